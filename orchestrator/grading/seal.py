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
import functools
import io
import json
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
    "assertDictEqual": "==", "assertSetEqual": "==", "assertMultiLineEqual": "==", "assertIn": "in"}
"""``TestCase`` methods sealed like the operator: ``assertIn(member, container)`` is ``member in container``
(``assertSequenceEqual`` compares a tuple with a list element by element: not the operator, not sealed)."""
COMPARE = {"==": operator.eq, "!=": operator.ne, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
MAX_LITERAL = 16384
"""A longer literal stays in the file (its assertion is not sealed)."""
MAX_HASHED = 500
"""Entries of one set or dict a sent value may hold, and a sealed literal (rebuilding a set hashes, and crafted
members that collide cost quadratic time: this bounds it)."""
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
    secret: bool = True
    """False where the value may be known without the fix: it follows a block that says what must be refused (a
    ``pytest.raises``, a ``try``; in the test, or in a fixture, helper or setup it takes one from), after which the
    expected value is often the state a refusal leaves."""

    @property
    def canonical(self) -> str:
        """The literal's value written one way (``'a'`` and ``"a"`` alike), to tell the same literal wherever it is."""
        try:
            return repr(self.literal())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return self.expected

    @property
    def deciding(self) -> bool:
        """Whether a mismatch here on the untouched repository counts as deciding its test (``tasks check``): a
        secret literal, not seen by the agent, and not one of a forger's first guesses (``GUESSABLE``)."""
        try:
            value = self.literal()
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        # under ``in`` the value meets any member: one first guess (or None, True, False) among them is enough
        candidates = [value] if self.op != "in" else _members(value)
        try:
            guessable = any(any(c is x for x in NO_SECRET) or any(c == g for g in GUESSABLE) for c in candidates)
        except Exception:  # noqa: BLE001 - a literal is plain data; a comparison that raises tells nothing
            guessable = True
        return self.secret and not self.visible and not guessable

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
    """A value of a type the host does not rebuild, or one that decides its own equality otherwise than its plain
    form: equal to a number literal when its ``__index__`` or ``__float__`` is that number *and its own ``__eq__``
    said, in the test process, that it equals that projection* (the plugin sends the projection only then: a class
    whose broken ``__eq__`` a test checks is not passed by its ``__float__``), else to a literal whose ``repr`` is
    its own (a ``sympy`` integer ``4`` has ``4``'s); never to anything else."""

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

    def __hash__(self) -> int:  # as the literal whose repr it has (set members, dict keys)
        try:
            return hash(ast.literal_eval(self.repr)) if self.repr is not None and len(self.repr) < 4096 else 0
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return hash((self.type, self.repr))

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
MAX_INT_DIGITS = 4096
"""Hex digits of a fraction's parts (a gcd of larger crafted ints would cost the host its time)."""


HASHED_PER_GROUP = 5000
"""Set and dict entries the host rebuilds from one group's values, in all (past it, a value is judged cut): with
``MAX_HASHED`` per set, what crafted collisions can cost is bounded (a few seconds of CPU)."""


def decode(data: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """The value the plugin's ``encode`` sent (bounded by ``MAX_DEPTH`` and ``MAX_ITEMS``; ``budget`` is [values
    left, set and dict entries left], the second shared by a group's values); ``Malformed`` for anything no plugin
    sends; ``Cut`` for a set or dict past the bounds, or whose members cannot be hashed here."""
    budget = [MAX_ITEMS, HASHED_PER_GROUP] if budget is None else budget
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
            hashed = tag in ("set", "frozenset")
            if hashed and not _room(budget, len(rest[0])):
                return Cut(f"a set of {len(rest[0])} entries: more than the host rebuilds")
            items = [decode(x, depth + 1, budget) for x in rest[0]]
            try:
                return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
            except TypeError:
                return Cut("a set whose members cannot be hashed here")
        if tag == "dict" and len(rest) == 1 and isinstance(rest[0], list):
            if not _room(budget, len(rest[0])):
                return Cut(f"a dict of {len(rest[0])} entries: more than the host rebuilds")
            pairs = []
            for pair in rest[0]:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise Malformed("a dict entry is not a pair")
                pairs.append((decode(pair[0], depth + 1, budget), decode(pair[1], depth + 1, budget)))
            try:
                return dict(pairs)
            except TypeError:
                return Cut("a dict whose keys cannot be hashed here")
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


def _room(budget: list[int], entries: int) -> bool:
    """Whether a set or dict of ``entries`` may be rebuilt (``MAX_HASHED`` each, ``HASHED_PER_GROUP`` in all)."""
    if len(budget) < 2:
        budget.append(HASHED_PER_GROUP)
    if entries > MAX_HASHED or entries > budget[1]:
        return False
    budget[1] -= entries
    return True


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


def _dotted(node: ast.expr) -> list[str]:
    target = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return parts[::-1]


def _decorator_runs_once(node: ast.expr) -> bool:
    parts = _dotted(node)
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


NO_SECRET = (None, True, False)
"""Literals not sealed: what a comparison with them expects is known without them (the other bool of a wrong one)."""
GUESSABLE = (0, 1, -1, "", b"", (), [], {}, set(), frozenset(), 0.5, 2)
"""Values sealed but never counted as deciding a test (``Seal.deciding``): a forger's first guesses, compared by
Python's equality (``0.0`` is ``0``)."""
REFUSALS = ("raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "warns", "assertWarns",
            "assertWarnsRegex", "suppress", "assertLogs", "deprecated_call")
"""Blocks that say what the code must refuse: a sealed value after one may be the state a refusal leaves, which
code that refuses only there (reading the test) gets right without the fix (``Seal.secret``)."""


def _sealable(stmt: ast.stmt, unittest_ok: bool) -> tuple[ast.expr, ast.expr, str, bool] | None:
    """(value, literal, op, value is the left operand) of a sealable statement; None otherwise. Only what a value
    the code under test did not compute cannot meet: ``value == literal`` and ``value in literal`` (``!=``,
    ``not in`` and order comparisons are met by a NaN or an infinity, so they stay in the process, where a forged
    pass is the tripwire's to see)."""
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1:
        op = OPS.get(type(stmt.test.ops[0]))
        left, right = stmt.test.left, stmt.test.comparators[0]
    elif unittest_ok and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
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
    if op not in ("==", "in"):
        return None
    lit_left, lit_right = _literal(left), _literal(right)
    if lit_left == lit_right:
        return None
    literal, value = (right, left) if lit_right else (left, right)
    if (literal.end_col_offset is None) or len(ast.unparse(literal)) > MAX_LITERAL:
        return None
    if op == "in" and not lit_right:
        return None  # a literal looked for in the value: the value may be a container the host cannot rebuild
    expected = ast.literal_eval(literal)
    if op == "in" and isinstance(expected, (str, bytes)):
        return None  # a substring test: the empty string meets it
    if any(expected is x for x in NO_SECRET) or _too_many_to_hash(expected):
        return None
    return value, literal, op, lit_right


def _too_many_to_hash(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (set, frozenset, dict)) and len(v) > MAX_HASHED:
            return True
        if isinstance(v, dict):
            stack += [*v.keys(), *v.values()]
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack += list(v)
    return False


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


TESTCASES = ("TestCase", "IsolatedAsyncioTestCase", "SimpleTestCase", "TransactionTestCase", "LiveServerTestCase")
"""Base classes whose ``assertEqual`` and ``assertIn`` are the operator's (``unittest``'s; Django's test cases
keep them)."""


TESTCASE_MODULES = ("unittest", "django.test")
"""Where a ``TestCase`` base must come from for its ``assertEqual`` to be the operator's."""


class _Classes:
    """The classes of one file, by name, to resolve a test method as pytest does (through the file's own bases)."""

    def __init__(self, module: ast.Module, elsewhere: set[str]) -> None:
        self.module = module
        self.elsewhere = elsewhere
        self.by_name: dict[str, ast.ClassDef] = {}
        self.bases_of_some: set[str] = set()
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                self.by_name[node.name] = node
                self.bases_of_some |= {p[-1] for p in map(_dotted, node.bases) if p}
        # the names the file binds to unittest's or Django's test cases, and the modules it imports whole
        self.testcase_names: set[str] = set()
        self.testcase_modules: set[str] = set()
        for node in module.body:
            if isinstance(node, ast.ImportFrom) and node.module in TESTCASE_MODULES:
                self.testcase_names |= {a.asname or a.name for a in node.names if a.name in TESTCASES}
            elif isinstance(node, ast.Import):
                self.testcase_modules |= {a.asname or a.name for a in node.names if a.name in TESTCASE_MODULES}

    def _testcase(self, parts: list[str]) -> bool:
        if len(parts) == 1:
            return parts[0] in self.testcase_names
        return parts[-1] in TESTCASES and ".".join(parts[:-1]) in self.testcase_modules

    def scope(self, path: list[str]) -> ast.ClassDef | None:
        body: list[ast.stmt] = self.module.body
        found = None
        for name in path:
            matches = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
            if not matches:
                return None
            found = matches[-1]
            body = found.body
        return found

    def mro(self, cls: ast.ClassDef) -> tuple[list[ast.ClassDef], bool]:
        """``cls`` and its bases defined in this file, depth first, and whether that is all of them (False when a
        base is neither in the file nor a known test case class: what it defines is not known)."""
        out, stack, complete = [], [cls], True
        while stack:
            c = stack.pop(0)
            if c in out:
                continue
            out.append(c)
            for base in c.bases:
                parts = _dotted(base)
                if parts and parts[-1] in self.by_name and len(parts) == 1:
                    stack.append(self.by_name[parts[-1]])
                elif not parts or not (self._testcase(parts) or parts == ["object"]):
                    complete = False
        return out, complete

    def resolve(self, parts: list[str]) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool] | None:
        """The function a node id runs (a module function, or a method found through the file's own bases), and
        whether its ``self.assert…`` calls are ``unittest``'s own; None when it cannot be told, or when a class of
        another trusted file subclasses the one that defines it (that file's tests would run it unseen)."""
        if len(parts) == 1:
            defs = [n for n in self.module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.name == parts[0]]
            return (defs[-1], False) if defs else None
        cls = self.scope(parts[:-1])
        if cls is None:
            return None
        chain, complete = self.mro(cls)
        for c in chain:  # the first definition found: where an unknown base stands earlier, it may be its
            defs = [n for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == parts[-1]]
            if defs:
                if c.name in self.elsewhere or (c is not cls and not complete):
                    return None
                own_asserts = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("assert")
                                  for k in chain for n in k.body)
                return defs[-1], complete and not own_asserts
        return None


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


