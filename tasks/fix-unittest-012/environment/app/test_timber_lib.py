import unittest

from timber_lib import take


class TestTake(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(take(*([34, 23, 83, 81, 87], 4)), [34, 23, 83, 81])
        self.assertEqual(take(*([84, 83, 57, 93, 55], 4)), [84, 83, 57, 93])
        self.assertEqual(take(*([52, 17, 40, 76, 67], 2)), [52, 17])


if __name__ == '__main__':
    unittest.main()
