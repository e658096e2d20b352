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
  zero-width), surrogate, private-use and line/paragraph-separator character,
  newlines included, so one logical line stays one line and no escape
  sequence reaches the terminal.
* **HTML**: ``html.escape`` of the ``printable`` form.
"""

from __future__ import annotations

import html
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


def recordable(text: str) -> str:
    """``text`` as valid Unicode: a surrogate-escaped byte becomes ``\\xNN``, any other lone surrogate
    ``\\uNNNN``. Unchanged when it already encodes (the common case costs one encode)."""
    if encodable(text):
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def recordable_data(value: Any, where: str = "", escaped: list[str] | None = None) -> Any:
    """A copy of a JSON-like value whose strings (keys too) are all ``recordable``; the dotted paths of
    what had to be escaped are appended to ``escaped``."""
    if isinstance(value, str):
        safe = recordable(value)
        if safe is not value and escaped is not None:
            escaped.append(where or "(value)")
        return safe
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = recordable(k) if isinstance(k, str) else k
            if key is not k and escaped is not None:
                escaped.append(f"{where}.{key}(key)" if where else f"{key}(key)")
            out[key] = recordable_data(v, f"{where}.{key}" if where else str(key), escaped)
        return out
    if isinstance(value, (list, tuple)):
        return [recordable_data(v, f"{where}[{i}]", escaped) for i, v in enumerate(value)]
    return value


def _unsafe(ch: str) -> bool:
    if ch in _KEEP:
        return False
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp")


def printable(text: Any) -> str:
    """One line of text a terminal shows as it is: every control or invisible formatting character
    (escape sequences, carriage returns, newlines, tabs, bidi overrides, zero-width marks,
    surrogates) replaced by its visible escape."""
    text = recordable(text if isinstance(text, str) else str(text))
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


def printable_lines(text: str) -> str:
    """A block of text whose own line breaks are kept and every line made ``printable``."""
    return "\n".join(printable(line) for line in text.split("\n"))


def html_text(text: Any) -> str:
    """Text for an HTML page: ``printable``, then HTML-escaped (quotes included)."""
    return html.escape(printable(text), quote=True)
