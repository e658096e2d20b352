"""Sealed assertions (``grading/seal.py``, the plugin's ``seal``, ``runner._apply_seals``): the literal a test
compares with stays on the host, which compares the value the test process sent.

The rewriting is checked on source text, the value's journey (plugin encode → JSON → host decode) against
Python's own operators on the same values, and the host's judgement of a group's records, forged ones included.
The real-engine tests are in ``tests/docker/test_threats_sealed.py``."""

from __future__ import annotations

import ast
import importlib.util
import json
from decimal import Decimal
from fractions import Fraction

import pytest

from orchestrator.grading import runner as R
from orchestrator.grading.seal import CALL, Cut, Malformed, Opaque, Seal, decode, seal_source
from orchestrator.pyparse import parse

_spec = importlib.util.spec_from_file_location("trialbox_grader_plugin_under_test",
                                               R.TOOLS / "trialbox_grader_plugin.py")
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)

FILE = "tests/test_x.py"


def _seal(src: str, *tests: str, seen: bytes | None = None):
    return seal_source(src, FILE, [f"{FILE}::{t}" for t in tests], seen)


def test_plain_comparisons_with_literals_are_sealed_and_their_literals_leave_the_file():
    src = ('from pkg import f\n\n\ndef test_a():\n    x = f(1)\n    assert f("Crème") == "creme"  # gives creme\n'
           '    assert x == [1, (2, 3)]\n    assert f(2) in ("needle", "pin")\n'
           '    assert ("multi"\n            "line") == f(4)\n')
    out, seals = _seal(src, "test_a")
    assert [s.op for s in seals] == ["==", "==", "in", "=="]
    for literal in ('"creme"', "creme", "[1, (2, 3)]", "needle", "multi"):
        assert literal not in out  # neither in the statement nor in the comment beside it
    assert out.count("\n") == src.count("\n") and out.count(CALL) == 4
    assert [s.value_left for s in seals] == [True, True, True, False]
    assert [s.literal() for s in seals] == ["creme", [1, (2, 3)], ("needle", "pin"), "multiline"]
    parse(out)


@pytest.mark.parametrize("body", [
    "    assert f(1) != 0\n",          # a NaN meets it without the value
    "    assert f(1) not in (1, 2)\n",
    "    assert f(1) >= 3\n",          # an infinity meets it
    "    assert f(1) == True\n",       # the other bool of a wrong answer
    "    assert f(1) == None\n",
])
def test_comparisons_a_value_nobody_computed_meets_stay_in_the_process(body):
    src = "def test_a():\n" + body
    assert _seal(src, "test_a") == (src, [])


def test_unittest_assertions_are_sealed_multi_line_ones_keep_their_lines():
    src = ('import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n'
           '        self.assertEqual(\n            total(),\n            {"a": 1,\n             "b": 2},\n        )\n'
           '        self.assertIn(kind(), ["x", "y"], msg="why")\n        self.assertTrue(ok())\n'
           '        self.assertSequenceEqual(pair(), ["a", "b"])\n')
    out, seals = _seal(src, "T::test_a")
    assert [(s.op, s.value_left) for s in seals] == [("==", True), ("in", True)]
    assert '"a": 1' not in out and '"x"' not in out and "self.assertTrue(ok())" in out
    assert out.count("\n") == src.count("\n")
    tree = parse(out)
    call = tree.body[1].body[0].body[0].value
    assert call.lineno == 6 and call.end_lineno == 10  # the statement keeps its five lines


@pytest.mark.parametrize("body", [
    "    for i in range(2):\n        assert f(i) == 1\n",            # may run any number of times
    "    with ctx():\n        assert f(1) == 1\n",                   # a context manager can skip the rest
    "    if cond():\n        assert f(1) == 1\n",
    "    x = 1; assert f(x) == 1\n",                                  # shares its line
    "    assert f(1) == g(2)\n",                                      # no literal
    "    assert 1 == 1\n",                                            # no value
    "    assert f(1) == 1 == g()\n",                                  # a chain
    "    assert f(1) is None\n",                                      # no secret to keep
    '    assert "BOLT" in warehouse()\n',                             # looked for in a value: maybe a container
    '    assert version() >= "1.2"\n',                                # ordered, not against a number
])
def test_what_is_not_sealed(body):
    src = "def test_a():\n" + body
    out, seals = _seal(src, "test_a")
    assert seals == [] and out == src


@pytest.mark.parametrize("head", ["@given(st.integers())\n", "@retry(3)\n"])
def test_a_function_whose_decorator_may_run_it_other_than_once_is_left_whole(head):
    src = head + "def test_a(x):\n    assert f(x) == 1\n"
    assert _seal(src, "test_a") == (src, [])


@pytest.mark.parametrize("head", ['@pytest.mark.parametrize("x", [1, 2])\n', '@mock.patch("a.b")\n',
                                  '@patch.object(A, "b")\n', "@unittest.skipIf(False, 'no')\n"])
