"""Throughput: ``trialbox run`` of nop trials on one sample task against a bare thread pool doing the same trials
(``_baretrial.BareTrial``, nop: no command but the submit) at the same concurrency, alternately, at 1, 2, 4 and 8
trials at once.

trialbox's side is the whole command as a user runs it (``run_experiment``: the lock checked, the trials planned,
admitted, run, graded, stored); the manifest's reservations are small enough (0.25 CPU, 256 MB) that admission
allows 8 at once on this machine, so both sides run at the same concurrency. Printed per level: trials per
minute of each, the ratio (trialbox's throughput over the bare pool's; target ≥ 0.9), failed trials (target
none), and at the highest level the p95 latency of a trial (target ≤ 2× the bare one's).

    .venv/bin/python benchmarks/throughput.py [TRIALS_PER_LEVEL] [PAIRS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


from _common import quantile
from _baretrial import BareTrial, nop_manifest

from orchestrator.engine import connect
from orchestrator.job import run_experiment
from orchestrator.loading import load_manifest
from orchestrator.store import Store
from orchestrator.taskload import load_tasks

LEVELS = (1, 2, 4, 8)


def manifest(folder: Path, concurrency: int, trials: int) -> Path:
    return nop_manifest(folder, "throughput", concurrency, trials, {"cpu_reservation": 0.25, "memory_limit_mb": 1024, "memory_reservation_mb": 256, "disk_limit_mb": 256}, 300)


def main(trials: int = 8, pairs: int = 2) -> int:
    client = connect()
    met = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for level in LEVELS:
            tb_walls, bare_walls, tb_lat, bare_lat, failed = [], [], [], [], 0
            for pair in range(pairs):
                loaded = load_manifest(manifest(work, level, trials))
                tasks = load_tasks(loaded)
                bare = BareTrial.of(client, loaded, tasks[0])

                def trialbox() -> None:
                    nonlocal failed
                    t0 = time.perf_counter()
                    paths = run_experiment(loaded, tasks, client, work / f"run-{uuid.uuid4().hex[:6]}",
                                           say=lambda line: None, unchecked=True)
                    tb_walls.append(time.perf_counter() - t0)
                    store = Store(paths)
                    try:
                        rows = store.trials()
                    finally:
                        store.close()
                    failed += sum(1 for r in rows if r.outcome.value != "rejected")  # nop must be rejected
                    tb_lat.extend(r.duration_s for r in rows if r.duration_s is not None)

                def pool() -> None:
                    def one(_: int) -> None:
                        t = time.perf_counter()
                        bare.run(oracle=False)
                        bare_lat.append(time.perf_counter() - t)
                    t0 = time.perf_counter()
                    with ThreadPoolExecutor(max_workers=level) as ex:
                        list(ex.map(one, range(trials)))
                    bare_walls.append(time.perf_counter() - t0)

                for fn in ((trialbox, pool) if pair % 2 == 0 else (pool, trialbox)):
                    fn()
            tb_rate = trials / statistics.median(tb_walls) * 60
            bare_rate = trials / statistics.median(bare_walls) * 60
            ratio = tb_rate / bare_rate
            ok = ratio >= 0.9 and failed == 0
            line = (f"concurrency {level}: trialbox {tb_rate:6.1f} trials/min, bare pool {bare_rate:6.1f} trials/min, "
                    f"ratio {ratio:.2f}x (target >= 0.9x), failed {failed}")
            if level == LEVELS[-1]:
                p95, bp95 = quantile(tb_lat, 0.95), quantile(bare_lat, 0.95)
                ok = ok and p95 <= 2 * bp95
                line += f"; p95 latency {p95:.2f} s vs bare {bp95:.2f} s ({p95 / bp95:.2f}x, target <= 2x)"
            print(line + ("  MET" if ok else "  NOT MET"), flush=True)
            met = met and ok
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
