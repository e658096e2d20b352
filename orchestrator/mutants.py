"""Wrong fixes made on purpose: mutants of a task's reference solution, to measure how strong its grader is.

A grader that accepts the reference solution and rejects the untouched repository can still accept wrong fixes.
``tasks check --mutants N`` asks how many: it makes small wrong variants of the reference patch and grades each
one as a trial is graded; the grader's **strength** is the share of them it rejects. The variants change exactly
one line that the reference solution adds (a ``+`` line of its patch), in a Python file, by one operator:

=====================  ==========================================================================================
operator               what it does to the line
=====================  ==========================================================================================
``comparison``         ``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``, ``is`` ↔ ``is not``, ``in`` ↔ ``not in``
``arithmetic``         ``+`` ↔ ``-``, ``*`` ↔ ``/``, ``//`` → ``/``, ``%`` → ``*``, ``+=`` ↔ ``-=``
``boolean``            ``and`` ↔ ``or``, ``True`` ↔ ``False``
``constant``           a decimal integer ``n`` → ``n + 1`` and ``n - 1``
``negated condition``  ``if C:`` / ``elif C:`` / ``while C:`` → the same with ``not (C)``
``branch removed``     ``if C:`` / ``elif C:`` → ``if False:`` (the branch is never taken)
``statement removed``  a simple statement → ``pass`` (not a definition, an import, a block's header)
``return value``       ``return X`` → ``return None``
=====================  ==========================================================================================

Each variant is checked on the host before it costs a container: the patched file must still parse, and its
syntax tree must differ from the reference's (a change of spelling only is no mutant). Two variants with the same
tree are one. When there are more than asked for, the draw is seeded by the task (the same task gives the same
mutants), taken in turn from each operator so that every operator is represented.

Limits, stated in the README: a surviving mutant may be *equivalent* (it computes the same thing: no test can
reject it), so survivors are listed with their diff for a person to judge, and strength is a lower bound of what
tests can tell apart; mutation finds weak assertions on the lines the fix changed, not missing tests for behaviour
the fix never touched; only Python files and one-line changes are mutated; a solution given as a script (an
imported Harbor task's ``solve.sh``) is not mutated.
"""

from __future__ import annotations

import ast
import hashlib
import io
import random
import re
import subprocess
import tempfile
import tokenize
from dataclasses import asdict, dataclass
from pathlib import Path

from .pyparse import parse

OPERATORS = ("comparison", "arithmetic", "boolean", "constant", "negated condition", "branch removed",
             "statement removed", "return value")
DEFAULT_COUNT = 6
"""Mutants graded per task when ``--mutants`` is given without a number."""

_SWAPS = {
    "comparison": {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="},
    "arithmetic": {"+": "-", "-": "+", "*": "/", "/": "*", "//": "/", "%": "*", "+=": "-=", "-=": "+="},
}
_KEYWORD_SWAPS = {"and": ("boolean", "or"), "or": ("boolean", "and"), "True": ("boolean", "False"),
                  "False": ("boolean", "True")}
_NOT_STATEMENTS = re.compile(r"^(def|class|async|import|from|if|elif|else|for|while|try|except|finally|with|"
                             r"match|case|pass|return|global|nonlocal|@|#|\)|\]|\}|\"\"\"|''')")
_CONDITION = re.compile(r"^(if|elif|while)\s+(.+):\s*(#.*)?$")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)")


@dataclass(frozen=True)
class Mutant:
    """One wrong variant of the reference patch."""

    id: str
    operator: str
    path: str
    line: int
    """Line number in the patched file (the reference solution's version)."""
    before: str
    after: str
    patch: str
    """The whole reference patch with that one added line changed (hunks keep their line counts)."""

    def summary(self) -> dict:
        """What a record keeps of it (the patch is rebuilt from the reference on demand)."""
        out = asdict(self)
        out.pop("patch")
        return out

    def diff(self) -> str:
        """The change against the reference solution, for a person judging a survivor."""
        return f"--- {self.path}:{self.line} (reference solution)\n+++ {self.path}:{self.line} ({self.operator})\n" \
               f"-{self.before}\n+{self.after}\n"


