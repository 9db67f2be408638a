import unittest

from jungle_utils import plus


class TestPlus(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(plus(*(41, 19)), 60)
        self.assertEqual(plus(*(93, 23)), 116)
        self.assertEqual(plus(*(92, 18)), 110)


if __name__ == '__main__':
    unittest.main()
