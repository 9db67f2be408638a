import unittest

from beacon_tools import yell


class TestYell(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(yell(*('timber',)), 'TIMBER!')
        self.assertEqual(yell(*('fig',)), 'FIG!')
        self.assertEqual(yell(*('apple',)), 'APPLE!')


if __name__ == '__main__':
    unittest.main()