@dataclass(frozen=True)
class _Added:
    index: int
    """Index of the line in the patch's lines."""
    path: str
    line: int
    text: str


def added_lines(patch: str) -> list[_Added]:
    """The ``+`` lines of a unified diff in Python files, with their file and line number on the new side."""
    out: list[_Added] = []
    path, new_line = None, 0
    for i, line in enumerate(patch.split("\n")):
        if line.startswith("+++ "):
            m = _TARGET.match(line)
            path = m.group(1) if m and m.group(1) != "/dev/null" else None
            continue
        if line.startswith("--- ") or line.startswith("diff ") or line.startswith("index "):
            continue
        m = _HUNK.match(line)
        if m:
            new_line = int(m.group(1))
            continue
        if path is None or not new_line:
            continue
        if line.startswith("+"):
            if path.endswith(".py"):
                out.append(_Added(i, path, new_line, line[1:]))
            new_line += 1
        elif line.startswith(" ") or line == "":
            new_line += 1
    return out


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line (an unclosed bracket ends it early: what came before is kept)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            out.append(tok)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _replace(text: str, tok: tokenize.TokenInfo, new: str) -> str:
    """``text`` (one line) with the token ``tok`` replaced by ``new``."""
    return text[:tok.start[1]] + new + text[tok.end[1]:]


