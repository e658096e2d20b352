"""Sealed assertions: the expected values of a test's plain comparisons never enter the test process.

Code under test runs inside the pytest process that runs its tests, so it can make that process report anything
(see ``runner``): a tripwire can catch a blanket forgery, but a forger that tells the tripwire apart is not seen.
Sealing removes what such a forger needs. Each *sealable* assertion of a requested test, a comparison of a value
with a literal written in the test (``assert slugify(x) == "a-b"``, ``self.assertEqual(total(), 105)``), is
rewritten in the grader's copy of the file into a call that sends the value to the host and holds nothing else::

    __import__("trialbox_grader_plugin").seal(slugify(x), "3f9a1c07")

The literal stays on the host (``Seal.expected``), which compares once the group's process has ended. A test
counts as passed only when pytest passed it *and* every sealed assertion of it sent exactly one value, and each
value meets its literal. So code under test that has not produced the right value cannot pass a sealed assertion
by any forgery inside the process: the value it would have to send is nowhere in the container (the test file
on the agent's side never had it either, when the grader holds the tests). A passed test with a sealed
assertion that sent nothing, or sent twice, is forged (``runner``: ``grader_integrity``).

Sealable: a statement of its own at the top level of a requested test function's body (never in a loop, a
branch, a ``with`` or ``try``: there it may run any number of times), ``assert A op B`` with one op of
``OPS`` or a ``self.assert…`` call of ``UNITTEST``, where exactly one side is a literal (what
``ast.literal_eval`` reads, at most ``MAX_LITERAL`` characters). A function is left whole when it could run its
body other than once per test case (a decorator that is not a pytest mark, ``unittest``'s skip or ``mock``'s
patch: Hypothesis' ``given``, a retry wrapper) or leave it early (``return``, ``yield``). Comments in a sealed
file are blanked (a comment beside an assertion can say its value); lines keep their numbers.

The value travels as tagged JSON (``encode`` in the plugin, ``decode`` here): builtin scalars, strings, bytes,
containers, ``Decimal`` and ``Fraction`` exactly; numpy scalars by ``item()``; any other object as *opaque*
(its type, ``repr`` and ``__index__``), which meets a literal under ``==`` only when it has the literal's
``repr`` or is an integer-like equal to an int literal (a ``sympy`` integer is). Comparison on the host is
Python's own operator on the decoded values, so honest results are what pytest would give; the stated
exceptions are objects whose ``__eq__`` accepts a literal of another type and repr (``seal: false`` in
``grader.yaml`` turns sealing off for such a task; ``tasks check`` shows the oracle failing on them by name).
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import io
import math
import operator
import re
import secrets
import tokenize
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from ..pyparse import parse

CALL = '__import__("trialbox_grader_plugin").seal'
"""What a sealed statement calls (the grader's plugin, imported before any workspace folder is on the path)."""

OPS: dict[type, str] = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Lt: "<",
                        ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
UNITTEST: dict[str, str] = {
    "assertEqual": "==", "assertEquals": "==", "assertListEqual": "==", "assertTupleEqual": "==",
    "assertDictEqual": "==", "assertSetEqual": "==", "assertSequenceEqual": "==", "assertMultiLineEqual": "==",
    "assertNotEqual": "!=", "assertNotEquals": "!=", "assertIn": "in", "assertNotIn": "not in",
    "assertLess": "<", "assertLessEqual": "<=", "assertGreater": ">", "assertGreaterEqual": ">="}
"""``TestCase`` methods sealed like the operator: ``assertIn(member, container)`` is ``member in container``."""
COMPARE = {"==": operator.eq, "!=": operator.ne, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
MAX_LITERAL = 16384
"""A longer literal stays in the file (its assertion is not sealed)."""
MAX_DEPTH = 64
"""How deep a sent value may nest (the plugin cuts deeper values; the host decodes no deeper)."""
RUN_DECORATORS = ("patch", "object", "dict", "multiple", "skip", "skipIf", "skipUnless", "expectedFailure")
"""Decorators (beside pytest marks) that run a test's body once, as written: ``mock.patch`` and its forms,
``unittest``'s skips."""


@dataclass(frozen=True)
class Seal:
    """One sealed assertion, as the host knows it (none of this is in the grader container)."""

    slot: str
    """The id its call sends (drawn: it tells nothing)."""
    test: str
    """The test's node id under its own name, without parameters."""
    op: str
    """One of ``COMPARE``'s operators."""
    expected: str
    """The literal as written in the test."""
    value_left: bool
    """The value is the left operand (``value op literal``); else ``literal op value``."""
    statement: str
    """The assertion as written (for the evidence)."""
    visible: bool = False
    """The literal's text is in the agent's own copy of this file (it was in the repository: no secret)."""
    lines: tuple[int, int] = (0, 0)
    """Where its call stands in the file as the grader runs it (first and last line; ``located``)."""

    def literal(self) -> Any:
        """The literal's value (in parentheses: a literal written over several lines inside the statement's own
        parentheses reads alone only so)."""
        return ast.literal_eval(f"(\n{self.expected}\n)")

    def holds(self, value: Any) -> bool:
        """Whether ``value`` (``decode``'s) meets this assertion, by Python's own operator (never raises)."""
        try:
            expected = self.literal()
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # ``seal_source`` checked it
            return False
        if isinstance(value, Cut):
            return False
        left, right = (value, expected) if self.value_left else (expected, value)
        try:
            return bool(COMPARE[self.op](left, right))
        except Exception:  # noqa: BLE001 - the test's own comparison would have raised: not passed
            return False


@dataclass(frozen=True, eq=False)
class Opaque:
    """A value of a type the host does not rebuild: compared with a literal by what it says of itself. Equal to an
    int literal when its ``__index__`` is that int, to a float literal when its ``__float__`` is that float, else to
    a literal whose ``repr`` is its own; ordered by its ``__index__`` or ``__float__`` against a number; never
    equal to anything else."""

    type: str
    repr: str | None
    index: int | None
    number: float | None = None

    def _number(self, literal: Any) -> int | float | None:
        if isinstance(literal, bool) or not isinstance(literal, (int, float)):
            return None
        if self.index is not None:
            return self.index
        return self.number

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Opaque):
            return (self.type, self.repr, self.index, self.number) == (other.type, other.repr, other.index, other.number)
        number = self._number(other)
        if number is not None:
            return number == other
        return self.repr is not None and self.repr == repr(other)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def _order(self, other: Any, op) -> bool:
        number = self._number(other)
        if number is None:
            raise TypeError(f"an opaque {self.type} has no order against {type(other).__name__}")
        return op(number, other)

    def __lt__(self, other: Any) -> bool:
        return self._order(other, operator.lt)

    def __le__(self, other: Any) -> bool:
        return self._order(other, operator.le)

    def __gt__(self, other: Any) -> bool:
        return self._order(other, operator.gt)

    def __ge__(self, other: Any) -> bool:
        return self._order(other, operator.ge)

    __hash__ = None  # type: ignore[assignment]  # in a set or as a key it is unhashable, as the host cannot hash it

    def __str__(self) -> str:
        return f"<{self.type}> {self.repr if self.repr is not None else '(no repr)'}"


@dataclass(frozen=True)
class Cut:
    """A value the plugin did not send whole (too deep, too large): it meets no literal."""

    reason: str

    def __str__(self) -> str:
        return f"(not sent: {self.reason})"


class Malformed(ValueError):
    """A sent value that no plugin's ``encode`` writes: forged."""


MAX_ITEMS = 100_000
"""Values in one sent value, as the plugin sends at most (``decode`` refuses more)."""
MAX_HASHED = 10_000
"""Entries of one set or dict rebuilt on the host: hashing is where crafted values (ints that collide) would cost
quadratic time, so more is refused (no literal of a test holds that many)."""
MAX_INT_DIGITS = 4096
"""Hex digits of a fraction's parts (a gcd of larger crafted ints would cost the host its time)."""


def decode(data: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """The value the plugin's ``encode`` sent (bounded by ``MAX_DEPTH`` and ``MAX_ITEMS``); ``Malformed`` for
    anything else."""
    budget = [MAX_ITEMS] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise Malformed(f"more than {MAX_ITEMS} values in one")
    if depth > MAX_DEPTH + 1 or not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise Malformed("not a sealed value")
    tag, rest = data[0], data[1:]
    try:
        if tag == "none" and not rest:
            return None
        if tag == "bool" and len(rest) == 1 and type(rest[0]) is bool:
            return rest[0]
        if tag == "int" and len(rest) == 1 and isinstance(rest[0], str) and re.fullmatch(r"-?[0-9a-f]+", rest[0]):
            return int(rest[0], 16)
        if tag == "float" and len(rest) == 1 and isinstance(rest[0], str):
            return float.fromhex(rest[0])
        if tag == "complex" and len(rest) == 2 and all(isinstance(r, str) for r in rest):
            return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
        if tag == "str" and len(rest) == 1 and isinstance(rest[0], str):
            return rest[0]
        if tag in ("bytes", "bytearray") and len(rest) == 1 and isinstance(rest[0], str):
            raw = base64.b64decode(rest[0], validate=True)
            return raw if tag == "bytes" else bytearray(raw)
        if tag == "decimal" and len(rest) == 1 and isinstance(rest[0], str) and len(rest[0]) < 4096:
            return Decimal(rest[0])
        if tag == "fraction" and len(rest) == 2 and all(isinstance(r, str) and len(r) <= MAX_INT_DIGITS for r in rest):
            return Fraction(decode(["int", rest[0]], depth, budget), decode(["int", rest[1]], depth, budget))
        if tag in ("list", "tuple", "set", "frozenset") and len(rest) == 1 and isinstance(rest[0], list):
            if tag in ("set", "frozenset") and len(rest[0]) > MAX_HASHED:
                raise Malformed(f"a set of more than {MAX_HASHED} entries")
            items = [decode(x, depth + 1, budget) for x in rest[0]]
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict" and len(rest) == 1 and isinstance(rest[0], list) and len(rest[0]) <= MAX_HASHED:
            pairs = []
            for pair in rest[0]:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise Malformed("a dict entry is not a pair")
                pairs.append((decode(pair[0], depth + 1, budget), decode(pair[1], depth + 1, budget)))
            return dict(pairs)
        if tag == "opaque" and len(rest) == 4 and isinstance(rest[0], str) and isinstance(rest[1], (str, type(None))) \
                and (rest[2] is None or isinstance(rest[2], str) and re.fullmatch(r"-?[0-9a-f]+", rest[2])) \
                and (rest[3] is None or isinstance(rest[3], str)):
            return Opaque(rest[0][:300], rest[1], None if rest[2] is None else int(rest[2], 16),
                          None if rest[3] is None else float.fromhex(rest[3]))
        if tag == "cut" and len(rest) == 1 and isinstance(rest[0], str):
            return Cut(rest[0][:200])
    except (ValueError, TypeError, OverflowError, InvalidOperation, ZeroDivisionError) as exc:
        raise Malformed(f"a {tag} value that does not decode: {type(exc).__name__}") from exc
    raise Malformed(f"not a sealed value of kind {tag[:40]!r}")


def shown(value: Any, limit: int = 300) -> str:
    """A decoded value for the evidence (bounded)."""
    try:
        text = str(value) if isinstance(value, (Opaque, Cut)) else repr(value)
    except (ValueError, RecursionError):  # an int past str()'s digit limit, a value nested to the decode bound
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


# ---- the rewriting (on the host, on trusted test files)

def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):  # literal_eval has no names, but be explicit
        return False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _decorator_runs_once(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    parts.reverse()
    if "mark" in parts[:-1]:
        return True  # pytest.mark.X, mark.X
    return bool(parts) and parts[-1] in RUN_DECORATORS and (parts[0] in ("mock", "patch", "unittest")
                                                            or parts[-1] == "patch" or len(parts) == 1)


def _leaves_early(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _sealable(stmt: ast.stmt) -> tuple[ast.expr, ast.expr, str, bool] | None:
    """(value, literal, op, value is the left operand) of a sealable statement; None otherwise."""
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1:
        op = OPS.get(type(stmt.test.ops[0]))
        left, right = stmt.test.left, stmt.test.comparators[0]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Attribute) and isinstance(stmt.value.func.value, ast.Name) and \
            stmt.value.func.value.id == "self" and stmt.value.func.attr in UNITTEST:
        call = stmt.value
        if not 2 <= len(call.args) <= 3 or any(k.arg != "msg" for k in call.keywords) or \
                any(isinstance(a, ast.Starred) for a in call.args):
            return None
        op = UNITTEST[call.func.attr]
        left, right = call.args[0], call.args[1]
    else:
        return None
    if op is None:
        return None
    lit_left, lit_right = _literal(left), _literal(right)
    if lit_left == lit_right:
        return None
    literal, value = (right, left) if lit_right else (left, right)
    if (literal.end_col_offset is None) or len(ast.unparse(literal)) > MAX_LITERAL:
        return None
    if op in ("in", "not in") and not lit_right:
        return None  # a literal looked for in the value: the value may be a container the host cannot rebuild
    if op in ("<", "<=", ">", ">="):
        number = ast.literal_eval(literal)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return None  # ordered against a string or a tuple: the value's own order may not be the host's
    return value, literal, op, lit_right


def _alone(stmt: ast.stmt, body: list[ast.stmt], lines: list[bytes]) -> bool:
    """Whether ``stmt`` has its lines to itself (no ``;`` neighbour, nothing but a comment after it)."""
    i = body.index(stmt)
    if i > 0 and (body[i - 1].end_lineno or 0) >= stmt.lineno:
        return False
    if i + 1 < len(body) and body[i + 1].lineno <= (stmt.end_lineno or stmt.lineno):
        return False
    first, last = lines[stmt.lineno - 1], lines[(stmt.end_lineno or stmt.lineno) - 1]
    after = last[stmt.end_col_offset:].strip()
    return not first[:stmt.col_offset].strip() and (not after or after.startswith(b"#"))


def _function(module: ast.Module, parts: list[str]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = module.body
    for name in parts[:-1]:
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
        if not found:
            return None
        body = found[-1].body
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == parts[-1]]
    return defs[-1] if defs else None


def _blank_comments(text: str) -> str:
    """``text`` with every comment's text removed (an encoding cookie and a ``#!`` line kept); lines unchanged."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    lines = text.splitlines(keepends=True)
    for tok in reversed(tokens):
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        if row <= 2 and (re.match(r"#.*coding[:=]", tok.string) or (row == 1 and col == 0 and tok.string.startswith("#!"))):
            continue
        line = lines[row - 1]
        lines[row - 1] = line[:col].rstrip(" \t") + line[col + len(tok.string):]
    return "".join(lines)


def seal_source(text: str, file: str, requested: list[str], seen: bytes | None = None) -> tuple[str, list[Seal]]:
    """``text`` (a trusted test file) with the sealable assertions of its ``requested`` tests (node ids) rewritten
    (see the module docstring), and the seals; ``text`` unchanged and no seals when nothing is sealable or the
    rewriting would not parse. ``seen``: the agent's copy of the file (the repository's), to mark a literal it saw."""
    try:
        module = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text, []
    raw = text.encode("utf-8")
    lines = raw.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, bytes]] = []
    seals: list[Seal] = []
    docstrings: list[ast.stmt] = []
    for node in dict.fromkeys(n.partition("[")[0] for n in requested):
        parts = node.split("::")[1:]
        func = _function(module, parts) if parts else None
        if func is None or _leaves_early(func) or not all(_decorator_runs_once(d) for d in func.decorator_list):
            continue
        first = func.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            docstrings.append(first)  # a docstring can say what a test expects
        for stmt in func.body:
            found = _sealable(stmt)
            if found is None or not _alone(stmt, func.body, lines):
                continue
            value, literal, op, value_left = found
            begin = starts[stmt.lineno - 1] + stmt.col_offset
            end = starts[(stmt.end_lineno or stmt.lineno) - 1] + (stmt.end_col_offset or 0)
            value_src = raw[starts[value.lineno - 1] + value.col_offset:
                            starts[(value.end_lineno or value.lineno) - 1] + (value.end_col_offset or 0)]
            slot = secrets.token_hex(4)
            newlines = raw[begin:end].count(b"\n") - value_src.count(b"\n")
            # the value in parentheses (a walrus or a multi-line value stays one argument); the statement's line
            # breaks inside the call's parentheses, so the file keeps its line numbers
            call = CALL.encode() + b"((" + value_src + b")," + b"\n" * newlines + f' "{slot}")'.encode()
            edits.append((begin, end, call))
            expected = raw[starts[literal.lineno - 1] + literal.col_offset:
                           starts[(literal.end_lineno or literal.lineno) - 1] + (literal.end_col_offset or 0)]
            statement = raw[begin:end].decode("utf-8", "replace")
            seal = Seal(slot, node, op, expected.decode("utf-8"), value_left, statement,
                        seen is not None and expected in seen)
            if not literal_ok(seal):
                edits.pop()
                continue
            seals.append(seal)
    if not seals:
        return text, []
    for doc in docstrings:  # the same lines, no text
        begin = starts[doc.lineno - 1] + doc.col_offset
        end = starts[(doc.end_lineno or doc.lineno) - 1] + (doc.end_col_offset or 0)
        if _alone(doc, [doc], lines):
            edits.append((begin, end, b'"""' + b"\n" * raw[begin:end].count(b"\n") + b'"""'))
    out = raw
    for begin, end, call in sorted(edits, reverse=True):
        out = out[:begin] + call + out[end:]
    result = _blank_comments(out.decode("utf-8"))
    try:
        parse(result)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text, []
    if result.count("\n") != text.count("\n"):
        return text, []
    return result, [dataclasses.replace(s, visible=True) if not s.visible and _still_written(s, result) else s
                    for s in seals]


def _still_written(seal: Seal, text: str) -> bool:
    """Whether a sealed literal can still be read in the sealed file (written elsewhere: another test's input, a
    helper, a parametrize list): then it is no secret. A string is looked for by its value (at least 4
    characters: shorter ones are found anywhere), anything else by its text."""
    value = seal.literal()
    if isinstance(value, (str, bytes)):
        found = value if isinstance(value, str) else value.decode("latin-1")
        return len(found) >= 4 and found in text
    written = re.escape(" ".join(seal.expected.split()))
    return re.search(rf"(?<![\w.]){written}(?![\w.])", " ".join(text.split())) is not None


def literal_ok(seal: Seal) -> bool:
    """Whether a seal's literal reads back (always, for what ``seal_source`` made; a guard for stored ones)."""
    try:
        value = seal.literal()
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return not (isinstance(value, float) and math.isnan(value) and seal.op == "==")


def located(seals: list[Seal], source: bytes) -> list[Seal]:
    """``seals`` with the lines their calls stand on in ``source``, the file as the grader runs it (a tripwire
    inserted after sealing moves them); a seal whose call is not found keeps ``(0, 0)``."""
    try:
        module = parse(source.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return seals
    where: dict[str, tuple[int, int]] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "seal" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            where[node.args[1].value] = (node.lineno, node.end_lineno or node.lineno)
    return [dataclasses.replace(s, lines=where.get(s.slot, (0, 0))) for s in seals]