def test_marks_and_patches_run_it_once(head):
    src = head + "def test_a(x):\n    assert f(x) == 1\n"
    assert len(_seal(src, "test_a")[1]) == 1


def test_a_function_that_may_leave_early_is_left_whole():
    src = "def test_a():\n    if skip():\n        return\n    assert f(1) == 1\n"
    assert _seal(src, "test_a") == (src, [])


def test_only_requested_tests_are_sealed_and_a_literal_the_agent_saw_is_marked():
    src = "def test_a():\n    assert f(1) == 'one'\n\n\ndef test_b():\n    assert f(2) == 'two'\n"
    out, seals = _seal(src, "test_a", seen=b"def test_a():\n    assert f(1) == 'one'\n")
    assert [s.test for s in seals] == [f"{FILE}::test_a"] and seals[0].visible
    assert "'two'" in out


def test_slots_are_drawn_per_composition():
    src = "def test_a():\n    assert f(1) == 1\n"
    assert _seal(src, "test_a")[1][0].slot != _seal(src, "test_a")[1][0].slot


# ---- the value's journey: plugin encode -> JSON -> host decode, against Python's own operators

def _sent(value):
    plugin._seals.clear()
    plugin._sent[0] = 0
    plugin._current[0] = "n"
    try:
        plugin.seal(value, "s")
    finally:
        plugin._current[0] = None
    return json.loads(json.dumps(plugin._seals["n"][0][1]))


class Version:
    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return other == self.text

    def __repr__(self):
        return f"Version({self.text!r})"


class Integer:
    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n

    def __eq__(self, other):
        return other == self.n

    def __lt__(self, other):
        return self.n < other

    def __gt__(self, other):
        return self.n > other

    def __repr__(self):
        return str(self.n)


CASES = [
    ("abc", "==", "abc"), ("abc", "==", "abd"), (1, "==", 1.0), (True, "==", 1), ((1, 2), "==", [1, 2]),
    ([1, (2, "x")], "==", [1, (2, "x")]), ({"a": [1]}, "==", {"a": [1]}), ({1, 2}, "==", frozenset({1, 2})),
    (b"\x00\xff", "==", b"\x00\xff"), (bytearray(b"a"), "==", b"a"), (Decimal("1.50"), "==", 1.5),
    (Fraction(1, 3), "==", Fraction(1, 3)), (float("nan"), "==", float("nan")), (-0.0, "==", 0.0),
    (10 ** 50, "==", 10 ** 50), (2 + 3j, "==", 2 + 3j), (None, "==", None), ("a\udcffb", "==", "a\udcffb"),
    ("needle", "in", "haystack with needle"), ([1, 2], "not in", [[1, 2]]), (3, "<", 4), ("b", ">=", "a"),
    (Integer(4), "<", 5), (Integer(4), "in", [1, 4]), ([Integer(4), "a"], "==", [4, "a"]),
    ("x", "!=", "y"), ({1: 2}, "==", {1: 2}), (Integer(4), "==", 4), (Integer(4), "==", 5),
]


PY = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "in": lambda a, b: a in b,
      "not in": lambda a, b: a not in b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b}


@pytest.mark.parametrize("value,op,literal", CASES, ids=range(len(CASES)))
def test_the_host_judges_as_python_does(value, op, literal):
    got = decode(_sent(value))
    try:
        written = repr(literal)
        ast.literal_eval(written)
    except ValueError:  # no literal writes it (a Fraction, a NaN): the value's journey alone
        assert got == value or (value != value and got != got)
        return
    assert Seal("s", "t", op, written, True, "").holds(got) == bool(PY[op](value, literal))
    try:
        reversed_ = bool(PY[op](literal, value))
    except TypeError:  # Python refuses the reversed operands (an object without that order): nothing to match
        return
    assert Seal("s", "t", op, written, False, "").holds(got) == reversed_


def test_values_of_other_kinds_are_sent_as_opaque_and_meet_only_their_repr():
    got = decode(_sent(Version("1.0")))
    assert isinstance(got, Opaque) and got.type.endswith("Version") and got.repr == "Version('1.0')"
    assert not Seal("s", "t", "==", "'1.0'", True, "").holds(got)  # a stated limit: Python would say equal
    assert Seal("s", "t", "!=", "'1.0'", True, "").holds(got)


def test_a_value_past_the_bounds_is_cut_and_meets_nothing():
    deep: list = []
    for _ in range(200):
        deep = [deep]
    got = decode(_sent(deep))
    assert isinstance(got, Cut) and not Seal("s", "t", "==", "[]", True, "").holds(got)
    assert isinstance(decode(_sent("x" * (3 << 20))), Cut)
    assert decode(_sent("small")) == "small"  # a cut value takes none of the session's room


@pytest.mark.parametrize("data", [
    "abc", [], ["int", "zz"], ["float", 1.0], ["list", "x"], ["dict", [[["str", "a"]]]],
    ["str"], ["weird", 1], ["opaque", 1, None, None], ["decimal", "1" * 5000], ["bytes", "***"],
])
def test_what_no_plugin_sends_is_malformed(data):
    with pytest.raises(Malformed):
        decode(data)


