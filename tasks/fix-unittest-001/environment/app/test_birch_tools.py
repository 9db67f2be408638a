import unittest

from birch_tools import take


class TestTake(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(take(*([23, 49, 73, 93, 90], 2)), [23, 49])
        self.assertEqual(take(*([22, 95, 13, 25, 39], 3)), [22, 95, 13])
        self.assertEqual(take(*([66, 14, 91, 17, 93], 5)), [66, 14, 91, 17, 93])


if __name__ == '__main__':
    unittest.main()