def _refuses(node: ast.AST, in_test: bool = True) -> bool:
    """Whether ``node`` holds a refusal construct: a call whose name reads as one (``_refusal_name``: as a ``with``
    or called, at any depth),
    or a ``try`` (in a helper or fixture, one that catches: a ``try``/``finally`` lets the exception through)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Try) and (in_test or n.handlers):
            return True
        if hasattr(ast, "TryStar") and isinstance(n, ast.TryStar):
            return True
        if isinstance(n, ast.Call) and _refusal_name((_dotted(n) or [""])[-1]):
            return True
    return False


def _names(node: ast.AST) -> set[str]:
    """Every name ``node`` reads or calls (a plain name, an attribute's last part, a string a ``usefixtures`` mark
    names), and the parameters of a function (the fixtures it takes)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


SETUPS = ("setUp", "asyncSetUp", "setUpClass", "setUpModule", "setup_method", "setup_class", "setup_function",
          "setup_module", "setup", "setup_each")
"""Functions pytest or ``unittest`` runs before a test by their name alone."""
AUTOUSE = "<autouse>"
"""In ``refusing_names``: some fixture that runs before every test (``autouse=True``) refuses."""


def _refusal_name(name: str) -> bool:
    """A name that reads as a refusal: ``REFUSALS``, or any name saying raises, warns, suppress, assert-logs or
    deprecated (numpy's ``assert_raises``, Django's ``assertRaisesMessage``, a project's ``expect_raises``)."""
    low = name.lower()
    return name in REFUSALS or any(k in low for k in ("raise", "warn", "suppress", "assertlogs", "deprecated"))