def test_the_decoder_stops_at_its_depth():
    data: list = ["none"]
    for _ in range(5000):
        data = ["list", [data]]
    with pytest.raises(Malformed):
        decode(data)


# ---- the host's judgement of a group's records

SEALS = {"t.py::test_a": [Seal("s1", "t.py::test_a", "==", "'creme'", True, 'assert f("Crème") == "creme"')]}


def _run(outcomes, seals_sent):
    run = R.TestRun(outcomes=R.select(outcomes, ["t.py::test_a"]))
    R._apply_seals(run, ["t.py::test_a"], outcomes, seals_sent, SEALS)
    return run


def test_a_passed_test_whose_sealed_value_is_right_passes():
    run = _run({"t.py::test_a": "passed"}, {"t.py::test_a": [["s1", ["str", "creme"]]]})
    assert run.outcomes["t.py::test_a"] == "passed" and not run.integrity
    assert run.sealed["t.py::test_a"]["held"] == 1


def test_a_passed_test_whose_sealed_value_is_wrong_fails_with_the_evidence():
    run = _run({"t.py::test_a": "passed"}, {"t.py::test_a": [["s1", ["str", "crme"]]]})
    assert run.outcomes["t.py::test_a"] == "failed" and not run.integrity
    assert run.sealed["t.py::test_a"]["mismatched"][0]["got"] == "'crme'"


@pytest.mark.parametrize("sent", [{}, {"t.py::test_a": []}, {"t.py::test_a": [["s1", ["str", "creme"]]] * 2},
                                  {"t.py::test_a": [["s1", ["bogus"]]]}])
def test_a_passed_test_that_sent_no_value_or_two_or_a_forged_one_is_forgery(sent):
    run = _run({"t.py::test_a": "passed"}, sent)
    assert run.outcomes["t.py::test_a"] == "failed" and run.integrity


def test_a_failed_test_keeps_its_mismatch_for_the_check():
    run = _run({"t.py::test_a": "failed"}, {"t.py::test_a": [["s1", ["str", "crme"]]]})
    assert run.outcomes["t.py::test_a"] == "failed" and not run.integrity
    assert run.sealed["t.py::test_a"]["mismatched"]


def test_each_parametrized_case_is_judged():
    outcomes = {"t.py::test_a[1]": "passed", "t.py::test_a[2]": "passed"}
    sent = {"t.py::test_a[1]": [["s1", ["str", "creme"]]], "t.py::test_a[2]": [["s1", ["str", "other"]]]}
    run = R.TestRun(outcomes=R.select(outcomes, ["t.py::test_a"]))
    R._apply_seals(run, ["t.py::test_a"], outcomes, sent, SEALS)
    assert run.outcomes["t.py::test_a"] == "failed"
    assert [m["case"] for m in run.sealed["t.py::test_a"]["mismatched"]] == ["t.py::test_a[2]"]


def test_the_results_document_carries_the_values_and_refuses_malformed_ones():
    import types

    doc = {"outcomes": {}, "collect_errors": [], "exit_code": 0, "junit": None, "seals": {"n": [["s", ["none"]]]}}
    res = types.SimpleNamespace(stdout=json.dumps(doc).encode(), stdout_size=len(json.dumps(doc)))
    assert R._document(res)["seals"] == {"n": [["s", ["none"]]]}
    for bad in ({"n": "x"}, {"n": [["s"]]}, {"n": [[1, ["none"]]]}, ["n"]):
        doc["seals"] = bad
        res = types.SimpleNamespace(stdout=json.dumps(doc).encode(), stdout_size=len(json.dumps(doc)))
        with pytest.raises(ValueError):
            R._document(res)


def test_the_seal_call_is_plain_python_the_plugin_answers():
    tree = ast.parse(CALL + '((1), "s")')
    assert isinstance(tree.body[0].value, ast.Call)


def test_crafted_values_cost_the_host_no_more_than_bounded_work():
    import time

    colliding = [["int", format(7 + i * ((1 << 61) - 1), "x")] for i in range(20_000)]  # one hash for all
    start = time.monotonic()
    assert isinstance(decode(["set", colliding]), Cut)  # more entries than the host rebuilds: judged unmet, unhashed
    budget = [10 ** 6, 5000]
    for _ in range(20):  # a group's share of set entries runs out: the rest are cut, not hashed
        last = decode(["set", colliding[:500]], budget=budget)
    assert isinstance(last, Cut)
    assert isinstance(decode(["set", [["list", []]]]), Cut)  # members the host cannot hash: unmet, not forged
    with pytest.raises(Malformed):
        decode(["fraction", "f" * 5000, "3"])
    with pytest.raises(Malformed):
        decode(["list", [["none"]] * 200_000])
    assert time.monotonic() - start < 5


# ---- parametrized tests: every case reported, or the passes left are forged

