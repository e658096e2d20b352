import unittest
from importlib.metadata import version

import versioned


class TestMetadata(unittest.TestCase):
    def test_version_comes_from_the_distribution(self):
        self.assertEqual(versioned.__version__, version("versioned"))
        self.assertEqual(versioned.__version__, "1.4.0")

    def test_own_version_parses(self):
        self.assertTrue(versioned.satisfies(versioned.__version__, ">=1.0.0, <2.0.0"))
