"""A fifth review's attack on the tripwire (issue 23), and what now holds against it.

The reviewer's forger, appended to the repository's own module, got an untouched task accepted in 14 of 16 and 13
of 16 trials: it told the tripwire from its model by (1) the argument list, which kept the task's listing order
of the requested tests with only the tripwire inserted at a drawn place, and (2) the way the copy's constant was
changed, which was lopsided (a value taken from elsewhere in the file, an alphabet without some letters, an insert
against a drop), so the likelier direction could be computed; and (3) by running a pair, where the copy's model
was a test that passes on the untouched repository. Now the arguments follow the file's order, the change is
symmetric, and the copy is made of a fail-to-pass test where the file has one. A sixth review then found that
code evaluating the assertion itself, and structural tells of the copy, still find it: the last test here pins
that open hole as a strict xfail (issue 23).
"""

from __future__ import annotations

import ast
import itertools
import random

import pytest

from orchestrator.grading import compose as C
from orchestrator.grading.runner import _as_run, in_file_order, wire_cases
from tests.conftest import ROOT

SLUG = "tests/test_slug_unicode.py"
SOURCE = (ROOT / "graders/textkit-slug-unicode/tests" / "test_slug_unicode.py").read_bytes()
MIXED = b'''from textkit import slugify


def test_plain():
    assert slugify("a b") == "a-b"


def test_accents():
    assert slugify("Cr\xc3\xa8me") == "creme"


def test_spaces():
    assert slugify("  x  ") == "x"


def test_mixed():
    assert slugify("\xc3\x9cn\xc3\xafc") == "unic"
'''


class Scripted(random.Random):
    """An rng whose ``choice`` and ``randrange`` return the drawn values in turn, to enumerate a draw's outcomes."""

    def __init__(self, picks):
        super().__init__(0)
        self.picks = list(picks)

    def choice(self, seq):
        return seq[self.picks.pop(0) % len(seq)]

    def randrange(self, a, b=None):
        lo, hi = (0, a) if b is None else (a, b)
        return lo + self.picks.pop(0) % (hi - lo)

    def random(self):
        return self.picks.pop(0) / 2


def kernel(value) -> dict:
    """Every value ``_mutated`` can make of ``value``, with its exact chance."""
    out: dict = {}
    if isinstance(value, int):
        for delta, up in itertools.product(range(96), (0, 1)):
            got = C._mutated(Scripted([delta, up]), value)
            out[got] = out.get(got, 0) + 1 / (96 * 2)
        return out
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    spots = [i for i, c in enumerate(text) if any(c in k for k in C.CHAR_CLASSES)]
    for s in range(len(spots)):
        kind = next(k for k in C.CHAR_CLASSES if text[spots[s]] in k)
        for r in range(len(kind) - 1):
            got = C._mutated(Scripted([s, r]), value)
            out[got] = out.get(got, 0) + 1 / (len(spots) * (len(kind) - 1))
    return out


@pytest.mark.parametrize("value", ["creme-brulee", "naive-cafe", "A1", "x", "unicode-done", b"bytes-9", 0, 7, -40, 1000])
def test_the_copys_change_is_as_likely_either_way(value):
    forward = kernel(value)
    assert forward and value not in forward and abs(sum(forward.values()) - 1) < 1e-9
    for other, p in forward.items():
        assert type(other) is type(value)
        assert kernel(other).get(value) == pytest.approx(p)  # b from a exactly as likely as a from b


def test_no_value_is_taken_from_elsewhere_in_the_file_and_a_value_with_no_letter_or_digit_is_no_model():
    rng = random.Random(3)
    pool = ["elsewhere"] * 50
    assert all(C._mutated(rng, "creme", pool) != "elsewhere" for _ in range(200))
    assert C._mutated(rng, "-- ✓ --") is None and C._mutated(rng, "") is None and C._mutated(rng, 1.5) is None


def _draw(source=SOURCE, file=SLUG, tests=("test_accents", "test_mixed"), failing=None):
    nodes = [f"{file}::{t}" for t in tests]
    out, [wire], names = C._tripwires([file], nodes, {file: source}, set(),
                                      set(nodes if failing is None else failing))
    argv = in_file_order([_as_run(n, names) for n in nodes] + wire_cases(wire, nodes), out[file])
    return out[file].decode(), wire, names, argv


