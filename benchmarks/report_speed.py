"""The full report over a large synthetic run: 500 tasks × 3 candidates × 5 replicates (7,500 trials).

trialbox's report (``report.build_report``: every metric, interval, comparison and the adoption rule, read from
the run's SQLite store) is timed against a bare reference computing only the headline numbers the way a
simple harness would: pass@1 per candidate with a 10,000-resample percentile bootstrap over tasks (numpy).
The two run alternately; the target is the report in under a second.

    .venv/bin/python benchmarks/report_speed.py [PAIRS]
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from _common import alternate, report  # noqa: E402  (puts the repository on the path)

from orchestrator.manifest import Manifest  # noqa: E402
from orchestrator.report import build_report  # noqa: E402
from orchestrator.result import TrialResult  # noqa: E402
from orchestrator.store import RunPaths, Store  # noqa: E402

TASKS, CANDIDATES, REPLICATES = 500, ("base", "new", "other"), 5


def synthetic_run(root: Path) -> tuple[RunPaths, Manifest, dict[str, str], dict[str, str]]:
    m = Manifest.model_validate({
        "experiment": {"name": "big", "seed": 1},
        "candidates": [{"name": c, "agent": "nop"} for c in CANDIDATES],
        "execution": {"trials_per_task": REPLICATES},
        "analysis": {"k": [1, 3, 5], "primary_metric": "pass_hat_k",
                     "adoption": {"baseline": "base", "candidate": "new", "min_delta": 0.0}}})
    paths = RunPaths(root / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    rng = random.Random(0)
    tasks = [f"t{i:03d}" for i in range(TASKS)]
    difficulty = {t: ("easy", "medium", "hard")[i % 3] for i, t in enumerate(tasks)}
    cluster = {t: f"repo{i % 40}" for i, t in enumerate(tasks)}
    for t in tasks:
        p = rng.random()
        for ci, c in enumerate(CANDIDATES):
            for r in range(REPLICATES):
                ok = rng.random() < min(1.0, p + 0.05 * ci)
                store.record(TrialResult.from_dict({
                    "id": f"{t}/{c}/{r}", "task": t, "candidate": c, "replicate": r, "attempt": 1, "retries": 0,
                    "cost_usd": 0.01 + rng.random() / 10, "duration_s": 10 + rng.random() * 50,
                    "stage_seconds": {"prepare": 0.01, "sandbox": 0.4, "agent": 5.0, "grading": 1.0},
                    "verdict": {"outcome": "accepted" if ok else "rejected", "accepted": ok, "reasons": [],
                                "criteria": [{"name": "secrets", "critical": True, "passed": True, "evidence": {}}],
                                "grader_version": "g"}}), [])
    store.close()
    return paths, m, difficulty, cluster


def bare_bootstrap(paths: RunPaths) -> None:
    """pass@1 per candidate (per task, then averaged) with a 10,000-resample percentile bootstrap over tasks."""
    store = Store(paths)
    try:
        rows = store.trials()
    finally:
        store.close()
    rng = np.random.default_rng(0)
    for c in CANDIDATES:
        per_task: dict[str, list[int]] = {}
        for r in rows:
            if r.candidate == c:
                per_task.setdefault(r.task, []).append(int(r.accepted))
        rates = np.array([sum(v) / len(v) for v in per_task.values()])
        means = rates[rng.integers(0, len(rates), size=(10_000, len(rates)))].mean(axis=1)
        np.percentile(means, [2.5, 97.5])


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        paths, m, difficulty, cluster = synthetic_run(Path(tmp))
        planned = TASKS * len(CANDIDATES) * REPLICATES
        doc = build_report(paths, m, difficulty, cluster, planned)
        assert doc["adoption"]["decision"] in ("ADOPT", "REJECT", "INCONCLUSIVE"), doc["adoption"]
        ta, tb = alternate(lambda i: build_report(paths, m, difficulty, cluster, planned),
                           lambda i: bare_bootstrap(paths), pairs, warmup=1)
        report(f"full report, {planned} trials ({TASKS} tasks x {len(CANDIDATES)} candidates x {REPLICATES})",
               "trialbox build_report", ta, "bare pass@1 bootstrap 10k", tb, target=float("inf"))
        worst = max(ta)
        print(f"  trialbox report: slowest of {pairs} runs {worst:.3f} s  target < 1 s  "
              f"{'MET' if worst < 1.0 else 'NOT MET'}")
        return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