def _swallows(cls: ast.ClassDef) -> bool:
    """A context manager class whose ``__exit__`` may return something true (it can swallow the exception)."""
    for f in cls.body:
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in ("__exit__", "__aexit__"):
            return any(isinstance(r, ast.Return) and r.value is not None
                       and not (isinstance(r.value, ast.Constant) and not r.value.value) for r in ast.walk(f))
    return False


def refusing_names(modules: list[ast.Module], module_level: bool = False) -> set[str]:
    """The names of the functions of ``modules`` (module functions, methods, fixtures) that make a refusal, or call,
    take as a fixture or name one that does, transitively (by name: a name any of them refuses under counts), and
    ``AUTOUSE`` when such a function is an ``autouse`` fixture. Also every name a refusal goes by: ``REFUSALS``
    themselves (``getattr(pytest, "raises")``), a refusal imported or assigned under another name (``from pytest
    import raises as refused``, ``refused = pytest.raises``), a function whose name reads as one
    (``_refusal_name``), a context manager class whose ``__exit__`` may swallow the exception. With
    ``module_level`` (a test file's own module), a ``try`` that catches around a call at the top of the module or
    a class body makes every test of it count as after a refusal (``AUTOUSE``)."""
    functions = [f for m in modules for f in ast.walk(m) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    refusing = {f.name for f in functions if _refuses(ast.Module(body=f.body, type_ignores=[]), in_test=False)
                or _refusal_name(f.name)}
    refusing |= set(REFUSALS)
    for m in modules:
        for n in ast.walk(m):
            if isinstance(n, (ast.ImportFrom, ast.Import)):
                refusing |= {a.asname for a in n.names if a.asname and _refusal_name(a.name.rpartition(".")[2])}
            elif isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.Attribute)) \
                    and _refusal_name((_dotted(n.value) or [""])[-1]):
                refusing |= {t.id for t in n.targets if isinstance(t, ast.Name)}
            elif isinstance(n, ast.ClassDef) and _swallows(n):
                refusing.add(n.name)
        if module_level and any(isinstance(t, ast.Try) and t.handlers and any(isinstance(c, ast.Call) for b in t.body
                                                                              for c in ast.walk(b))
                                for body in [m.body, *(c.body for c in m.body if isinstance(c, ast.ClassDef))]
                                for t in body):
            refusing.add(AUTOUSE)
    uses = [(f.name, _names(f) - {f.name}) for f in functions]
    grown = True
    while grown:
        grown = False
        for name, used in uses:
            if name not in refusing and used & refusing:
                refusing.add(name)
                grown = True
    for f in functions:
        if f.name in refusing and any(isinstance(k, ast.keyword) and k.arg == "autouse"
                                      and not (isinstance(k.value, ast.Constant) and not k.value.value)
                                      for d in f.decorator_list for k in ast.walk(d)):
            refusing.add(AUTOUSE)
    return refusing


