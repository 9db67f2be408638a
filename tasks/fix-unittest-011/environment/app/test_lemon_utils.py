import unittest

from lemon_utils import plus


class TestPlus(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(plus(*(43, 31)), 74)
        self.assertEqual(plus(*(85, 99)), 184)
        self.assertEqual(plus(*(48, 39)), 87)


if __name__ == '__main__':
    unittest.main()
