import unittest

from mint_lib import shout


class TestShout(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(shout(*('cinder',)), 'CINDER!')
        self.assertEqual(shout(*('island',)), 'ISLAND!')
        self.assertEqual(shout(*('garnet',)), 'GARNET!')


if __name__ == '__main__':
    unittest.main()
