import pytest

from textkit import top_words


def test_case_and_punctuation():
    text = "The end. THE (end) don't stop, well-known the"
    assert top_words(text, 3) == [("the", 3), ("end", 2), ("don't", 1)]


def test_ties_alphabetical():
    assert top_words("pear apple fig apple pear fig", 3) == [("apple", 2), ("fig", 2), ("pear", 2)]


def test_bounds():
    assert top_words("a b", 10) == [("a", 1), ("b", 1)]
    assert top_words("", 2) == []
    with pytest.raises(ValueError):
        top_words("a", -1)
