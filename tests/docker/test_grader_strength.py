"""How strong is each grader: ``tasks check --mutants`` grades wrong variants of the reference solution as trials,
on the engine; a grader weakened on purpose lets some through and the check names them."""

from __future__ import annotations

import json

from orchestrator.settings import load_settings

from .test_run_cli import cli

# textkit-top-words' held-out tests, weakened on purpose: each fails on the untouched repository and passes with
# the reference solution, but none looks at ordering among several words, nor at the edge n == 0
WEAK_TESTS = '''import pytest

from textkit import top_words


def test_case_and_punctuation():
    assert top_words("Hi hi", 1)[0][0] == "hi"


def test_ties_alphabetical():
    assert top_words("B b", 1) == [("b", 2)]


def test_bounds():
    with pytest.raises(ValueError):
        top_words("a", -1)
'''

# two other solutions of textkit-slug-unicode for its grader folder's alternatives/: one correct in its own way
# (accents taken off by decomposition, no ASCII encoding), one wrong (accented letters dropped, not transliterated)
OWN_FIX = """--- a/textkit/slug.py
+++ b/textkit/slug.py
@@ -7,5 +7,8 @@
 
 def slugify(text: str, sep: str = "-") -> str:
     \"\"\"Lower-case ``text`` and join its runs of ASCII letters and digits with ``sep``.\"\"\"
-    words = _NON_WORD.split(text.lower())
+    import unicodedata
+
+    plain = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
+    words = _NON_WORD.split(plain.lower())
     return sep.join(w for w in words if w)
"""
WRONG_FIX = """--- a/textkit/slug.py
+++ b/textkit/slug.py
@@ -7,5 +7,6 @@
 
 def slugify(text: str, sep: str = "-") -> str:
     \"\"\"Lower-case ``text`` and join its runs of ASCII letters and digits with ``sep``.\"\"\"
-    words = _NON_WORD.split(text.lower())
+    text = text.encode("ascii", "ignore").decode("ascii")
+    words = _NON_WORD.split(text.lower())
     return sep.join(w for w in words if w)
"""

MANIFEST = """experiment: {name: strength, seed: 3}
candidates:
  - {name: nop, agent: nop}
  - {name: oracle, agent: oracle}
environment: {cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384,
              disk_limit_mb: 256}
execution: {trials_per_task: 1, deadline_seconds: 300}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [%s]}
"""


def _strength(task_id: str) -> dict:
    """The strength in the task's newest check record that has one (the check just made)."""
    records = [json.loads(p.read_text()) for p in (load_settings().state_dir / "taskcheck").glob("*.json")]
    mine = [r for r in records if r.get("task") == task_id and r.get("strength")]
    assert mine, f"no check record of {task_id} with a strength"
    newest = max(mine, key=lambda r: r["checked_at"])
    assert newest["ok"], newest
    return newest["strength"]


def test_mutants_measure_each_graders_strength_and_a_weak_grader_is_shown(project, repo_root):
    (project / "graders/textkit-top-words/tests/test_top_words.py").write_text(WEAK_TESTS)
    manifest = project / "examples" / "strength.yaml"
    manifest.write_text(MANIFEST % "textkit-top-words, ledger-transfer-overdraft")
    res = cli("tasks", "check", str(manifest), "--replicates", "1", "--mutants", "6", "--again", cwd=repo_root,
              check=0, timeout=1800)
    print(res.stdout)
    assert "task set ok: 2 of 2 task(s) ok" in res.stdout
    weak, strong = _strength("textkit-top-words"), _strength("ledger-transfer-overdraft")
    for s in (weak, strong):
        assert s["asked"] == 6 and s["generated"] == 6 and s["available"] >= 6
        assert s["graded"] + len(s["not_graded"]) == 6 and s["rejected"] + len(s["survivors"]) == s["graded"]
        assert s["strength"] == round(s["rejected"] / s["graded"], 4)
        assert sum(v["graded"] for v in s["by_operator"].values()) == s["graded"]
        for m in s["mutants"]:  # each a trial: rejected on the tests, or accepted
            assert m["outcome"] in ("rejected", "survived", "not graded")
            if m["outcome"] == "rejected":
                assert set(m["failing"]) & {"fail_to_pass", "pass_to_pass"}, m
    # the weakened grader lets wrong fixes through; the check line names them and the record keeps their diff
    assert weak["survivors"], weak
    survivor = weak["survivors"][0]
    assert survivor["diff"].startswith(f"--- {survivor['path']}:{survivor['line']} (reference solution)")
    line = next(x for x in res.stdout.splitlines() if x.startswith("textkit-top-words"))
    assert f"grader strength {weak['rejected']}/{weak['graded']} mutants rejected" in line and "SURVIVED" in line
    assert f"{survivor['id']} {survivor['operator']} {survivor['path']}:{survivor['line']}" in line
    assert weak["strength"] < 1.0
    # asked again with no more mutants: the recorded strength stands (unless trialbox's checkout is dirty)
    again = cli("tasks", "check", str(manifest), "--replicates", "1", "--mutants", "6", cwd=repo_root, check=0)
    if "reused" in again.stdout:
        assert "grader strength" in again.stdout


def test_alternative_solutions_must_be_accepted_and_a_refused_one_names_its_tests(project, repo_root):
    alternatives = project / "graders/textkit-slug-unicode/alternatives"
    alternatives.mkdir()
    (alternatives / "own.patch").write_text(OWN_FIX)
    (alternatives / "wrong.patch").write_text(WRONG_FIX)
    manifest = project / "examples" / "alternatives.yaml"
    manifest.write_text(MANIFEST % "textkit-slug-unicode")
    bad = cli("tasks", "check", str(manifest), "--replicates", "1", cwd=repo_root, check=1)
    print(bad.stdout)
    line = next(x for x in bad.stdout.splitlines() if x.startswith("textkit-slug-unicode"))
    assert "PROBLEM  the alternative solution alternatives/wrong.patch was not accepted (rejected: fail_to_pass" in line
    assert "failing: tests/test_slug_unicode.py::test_accents, tests/test_slug_unicode.py::test_mixed" in line
    assert "own.patch" not in bad.stdout  # the correct one of its own is accepted
    (alternatives / "wrong.patch").unlink()
    good = cli("tasks", "check", str(manifest), "--replicates", "1", cwd=repo_root, check=0)
    assert "task set ok: 1 of 1 task(s) ok" in good.stdout
