import unittest

from robin_tools import take


class TestTake(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(take(*([15, 23, 61, 18, 65], 1)), [15])
        self.assertEqual(take(*([33, 56, 93, 62, 66], 5)), [33, 56, 93, 62, 66])
        self.assertEqual(take(*([56, 73, 53, 21, 66], 1)), [56])


if __name__ == '__main__':
    unittest.main()
