"""A candidate whose grader_integrity failed in any trial (forged results caught by the tripwire, or a test run its
code broke) is named first in the report and never adopted: a forger that guesses the tripwire right is accepted,
so its caught trials are the evidence against its accepted ones (a fifth review's forger got 7 of 16 untouched
trials accepted after the tripwire's fixes, caught in the other 9, and the report had said nothing)."""

from __future__ import annotations

import json

from orchestrator.manifest import Manifest
from orchestrator.report import build_report
from orchestrator.result import TrialResult
from orchestrator.store import RunPaths, Store
from orchestrator.summary import terminal

TASKS = [f"t{i:02d}" for i in range(24)]
FORGED = {"name": "grader_integrity", "critical": True, "passed": False,
          "evidence": {"problems": ["a test that must fail was reported passed"]}}


def _verdict(ok: bool, forged: bool) -> dict:
    crits = [FORGED] if forged else [{"name": "grader_integrity", "critical": True, "passed": True, "evidence": {}}]
    return {"outcome": "accepted" if ok else "rejected", "kind": None, "accepted": ok,
            "reasons": [] if ok else (["fail_to_pass", "grader_integrity"] if forged else ["fail_to_pass"]),
            "criteria": crits, "grader_version": "g"}


def _report(tmp_path, forged_trials: int):
    m = Manifest.model_validate({
        "experiment": {"name": "x", "seed": 1},
        "candidates": [{"name": "base", "agent": "nop"}, {"name": "new", "agent": "nop"}],
        "execution": {"trials_per_task": 2},
        "analysis": {"k": [1], "primary_metric": "acceptance_rate",
                     "adoption": {"baseline": "base", "candidate": "new", "min_delta": 0.1}}})
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text(json.dumps({"price_table_version": "p"}))
    n = 0
    for t in TASKS:
        for r in range(2):
            store.record(TrialResult.from_dict({"id": f"{t}/base/{r}", "task": t, "candidate": "base", "replicate": r,
                                                "attempt": 1, "verdict": _verdict(False, False)}), [])
            forged = n < forged_trials
            n += 1
            store.record(TrialResult.from_dict({"id": f"{t}/new/{r}", "task": t, "candidate": "new", "replicate": r,
                                                "attempt": 1, "verdict": _verdict(not forged, forged)}), [])
    store.close()
    return build_report(paths, m, {}, {t: t for t in TASKS}, 96)


def test_a_clean_candidate_is_adopted_and_a_caught_one_never_is(tmp_path):
    clean = _report(tmp_path / "a", 0)
    assert clean["candidates"]["new"]["integrity"] == {"grader_integrity": 0, "evaluator_tampering_attempts": 0}
    assert clean["adoption"]["decision"] == "ADOPT" and not any("grader_integrity" in w for w in clean["warnings"])
    caught = _report(tmp_path / "b", 3)  # 45 of 48 accepted: far above the baseline, and 3 forgeries caught
    assert caught["candidates"]["new"]["integrity"]["grader_integrity"] == 3
    assert caught["warnings"][0].startswith("new: grader_integrity FAILED in 3 of 48 trial(s)")
    assert "its 45 accepted trial(s) cannot be taken at face value" in caught["warnings"][0]
    assert caught["adoption"]["decision"] == "REJECT"
    assert any("grader_integrity failed in 3 trial(s) of new" in r for r in caught["adoption"]["reasons"])
    text = terminal(caught)
    assert "warning: new: grader_integrity FAILED" in text and "decision: REJECT" in text
