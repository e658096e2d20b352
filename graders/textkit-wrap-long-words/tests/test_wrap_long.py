from textkit import wrap


def test_long_word_alone():
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_long_word_between():
    assert wrap("a verylongword b", 5) == ["a", "veryl", "ongwo", "rd b"]
    assert all(len(line) <= 3 for line in wrap("xx abcdefg yy", 3))
