"""textkit: small text utilities."""

from .slug import slugify
from .stats import top_words, word_count
from .wrap import wrap

__all__ = ["slugify", "top_words", "word_count", "wrap"]