def _after_refusal(func: ast.FunctionDef | ast.AsyncFunctionDef, stmt: ast.stmt,
                   refusing: set[str] = frozenset(), method: bool = False) -> bool:
    """Whether anything before ``stmt`` in its test says what the code must refuse or may let pass: a ``try``, or a
    call of ``REFUSALS`` (as a ``with`` or called, at any depth: ``pytest.raises(E, f)``, ``contextlib.suppress``,
    a ``raises`` nested in another ``with``). After one, code that reads the test can refuse just there. So does a
    refusal made for the test elsewhere (``refusing``): in a fixture it takes (or a mark names), a helper it calls
    up to and in ``stmt``, a setup pytest or ``unittest`` runs before it, an ``autouse`` fixture."""
    at = func.body.index(stmt)
    for earlier in func.body[:at]:
        if _refuses(earlier):
            return True
    if not refusing:
        return False
    if AUTOUSE in refusing or refusing & set(SETUPS if method else ("setup_function", "setup_module", "setUpModule")):
        return True
    used = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    for node in [*func.decorator_list, *func.body[:at + 1]]:
        used |= _names(node)
    return bool(used & refusing)


def bases_named(sources: dict[str, bytes]) -> dict[str, set[str]]:
    """Per trusted Python file, the class names its classes derive from (the last part of each base)."""
    out: dict[str, set[str]] = {}
    for path, data in sources.items():
        if not path.endswith(".py"):
            continue
        try:
            module = parse(data.decode("utf-8"))
        except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        out[path] = {p[-1] for n in ast.walk(module) if isinstance(n, ast.ClassDef) for p in map(_dotted, n.bases) if p}
    return out


