"""The pytest grader's host-side logic: the tripwire's disguise, the results stream, the summary cross-check."""

from __future__ import annotations

import dataclasses
import random
import types

import pytest

from orchestrator.grading import compose as C
from orchestrator.grading import runner as R
from orchestrator.pyparse import parse

MODULE = b'''import pytest
from textkit import slugify


def test_ascii_words():
    assert slugify("a b") == "a-b"


@pytest.mark.parametrize("sep", ["-", "_"])
def test_separator_kept(sep):
    assert sep


class TestSlugMethods:
    def test_strips_accents(self):
        assert slugify("e") == "e"

    def test_empty_input(self):
        assert slugify("") == ""
'''
FILE = "tests/test_slug.py"
NODES = [f"{FILE}::test_ascii_words", f"{FILE}::test_separator_kept", f"{FILE}::TestSlugMethods::test_strips_accents"]


def _wire(seed: int, nodes=NODES, source=MODULE):
    return C._embed(random.Random(seed), source, FILE, nodes)


def test_the_tripwire_is_inside_the_groups_own_file_among_its_tests():
    positions, scopes, names = set(), set(), set()
    for seed in range(200):
        data, node, shows, _, _ = _wire(seed)
        module = parse(data.decode())
        assert node.startswith(FILE + "::")
        name = node.split("::")[-1]
        names.add(name)
        in_class = node.count("::") == 2
        scopes.add(in_class)
        body = module.body[-1].body if in_class else module.body
        tests = [n.name for n in body if getattr(n, "name", "").startswith("test")]
        assert name in tests and name.startswith("test_")
        positions.add((in_class, tests.index(name)))
        assert all(v in data.decode() for v in shows)
        assert b"tripwire" not in data and b"trialbox" not in data
        # every real test is still there, unchanged
        for line in MODULE.decode().splitlines():
            assert line in data.decode().splitlines()
    assert scopes == {True, False}  # the scope of a requested node drawn: module and class both
    assert len(positions) >= 3  # after its model: before a later test or after the last, in either scope
    assert len(names) > 5  # names drawn, not one pattern


def test_the_tripwire_is_named_from_the_scopes_own_test_names():
    tokens = {"ascii", "words", "separator", "kept", "strips", "accents", "empty", "input"}
    for seed in range(100):
        _, node, _, _, _ = _wire(seed)
        assert set(node.split("::")[-1].split("_")[1:]) <= tokens | set(C.WORDS)


def test_a_file_that_cannot_hold_one_gets_a_file_beside_it():
    files, wires, names = C._tripwires([FILE], NODES, {FILE: b"def broken(:\n"}, set())
    assert names == {}
    (path, data), = files.items()
    assert path != FILE and path.startswith("tests/test_slug_") and path.endswith(".py")
    assert not wires[0].embedded and wires[0].node.startswith(path + "::")
    files, wires, names = C._tripwires([FILE], NODES, {FILE: MODULE}, set())
    assert list(files) == [FILE] and wires[0].embedded


def test_the_requested_tests_run_under_drawn_names_the_host_maps_back():
    files, wires, names = C._tripwires([FILE], NODES, {FILE: MODULE}, set())
    assert set(names) == set(NODES)  # every requested test renamed (none of them is named elsewhere in the file)
    text = files[FILE].decode()
    for old, new in names.items():
        assert f"def {old.split('::')[-1]}(" not in text and f"def {new.split('::')[-1]}(" in text
        assert old.split("::")[:-1] == new.split("::")[:-1]  # same file, same class
    assert wires[0].node not in names.values()
    assert R._as_run(NODES[1] + "[-]", names) == names[NODES[1]] + "[-]"
    new = names[NODES[1]].split("::")[-1]
    doc = {"outcomes": {names[NODES[1]] + "[-]": "passed"}, "collect_errors": [], "exit_code": 1,
           "junit": f'<testsuites><testsuite><testcase classname="tests.test_slug" name="{new}[-]"/></testsuite></testsuites>'}
    back = R._back(doc, names)
    assert back["outcomes"] == {NODES[1] + "[-]": "passed"}
    assert R._parse_junit(back["junit"].encode()) == {"tests.test_slug::test_separator_kept[-]": "passed"}


def test_a_test_named_elsewhere_in_its_file_keeps_its_name():
    source = MODULE + b"\n\nalias = test_ascii_words\n"
    data, node, _, _, _ = _wire(3, source=source)
    _, mapping = C._renamed(random.Random(1), data, FILE, NODES, node)
    assert f"{FILE}::test_ascii_words" not in mapping and f"{FILE}::test_separator_kept" in mapping


