import unittest

from lantern_tools import shout


class TestShout(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(shout(*('canyon',)), 'CANYON!')
        self.assertEqual(shout(*('bucket',)), 'BUCKET!')
        self.assertEqual(shout(*('pine',)), 'PINE!')


if __name__ == '__main__':
    unittest.main()