def seal_source(text: str, file: str, requested: list[str], seen: bytes | None = None,
                elsewhere: set[str] = frozenset(), refusing: set[str] = frozenset()) -> tuple[str, list[Seal]]:
    """``text`` (a trusted test file) with the sealable assertions of the functions its ``requested`` tests (node
    ids) run rewritten (see the module docstring), and the seals, one per requested node running the function
    (a subclass's node runs its base's method); ``text`` unchanged and no seals when nothing is sealable or the
    rewriting would not parse. ``seen``: what the agent saw of it (its copy of the file, the instruction), to mark
    a literal found there; ``elsewhere``: class names other trusted files derive from (their methods are left
    whole: a test of another file would run them unseen); ``refusing``: ``refusing_names`` of the other trusted files
    (a fixture of a ``conftest.py``), beside this file's own."""
    try:
        module = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text, []
    refusing = set(refusing) | refusing_names([module], module_level=True)
    raw = text.encode("utf-8")
    lines = raw.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    classes = _Classes(module, set(elsewhere))
    custom_equality = "addTypeEqualityFunc" in text  # unittest's assertEqual then compares its own way
    edits: list[tuple[int, int, bytes]] = []
    by_function: dict[int, list[Seal]] = {}
    docstrings: list[ast.stmt] = []
    nodes_of: dict[int, list[str]] = {}
    for node in dict.fromkeys(n.partition("[")[0] for n in requested):
        parts = node.split("::")[1:]
        found = classes.resolve(parts) if parts else None
        if found is None:
            continue
        func, unittest_ok = found
        if _leaves_early(func) or not all(_decorator_runs_once(d) for d in func.decorator_list):
            continue
        nodes_of.setdefault(id(func), []).append(node)
        if id(func) in by_function:
            continue
        by_function[id(func)] = []
        first = func.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            docstrings.append(first)  # a docstring can say what a test expects
        for stmt in func.body:
            sealable = _sealable(stmt, unittest_ok and not custom_equality)
            if sealable is None or not _alone(stmt, func.body, lines):
                continue
            value, literal, op, value_left = sealable
            begin = starts[stmt.lineno - 1] + stmt.col_offset
            end = starts[(stmt.end_lineno or stmt.lineno) - 1] + (stmt.end_col_offset or 0)
            value_src = raw[starts[value.lineno - 1] + value.col_offset:
                            starts[(value.end_lineno or value.lineno) - 1] + (value.end_col_offset or 0)]
            slot = secrets.token_hex(4)
            newlines = raw[begin:end].count(b"\n") - value_src.count(b"\n")
            # the value in parentheses (a walrus or a multi-line value stays one argument); the statement's line
            # breaks inside the call's parentheses, so the file keeps its line numbers
            call = CALL.encode() + b"((" + value_src + b")," + b"\n" * newlines + f' "{slot}")'.encode()
            expected = raw[starts[literal.lineno - 1] + literal.col_offset:
                           starts[(literal.end_lineno or literal.lineno) - 1] + (literal.end_col_offset or 0)]
            seal = Seal(slot, "", op, expected.decode("utf-8"), value_left, raw[begin:end].decode("utf-8", "replace"),
                        seen is not None and expected in seen,
                        secret=not _after_refusal(func, stmt, refusing, method=len(parts) > 1))
            if not literal_ok(seal):
                continue
            edits.append((begin, end, call))
            by_function[id(func)].append(seal)
    if not any(by_function.values()):
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
    seals = []
    for key, found in by_function.items():
        for seal in found:
            visible = seal.visible or _still_written(seal, result, seen)
            seals += [dataclasses.replace(seal, test=node, visible=visible) for node in nodes_of[key]]
    return result, seals


class Corpus:
    """Text a sealed literal must not be found in to count as a secret: every file the grader's container holds
    (the sealed files as sealed, every other trusted file, the repository's files) and what the agent saw (the
    instruction). Read up to ``LIMIT`` bytes, files of at most ``FILE_LIMIT``; past that, nothing counts as secret
    (``holds`` says True: a claim of secrecy needs the whole search). Binary files (a NUL in their first 8 KiB) are
    not searched. A literal is looked for by its value, however the text writes it (``_found``)."""

    LIMIT = 64 << 20
    FILE_LIMIT = 8 << 20

    def __init__(self, blobs: list[bytes]) -> None:
        blobs = [b for b in blobs if b"\0" not in b[:8192]]  # binary files: no literal of a test is read from them
        total = sum(len(b) for b in blobs)
        self.complete = total <= self.LIMIT and all(len(b) <= self.FILE_LIMIT for b in blobs)
        self.where = _Text("\n".join(b.decode("utf-8", "replace") for b in blobs) if self.complete else "")

    @property
    def text(self) -> str:
        return self.where.text

    def holds(self, seal: Seal) -> bool:
        if not self.complete:
            return True
        return _seen(seal, self.where)