PARAMETRIZED = b'''import pytest
@pytest.mark.parametrize("a", [1, 2, 3])
@pytest.mark.parametrize("b", ["x", pytest.param("y", marks=pytest.mark.slow)])
def test_a(a, b):
    pass
@pytest.mark.parametrize("a", CASES)
def test_b(a):
    pass
class TestC:
    @pytest.mark.parametrize("q", (1, 2))
    def test_c(self, q):
        pass
def test_d():
    pass
'''


def test_case_counts_come_from_the_syntax_where_it_gives_them():
    from orchestrator.grading.compose import case_counts

    nodes = [f"{FILE}::test_a", f"{FILE}::test_b", f"{FILE}::TestC::test_c", f"{FILE}::test_d", f"{FILE}::test_a[1-x]"]
    assert case_counts(PARAMETRIZED, FILE, nodes) == {f"{FILE}::test_a": 6, f"{FILE}::TestC::test_c": 2}
    marked = b"import pytest\npytestmark = [pytest.mark.parametrize('z', [1, 2])]\n" + PARAMETRIZED
    assert case_counts(marked, FILE, nodes) == {}  # a module's marks multiply what the syntax says: not known


def test_a_parametrized_test_with_a_case_dropped_from_every_channel_is_failed_as_forged():
    node = f"{FILE}::TestC::test_c"
    run = R.TestRun(exit_codes=[0])
    doc = {"outcomes": {f"{node}[1]": "passed"}, "exit_code": 0, "junit": None, "collect_errors": [], "seals": {}}
    R._judge(run, [node], [([node], None, doc, None)], {}, {node: 2})
    assert run.outcomes[node] == "failed" and any("1 of its 2 cases" in p for p in run.integrity)
    run = R.TestRun(exit_codes=[0])
    doc["outcomes"] = {f"{node}[1]": "passed", f"{node}[2]": "passed"}
    R._judge(run, [node], [([node], None, doc, None)], {}, {node: 2})
    assert run.outcomes[node] == "passed"


def test_a_sealed_value_that_raised_is_known_by_its_line():
    seal = Seal("s1", "t.py::test_a", "==", "1", True, "assert f() == 1", lines=(5, 6))
    run = R.TestRun(outcomes={"t.py::test_a": "failed"})
    R._apply_seals(run, ["t.py::test_a"], {"t.py::test_a": "failed"}, {"t.py::test_a": []}, {"t.py::test_a": [seal]},
                   {"t.py::test_a": 6})
    assert run.sealed["t.py::test_a"]["raised"][0]["assertion"] == "assert f() == 1"
    run = R.TestRun(outcomes={"t.py::test_a": "failed"})
    R._apply_seals(run, ["t.py::test_a"], {"t.py::test_a": "failed"}, {}, {"t.py::test_a": [seal]}, {"t.py::test_a": 9})
    assert run.sealed["t.py::test_a"]["raised"] == []


def test_located_finds_each_call_where_the_file_has_it():
    from orchestrator.grading.seal import located

    src = "def test_a():\n    assert f(1) == 1\n\n\ndef test_b():\n    assert g(\n        2) == 2\n"
    out, seals = _seal(src, "test_a", "test_b")
    moved = located(seals, ("# a tripwire above\n\n" + out).encode())
    assert [s.lines for s in moved] == [(4, 4), (8, 9)]


def test_docstrings_of_sealed_tests_are_blanked_and_a_literal_still_written_is_no_secret():
    src = ('def test_a():\n    """slugify gives creme-brulee\n    for Crème Brûlée."""\n'
           '    assert slugify("Crème Brûlée") == "creme-brulee"\n    assert count("x") == 500\n\n\n'
           'def test_b():\n    assert f("plain-words") == "plain-words"\n    assert g(1500) == 1500\n')
    out, seals = _seal(src, "test_a", "test_b")
    assert "creme-brulee" not in out and out.count("\n") == src.count("\n")
    assert [s.visible for s in seals] == [False, False, True, True]  # test_b's values are its own inputs


def test_views_mappings_and_memoryviews_are_sent_as_what_they_equal():
    from collections import ChainMap
    from types import MappingProxyType

    d = {"a": 1, "b": 2}
    assert Seal("s", "t", "==", "{'a', 'b'}", True, "").holds(decode(_sent(d.keys())))
    assert Seal("s", "t", "==", "{('a', 1), ('b', 2)}", True, "").holds(decode(_sent(d.items())))
    assert Seal("s", "t", "==", "{'a': 1, 'b': 2}", True, "").holds(decode(_sent(MappingProxyType(d))))
    assert Seal("s", "t", "==", "{'a': 1, 'b': 2}", True, "").holds(decode(_sent(ChainMap(d))))
    assert Seal("s", "t", "==", "b'ab'", True, "").holds(decode(_sent(memoryview(b"ab"))))
    assert not Seal("s", "t", "==", "[1, 2]", True, "").holds(decode(_sent(d.values())))  # Python: unequal too


