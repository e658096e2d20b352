"""Strings the agent influenced, made safe for where they go: records, terminals, HTML.

Everything the agent produces reaches trialbox as data it did not choose the
form of: file names are bytes (a name that is not UTF-8 arrives as a ``str``
with surrogate escapes, Python's lossless convention for undecodable bytes),
tool arguments are whatever JSON the model sent (a lone surrogate included).
Three rules keep that data from breaking or forging anything:

* **Records** (event log, verdict, store) hold text only: ``recordable`` turns
  any string that cannot be encoded as UTF-8 into its visible escape
  (``\\xff`` for a raw byte, ``\\udcff`` for a lone surrogate), so nothing is
  dropped and nothing raises. ``path_bytes`` gives a path's exact bytes.
* **Terminals** (``show``, ``report``, progress lines, console logs):
  ``printable`` escapes every control, format (bidirectional overrides,
  zero-width), surrogate, private-use, line/paragraph-separator and space
  character other than the plain space, and the letters that print as
  nothing (Hangul fillers, the braille blank), newlines included, and shows a
  long run of spaces by its length, so one logical line stays one line, no
  escape sequence reaches the terminal and wrapping cannot fake a line.
* **HTML**: ``html.escape`` of the ``printable`` form.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

_KEEP = frozenset(" ")


def path_bytes(path: str) -> bytes:
    """The exact bytes of a path read from the workspace (surrogate escapes back to their bytes)."""
    return path.encode("utf-8", "surrogateescape")


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def recordable(text: str, raw_bytes: bool = True) -> str:
    """``text`` as valid Unicode: a surrogate-escaped byte becomes ``\\xNN`` (with ``raw_bytes``: text read
    from the workspace, where such a surrogate stands for a byte of a name), any other lone surrogate
    ``\\uNNNN`` (what JSON from a model carries). Unchanged when it already encodes (one encode)."""
    if encodable(text):
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if raw_bytes and 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def recordable_data(value: Any, where: str = "", escaped: list[str] | None = None, raw_bytes: bool = True) -> Any:
    """A copy of a JSON-like value whose strings (keys too) are all ``recordable``; the dotted paths of
    what had to be escaped are appended to ``escaped``."""
    if isinstance(value, str):
        safe = recordable(value, raw_bytes)
        if safe is not value and escaped is not None:
            escaped.append(where or "(value)")
        return safe
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = recordable(k, raw_bytes) if isinstance(k, str) else k
            if key is not k and escaped is not None:
                escaped.append(f"{where}.{key}(key)" if where else f"{key}(key)")
            out[key] = recordable_data(v, f"{where}.{key}" if where else str(key), escaped, raw_bytes)
        return out
    if isinstance(value, (list, tuple)):
        return [recordable_data(v, f"{where}[{i}]", escaped, raw_bytes) for i, v in enumerate(value)]
    return value


_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")
"""Characters that are letters or symbols by category but print as nothing (Hangul fillers, braille blank)."""
_SPACE_RUN = re.compile(" {16,}")
"""A run this long of plain spaces is shown by its length: wrapped by a terminal, it could fake a line."""


def _unsafe(ch: str) -> bool:
    if ch in _KEEP:
        return False
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp", "Zs") or ch in _BLANK_LETTERS


def printable(text: Any, space_runs: bool = True) -> str:
    """One line of text a terminal shows as it is: every control or invisible formatting character
    (escape sequences, carriage returns, newlines, tabs, bidi overrides, zero-width marks,
    surrogates) replaced by its visible escape, and (``space_runs``) a long run of spaces shown by its
    length. A line trialbox pads itself, whose every field was made ``printable`` on its own, is passed
    with ``space_runs=False``: its own alignment is not a forged line."""
    text = recordable(text if isinstance(text, str) else str(text))
    if space_runs and "                " in text:
        text = _SPACE_RUN.sub(lambda m: f" [{len(m.group())} spaces] ", text)
    if text.isascii() and text.isprintable():
        return text
    out = []
    for ch in text:
        if not _unsafe(ch):
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def printable_lines(text: str, space_runs: bool = True) -> str:
    """A block of text whose own line breaks are kept and every line made ``printable``."""
    return "\n".join(printable(line, space_runs) for line in text.split("\n"))


def html_text(text: Any) -> str:
    """Text for an HTML page: ``printable``, then HTML-escaped (quotes included)."""
    return html.escape(printable(text), quote=True)
