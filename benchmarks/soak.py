"""The soak: many trials at full concurrency in one ``trialbox run``; throughput must not decay, nothing may leak.

One run of ``TRIALS`` trials (default 1,000) on the sample task, half the oracle and half nop (so accepted and
rejected gradings both run), at ``CONCURRENCY`` trials at once (default 8: the highest level of throughput.py;
the manifest reserves little enough that admission allows it). Reported, against the targets of the speed issue:

* **throughput** of the first hundred finished trials against the last hundred (trials per minute between the
  1st and the 100th completion, and between the last hundred's): the last within 10% of the first;
* **leftovers** once the run returned, each counted before and after: containers and volumes trialbox labels,
  loop devices, files in the disks folder, entries in the host's temporary folder, folders of trialbox's own
  prefixes anywhere there: all must be back to where they were;
* **the driver's memory** (this process's resident set after a garbage collection) every 100 trials: flat means
  the last sample within 2 MB of the one after the first hundred (the bounded caches fill in the first hundred);
* every trial's outcome: the oracle accepted and nop rejected every time, no infrastructure error.

    .venv/bin/python benchmarks/soak.py [TRIALS] [CONCURRENCY]

It takes about 15 minutes on the development machine (2 cores) and is a manual target: not part of ``make test``.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


import _common  # noqa: F401  (puts the repository on the path)
from _baretrial import nop_manifest

from orchestrator.engine import MANAGED_LABEL, connect
from orchestrator.job import run_experiment
from orchestrator.loading import load_manifest
from orchestrator.settings import load_settings
from orchestrator.store import Store
from orchestrator.taskload import load_tasks

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    gc.collect()
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def manifest(folder: Path, trials: int, concurrency: int) -> Path:
    return nop_manifest(folder, "soak", concurrency, max(1, trials // 2),
                        {"cpu_reservation": 0.05, "memory_limit_mb": 512, "memory_reservation_mb": 128,
                         "disk_limit_mb": 64}, 600, agents=("oracle", "nop"))


def leftovers(client, work: Path) -> dict[str, set[str]]:
    """What could leak, by kind (names, so a leak can be named)."""
    tmp = Path(tempfile.gettempdir())
    disks = load_settings().disks_dir
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME"], capture_output=True,
                           text=True).stdout.split()
    return {
        "containers": {c.name for c in client.containers.list(all=True, filters={"label": MANAGED_LABEL})},
        "volumes": {v.name for v in client.volumes.list(filters={"label": MANAGED_LABEL})},
        "loop devices": set(loops),
        "disk files": {p.name for p in disks.iterdir()} if disks.exists() else set(),
        "temporary entries": {p.name for p in tmp.iterdir() if p != work},
    }


def per_minute(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0]) * 60 if len(times) > 1 and times[-1] > times[0] else 0.0


def main(trials: int = 1000, concurrency: int = 8) -> int:
    client = connect()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        work = Path(tmp)
        loaded = load_manifest(manifest(work, trials, concurrency))
        tasks = load_tasks(loaded)
        before = leftovers(client, work)
        finished: list[float] = []
        memory: list[tuple[int, float]] = [(0, rss_mb())]

        def say(line: str) -> None:
            if line.startswith("["):
                finished.append(time.monotonic())
                if len(finished) % 100 == 0:
                    memory.append((len(finished), rss_mb()))

        t0 = time.monotonic()
        paths = run_experiment(loaded, tasks, client, work / "run", say=say, unchecked=True)
        wall = time.monotonic() - t0
        after = leftovers(client, work)
        store = Store(paths)
        rows = store.trials()
        store.close()

    n = len(finished)
    first, last = per_minute(finished[:100]), per_minute(finished[-100:])
    print(f"soak: {n} trials, {concurrency} at once, in {wall / 60:.1f} min ({n / wall * 60:.1f} trials/min overall)")
    decay = (last - first) / first if first else float("nan")
    thr_ok = n >= 200 and decay >= -0.10  # faster at the end is no decay
    print(f"throughput: first hundred {first:.1f} trials/min, last hundred {last:.1f}: {decay:+.1%}  "
          f"target within 10%  {'MET' if thr_ok else 'NOT MET'}")
    leaked = {kind: sorted(after[kind] - before[kind]) for kind in after}
    leak_ok = not any(leaked.values())
    for kind, names in leaked.items():
        print(f"left behind: {kind}: {len(names)}" + (f" ({', '.join(names[:5])}{' …' if len(names) > 5 else ''})"
                                                     if names else ""))
    print(f"leftovers: {'none  MET' if leak_ok else 'NOT MET'}")
    base = memory[1][1] if len(memory) > 1 else memory[0][1]
    mem_ok = memory[-1][1] - base <= 2.0
    print("driver memory (MB) by trials finished: " + ", ".join(f"{k}: {v:.1f}" for k, v in memory)
          + f"  flat (last within 2 MB of the one after 100)  {'MET' if mem_ok else 'NOT MET'}")
    outcomes = Counter((r.candidate, r.outcome.value) for r in rows)
    expected = all((c == "oracle") == (o == "accepted") for c, o in outcomes)
    print("outcomes: " + ", ".join(f"{c} {o}: {k}" for (c, o), k in sorted(outcomes.items()))
          + f"  (oracle always accepted, nop never: {'yes' if expected else 'NO'})")
    return 0 if thr_ok and leak_ok and mem_ok and expected and len(rows) == n else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
