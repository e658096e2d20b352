"""Run folders for the viewer's tests and benchmark, written through trialbox's own store and event log (the same
files a run writes): trials with hash-chained event logs, diffs, grader logs and verdicts with criteria.

``HOSTILE`` is text an agent could leave in everything it influences (its commands and their output, its
model's text, its submit summary, its diff and the grader's log, a criterion's evidence): HTML and script that
must be shown as text.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from orchestrator.events import EventLog
from orchestrator.result import TrialResult
from orchestrator.store import RunPaths, Store

HOSTILE = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           '</pre></td></tr></table><h1 id="forged">ACCEPTED</h1>\u202eTPECCA')

OUTCOMES = ["accepted", "rejected", "agent_timeout", "infra_error"]
START = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def trial_doc(task: str, cand: str, rep: int, outcome: str, *, hostile: bool = False, n: int = 0) -> dict:
    accepted = outcome == "accepted"
    said = HOSTILE if hostile else "fixed the median of an even-length list"
    failed = [] if accepted or outcome != "rejected" else ["fail_to_pass"]
    criteria = [
        {"name": "fail_to_pass", "critical": True, "passed": "fail_to_pass" not in failed,
         "evidence": {"outcomes": {"tests/test_stats.py::test_median_even": "passed" if accepted else "failed"},
                      **({"note": HOSTILE} if hostile else {})}},
        {"name": "pass_to_pass", "critical": True, "passed": True, "evidence": {"outcomes": {"tests/test_stats.py::test_mean": "passed"}}},
        {"name": "scope", "critical": True, "passed": True, "evidence": {"changed": ["src/stats.py"]}},
        {"name": "secrets", "critical": True, "passed": True, "evidence": {}},
        {"name": "evaluator_tampering_attempts", "critical": False, "passed": not (n % 7 == 3), "evidence": {}},
        {"name": "near_identical_to_reference", "critical": False, "passed": not (n % 11 == 5),
         "evidence": {"similarity": 0.95 if n % 11 == 5 else 0.3}},
    ]
    start = START + timedelta(seconds=30 * n)
    duration = 20.0 + (n * 37 % 60)
    return {
        "id": f"{task}/{cand}/{rep}", "task": task, "candidate": cand, "replicate": rep, "attempt": 1,
        "retries": 1 if outcome == "infra_error" else 0, "cost_usd": round(0.01 + (n % 13) * 0.003, 4),
        "duration_s": duration, "started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=duration)).isoformat(),
        "stop_reason": "deadline" if outcome == "agent_timeout" else "submitted",
        "stop_detail": said if hostile else "", "summary": said, "tool_calls": 2, "model_calls": 2,
        "tokens": {"input": 1200, "output": 300, "cache_read": 0, "cache_write": 0},
        "stage_seconds": {"sandbox": 2.5, "agent": duration - 10, "export": 0.7, "grading": 6.8},
        "sandbox": {"NanoCpus": 1000000000, "Memory": 2147483648, "NetworkMode": "none", "Runtime": "runc"},
        "verdict": {"outcome": outcome, "kind": "sandbox" if outcome == "infra_error" else None, "accepted": accepted,
                    "reasons": failed if outcome == "rejected" else [], "criteria": criteria,
                    "grader_version": "trialbox-grader/1+abc"},
    }


def write_events(path: Path, trial_id: str, *, hostile: bool = False) -> tuple[list[dict], str]:
    log = EventLog(path, trial_id)
    text = HOSTILE if hostile else "The median is wrong for even lengths; I will fix it."
    events = [
        log.append("model_call", model_served="claude-test", input_tokens=1200, output_tokens=150, cost_usd=0.004,
                   latency_s=1.9, stop_reason="tool_use", retries=0,
                   content=[{"type": "text", "text": text}, {"type": "tool_use", "name": "bash", "input": {"command": "pytest -q"}}]),
        log.append("tool", tool="bash", arguments={"command": HOSTILE if hostile else "pytest -q tests"},
                   output=(HOSTILE + "\n") if hostile else "1 failed, 4 passed in 0.12s\n", exit_code=1, duration_s=1.4,
                   started_seq=None),
        log.append("model_tool_use", source="model_reported", tool="edit_file", arguments={"path": "src/stats.py"}),
        log.append("tool", tool="edit_file", arguments={"path": "src/stats.py", "old": "a", "new": "b"}, output="ok",
                   exit_code=None, duration_s=0.02),
        log.append("proxy_refused", path="/v1/other", reason="not the model API"),
        log.append("stop", reason="submitted", detail=text),
    ]
    head = log.close()
    return events, head


DIFF = """diff --git a/src/stats.py b/src/stats.py
--- a/src/stats.py
+++ b/src/stats.py
@@ -10,7 +10,9 @@ def median(xs):
     xs = sorted(xs)
     n = len(xs)
-    return xs[n // 2]
+    if n % 2:
+        return xs[n // 2]
+    return (xs[n // 2 - 1] + xs[n // 2]) / 2
"""


def write_run(root: Path, tasks: int = 6, candidates: tuple[str, ...] = ("base", "new"), replicates: int = 3,
              files: bool | int = True, hostile_trial: str | None = None, seed: int = 7, finished: int | None = None,
              planned: bool = True) -> RunPaths:
    """A run folder of ``tasks`` × ``candidates`` × ``replicates`` trials; ``finished`` of them recorded (all by
    default), the rest planned (``plan.json``). ``files``: each trial's event log, diff and grader log too (a
    number k: every k-th trial's)."""
    paths = RunPaths(root)
    store = Store(paths)
    paths.lock.write_text("{}")
    rng = random.Random(seed)
    ids = [(f"task-{t:04d}", c, r) for t in range(tasks) for c in candidates for r in range(replicates)]
    if planned:
        paths.plan.write_text(json.dumps({"order": "blocked", "trials": [f"{t}/{c}/{r}" for t, c, r in ids]}))
    try:
        for n, (task, cand, rep) in enumerate(ids[: len(ids) if finished is None else finished]):
            record_trial(paths, store, task, cand, rep, n, rng,
                         files if isinstance(files, bool) else n % files == 0, hostile_trial)
    finally:
        store.close()
    return paths


def record_trial(paths: RunPaths, store: Store, task: str, cand: str, rep: int, n: int, rng: random.Random,
                 files: bool = True, hostile_trial: str | None = None, outcome: str | None = None) -> str:
    trial_id = f"{task}/{cand}/{rep}"
    hostile = trial_id == hostile_trial
    p = 0.7 if cand != "base" else 0.45
    draw = rng.random()
    outcome = outcome or ("accepted" if draw < p else "rejected" if draw < 0.93 else "agent_timeout" if draw < 0.97
                          else "infra_error")
    doc = trial_doc(task, cand, rep, outcome, hostile=hostile, n=n)
    events: list[dict] = []
    if files:
        folder = paths.attempt(trial_id, 1)
        events, head = write_events(folder.events, trial_id, hostile=hostile)
        doc["events_anchor"] = head
        folder.diff.write_text(DIFF + (f"+# {HOSTILE}\n" if hostile else ""))
        folder.grader_log.write_text(("collected 5 items\n\ntests/test_stats.py ....F\n" if outcome != "accepted"
                                      else "collected 5 items\n\ntests/test_stats.py .....\n") + (HOSTILE if hostile else ""))
        folder.verdict.write_text(json.dumps(doc))
    store.record(TrialResult.from_dict(doc), events)
    return trial_id
