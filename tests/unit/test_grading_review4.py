"""Fourth review of the pytest grader (HEAD 3b131bb, read-only): its findings, each as the test that must hold."""

from __future__ import annotations

import ast
import types
import xml.etree.ElementTree as ET

from orchestrator.grading import compose as C
from orchestrator.grading import runner as R
from orchestrator.grading.tree import Tree

FILE = "tests/test_mod.py"


def _decorated(source: str) -> list[str]:
    model = ast.parse(source).body[-1]
    return C._decorators(source.splitlines(keepends=True), model)


def test_a_parametrize_naming_skip_or_carrying_outcome_marks_is_copied_whole():
    """Findings 1 and 2: a decorator is dropped only when it is itself a skip, skipif or xfail mark; a parametrize
    whose argument is ``skipna`` or whose cases carry ``marks=pytest.mark.xfail`` stays (the copy takes the same
    arguments as its model, so it neither errors at setup nor stands out by that)."""
    skipna = "import pytest\n\n\n@pytest.mark.parametrize('skipna', [True, False])\ndef test_total(skipna):\n    assert 1 == 1\n"
    marks = ("import pytest\n\n\n@pytest.mark.parametrize('x, want', [(1, 2), pytest.param(3, 7, marks=pytest.mark.xfail)])"
             "\ndef test_double(x, want):\n    assert x == 1\n")
    assert len(_decorated(skipna)) == 1 and "skipna" in _decorated(skipna)[0]
    assert len(_decorated(marks)) == 1 and "marks=pytest.mark.xfail" in _decorated(marks)[0]
    for mark in ("@pytest.mark.xfail", "@pytest.mark.skip(reason='x')", "@pytest.mark.skipif(True, reason='x')"):
        source = f"import pytest\n\n\n{mark}\ndef test_x():\n    assert 1 == 1\n"
        assert _decorated(source) == [], mark


def test_only_the_cases_asked_of_the_model_are_run_of_its_copy():
    """Finding 3: a task asking two of three cases of a parametrized test gets its copy's same two cases run, never
    the third (which would be reported as a test nobody asked for, rejecting every honest fix)."""
    wire = C.Tripwire(f"{FILE}::test_load", FILE, (), True, f"{FILE}::test_double")
    group = [f"{FILE}::test_double[1]", f"{FILE}::test_double[2]", f"{FILE}::test_other"]
    assert R.wire_cases(wire, group) == [f"{FILE}::test_load[1]", f"{FILE}::test_load[2]"]
    assert R.wire_cases(wire, [f"{FILE}::test_double"]) == [f"{FILE}::test_load"]
    assert R.wire_cases(C.Tripwire(f"{FILE}::test_load", FILE, (), True, None), group) == [f"{FILE}::test_load"]


def test_a_repository_link_in_a_test_folder_is_kept():
    """Finding 4: the initial commit's own symbolic link in a test folder is trusted material, kept (and put back when
    the agent changed it), never removed as the agent's."""
    original = Tree(files={"tests/test_links.py": b"def test_a():\n    assert 1 == 1\n", "tests/data/real.txt": b"x"},
                    executable=set(), symlinks={"tests/data/alias.txt": "real.txt"}, dirs={"tests", "tests/data"})
    task = types.SimpleNamespace(grader=types.SimpleNamespace(fail_to_pass=["tests/test_links.py::test_a"],
                                                              pass_to_pass=[], test_patch=None, held_out=None, seal=True))
    saved = C._trusted
    C._trusted = lambda final, orig, t: ({p: b for p, b in orig.files.items()}, {"tests"},
                                         {p for p in final.symlinks if p.startswith("tests/")})
    try:
        comp = C.compose(original, original, task)
        assert comp.tree.symlinks == {"tests/data/alias.txt": "real.txt"} and "tests/data/alias.txt" not in comp.removed
        assert comp.links == ["tests/data/alias.txt"]
        changed = Tree(files=dict(original.files), executable=set(), symlinks={"tests/data/alias.txt": "../../x"},
                       dirs=set(original.dirs))
        comp = C.compose(changed, original, task)
        assert comp.tree.symlinks["tests/data/alias.txt"] == "real.txt" and "tests/data/alias.txt" in comp.restored
    finally:
        C._trusted = saved


def test_pytests_own_second_entry_of_a_test_failing_on_teardown_is_no_forgery():
    """Finding 5: pytest writes a test whose call failed and whose teardown then errored twice in its JUnit report."""
    node = f"{FILE}::test_a"
    wire = C.Tripwire(f"{FILE}::test_w", FILE, (), True, None)
    junit = ('<testsuites><testsuite><testcase classname="tests.test_mod" name="test_a"><failure message="x"/></testcase>'
             '<testcase classname="tests.test_mod" name="test_a"><error message="failed on teardown with &quot;E&quot;"/>'
             '</testcase><testcase classname="tests.test_mod" name="test_w"><failure message="y"/></testcase>'
             '<testcase classname="tests.test_mod" name="test_ok"/></testsuite></testsuites>')
    ET.fromstring(junit)
    doc = {"outcomes": {node: "error", wire.node: "failed", f"{FILE}::test_ok": "passed"}, "collect_errors": [],
           "exit_code": 1, "junit": junit}
    run = R.TestRun(exit_codes=[1])
    R._judge(run, [node, f"{FILE}::test_ok"], [([node, f"{FILE}::test_ok"], wire, doc, None)])
    assert not any("twice" in p for p in run.integrity), run.integrity
    doc2 = {**doc, "junit": junit.replace('failed on teardown with &quot;E&quot;', 'forged')}
    run = R.TestRun(exit_codes=[1])
    R._judge(run, [node, f"{FILE}::test_ok"], [([node, f"{FILE}::test_ok"], wire, doc2, None)])
    assert any("twice" in p for p in run.integrity)


def test_a_copy_of_a_parametrized_model_fails_where_one_of_its_cases_is_xfailed():
    """With its model's parametrize kept whole, a copy's case marked xfail is xfailed like the model's; the copy
    fails all the same where any of its cases failed."""
    assert R._wire_outcome({f"{FILE}::test_w[1]": "failed", f"{FILE}::test_w[3]": "xfailed"}, f"{FILE}::test_w") == "failed"
    assert R._wire_outcome({f"{FILE}::test_w[1]": "passed"}, f"{FILE}::test_w") == "passed"
    assert R._wire_outcome({}, f"{FILE}::test_w") is None