class _Text:
    """A text to look literals up in, with the forms ``_found`` searches made once, when first needed."""

    def __init__(self, text: str) -> None:
        self.text = text

    @functools.cached_property
    def words(self) -> str:
        """Runs of white space as one space."""
        return " ".join(self.text.split())

    @functools.cached_property
    def compact(self) -> str:
        """No white space, one kind of quote, no comma before a closing bracket (``_compact``)."""
        return _compact(self.text)

    @functools.cached_property
    def lines(self) -> str:
        """Each line stripped."""
        return "\n".join(line.strip() for line in self.text.splitlines())


def _compact(text: str) -> str:
    """``text`` written one way whatever its spelling as Python or JSON: no white space, ``'`` as ``"``, no comma
    before a closing bracket (``('a', 1,)`` and ``("a",1)`` alike). Applied to both sides, it can only find more."""
    return re.sub(r",(?=[)\]}])", "", re.sub(r"\s+", "", text).replace("'", '"'))


SHORT = 4
"""A string shorter than this is found anywhere (a first guess); an element of a container is looked for one by
one only from this length of text on (``["b", "a", "c"]`` is not found by its letters)."""


def _token_in(token: str, text: str, before: str = "", tail: str | None = None) -> bool:
    """Whether ``token`` stands in ``text`` as a whole token: no word character or ``.`` before it (``before``:
    what must precede it instead, white space allowed between), and after it (``tail``: a pattern it may go on
    with, ``0*`` for more zeros) no word character and no ``.`` followed by a digit. Found by ``str.find`` (a
    pattern that starts with a look-behind would be tried at every position of a 64 MiB text)."""
    if not token:
        return False
    after = re.compile((tail or "") + r"(?!\w)(?!\.\d)")
    at = text.find(token)
    while at >= 0:
        ok = True
        if before:
            head = text[max(0, at - 64):at].rstrip()
            ok = head.endswith(before) and not head[:-len(before)][-1:].isalnum()
        elif at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_."):
            ok = False
        if ok and after.match(text, at + len(token)):
            return True
        at = text.find(token, at + 1)
    return False


