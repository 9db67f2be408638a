import unittest

from thunder_utils import add


class TestAdd(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(add(*(41, 11)), 52)
        self.assertEqual(add(*(83, 44)), 127)
        self.assertEqual(add(*(95, 51)), 146)


if __name__ == '__main__':
    unittest.main()
