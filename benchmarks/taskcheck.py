"""`trialbox tasks check` of 10 sample tasks: in parallel within admission control, against the same checks
run one after another (``execution.concurrency: 1``), alternately.

The 10 tasks: the five realistic ones (examples/realistic, imported as a user would: a src layout, a PyPI
dependency with a plugin, an install step) and five of the textkit/ledger samples. Each check builds nothing
(the environments are built first), runs the untouched repository twice, the oracle twice and nop once.
Target: the whole check of 10 tasks in under a minute on this machine (2 cores).
Run: .venv/bin/python benchmarks/taskcheck.py [pairs]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from _common import report

from orchestrator.engine import connect
from orchestrator.loading import load_manifest
from orchestrator.taskcheck import build_environments, check_tasks
from orchestrator.taskload import load_tasks

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("TRIALBOX_BENCH_DIR", "/tmp/trialbox-bench")) / "taskcheck"
SAMPLES = ["textkit-slug-unicode", "textkit-top-words", "textkit-wrap-long-words", "ledger-negative-format",
           "ledger-thousands"]


def task_set() -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    src = ROOT / "examples/realistic"
    for item in ("images", "repos"):
        shutil.copytree(src / item, WORK / item)
    for item in ("instances.jsonl", "specs.yaml"):
        shutil.copyfile(src / item, WORK / item)
    subprocess.run([sys.executable, "-m", "orchestrator.cli", "tasks", "import-swebench", "instances.jsonl", "--repos",
                    "repos", "--specs", "specs.yaml", "--out", "tasks"], cwd=WORK, check=True, capture_output=True)
    shutil.copytree(ROOT / "tasks/_repos", WORK / "tasks/_repos")
    for name in SAMPLES:
        shutil.copytree(ROOT / "tasks" / name, WORK / "tasks" / name)
        shutil.copytree(ROOT / "graders" / name, WORK / "graders" / name)
    return WORK


def manifest(root: Path, name: str, concurrency) -> Path:
    m = {"experiment": {"name": name}, "candidates": [{"name": "nop", "agent": "nop"}],
         "environment": {"cpu_limit": 1.0, "cpu_reservation": 0.5, "memory_limit_mb": 1024,
                         "memory_reservation_mb": 384, "disk_limit_mb": 256},
         "execution": {"trials_per_task": 1, "deadline_seconds": 300, "concurrency": concurrency},
         "tasks": {"path": "tasks", "graders": "graders", "images": "images"}}
    (root / f"{name}.yaml").write_text(yaml.safe_dump(m))
    return root / f"{name}.yaml"


def main(pairs: int) -> None:
    root = task_set()
    client = connect()
    parallel, sequential = load_manifest(manifest(root, "parallel", "auto")), load_manifest(manifest(root, "sequential", 1))
    tasks_p, tasks_s = load_tasks(parallel), load_tasks(sequential)
    assert len(tasks_p) == 10, [t.id for t in tasks_p]
    build_environments(parallel, tasks_p, client, lambda line: None)
    quiet = lambda line: None  # noqa: E731
    ta, tb = [], []
    for i in range(pairs):
        order = [(parallel, tasks_p, ta), (sequential, tasks_s, tb)]
        for loaded, tasks, out in (order if i % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            ok = check_tasks(loaded, tasks, client, say=quiet, again=True)  # timed: never a reused check
            out.append(time.perf_counter() - t0)
            assert ok, "the sample task set must pass its check"
    report("tasks check of 10 tasks", "parallel (admission)", ta, "one after another", tb, target=1.0)
    print(f"  parallel: {statistics.median(ta):.1f} s for 10 tasks, {statistics.median(ta) / 10:.2f} s per task "
          f"(target < 60 s: {'MET' if statistics.median(ta) < 60 else 'NOT MET'}); one after another "
          f"{statistics.median(tb) / 10:.2f} s per task")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