def test_a_subclass_node_gets_the_seals_of_the_method_it_inherits():
    src = ("class TestLetters:\n    def test_word(self):\n        assert letters('ab') == ['a', 'b']\n\n\n"
           "class TestLettersUpper(TestLetters):\n    pass\n")
    out, seals = _seal(src, "TestLetters::test_word", "TestLettersUpper::test_word")
    assert sorted(s.test for s in seals) == [f"{FILE}::TestLetters::test_word", f"{FILE}::TestLettersUpper::test_word"]
    assert len({s.slot for s in seals}) == 1 and out.count(CALL) == 1
    # a class another trusted file derives from keeps its methods whole (that file's tests would run them unseen)
    assert seal_source(src, FILE, [f"{FILE}::TestLetters::test_word"], None, {"TestLetters"}) == (src, [])


def test_unittest_methods_are_sealed_only_where_they_are_unittests_own():
    own = ("import unittest\n\n\nclass T(unittest.TestCase):\n    def assertEqual(self, a, b, msg=None):\n"
           "        assert abs(a - b) < 0.1\n\n    def test_a(self):\n        self.assertEqual(f(), 3)\n")
    assert _seal(own, "T::test_a") == (own, [])
    foreign = ("from helpers import Base\n\n\nclass T(Base):\n    def test_a(self):\n        self.assertEqual(f(), 3)\n"
               "        assert g() == 4\n")
    assert [s.literal() for s in _seal(foreign, "T::test_a")[1]] == [4]  # Base is unknown: its methods too


def test_a_method_of_a_class_another_derives_from_keeps_its_name():
    from orchestrator.grading import compose as C

    src = (b"class TestLetters:\n    def test_word(self):\n        assert 1\n\n\n"
           b"class TestLettersUpper(TestLetters):\n    pass\n\n\ndef test_plain():\n    assert 1\n")
    import random as _random
    out, mapping = C._renamed(_random.Random(1), src, FILE, [f"{FILE}::TestLetters::test_word",
                                                              f"{FILE}::TestLettersUpper::test_word",
                                                              f"{FILE}::test_plain"], f"{FILE}::test_wire")
    assert f"{FILE}::TestLetters::test_word" not in mapping and b"def test_word" in out
    assert f"{FILE}::test_plain" in mapping


@pytest.mark.parametrize("src,deciding", [
    ("def test_a():\n    assert f() == 'secret'\n", True),
    ("def test_a():\n    assert f() == 0\n", False),                               # a first guess
    ("def test_a():\n    with pytest.raises(E):\n        g()\n    assert f() == 'secret'\n", False),  # after a refusal
    ("def test_a():\n    try:\n        g()\n    except E:\n        pass\n    assert f() == 'secret'\n", False),
])
def test_what_counts_as_deciding(src, deciding):
    assert [s.deciding for s in _seal(src, "test_a")[1]] == [deciding]


def test_a_literal_in_the_instruction_is_seen():
    src = "def test_a():\n    assert wrap('a verylongword b', 5) == ['a', 'veryl', 'ongwo', 'rd b']\n"
    assert _seal(src, "test_a", seen=b"For example wrap('a verylongword b', 5) gives ['a', 'veryl', 'ongwo', 'rd b'].")[1][0].visible


# ---- after the eighth review

def test_a_value_that_decides_its_own_equality_is_compared_as_its_own_eq_allows():
    class Ratio:
        def __init__(self, a, b, broken=False):
            self.a, self.b, self.broken = a, b, broken

        def __float__(self):
            return self.a / self.b

        def __eq__(self, other):  # the test checks this very method: broken, it refuses numbers
            if isinstance(other, Ratio):
                return (self.a, self.b) == (other.a, other.b)
            return not self.broken and float(self) == other

        def __repr__(self):
            return f"Ratio({self.a}, {self.b})"

    class Headers(dict):
        def __init__(self, items, broken=False):
            super().__init__(items)
            self.broken = broken

        def __eq__(self, other):
            return not self.broken and {k.lower(): v for k, v in self.items()} == \
                {k.lower(): v for k, v in dict(other).items()}

    quarter = Seal("s", "t", "==", "0.25", True, "")
    assert quarter.holds(decode(_sent(Ratio(1, 4))))  # its own __eq__ agrees with its number: compared so
    broken = decode(_sent(Ratio(1, 4, broken=True)))
    assert isinstance(broken, Opaque) and not quarter.holds(broken)  # a broken __eq__ is not passed by its number
    assert decode(_sent(Headers({"A": 1}))) == {"A": 1}  # agrees with its plain form: sent so
    assert isinstance(decode(_sent(Headers({"A": 1}, broken=True))), Opaque)
    from collections import Counter, OrderedDict
    assert decode(_sent(OrderedDict(a=1))) == {"a": 1} and decode(_sent(Counter("aa"))) == {"a": 2}


