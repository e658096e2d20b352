"""The change an agent made: computed on the host from two trees, never with git.

The original is the trusted history-free repository (from the host's cache);
the final tree is the exported workspace. Paths are compared as normalised
relative paths; the unified diff covers UTF-8 text files, binary files are
named.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .tree import Tree

MAX_DIFF_FILE = 1 << 20
ARTIFACT_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def is_artifact(path: str) -> bool:
    """Files tools leave behind when they run (bytecode, test caches): not changes, never graded."""
    parts = path.split("/")
    return any(p in ARTIFACT_DIRS for p in parts) or path.endswith((".pyc", ".pyo"))


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added | deleted | modified | mode | symlink


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)
    text: str = ""

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


def _decoded(data: bytes | None) -> str | None:
    """A file's text for the diff ("" when absent), or None when it is shown as binary (past ``MAX_DIFF_FILE``,
    a NUL byte, not UTF-8)."""
    if data is None:
        return ""
    if len(data) > MAX_DIFF_FILE or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _lines(text: str) -> list[str]:
    # lines as patch counts them: split at "\n" only (``str.splitlines`` also splits at a form feed and
    # \x1c-\x1e, and the diff then did not apply: the sixteenth review)
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _text(data: bytes | None) -> list[str] | None:
    text = _decoded(data)
    return None if text is None else _lines(text)


def _count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _prefixed(text: str, mark: str) -> str:
    """Every line of ``text`` with ``mark`` before it, as one string (a file shown replaced whole costs its own
    size, not a string per line: the eighteenth review's 64 files of 1 MiB of short lines took 2.9 GB)."""
    if not text:
        return ""
    body = mark + text.replace("\n", "\n" + mark)
    return body[:-1] if text.endswith("\n") else body + "\n\\ No newline at end of file\n"


def _whole(a: str, b: str, name_a: str, name_b: str) -> str:
    """The diff of a file shown replaced whole (every line of ``a`` removed, every line of ``b`` added)."""
    return (f"--- {name_a}\n+++ {name_b}\n@@ -{_range(0, _count(a))} +{_range(0, _count(b))} @@\n"
            + _prefixed(a, "-") + _prefixed(b, "+"))


ALIGN_CELLS = 250_000
"""Lines aligned by ``difflib`` at most this product of the two sides' line counts at once. ``difflib`` is quadratic
when most lines differ one by one (the fifteenth review: a line inserted after each of 12,000 took 218 s of the
host's CPU); longer stretches are first cut at the lines both sides hold once each, in the same order. At 4M cells
the sixteenth review still took 6 s with anchors 1,000 lines apart; at this bound the worst spacing costs about
1 s for a 12,000-line file (its cost grows with the file, whose size the task bounds)."""


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Lines that occur exactly once in ``a`` and once in ``b``, as (index in a, index in b), the longest run of
    them in the same order on both sides (patience sorting: n log n)."""
    import bisect
    from collections import Counter

    ca, cb = Counter(a), Counter(b)
    where_b = {line: j for j, line in enumerate(b) if cb[line] == 1}
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if ca[line] == 1 and line in where_b]
    tops: list[int] = []  # smallest b-index ending an increasing run of each length
    ends: list[int] = []  # index in pairs of that end
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tops, j)
        back[k] = ends[at - 1] if at else -1
        if at == len(tops):
            tops.append(j)
            ends.append(k)
        else:
            tops[at], ends[at] = j, k
    out, k = [], ends[-1] if ends else -1
    while k >= 0:
        out.append(pairs[k])
        k = back[k]
    return out[::-1]


DIFF_CELLS = 10_000_000
"""What one diff (every file of a trial) may align with ``difflib`` in all, in cells; past it every stretch left is
replaced whole (the seventeenth review: 20 s per crafted file, and the agent chooses how many files)."""
DIFF_LINES = 100_000
"""Lines of changed files one diff aligns in all (each costs tens of microseconds however it is cut: a 1 MiB file
of short lines is 150,000 of them); a file past it is shown replaced whole, which costs its length only."""


def _opcodes(a: list[str], b: list[str], depth: int = 0, budget: list[int] | None = None
             ) -> list[tuple[str, int, int, int, int]]:
    """``difflib`` opcodes of ``a`` against ``b`` within ``ALIGN_CELLS``: stretches too long to align whole are cut
    at their anchors (``_anchors``); one without anchors, cut more than 30 times over, or past the diff's
    ``budget`` of cells, is replaced whole."""
    budget = budget if budget is not None else [DIFF_CELLS, DIFF_LINES]
    if len(a) * len(b) <= ALIGN_CELLS and len(a) * len(b) <= budget[0]:
        budget[0] -= len(a) * len(b)
        return [(t, i1, i2, j1, j2) for t, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False)
                .get_opcodes()] if a or b else []
    anchors = _anchors(a, b) if depth < 30 and budget[0] > 0 else []
    if not anchors:
        return [("replace" if a and b else "delete" if a else "insert", 0, len(a), 0, len(b))]
    out: list[tuple[str, int, int, int, int]] = []
    pi = pj = 0
    for i, j in [*anchors, (len(a), len(b))]:
        for t, i1, i2, j1, j2 in _opcodes(a[pi:i], b[pj:j], depth + 1, budget):
            out.append((t, i1 + pi, i2 + pi, j1 + pj, j2 + pj))
        if i < len(a):
            out.append(("equal", i, i + 1, j, j + 1))
        pi, pj = i + 1, j + 1
    return out


def _unified(a: list[str], b: list[str], name_a: str, name_b: str, context: int = 3,
             budget: list[int] | None = None) -> list[str]:
    """A unified diff of ``a`` and ``b`` from ``_opcodes`` (hunks with ``context`` lines around each change)."""
    budget = budget if budget is not None else [DIFF_CELLS, DIFF_LINES]
    if len(a) + len(b) > budget[1]:  # past the diff's line budget: replaced whole, at the cost of its length
        budget[1] = 0
        whole = [("replace" if a and b else "delete" if a else "insert", 0, len(a), 0, len(b))]
    else:
        budget[1] -= len(a) + len(b)
        whole = None
    ops = [o for o in (whole or _opcodes(a, b, budget=budget)) if o[1] != o[2] or o[3] != o[4]]
    if not any(t != "equal" for t, *_ in ops):
        return []
    merged: list[list] = []  # adjacent equal opcodes joined
    for t, i1, i2, j1, j2 in ops:
        if merged and merged[-1][0] == t == "equal":
            merged[-1][2], merged[-1][4] = i2, j2
        else:
            merged.append([t, i1, i2, j1, j2])
    out = [f"--- {name_a}\n", f"+++ {name_b}\n"]
    groups: list[list] = []
    for op in merged:
        if op[0] == "equal":
            continue
        lo_i, lo_j = max(op[1] - context, 0), max(op[3] - context, 0)
        if groups and lo_i <= groups[-1][-1][2] + context:
            groups[-1].append(op)
        else:
            groups.append([op])
    for g in groups:
        i1, j1 = max(g[0][1] - context, 0), max(g[0][3] - context, 0)
        i2, j2 = min(g[-1][2] + context, len(a)), min(g[-1][4] + context, len(b))
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        i, j = i1, j1
        for _, c1, c2, d1, d2 in g:
            out += [" " + line for line in a[i:c1]]
            out += ["-" + line for line in a[c1:c2]]
            out += ["+" + line for line in b[d1:d2]]
            i, j = c2, d2
        out += [" " + line for line in a[i:i2]]
    return out


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (1-based start, length; an empty range names the line before)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start + 1 if length else start},{length}"


DIFF_BYTES = 64 << 20
"""Characters of text one diff holds: past them a changed file is named, not shown (its whole content is in the
stored final workspace). The host's memory for a diff is bounded by it (the eighteenth review)."""


def compute_diff(original: Tree, final: Tree) -> Diff:
    diff = Diff()
    budget = [DIFF_CELLS, DIFF_LINES]  # for every file of the diff together
    parts: list[str] = []
    size = 0
    for path in sorted(set(original.files) | set(final.files) | set(original.symlinks) | set(final.symlinks)):
        if is_artifact(path):
            continue
        a, b = original.files.get(path), final.files.get(path)
        la, lb = original.symlinks.get(path), final.symlinks.get(path)
        if la != lb:
            diff.changes.append(Change(path, "symlink"))
            parts.append(f"symlink {path}: {la!r} -> {lb!r}\n")
            continue
        if a == b:
            if a is not None and (path in original.executable) != (path in final.executable):
                diff.changes.append(Change(path, "mode"))
                parts.append(f"mode {path}: executable {path in final.executable}\n")
            continue
        kind = "added" if a is None else "deleted" if b is None else "modified"
        diff.changes.append(Change(path, kind))
        sa, sb = _decoded(a), _decoded(b)
        if sa is None or sb is None:
            parts.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        if size + len(sa) + len(sb) > DIFF_BYTES:
            parts.append(f"Files a/{path} and b/{path} differ (not shown: the diff's {DIFF_BYTES >> 20} MiB of text "
                         "is reached; the whole file is in the stored final workspace)\n")
            continue
        size += len(sa) + len(sb)
        name_a, name_b = f"a/{path}" if a is not None else "/dev/null", f"b/{path}" if b is not None else "/dev/null"
        if _count(sa) + _count(sb) > budget[1]:  # past the line budget: replaced whole, at the cost of its size
            budget[1] = 0
            parts.append(_whole(sa, sb, name_a, name_b))
        else:
            parts.extend(_unified(_lines(sa), _lines(sb), name_a, name_b, budget=budget))
    diff.text = "".join(p if p.endswith("\n") else p + "\n\\ No newline at end of file\n" for p in parts)
    return diff
