"""URL slugs."""

import re

_NON_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-") -> str:
    """Lower-case ``text`` and join its runs of ASCII letters and digits with ``sep``."""
    words = _NON_WORD.split(text.lower())
    return sep.join(w for w in words if w)