@pytest.mark.parametrize("body,deciding", [
    ("    assert net() == 0.0\n", False),                                    # a first guess, by value
    ("    assert tags() == set()\n", False),
    ("    pytest.raises(ValueError, pay, 61)\n    assert bal() == 439\n", False),   # the call form
    ("    with caplog.at_level(1):\n        with pytest.raises(E):\n            pay()\n    assert bal() == 439\n", False),
    ("    with contextlib.suppress(E):\n        pay()\n    assert bal() == 439\n", False),
    ("    assert bal() == 439\n", True),
])
def test_first_guesses_and_refusals_anywhere_before_do_not_decide(body, deciding):
    assert [s.deciding for s in _seal("def test_a():\n" + body, "test_a")[1]] == [deciding]


def test_a_substring_test_is_not_sealed():
    src = 'def test_a():\n    assert initial("kiwi") in "abcdefghijklmnopqrstuvwxyz"\n'
    assert _seal(src, "test_a") == (src, [])


def test_a_testcase_base_from_elsewhere_is_no_unittest_testcase():
    src = ("from tests.support import TestCase\n\n\nclass T(TestCase):\n    def test_a(self):\n"
           "        self.assertEqual(mean([0.1, 0.2]), 0.15)\n")
    assert _seal(src, "T::test_a") == (src, [])
    ok = src.replace("from tests.support import TestCase", "from unittest import TestCase")
    assert len(_seal(ok, "T::test_a")[1]) == 1


def test_a_literal_any_file_of_the_container_holds_is_no_secret():
    from orchestrator.grading.seal import Corpus

    seal = _seal("def test_a():\n    assert digest('Kiwi') == 436\n", "test_a")[1][0]
    assert not Corpus([b"def test_b():\n    assert other() == 4360\n"]).holds(seal)
    assert Corpus([b"def test_slow():\n    assert digest('Kiwi') == 436\n"]).holds(seal)
    assert Corpus([b"x" * (9 << 20)]).holds(seal)  # a search that could not be whole claims nothing


def test_the_same_literal_written_two_ways_is_one_literal():
    a = _seal("def test_a():\n    assert f() == 'kiwi-pie'\n", "test_a")[1][0]
    b = _seal('def test_a():\n    assert f() == "kiwi-pie"\n', "test_a")[1][0]
    assert a.canonical == b.canonical


def test_a_results_document_with_entities_or_too_many_names_is_refused():
    import types

    def res(doc):
        text = json.dumps(doc)
        return types.SimpleNamespace(stdout=text.encode(), stdout_size=len(text))

    base = {"outcomes": {}, "collect_errors": [], "exit_code": 0, "seals": {}}
    with pytest.raises(ValueError, match="entities"):
        R._document(res({**base, "junit": '<!DOCTYPE x [<!ENTITY a "b">]><testsuites/>'}))
    with pytest.raises(ValueError, match="more than any group runs"):
        R._document(res({**base, "junit": None, "seals": {f"t.py::x[{i}]": [] for i in range(R.MAX_RESULT_KEYS + 1)}}))


# ---- after the ninth review (tests/docker/test_threats_review9.py)

@pytest.mark.parametrize("literal,deciding", [
    ("(0, None)", False),          # the value meets any member: one first guess is enough
    ("[-1, 4321]", False),
    ("{'': 1, 'kiwi-pie': 2}", False),  # a dict's members are its keys
    ("(True, 4321)", False),
    ("(4321, 8765)", True),
])
def test_a_first_guess_member_of_an_in_literal_does_not_decide(literal, deciding):
    seals = _seal(f"def test_a():\n    assert run(7) in {literal}\n", "test_a")[1]
    assert [s.deciding for s in seals] == [deciding]


@pytest.mark.parametrize("seen", [
    b">>> wrap('aaa bbb', 3)\n'aaa\\nbbb'\n",                        # the REPL's repr: single quotes, escaped
    b'Example: `wrap("aaa bbb", 3)` returns `"aaa\\nbbb"`.\n',     # written as the test writes it
    b"{\"text\": \"aaa\\nbbb\"}",                                    # JSON
])
def test_an_escaped_string_is_seen_however_the_text_writes_it(seen):
    seal = _seal('def test_a():\n    assert wrap("aaa bbb", 3) == "aaa\\nbbb"\n', "test_a", seen=seen)[1][0]
    assert seal.visible and not seal.deciding


