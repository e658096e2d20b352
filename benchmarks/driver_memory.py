"""The driver's memory: per concurrent trial with N in flight, and its growth over many sequential trials.

The driver is the ``trialbox run`` process (everything on the host: planning, admission, the agents' loops, the
event logs, grading on the host, the store); the containers' memory is the engine's and is not counted here.
Two measurements, each from this process's resident set (``/proc/self/statm``) after a garbage collection:

* **in flight**: nop trials on one sample task with ``concurrency`` N (default 20; the manifest reserves little
  enough that admission allows N), sampled every 50 ms while they run; reported: the peak above the resident set
  before the run, divided by N;
* **growth**: ``SEQUENTIAL`` nop trials one at a time (default 500) in one run; the resident set every 25 trials;
  reported: the growth per 100 trials between the first and the last quarter (target < 1 MB per 100 trials).

    .venv/bin/python benchmarks/driver_memory.py [IN_FLIGHT] [SEQUENTIAL]
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


import _common  # noqa: F401  (puts the repository on the path)
from _baretrial import nop_manifest

from orchestrator.engine import connect
from orchestrator.job import run_experiment
from orchestrator.loading import load_manifest
from orchestrator.taskload import load_tasks

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def manifest(folder: Path, concurrency: int, trials: int) -> Path:
    return nop_manifest(folder, "memory", concurrency, trials, {"cpu_reservation": 0.05, "memory_limit_mb": 512, "memory_reservation_mb": 128, "disk_limit_mb": 64}, 600)


def main(in_flight: int = 20, sequential: int = 500) -> int:
    client = connect()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        loaded = load_manifest(manifest(work, in_flight, in_flight))
        tasks = load_tasks(loaded)
        gc.collect()
        before = rss_mb()
        peak = [before]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak.append(rss_mb())
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        run_experiment(loaded, tasks, client, work / "in-flight", say=lambda line: None, unchecked=True)
        stop.set()
        sampler.join()
        per_trial = (max(peak) - before) / in_flight
        print(f"in flight: {in_flight} nop trials at once in {time.perf_counter() - t0:.1f} s; driver resident set "
              f"{before:.1f} MB before, peak {max(peak):.1f} MB: {per_trial:.2f} MB per concurrent trial")

        loaded = load_manifest(manifest(work, 1, sequential))
        tasks = load_tasks(loaded)
        marks: list[tuple[int, float]] = []
        done = [0]

        def say(line: str) -> None:
            if line.startswith("["):
                done[0] += 1
                if done[0] % 25 == 0:
                    gc.collect()
                    marks.append((done[0], rss_mb()))

        t0 = time.perf_counter()
        run_experiment(loaded, tasks, client, work / "sequential", say=say, unchecked=True)
        quarter = max(1, len(marks) // 4)
        first = statistics.median(m for _, m in marks[:quarter])
        last = statistics.median(m for _, m in marks[-quarter:])
        span = statistics.median(n for n, _ in marks[-quarter:]) - statistics.median(n for n, _ in marks[:quarter])
        growth = (last - first) / span * 100 if span else 0.0
        ok = growth < 1.0
        print(f"growth: {sequential} sequential nop trials in {time.perf_counter() - t0:.0f} s; resident set "
              f"{marks[0][1]:.1f} MB after {marks[0][0]}, {marks[-1][1]:.1f} MB after {marks[-1][0]}: "
              f"{growth:+.2f} MB per 100 trials (first quarter against the last)  target < 1 MB  "
              f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