def test_the_arguments_follow_the_file_so_their_order_tells_nothing_the_file_does_not():
    for _ in range(60):
        text, wire, names, argv = _draw()
        defs = [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
        assert [a.split("::")[-1] for a in argv] == defs  # exactly the file's order, the tripwire at its place
        assert wire.node in argv


def test_the_tripwire_copies_a_fail_to_pass_test_where_the_file_has_one():
    nodes = [f"t.py::{n}" for n in ("test_plain", "test_accents", "test_spaces", "test_mixed")]
    failing = {nodes[1], nodes[3]}
    models = set()
    for _ in range(80):
        _, wire, _, _ = _draw(MIXED, "t.py", [n.split("::")[1] for n in nodes], failing)
        models.add(wire.model)
    assert models == failing  # never a copy of a test that passes on the untouched repository


def test_a_reader_who_knows_every_rule_guesses_the_copy_one_time_in_two():
    """The informed guess: of the two tests that differ in one constant, the one whose constant is the likelier
    change of the other's under the drawn rule (exact ``kernel``), ties broken by position; the file's order is
    the arguments' order, so it adds nothing."""
    hits, n = 0, 300
    for _ in range(n):
        text, wire, names, argv = _draw()
        module = ast.parse(text)
        funcs = [f for f in module.body if isinstance(f, ast.FunctionDef)]
        copy = next(f for f in funcs if f.name == wire.node.split("::")[-1])
        model = next(f for f in funcs if f.name == names.get(wire.model, wire.model).split("::")[-1])
        last = [c.value for c in ast.walk(copy.body[-1]) if isinstance(c, ast.Constant)]
        first = [c.value for c in ast.walk(model.body[-1]) if isinstance(c, ast.Constant)]
        a, b = next((x, y) for x, y in zip(first, last) if x != y)  # the model's value, the copy's
        pair = sorted([(model, a, b), (copy, b, a)], key=lambda t: t[0].lineno)
        # guess: the test whose value is the likelier change of the other's; the later one on a tie
        scores = [kernel(theirs).get(mine, 0) for _, mine, theirs in pair]
        guess = pair[0][0] if scores[0] > scores[1] else pair[1][0]
        hits += guess is copy
    assert 0.38 < hits / n < 0.62, hits / n


# --------------------------------------------------------------------------- a sixth review: what does not hold
def _distance(a, b) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return abs(a - b)
    a, b = str(a), str(b)
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


@pytest.mark.xfail(strict=True, reason="stated limit of the tripwire alone: code under test that evaluates the last "
                   "assertion's other side itself and takes the constant nearer its own answer finds the copy (a "
                   "sixth review's forger was accepted on untouched tasks in 44 of 44 trials so); in the grader these "
                   "assertions are sealed now, and the values decide (tests/docker/test_threats_sealed.py)")
def test_a_forger_that_computes_the_answer_itself_finds_the_copy_no_more_than_one_time_in_two():
    import sys

    sys.path.insert(0, str(ROOT / "tasks/_repos/textkit"))
    try:
        from textkit import slugify  # the untouched code, as the forger's own module sees it
    finally:
        sys.path.pop(0)
    hits, n = 0, 200
    for _ in range(n):
        text, wire, names, _ = _draw()
        funcs = {f.name: f for f in ast.parse(text).body if isinstance(f, ast.FunctionDef)}
        copy = funcs[wire.node.split("::")[-1]]
        model = funcs[names.get(wire.model, wire.model).split("::")[-1]]
        near = []
        for f in (model, copy):
            test = f.body[-1].test  # assert <call> == <constant>
            actual = eval(compile(ast.Expression(test.left), "t", "eval"), {"slugify": slugify})
            near.append(_distance(actual, test.comparators[0].value))
        guess = copy if near[1] > near[0] else model  # the farther constant is the copy
        hits += guess is copy
    assert hits / n < 0.62, hits / n