def _number_found(value: Any, text: str) -> bool:
    """Whether an int or finite float is written in ``text`` in any plain decimal spelling of it (``2.5``:
    ``2.5``, ``2.50``, ``+2.5``, ``02.5`` no; ``3``: ``3``, ``3.0``; ``0.5``: ``.5`` too), as a whole token."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, float) and not math.isfinite(value)):
        return False
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        digits = format(abs(number), "f")
    except (ValueError, ArithmeticError):
        return False
    if len(digits) > 200:
        return False
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    whole, _, frac = digits.partition(".")
    sign = "-" if number < 0 else ""
    if frac:
        tail = "0*"
        if whole == "0" and _token_in("." + frac, text, sign, tail):
            return True
        return _token_in(f"{whole}.{frac}", text, sign, tail)
    return _token_in(whole, text, sign, r"(?:\.0*)?")


def _string_forms(value: str, written: str | None) -> list[str]:
    """How a text may write the string ``value``: as it is, escaped as Python's REPL or JSON writes it, or as the
    test writes it (its quotes and escapes, with and without the quotes)."""
    forms = [value, repr(value)[1:-1], json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
    if written is not None:
        forms.append(written)
        quoted = re.fullmatch(r"[rRbBuU]{0,2}('\'\'|\"\"\"|'|\")(.*)\1", written.strip(), re.DOTALL)
        if quoted:
            forms.append(quoted.group(2))
    return forms


def _members(value: Any) -> list[Any]:
    """What ``x in value`` compares ``x`` with (a dict's keys); the value itself when it is no container."""
    if isinstance(value, dict):
        return list(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


FOUND_BUDGET = 200
"""Values one literal's search looks for (its elements, theirs); past it, the literal counts as found (unsure)."""


def _found(value: Any, written: str | None, where: _Text, depth: int = 0, budget: list[int] | None = None) -> bool:
    """Whether ``value`` (a literal's; ``written``: how the test writes it, None for an element) is written in
    ``where`` in any spelling that reads back to it: a string by its text, escaped or not, its white space as it
    likes (under ``SHORT`` characters: anywhere); a number by any decimal spelling of it (``2.50`` is ``2.5``);
    anything by its test's text, Python's ``repr``, or JSON, compared without white space, quotes told apart or
    trailing commas; a list of strings by its lines, one per line; a container by its elements (each at least
    ``SHORT`` characters long as written) stated together (``_together``). When unsure, found: a literal found is
    no secret."""
    budget = [FOUND_BUDGET] if budget is None else budget
    budget[0] -= 1
    if depth > 8 or budget[0] < 0:
        return True
    if isinstance(value, (str, bytes, bytearray)):
        text = value if isinstance(value, str) else bytes(value).decode("latin-1")
        if len(text) < SHORT:
            return True
        forms = _string_forms(text, written)
        if not isinstance(value, str):
            forms.append(repr(bytes(value))[2:-1])
        if any(len(f) >= SHORT and f in where.text for f in forms):
            return True
        spaced = " ".join(text.split())
        return len(spaced) >= SHORT and spaced in where.words
    if _number_found(value, where.words):
        return True
    spellings = [repr(value)] + ([written] if written is not None else [])
    try:
        spellings.append(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        pass
    for spelling in spellings:
        if _token_in(" ".join(spelling.split()), where.words):
            return True
        compact = _compact(spelling)
        if len(compact) >= SHORT and compact in where.compact:
            return True
    if isinstance(value, (list, tuple)) and len(value) > 1 and all(isinstance(x, str) for x in value):
        lines = "\n".join(x.strip() for x in value)
        if len(lines) >= SHORT and lines in where.lines:  # a table, a listing: shown line by line
            return True
    if isinstance(value, (list, tuple, set, frozenset, dict)) and 1 < len(value) <= 64:
        elements = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
        texts = [_element_text(x) for x in elements]
        if all(t is not None for t in texts):
            return _together(texts, where.text, ordered=isinstance(value, (list, tuple)))
    return False


def _element_text(value: Any) -> str | None:
    """How an element of a container is looked for (``_together``): a string of ``SHORT`` characters or more as it
    is, a number of as many as Python writes it; None for anything else (a container with one is not looked for
    element by element)."""
    if isinstance(value, str) and len(value) >= SHORT:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and len(repr(value)) >= SHORT:
        return repr(value)
    return None


def _together(texts: list[str], text: str, ordered: bool) -> bool:
    """Whether every one of ``texts`` is written in ``text`` within one stretch (twice their length, and 200
    characters more), in their order for a list or tuple, in any order for a set or dict: the container stated
    element by element (an issue's listing, a sentence). Elements found each somewhere else say nothing of which
    of them, in what order, the value holds (a test's own inputs, sorted or filtered, hold them all)."""
    span = 2 * sum(len(t) + 4 for t in texts) + 200
    starts, at = 0, text.find(texts[0])
    while at >= 0 and starts < 1000:
        starts += 1
        if ordered:
            pos, ok = at + len(texts[0]), True
            for t in texts[1:]:
                nxt = text.find(t, pos, at + span)
                if nxt < 0:
                    ok = False
                    break
                pos = nxt + len(t)
        else:
            window = text[max(0, at - span):at + span]
            ok = all(t in window for t in texts[1:])
        if ok:
            return True
        at = text.find(texts[0], at + 1)
    return False


def _seen(seal: Seal, where: _Text) -> bool:
    """Whether a seal's literal, or under ``in`` any of its members (the value meets any one), is found."""
    value = seal.literal()
    if _found(value, seal.expected, where):
        return True
    return seal.op == "in" and isinstance(value, (list, tuple, set, frozenset, dict)) and \
        (len(value) > FOUND_BUDGET or any(_found(m, None, where) for m in _members(value)))


def _still_written(seal: Seal, text: str, seen: bytes | None = None) -> bool:
    """Whether a sealed literal can still be read in the sealed file or what the agent saw (written elsewhere:
    another test's input, a helper, the instruction): then it is no secret (``_found``: by its value)."""
    return _seen(seal, _Text(text + "\n" + (seen or b"").decode("utf-8", "replace")))


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