@pytest.mark.parametrize("literal,text,seen", [
    ('[("a", "1"), ("b", "2")]', "[('a', '1'), ('b', '2')]", True),     # the REPL's quotes
    ('[("a", "1"), ("b", "2")]', "[ ( 'a','1' ),( 'b','2' ), ]", True),  # other spacing, a trailing comma
    ("2.5", "total() returns 2.50.", True),                            # another decimal spelling
    ("3", "it gives 3.0", True),
    ("436", "other() == 4360", False),
    ("-2.5", "it returns 2.5", False),
    ('["| a | b |", "|---|---|"]', "```\n  | a | b |\n  |---|---|\n```", True),  # a table shown line by line
    ('["kiwi-pie", "apple-tart"]', "first kiwi-pie, then apple-tart", True),       # stated element by element
    ('["kiwi-pie", "apple-tart"]', "either apple-tart or kiwi-pie", False),        # in another order: a list's secret
    ("{'kiwi-pie', 'apple-tart'}", "either apple-tart or kiwi-pie", True),         # a set has none
    ('["0.9.1", "1.2.0-rc.1", "1.2.0"]', 'sorted(["1.2.0", "0.9.1", "1.2.0-rc.1"])', False),  # a sort's inputs
    ('["kiwi-pie", "apple-tart"]', "kiwi-pie" + " " * 400 + "apple-tart", False),  # not stated together
    ('["b", "a", "c"]', 'columns b, a and c: {"b": 1, "a": 2, "c": 3}', False),   # short elements: order is the secret
    ("{'name': 'kiwi', 'count': 12}", '{"name": "kiwi", "count": 12}', True),    # JSON
    ("(1, 2, 3)", "[1, 2, 3]", True),
])
def test_a_literal_is_looked_for_by_its_value(literal, text, seen):
    from orchestrator.grading.seal import Corpus

    seal = _seal(f"def test_a():\n    assert f() == {literal}\n", "test_a")[1][0]
    assert Corpus([text.encode()]).holds(seal) is seen


def test_an_in_literal_with_a_member_in_the_corpus_is_seen():
    from orchestrator.grading.seal import Corpus

    seal = _seal('def test_a():\n    assert f() in ("kiwi-pie", "apple-tart")\n', "test_a")[1][0]
    assert Corpus([b"returns kiwi-pie"]).holds(seal)
    assert not Corpus([b"returns plum-cake"]).holds(seal)


REFUSING = '''import pytest


@pytest.fixture
def refused(wallet):
    with pytest.raises(ValueError):
        wallet.pay(61)
    return wallet


@pytest.fixture
def wallet():
    return Wallet(100)


@pytest.fixture
def tidy():
    try:
        yield
    finally:
        cleanup()


def _overpay(wallet, cents):
    with pytest.raises(ValueError):
        wallet.pay(cents)


def _twice(wallet):
    _overpay(wallet, 1000)
    _overpay(wallet, 2000)


def test_fixture(refused):
    assert refused.cents == 4321


@pytest.mark.usefixtures("refused")
def test_marked(wallet):
    assert wallet.cents == 4321


def test_helper():
    w = Wallet(90)
    _twice(w)
    assert w.cents == 4321


def test_in_the_value():
    assert _overpaid_cents(Wallet(90)) == 4321


def _overpaid_cents(w):
    _overpay(w, 1000)
    return w.cents


def test_plain(wallet, tidy):
    wallet.pay(3)
    assert wallet.cents == 4321


class TestSetUp:
    def setup_method(self):
        self.w = Wallet(90)
        _overpay(self.w, 100)

    def test_after_setup(self):
        assert self.w.cents == 4321
'''


def test_a_refusal_in_a_fixture_helper_or_setup_makes_what_follows_no_secret():
    names = ["test_fixture", "test_marked", "test_helper", "test_in_the_value", "test_plain",
             "TestSetUp::test_after_setup"]
    seals = _seal(REFUSING, *names)[1]
    assert {s.test.split("::", 1)[1]: s.secret for s in seals} == {
        "test_fixture": False, "test_marked": False, "test_helper": False, "test_in_the_value": False,
        "test_plain": True,  # a try/finally fixture refuses nothing
        "TestSetUp::test_after_setup": False}


def test_a_refusing_fixture_of_another_trusted_file_is_seen():
    from orchestrator.grading.seal import refusing_names

    conftest = parse("import pytest\n\n\n@pytest.fixture\ndef overdrawn():\n    w = W()\n"
                     "    with pytest.raises(E):\n        w.pay(9)\n    return w\n\n\n"
                     "@pytest.fixture(autouse=False)\ndef plain():\n    return 1\n")
    refusing = refusing_names([conftest])
    from orchestrator.grading.seal import REFUSALS

    assert refusing - set(REFUSALS) == {"overdrawn"}
    src = "def test_a(overdrawn):\n    assert overdrawn.cents == 4321\n\n\ndef test_b(plain):\n    assert f() == 4321\n"
    seals = seal_source(src, FILE, [f"{FILE}::test_a", f"{FILE}::test_b"], None, set(), refusing)[1]
    assert [s.secret for s in seals] == [False, True]
    auto = parse("import pytest\n\n\n@pytest.fixture(autouse=True)\ndef always():\n    try:\n        x()\n"
                 "    except E:\n        pass\n")
    assert "<autouse>" in refusing_names([auto])
    assert [s.secret for s in seal_source(src, FILE, [f"{FILE}::test_b"], None, set(),
                                          refusing_names([auto]))[1]] == [False]


