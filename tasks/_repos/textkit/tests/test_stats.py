from textkit import top_words, word_count


def test_word_count():
    assert word_count("one two  three") == 3


def test_top_words_simple():
    assert top_words("b a b", 1) == [("b", 2)]
