"""How close an agent's diff is to the task's reference solution: a diagnostic for answers looked up.

An agent that found the upstream fix (in a package's later version, a cache, the network where it was open) and
copied it leaves a diff nearly identical to the reference patch; an agent that solved the task leaves its own.
``near_identical_to_reference`` (diagnostic, never critical) compares the two on what they change, not how they
are written: every added and removed line of each diff, with its sign, with all whitespace and Python comments
taken out and empty results dropped, compared as sequences (``difflib``'s ratio: 1.0 the same changes in the same
order). At ``NEAR_IDENTICAL`` or above it fires. The report gives, per candidate, the share of accepted trials on
which it fired.

Limits: a fix that is short and forced by the task (one comparison operator changed) is near-identical to the
reference whoever wrote it, so the share is evidence to read with the tasks' fixes in view, not a verdict; renamed
variables or moved code lower the ratio without making the fix the agent's own. Only tasks whose reference solution
is a patch get it (a solution script has no diff to compare). Each side is cut at ``MAX_LINES`` changed lines (the
agent's diff can be large; the comparison is quadratic at worst), and the evidence says when it was.
"""

from __future__ import annotations

import difflib
import io
import tokenize

from ..tasks import Task
from .criteria import Criterion

NEAR_IDENTICAL = 0.9
MAX_LINES = 2000
NAME = "near_identical_to_reference"


MAX_LINE_CHARS = 1000
"""Characters of one changed line compared: a longer line is cut there, and its comment is not looked for (the
twentieth review: tokenizing 2,000 lines of 32,000 brackets took 91 s of host CPU)."""


def _without_comment(code: str) -> str:
    """A Python line without its comment (a ``#`` inside a string stays); a line past ``MAX_LINE_CHARS`` is cut
    there, comment and all."""
    if len(code) > MAX_LINE_CHARS:
        return code[:MAX_LINE_CHARS]
    if "#" not in code:
        return code
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT:
                return code[:tok.start[1]]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return code


def changed_lines(diff: str, limit: int | None = None) -> list[str]:
    """The normalised changes of a unified diff: ``+``/``-`` and the line's text without whitespace or comment;
    with ``limit``, at most that many and one more (see ``_changes``)."""
    return _changes(diff, limit)[0]


def _changes(diff: str, limit: int | None) -> tuple[list[str], bool]:
    """``changed_lines`` and whether the diff was cut: past ``limit`` normalised lines, or past ten times as many
    changed lines read (lines that normalise to nothing, comments, count there: the twenty-first review's diff of
    ``#`` lines was tokenized whole, 0.6 s per MB). The diff is read line by line, never split whole (the
    nineteenth review's 70 MiB of short changed lines took 4.8 GB as a list)."""
    out: list[str] = []
    start, seen = 0, 0
    while start < len(diff):
        end = diff.find("\n", start)
        end = len(diff) if end < 0 else end
        line = diff[start:end]
        start = end + 1
        if line.startswith(("+++ ", "--- ")) or line[:1] not in ("+", "-"):
            continue
        seen += 1
        if limit is not None and seen > 10 * limit:
            return out, True
        text = "".join(_without_comment(line[1:]).split())
        if text:
            out.append(line[0] + text)
            if limit is not None and len(out) > limit:
                return out, True
    return out, False


def similarity(agent_diff: str, reference: str) -> tuple[float, bool]:
    """(ratio of the two diffs' normalised changes, whether a side was cut at ``MAX_LINES``)."""
    (a, cut_a), (b, cut_b) = _changes(agent_diff, MAX_LINES), _changes(reference, MAX_LINES)
    cut = cut_a or cut_b
    a, b = a[:MAX_LINES], b[:MAX_LINES]
    if not a or not b:
        return 0.0, cut
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), cut


def near_identical(task: Task, agent_diff: str) -> Criterion | None:
    """The diagnostic for one trial (None: the task's reference solution is not a patch file)."""
    sol = task.grader.solution
    if sol is None or not str(sol).endswith(".patch"):
        return None
    path = task.grader_path(sol)
    try:
        reference = path.read_text(errors="replace")
    except OSError:
        return None
    ratio, cut = similarity(agent_diff, reference)
    evidence = {"similarity": round(ratio, 4), "threshold": NEAR_IDENTICAL}
    if cut:
        evidence["cut_at_lines"] = MAX_LINES
    return Criterion(NAME, False, ratio < NEAR_IDENTICAL, evidence)
