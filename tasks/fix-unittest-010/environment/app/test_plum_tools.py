import unittest

from plum_tools import total_of


class TestTotalOf(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(total_of(*(75, 18)), 93)
        self.assertEqual(total_of(*(69, 42)), 111)
        self.assertEqual(total_of(*(38, 36)), 74)


if __name__ == '__main__':
    unittest.main()
