import unittest

from thunder_tools import first_n


class TestFirstN(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(first_n(*([71, 39, 28, 46, 17], 3)), [71, 39, 28])
        self.assertEqual(first_n(*([11, 70, 82, 43, 17], 1)), [11])
        self.assertEqual(first_n(*([70, 43, 62, 16, 82], 1)), [70])


if __name__ == '__main__':
    unittest.main()
