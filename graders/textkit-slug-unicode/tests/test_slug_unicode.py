from textkit import slugify


def test_accents():
    assert slugify("Crème Brûlée") == "creme-brulee"
    assert slugify("naïve café") == "naive-cafe"


def test_mixed():
    assert slugify("Ünïcödé ✓ done") == "unicode-done"
