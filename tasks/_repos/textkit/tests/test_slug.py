from textkit import slugify


def test_ascii():
    assert slugify("Hello, World!") == "hello-world"


def test_separator():
    assert slugify("a b  c", sep="_") == "a_b_c"
