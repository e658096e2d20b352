from textkit import wrap


def test_wrap_basic():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_empty():
    assert wrap("", 5) == []
