"""``near_identical_to_reference``: an agent's diff compared with the reference solution on what it changes."""

from __future__ import annotations

import types
from pathlib import Path

from orchestrator.grading.likeness import MAX_LINES, NEAR_IDENTICAL, changed_lines, near_identical, similarity

REFERENCE = """diff --git a/textkit/slug.py b/textkit/slug.py
--- a/textkit/slug.py
+++ b/textkit/slug.py
@@ -8,5 +8,6 @@ def slugify(text):
-    words = _NON_WORD.split(text.lower())
+    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
+    words = _NON_WORD.split(ascii_text.lower())
     return "-".join(w for w in words if w)
"""

# the same change as the agent's own diff would show it: other header, other context, other spacing, a comment
SAME_REWRITTEN = """--- a/textkit/slug.py
+++ b/textkit/slug.py
@@ -1,9 +1,10 @@
-    words = _NON_WORD.split(text.lower())
+    ascii_text = unicodedata.normalize( "NFKD", text ).encode("ascii", "ignore").decode("ascii")  # strip accents
+    words = _NON_WORD.split(ascii_text.lower())   # '#' in a string stays: "#"
"""

OWN_FIX = """--- a/textkit/slug.py
+++ b/textkit/slug.py
@@ -1,9 +1,14 @@
-    words = _NON_WORD.split(text.lower())
+    decomposed = unicodedata.normalize("NFD", text)
+    kept = []
+    for ch in decomposed:
+        if unicodedata.category(ch) != "Mn":
+            kept.append(ch)
+    words = _NON_WORD.split("".join(kept).lower())
"""


def test_the_changes_are_compared_without_whitespace_comments_or_headers():
    assert changed_lines("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a = 1  # old\n+a  =  2\n \n+# only a comment\n") == \
        ["-a=1", "+a=2"]
    assert changed_lines('+s = "#not a comment"  # but this is\n') == ['+s="#notacomment"']
    same, cut = similarity(SAME_REWRITTEN, REFERENCE)
    assert same > 0.8 and not cut
    assert similarity(REFERENCE, REFERENCE) == (1.0, False)


def test_a_fix_of_its_own_is_not_near_identical_and_the_reference_is():
    own, _ = similarity(OWN_FIX, REFERENCE)
    assert own < NEAR_IDENTICAL
    assert similarity("", REFERENCE) == (0.0, False)


def _task(tmp_path: Path, solution: str | None, text: str = REFERENCE):
    if solution is not None:
        (tmp_path / solution).write_text(text)
    grader = types.SimpleNamespace(solution=Path(solution) if solution else None)
    return types.SimpleNamespace(grader=grader, grader_path=lambda p: tmp_path / p)


def test_the_criterion_is_a_diagnostic_and_only_for_a_patch_solution(tmp_path):
    fired = near_identical(_task(tmp_path, "solution.patch"), REFERENCE)
    assert fired.name == "near_identical_to_reference" and not fired.critical and not fired.passed
    assert fired.evidence == {"similarity": 1.0, "threshold": NEAR_IDENTICAL}
    own = near_identical(_task(tmp_path, "solution.patch"), OWN_FIX)
    assert own.passed and own.evidence["similarity"] < NEAR_IDENTICAL
    assert near_identical(_task(tmp_path, "solve.sh", "echo"), REFERENCE) is None
    assert near_identical(_task(tmp_path, None), REFERENCE) is None


def test_a_huge_agent_diff_is_cut_and_says_so(tmp_path):
    huge = "".join(f"+x{i} = {i}\n" for i in range(MAX_LINES * 3))
    crit = near_identical(_task(tmp_path, "solution.patch"), huge)
    assert crit.passed and crit.evidence["cut_at_lines"] == MAX_LINES