def test_a_str_or_int_subclass_whose_eq_disagrees_meets_no_literal_and_numpy_floats_do():
    class Strict(str):
        def __eq__(self, other):
            return isinstance(other, Strict) and str.__eq__(self, other)

        __hash__ = str.__hash__

    class Flag:
        def __init__(self, v):
            self.v = v

        def __bool__(self):
            return self.v

    class Real(float):  # numpy 2's float64 as the plugin sees it
        def __eq__(self, other):
            return Flag(float(self) == other)

        __hash__ = float.__hash__

        def __repr__(self):
            return f"Real({float(self)!r})"

    assert not Seal("s", "t", "==", "'kiwi'", True, "").holds(decode(_sent(Strict("kiwi"))))
    assert Seal("s", "t", "==", "1.5", True, "").holds(decode(_sent(Real(1.5))))
    assert not Seal("s", "t", "==", "2.5", True, "").holds(decode(_sent(Real(1.5))))
    np = pytest.importorskip("numpy")
    assert Seal("s", "t", "==", "1.5", True, "").holds(decode(_sent(np.mean([1.0, 2.0]))))
    assert Seal("s", "t", "==", "(1+2j)", True, "").holds(decode(_sent(np.complex128(1 + 2j))))


def test_a_full_disk_the_check_between_groups_meets_is_compared_not_an_engine_error(monkeypatch):
    from orchestrator.errors import EngineUnavailable, GraderInfraError, SandboxError

    def failing(exc):
        def check(*args, **kwargs):
            raise exc
        return check

    monkeypatch.setattr(R, "_check_between_groups", failing(SandboxError("write /workspace/x: no space left on device")))
    with pytest.raises(GraderInfraError, match="no space left"):  # grading compares it with the untouched repository
        R._between_groups(None, None, "after the last group")
    # before any code under test ran too: the agent's files alone can fill the disk's inodes (an earlier review's
    # finding B2: a sandbox error there was an infrastructure error, retried for free); compared likewise
    with pytest.raises(GraderInfraError, match="no space left"):
        R._between_groups(None, None, "before group 0")
    monkeypatch.setattr(R, "_check_between_groups", failing(EngineUnavailable("no Docker engine answers")))
    with pytest.raises(EngineUnavailable):
        R._between_groups(None, None, "after the last group")


def test_a_sandbox_error_between_groups_not_shown_to_be_a_full_disk_stays_the_sandboxs(monkeypatch):
    """A tenth (read-only) review: any sandbox error after group 0 had become the agent's failure, so the engine's
    lost exec output, a transient API error, a paused or vanished container or an OOM kill rejected honest work.
    Only a check that failed for want of space (the engine's own words) is compared with the untouched repository."""
    from orchestrator.errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError

    def failing(exc):
        def check(*args, **kwargs):
            raise exc
        return check

    for exc in (OutputLost("the engine kept losing the output"), SandboxError("500 Server Error: Internal Server Error"),
                SandboxBroken("container is paused", reason="unresponsive"), SandboxError("No such container: tb-x")):
        monkeypatch.setattr(R, "_check_between_groups", failing(exc))
        with pytest.raises(SandboxError) as raised:
            R._between_groups(None, None, "before group 1")
        assert not isinstance(raised.value, GraderInfraError) and raised.value is exc
    monkeypatch.setattr(R, "_check_between_groups", failing(SandboxError("copy: disk quota exceeded")))
    with pytest.raises(GraderInfraError, match="disk was full"):
        R._between_groups(None, None, "before group 1")


@pytest.mark.parametrize("refusal", [
    "from numpy.testing import assert_raises\n\n\ndef test_a():\n    w = W()\n    assert_raises(E, w.pay, 61)\n"
    "    assert w.cents == 4321\n",
    "import pytest\nfrom pytest import raises as refused\n\n\ndef test_a():\n    w = W()\n    with refused(E):\n"
    "        w.pay(61)\n    assert w.cents == 4321\n",
    "import pytest\n\n\ndef test_a():\n    w = W()\n    with getattr(pytest, 'raises')(E):\n        w.pay(61)\n"
    "    assert w.cents == 4321\n",
    "class Quiet:\n    def __enter__(self):\n        return self\n\n    def __exit__(self, *exc):\n        return True\n\n\n"
    "def test_a():\n    w = W()\n    with Quiet():\n        w.pay(61)\n    assert w.cents == 4321\n",
    "W0 = W()\ntry:\n    W0.pay(61)\nexcept E:\n    pass\n\n\ndef test_a():\n    assert W0.cents == 4321\n",
    "class T:\n    def test_a(self):\n        w = W()\n        self.assertRaisesMessage(E, 'no', w.pay, 61)\n"
    "        assert w.cents == 4321\n",
], ids=["numpy-assert_raises", "imported-alias", "getattr", "swallowing-exit", "module-level-try", "assertRaisesMessage"])
def test_refusals_written_other_ways_make_what_follows_no_secret(refusal):
    """A tenth (read-only) review: each of these refusals left the value after it counted as deciding."""
    node = f"{FILE}::T::test_a" if "class T" in refusal else f"{FILE}::test_a"
    seals = seal_source(refusal, FILE, [node], None, set(), set())[1]
    assert seals and not any(s.secret for s in seals), [(s.test, s.secret) for s in seals]