MIXED = b'''import unittest


class OrderMixin:
    def test_left_right(self):
        assert [1, 2] == [1, 2]

    def test_right_top(self):
        assert sorted([2, 1]) == [1, 2]


class OrderTests(OrderMixin, unittest.TestCase):
    def test_left_top(self):
        self.assertEqual(min(3, 4), 3)

    def test_top_right(self):
        self.assertEqual(max(3, 4), 4)

    def test_top_left(self):
        self.assertEqual(abs(-3), 3)
'''
MIXED_NODES = [f"{FILE}::OrderTests::{n}" for n in
               ("test_left_right", "test_right_top", "test_left_top", "test_top_right", "test_top_left")]


def test_no_drawn_name_takes_the_name_of_a_test_the_class_inherits():
    # found on a real upstream test file (a mixin's tests inherited by a TestCase): the tripwire and the renamed
    # tests are named from the class's own tokens (left, right, top), whose pairs include the inherited tests'
    # names; one drawn so would replace the inherited test for pytest, and the requested node would run another test
    for seed in range(150):
        files, wires, names = C._tripwires([FILE], MIXED_NODES, {FILE: MIXED}, set())
        module = parse(files[FILE].decode())
        order = next(n for n in module.body if getattr(n, "name", "") == "OrderTests")
        own = [n.name for n in order.body if getattr(n, "name", "").startswith("test")]
        assert "test_left_right" not in own and "test_right_top" not in own
        assert len(own) == len(set(own)) == 4  # three own tests, renamed or not, and the tripwire
        assert wires[0].node not in MIXED_NODES
        for old, new in names.items():
            assert new not in MIXED_NODES
            assert old.split("::")[-1] not in ("test_left_right", "test_right_top")  # inherited: not renamed here


def test_no_drawn_name_takes_a_name_used_in_another_trusted_file():
    # the mixin in a file of its own (imported): its tests' names are words of a trusted file
    mixin = b"class OrderMixin:\n    def test_left_right(self):\n        pass\n\n    def test_right_top(self):\n        pass\n"
    source = MIXED.replace(MIXED[MIXED.index(b"class OrderMixin"):MIXED.index(b"class OrderTests")],
                           b"").replace(b"import unittest\n", b"import unittest\n\nfrom tests.mixins import OrderMixin\n")
    nodes = [n for n in MIXED_NODES if "left_right" not in n and "right_top" not in n]
    for seed in range(150):
        files, wires, names = C._tripwires([FILE], nodes, {FILE: source, "tests/mixins.py": mixin}, set())
        drawn = {wires[0].node.split("::")[-1], *(n.split("::")[-1] for n in names.values())}
        assert not drawn & {"test_left_right", "test_right_top"}


def test_composition_counts_a_tripwire_file_as_restored_only_when_the_agent_changed_it():
    from orchestrator.grading.tree import Tree
    original = Tree(files={FILE: MODULE, "textkit/__init__.py": b""}, executable=set(), symlinks={}, dirs={"tests", "textkit"})
    task = types.SimpleNamespace(grader=types.SimpleNamespace(fail_to_pass=NODES[:1], pass_to_pass=NODES[1:],
                                                              test_patch=None, held_out=None, seal=True))
    import orchestrator.grading.compose as mod
    trusted = {FILE: MODULE}
    saved = mod._trusted
    mod._trusted = lambda final, orig, t: (trusted, {"tests"}, set())
    try:
        comp = C.compose(original, original, task)
        assert FILE not in comp.restored and comp.trusted[FILE] != MODULE and comp.tree.files[FILE] == comp.trusted[FILE]
        changed = Tree(files={**original.files, FILE: b"def test_ascii_words():\n    pass\n"}, executable=set(),
                       symlinks={}, dirs=set(original.dirs))
        assert FILE in C.compose(changed, original, task).restored
    finally:
        mod._trusted = saved


def _res(stdout: bytes, size: int | None = None):
    return types.SimpleNamespace(stdout=stdout, stdout_size=len(stdout) if size is None else size)


@pytest.mark.parametrize("stdout,why", [
    (b"", "0 documents"),
    (b'{"outcomes": {}, "collect_errors": [], "exit_code": 1, "junit": null}\n' * 2, "2 documents"),
    (b'[1]\n', "not a JSON object"),
    (b'{"outcomes": {"a": 1}, "collect_errors": [], "exit_code": 1, "junit": null}\n', "malformed outcomes"),
    (b'{"outcomes": {}, "collect_errors": [], "exit_code": "0", "junit": null}\n', "malformed exit code"),
])
def test_a_malformed_results_stream_is_a_value_error(stdout, why):
    with pytest.raises(ValueError, match=why):
        R._document(_res(stdout))


def test_a_results_stream_larger_than_read_is_refused():
    with pytest.raises(ValueError, match="larger"):
        R._document(_res(b"{}", size=10 << 20))


