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
import json
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


MAX_DEPTH = 64
"""How deep a JSON-like value the agent sent is recorded: a container nested deeper is recorded as
``DEPTH_MARKER`` and its path listed (JSON nested a few hundred levels deep would otherwise exhaust Python's
recursion limit in whatever walks it next: ``json.dumps``, ``repr``, a validator)."""
DEPTH_MARKER = f"[nested deeper than {MAX_DEPTH} levels: not recorded]"
_END = object()


def recordable_data(value: Any, where: str = "", escaped: list[str] | None = None, raw_bytes: bool = True,
                    capped: list[str] | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """A copy of a JSON-like value whose strings (keys too) are all ``recordable``; the dotted paths of
    what had to be escaped are appended to ``escaped``. Walked without recursion and at most ``max_depth``
    containers deep: a deeper one becomes ``DEPTH_MARKER`` and its path is appended to ``capped``. Never
    raises on any value (what is not a string, dict, list or tuple is returned as it is)."""

    def text(v: str, path: str) -> str:
        safe = recordable(v, raw_bytes)
        if safe is not v and escaped is not None:
            escaped.append(path or "(value)")
        return safe

    def opened(v: Any) -> tuple[Any, Any] | None:
        if isinstance(v, dict):
            return {}, iter(v.items())
        if isinstance(v, (list, tuple)):
            return [], iter(enumerate(v))
        return None

    if isinstance(value, str):
        return text(value, where)
    first = opened(value)
    if first is None:
        return value
    if max_depth < 1:
        if capped is not None:
            capped.append(where or "(value)")
        return DEPTH_MARKER
    root, items = first
    stack = [(root, items, where, 1)]  # pre-order, as a recursive walk would list what it escaped
    while stack:
        out, items, path, depth = stack[-1]
        item = next(items, _END)
        if item is _END:
            stack.pop()
            continue
        k, v = item
        if isinstance(out, dict):
            key = recordable(k, raw_bytes) if isinstance(k, str) else k
            if key is not k and escaped is not None:
                escaped.append(f"{path}.{key}(key)" if path else f"{key}(key)")
            child_path = f"{path}.{key}" if path else str(key)
        else:
            key, child_path = None, f"{path}[{k}]"
        child = opened(v)
        if child is None:
            new = text(v, child_path) if isinstance(v, str) else v
        elif depth >= max_depth:
            new = DEPTH_MARKER
            if capped is not None:
                capped.append(child_path)
        else:
            new = child[0]
            stack.append((new, child[1], child_path, depth + 1))
        if isinstance(out, dict):
            out[key] = new
        else:
            out.append(new)
    return root


def loads_bounded(data: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads``, except that JSON nested deeper than Python's decoder can go (it raises
    ``RecursionError`` a few hundred levels down) is decoded with every container deeper than ``max_depth``
    replaced by ``DEPTH_MARKER``: what is shallow (an answer's usage, its model, a tool's name) is still read.
    Raises ``ValueError`` for text that is not JSON, as ``json.loads`` does."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text)
    except RecursionError:
        pass
    out, start, depth, skip_from, i, n = [], 0, 0, -1, 0, len(text)
    marker = json.dumps(DEPTH_MARKER)
    while i < n:
        c = text[i]
        if c == '"':  # a string: skipped whole, escapes included
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "[{":
            depth += 1
            if depth == max_depth + 1:
                skip_from = i
        elif c in "]}":
            if depth == max_depth + 1 and skip_from >= 0:
                out.append(text[start:skip_from] + marker)
                start, skip_from = i + 1, -1
            depth -= 1
        i += 1
    out.append(text[start:])
    return json.loads("".join(out))


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
