import unittest

from saffron_lib import shout


class TestShout(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(shout(*('canyon',)), 'CANYON!')
        self.assertEqual(shout(*('desert',)), 'DESERT!')
        self.assertEqual(shout(*('daisy',)), 'DAISY!')


if __name__ == '__main__':
    unittest.main()