@pytest.mark.parametrize("log,counts", [
    ("F..\n1 failed, 2 passed in 0.02s\n", {"failed": 1, "passed": 2}),
    ("==== 3 passed, 1 warning in 1.10s ====\n", {"passed": 3, "warning": 1}),
    ("2 failed, 1 passed, 2 errors in 0.5s (0:00:00)\n", {"failed": 2, "passed": 1, "error": 2}),
    ("nothing here\n", None),
])
def test_pytests_summary_line_is_read(log, counts):
    assert R._summary(log) == counts


def _group(outcomes, junit_cases, exit_code, summary, wire_outcome="failed", shows=("111", "222")):
    wire = C.Tripwire(f"{FILE}::test_kept_words", FILE, shows, True)
    outcomes = {**outcomes, wire.node: wire_outcome}
    cases = "".join(f'<testcase classname="tests.test_slug" name="{n.split("::")[-1]}">'
                    + ("<failure message='AssertionError: (111, 222)'/>" if v == "failed" else "") + "</testcase>"
                    for n, v in {**junit_cases, wire.node: wire_outcome}.items())
    doc = {"outcomes": outcomes, "collect_errors": [], "exit_code": exit_code,
           "junit": f"<testsuites><testsuite>{cases}</testsuite></testsuites>"}
    return [NODES[0]], wire, doc, R._summary(summary)


def _judged(group, exit_code=1):
    run = R.TestRun(exit_codes=[exit_code])
    R._judge(run, [NODES[0]], [group])
    return run


def test_an_honest_group_has_no_problem():
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 1, "1 failed, 1 passed in 0.1s"))
    assert run.integrity == [] and run.outcomes == {NODES[0]: "passed"}


def test_a_tripwire_reported_passed_is_forgery():
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 0, "2 passed in 0.1s", wire_outcome="passed"), 0)
    assert any("must fail" in p for p in run.integrity)


def test_a_tripwire_failing_without_its_values_is_forgery():
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 1, "1 failed, 1 passed in 0.1s",
                         shows=("333", "444")))
    assert any("without its values" in p for p in run.integrity)


def test_more_passes_than_pytests_summary_is_forgery():
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 1, "2 failed in 0.1s"))
    assert any("summary" in p for p in run.integrity)
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 1, "no summary here"))
    assert run.integrity == []  # -qq or a log cut past what is read leaves none: its absence proves nothing


def test_exit_codes_must_agree():
    run = _judged(_group({NODES[0]: "passed"}, {NODES[0]: "passed"}, 1, "1 failed, 1 passed in 0.1s"), exit_code=0)
    assert any("exit code" in p for p in run.integrity)


def test_a_tripwire_not_failing_is_forgery_unless_its_model_did_not_pass_either():
    run = _judged(_group({NODES[0]: "failed"}, {NODES[0]: "failed"}, 1, "1 failed, 1 skipped in 0.1s",
                         wire_outcome="skipped"))
    assert any("must fail" in p for p in run.integrity)
    group = _group({NODES[0]: "skipped"}, {NODES[0]: "skipped"}, 0, "2 skipped in 0.1s", wire_outcome="skipped")
    group = (group[0], dataclasses.replace(group[1], model=NODES[0]), *group[2:])
    assert not any("must fail" in p for p in _judged(group, 0).integrity)


def test_a_group_reporting_another_groups_tests_is_forgery():
    group = _group({NODES[0]: "passed", "tests/test_other.py::test_x": "passed"}, {NODES[0]: "passed"}, 1,
                   "1 failed, 2 passed in 0.1s")
    run = _judged(group)
    assert any("not given" in p for p in run.integrity) and "tests/test_other.py::test_x" not in run.outcomes


def test_the_stored_log_leaves_the_tripwires_section_out():
    wire = C.Tripwire(f"{FILE}::test_kept_words", FILE, ("1", "2"), True)
    log = ("F.\n=== FAILURES ===\n___ test_kept_words ___\n\n    def test_kept_words():\n>       assert observed\n"
           "E   AssertionError\n___ test_ascii_words ___\nreal failure\n=== short test summary info ===\n"
           f"FAILED {FILE}::test_kept_words - AssertionError\nPASSED {FILE}::test_ascii_words\n1 failed, 1 passed in 0.1s")
    out = R._without_tripwire(log, wire)
    assert "test_kept_words" not in out and "real failure" in out and "PASSED" in out and "1 failed, 1 passed" in out


def test_names_to_avoid_are_read_from_code_not_from_data():
    assert C._identifiers(b"def test_one():\n    helper_two()\n") == {"def", "test_one", "helper_two"}
    assert C._identifiers(b"\x00\x01test_binary_blob") == set()  # a NUL near the start: data
    assert C._identifiers(b"test_huge " * (C.WORDS_READ_MAX // 10 + 1)) == set()  # larger than read: data
    assert C._identifiers("text_as_str") == {"text_as_str"}
