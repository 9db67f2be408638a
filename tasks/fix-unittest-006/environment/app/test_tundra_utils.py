import unittest

from tundra_utils import exclaim


class TestExclaim(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(exclaim(*('plum',)), 'PLUM!')
        self.assertEqual(exclaim(*('fern',)), 'FERN!')
        self.assertEqual(exclaim(*('prism',)), 'PRISM!')


if __name__ == '__main__':
    unittest.main()