def line_variants(text: str) -> list[tuple[str, str]]:
    """Every (operator, mutated line) of one added line."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return []
    indent = text[:len(text) - len(text.lstrip())]
    out: list[tuple[str, str]] = []
    toks = _tokens(text.lstrip())
    shift = len(indent)

    def at(tok: tokenize.TokenInfo, new: str) -> str:
        return indent + _replace(text[shift:], tok, new)

    for k, tok in enumerate(toks):
        if tok.type == tokenize.OP:
            for op, swaps in _SWAPS.items():
                if tok.string in swaps:
                    out.append((op, at(tok, swaps[tok.string])))
        elif tok.type == tokenize.NAME:
            nxt = toks[k + 1].string if k + 1 < len(toks) else ""
            prev = toks[k - 1].string if k > 0 else ""
            if tok.string in _KEYWORD_SWAPS:
                op, new = _KEYWORD_SWAPS[tok.string]
                out.append((op, at(tok, new)))
            elif tok.string == "is" and nxt != "not":
                out.append(("comparison", at(tok, "is not")))
            elif tok.string == "is" and nxt == "not":
                out.append(("comparison", indent + text[shift:][:tok.end[1]] + text[shift:][toks[k + 1].end[1]:]))
            elif tok.string == "in" and prev != "not":
                out.append(("comparison", at(tok, "not in")))
            elif tok.string == "not" and nxt == "in":
                out.append(("comparison", indent + text[shift:][:tok.start[1]] + text[shift:][toks[k + 1].start[1]:]))
        elif tok.type == tokenize.NUMBER and re.fullmatch(r"[0-9]+", tok.string):
            n = int(tok.string)
            out.append(("constant", at(tok, str(n + 1))))
            if n > 0:
                out.append(("constant", at(tok, str(n - 1))))
    cond = _CONDITION.match(stripped)
    if cond:
        keyword, condition = cond.group(1), cond.group(2).strip()
        out.append(("negated condition", f"{indent}{keyword} not ({condition}):"))
        if keyword != "while":
            out.append(("branch removed", f"{indent}{keyword} False:"))
    if stripped.startswith("return ") and stripped not in ("return None",):
        out.append(("return value", f"{indent}return None"))
    if not _NOT_STATEMENTS.match(stripped) and not stripped.endswith((":", "\\", "(", "[", "{", ",")):
        out.append(("statement removed", f"{indent}pass"))
    return [(op, new) for op, new in dict.fromkeys(out) if new != text]


def apply_patch(files: dict[str, bytes], patch: str) -> dict[str, bytes | None]:
    """The files a patch touches after applying it with GNU patch (None: removed); ``ValueError`` when it does not
    apply. ``files``: the untouched repository's files by path."""
    targets = {m.group(1) for m in re.finditer(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)", patch, re.MULTILINE)} - {"/dev/null"}
    with tempfile.TemporaryDirectory(prefix="trialbox-mutants-") as tmp:
        root = Path(tmp)
        for rel in targets:
            if rel in files:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(files[rel])
        proc = subprocess.run(["patch", "-p1", "--batch", "--forward", "--silent", "-d", str(root)],
                              input=patch.encode("utf-8", "surrogateescape"), capture_output=True)
        if proc.returncode != 0:
            raise ValueError(f"the reference patch does not apply: {(proc.stdout + proc.stderr).decode(errors='replace')[-400:]}")
        return {rel: ((root / rel).read_bytes() if (root / rel).is_file() else None) for rel in targets}


def _tree(source: bytes) -> str | None:
    try:
        return ast.dump(parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def candidates(patch: str, files: dict[str, bytes]) -> dict[str, list[Mutant]]:
    """Every distinct mutant of the reference ``patch`` against the untouched ``files``, by operator (unnumbered):
    each parses and differs from the reference in its syntax tree. ``ValueError`` when the patch does not apply."""
    patched = apply_patch(files, patch)
    lines = patch.split("\n")
    reference: dict[str, str | None] = {}
    seen: set[tuple[str, str]] = set()
    by_operator: dict[str, list[Mutant]] = {op: [] for op in OPERATORS}
    for added in added_lines(patch):
        content = patched.get(added.path)
        if content is None:
            continue
        file_lines = content.decode("utf-8", "surrogateescape").split("\n")
        if not 0 < added.line <= len(file_lines) or file_lines[added.line - 1] != added.text:
            continue  # the patch applied with an offset or fuzz: the line is not where the hunk says
        if added.path not in reference:
            reference[added.path] = _tree(content)
        for operator, new in line_variants(added.text):
            mutated_lines = list(file_lines)
            mutated_lines[added.line - 1] = new
            tree = _tree("\n".join(mutated_lines).encode("utf-8", "surrogateescape"))
            if tree is None or tree == reference[added.path] or (added.path, tree) in seen:
                continue
            seen.add((added.path, tree))
            new_patch = list(lines)
            new_patch[added.index] = "+" + new
            by_operator[operator].append(Mutant("", operator, added.path, added.line, added.text, new,
                                                "\n".join(new_patch)))
    return by_operator


def draw(found: dict[str, list[Mutant]], count: int, seed: str) -> list[Mutant]:
    """Up to ``count`` of ``candidates``, drawn by ``seed``, in turn from each operator, numbered."""
    by_operator = {op: list(found.get(op, [])) for op in OPERATORS}
    rng = random.Random(hashlib.sha256(seed.encode()).hexdigest())
    for group in by_operator.values():
        rng.shuffle(group)
    chosen: list[Mutant] = []
    while len(chosen) < count and any(by_operator.values()):
        for op in OPERATORS:
            if by_operator[op] and len(chosen) < count:
                chosen.append(by_operator[op].pop())
    return [Mutant(f"m{i:02d}", m.operator, m.path, m.line, m.before, m.after, m.patch) for i, m in enumerate(chosen)]


def generate(patch: str, files: dict[str, bytes], count: int, seed: str) -> list[Mutant]:
    """Up to ``count`` mutants of the reference ``patch`` (``candidates``, then ``draw``)."""
    return draw(candidates(patch, files), count, seed)


def available(patch: str, files: dict[str, bytes]) -> int:
    """How many distinct mutants the reference patch has (every operator, every line)."""
    return counted(candidates(patch, files))


def counted(found: dict[str, list[Mutant]]) -> int:
    """How many mutants ``candidates`` found."""
    return sum(len(v) for v in found.values())
