import unittest

from versioned import parse, satisfies


class TestSatisfies(unittest.TestCase):
    def test_range(self):
        self.assertTrue(satisfies("1.4.0", ">=1.2.0, <2.0.0"))
        self.assertFalse(satisfies("2.0.0", ">=1.2.0, <2.0.0"))
        self.assertFalse(satisfies("1.1.9", ">=1.2.0,<2.0.0"))

    def test_exact_and_exclusion(self):
        self.assertTrue(satisfies(parse("1.4.0"), "==1.4.0"))
        self.assertFalse(satisfies("1.4.0", "!=1.4.0"))

    def test_bad_clause(self):
        with self.assertRaisesRegex(ValueError, "not a requirement clause"):
            satisfies("1.4.0", "~1.4")
