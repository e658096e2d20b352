"""Mutants of a reference solution (``orchestrator.mutants``): the operators on one line, the mutated patch that
still applies and parses, the draw, and the check line that reports a grader's strength."""

from __future__ import annotations

import pytest

from orchestrator.mutants import OPERATORS, added_lines, apply_patch, available, generate, line_variants
from orchestrator.taskcheck import strength_line

ORIGINAL = {
    "pkg/calc.py": (b"def clamp(x, lo, hi):\n"
                    b"    return x\n"
                    b"\n"
                    b"\n"
                    b"def tail():\n"
                    b"    pass\n"),
    "README.md": b"calc\n",
}

PATCH = """diff --git a/pkg/calc.py b/pkg/calc.py
--- a/pkg/calc.py
+++ b/pkg/calc.py
@@ -1,3 +1,9 @@
 def clamp(x, lo, hi):
+    if x < lo:
+        return lo
+    for limit in (hi,):
+        if x > limit and limit is not None:
+            x = limit - 0
+    total = x * 2
-    return x
+    return total // 2
 
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-calc
+calc: x < 3
"""


def variants(line: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for op, new in line_variants(line):
        out.setdefault(op, set()).add(new)
    return out


def test_each_operator_changes_one_thing_on_the_line():
    got = variants("    if x < lo and ok is not None:")
    assert got["comparison"] == {"    if x <= lo and ok is not None:", "    if x < lo and ok is None:"}
    assert got["boolean"] == {"    if x < lo or ok is not None:"}
    assert got["negated condition"] == {"    if not (x < lo and ok is not None):"}
    assert got["branch removed"] == {"    if False:"}
    assert "statement removed" not in got  # a block's header is not a statement to remove
    assert variants("        total += 10 * n")["constant"] == {"        total += 11 * n", "        total += 9 * n"}
    assert variants("        total += 10 * n")["arithmetic"] == {"        total -= 10 * n", "        total += 10 / n"}
    assert variants("    return a not in b")["comparison"] == {"    return a in b"}
    assert variants("    return a not in b")["return value"] == {"    return None"}
    assert variants("    raise ValueError(x)")["statement removed"] == {"    pass"}
    assert variants("    while n > 0:")["negated condition"] == {"    while not (n > 0):"}
    assert "branch removed" not in variants("    while n > 0:")


@pytest.mark.parametrize("line", ["import os", "from x import y", "def f(a=1 < 2):", "class C:", "# x < 1", "",
                                  "    pass", "    return None", "@decorator"])
def test_lines_that_are_no_statement_to_remove_are_not_removed(line):
    assert "statement removed" not in variants(line)
    assert "return value" not in variants(line)


def test_an_unclosed_bracket_keeps_the_tokens_before_it():
    assert variants("    x = f(a < b,")["comparison"] == {"    x = f(a <= b,"}
    assert "statement removed" not in variants("    x = f(a < b,")  # a continued statement is not removed


def test_added_lines_are_found_in_python_files_with_their_new_line_numbers():
    found = [(a.path, a.line, a.text.strip()) for a in added_lines(PATCH)]
    assert found == [("pkg/calc.py", 2, "if x < lo:"), ("pkg/calc.py", 3, "return lo"),
                     ("pkg/calc.py", 4, "for limit in (hi,):"), ("pkg/calc.py", 5, "if x > limit and limit is not None:"),
                     ("pkg/calc.py", 6, "x = limit - 0"), ("pkg/calc.py", 7, "total = x * 2"),
                     ("pkg/calc.py", 8, "return total // 2")]  # README.md is not Python: not mutated


def test_every_mutant_applies_parses_and_differs_from_the_reference_by_its_one_line():
    made = generate(PATCH, ORIGINAL, 1000, "seed")
    reference = apply_patch(ORIGINAL, PATCH)["pkg/calc.py"].decode().split("\n")
    assert len(made) == available(PATCH, ORIGINAL) > len(OPERATORS)
    assert {m.operator for m in made} == set(OPERATORS)
    assert len({m.id for m in made}) == len(made)
    for m in made:
        lines = apply_patch(ORIGINAL, m.patch)["pkg/calc.py"].decode().split("\n")
        changed = [i for i, (a, b) in enumerate(zip(lines, reference)) if a != b]
        assert changed == [m.line - 1] and lines[m.line - 1] == m.after and reference[m.line - 1] == m.before
        assert f"-{m.before}\n+{m.after}\n" in m.diff()
    # ``for limit not in (hi,)`` does not parse: never made
    assert not any(m.after.strip().startswith("for") for m in made)


def test_the_draw_is_the_tasks_own_and_takes_every_operator_in_turn():
    first = generate(PATCH, ORIGINAL, len(OPERATORS), "task-a")
    assert [(m.line, m.after) for m in first] == [(m.line, m.after) for m in generate(PATCH, ORIGINAL, 8, "task-a")]
    assert sorted(m.operator for m in first) == sorted(OPERATORS)  # one of each while every one has some
    draws = {tuple((m.line, m.after) for m in generate(PATCH, ORIGINAL, 3, f"task-{i}")) for i in range(8)}
    assert len(draws) > 1  # another task draws others


def test_a_patch_that_does_not_apply_is_an_error_not_an_empty_list():
    with pytest.raises(ValueError, match="does not apply"):
        generate(PATCH.replace("-    return x", "-    return y"), ORIGINAL, 4, "s")


def test_the_check_line_names_survivors_and_never_calls_an_unmeasured_grader_strong():
    assert strength_line(None) == ""
    assert "not measured: the reference solution is not a patch" in strength_line(
        {"asked": 6, "skipped": "the reference solution is not a patch"})
    line = strength_line({"asked": 6, "graded": 5, "rejected": 3, "not_graded": [{"id": "m05"}],
                          "survivors": [{"id": "m01", "operator": "constant", "path": "a.py", "line": 3},
                                        {"id": "m04", "operator": "boolean", "path": "a.py", "line": 9}]})
    assert "grader strength 3/5 mutants rejected" in line and "1 not graded" in line
    assert "SURVIVED" in line and "m01 constant a.py:3" in line and "m04 boolean a.py:9" in line
    assert "SURVIVED" not in strength_line({"graded": 4, "rejected": 4, "survivors": []})


def test_the_check_line_says_when_fewer_mutants_exist_than_were_asked():
    line = strength_line({"asked": 8, "available": 2, "graded": 2, "rejected": 2, "survivors": []})
    assert "grader strength 2/2 mutants rejected (the reference solution has 2 distinct mutant(s), 8 asked)" in line
    assert "distinct mutant" not in strength_line({"asked": 6, "available": 13, "graded": 6, "rejected": 6})


def test_a_mutant_rejected_on_an_integrity_criterion_is_named_for_reading():
    # a mutant of the reference changes one line of the code under test, never a test or grader file: a rejection on
    # grader_integrity or tampering is not its own doing to explain (seen once on a real upstream task, unexplained)
    line = strength_line({"graded": 8, "rejected": 8, "survivors": [],
                          "integrity": [{"id": "m05", "failing": ["grader_integrity"]}]})
    assert "m05 rejected on grader_integrity" in line and "read its trial" in line
    assert "rejected on" not in strength_line({"graded": 8, "rejected": 8, "survivors": [], "integrity": []})
