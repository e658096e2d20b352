"""Word statistics."""

from collections import Counter


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The ``n`` most frequent words with their counts."""
    return Counter(text.split()).most_common(n)
