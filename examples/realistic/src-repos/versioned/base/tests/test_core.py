import unittest

from versioned import Version, bump, parse


class TestParse(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse("1.4.0"), Version(1, 4, 0))

    def test_leading_v(self):
        self.assertEqual(parse("v2.0.10"), Version(2, 0, 10))

    def test_prerelease(self):
        version = parse("3.1.0-rc.2")
        self.assertEqual(version.pre, ("rc", "2"))
        self.assertTrue(version.is_prerelease)

    def test_round_trip(self):
        for text in ("0.0.1", "1.4.0", "10.20.30-alpha.1.beta"):
            with self.subTest(text=text):
                self.assertEqual(str(parse(text)), text)

    def test_empty(self):
        with self.assertRaisesRegex(ValueError, "not a semantic version"):
            parse("")

    def test_garbage(self):
        for text in ("1.4", "1.4.0.0", "01.4.0", "1.4.0-", "one.two.three"):
            with self.subTest(text=text):
                with self.assertRaises(ValueError):
                    parse(text)


class TestCompare(unittest.TestCase):
    def test_numeric_not_lexical(self):
        self.assertLess(parse("1.9.0"), parse("1.10.0"))
        self.assertGreater(parse("2.0.0"), parse("1.99.99"))

    def test_equal_ignores_leading_v(self):
        self.assertEqual(parse("v1.4.0"), parse("1.4.0"))
        self.assertEqual(len({parse("v1.4.0"), parse("1.4.0")}), 1)

    def test_sorting(self):
        texts = ["1.10.0", "0.9.1", "1.2.0", "1.2.10", "1.2.9"]
        ordered = [str(v) for v in sorted(parse(t) for t in texts)]
        self.assertEqual(ordered, ["0.9.1", "1.2.0", "1.2.9", "1.2.10", "1.10.0"])


class TestBump(unittest.TestCase):
    def test_major(self):
        self.assertEqual(bump(parse("1.4.2"), "major"), Version(2, 0, 0))

    def test_minor(self):
        self.assertEqual(bump(parse("1.4.2"), "minor"), Version(1, 5, 0))

    def test_patch(self):
        self.assertEqual(bump(parse("1.4.2"), "patch"), Version(1, 4, 3))

    def test_patch_of_prerelease_is_the_release(self):
        self.assertEqual(bump(parse("1.5.0-rc.1"), "patch"), Version(1, 5, 0))

    def test_bad_part(self):
        with self.assertRaisesRegex(ValueError, "major, minor or patch"):
            bump(parse("1.4.2"), "build")
