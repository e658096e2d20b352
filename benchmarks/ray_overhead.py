"""Per-trial cost of scheduling through Ray against the local backend, on the same trivial trials.

The same manifest (the nop agent on one small task, ``trials`` trials,
``concurrency: 4``) runs with ``trialbox run --backend local`` and ``--backend
ray`` on a local cluster of two nodes (each fits two trials: four at once,
like the local backend), alternately (A B A B …, one warm-up each). Each side
is the whole command, start-up included (for Ray: connecting, probing the
nodes, shipping the bundle, starting workers), divided by the trials it ran.
Every process runs in the cluster's loopback-only network namespace.
Run: .venv/bin/python benchmarks/ray_overhead.py [pairs] [trials]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import alternate, median_interval

from orchestrator.testing.raylocal import LocalRayCluster, NodeSpec

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.25


def manifest(folder: Path, trials: int) -> Path:
    path = folder / "bench.yaml"
    path.write_text(f"""
experiment: {{name: bench-ray, seed: 1}}
candidates: [{{name: nop, agent: nop}}]
environment: {{cpu_limit: 1.0, cpu_reservation: 0.25, memory_limit_mb: 512, memory_reservation_mb: 256,
               disk_limit_mb: 64}}
execution: {{trials_per_task: {trials}, deadline_seconds: 120, concurrency: 4}}
tasks: {{path: {ROOT}/tasks, graders: {ROOT}/graders, images: {ROOT}/images, select: [textkit-slug-unicode]}}
analysis: {{k: [1]}}
""")
    return path


def main(pairs: int = 3, trials: int = 16) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    with tempfile.TemporaryDirectory() as tmp, LocalRayCluster(Path(tmp) / "ray") as cluster:
        cluster.start([NodeSpec("n1", cpus=1, memory_mb=2048), NodeSpec("n2", cpus=1, memory_mb=2048)])
        m = manifest(Path(tmp), trials)

        def run(backend: str):
            def go(i: int) -> None:
                res = cluster.run([sys.executable, "-m", "orchestrator.cli", "run", str(m), "--unchecked", "--backend", backend,
                                   "--out", f"{tmp}/{backend}-{i}"], env=env, cwd=ROOT)
                if res.returncode != 0 or "infra_error" in res.stdout:
                    raise SystemExit(f"{backend} run failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
            return go

        ta, tb = alternate(run("ray"), run("local"), pairs, warmup=1)
    per_a, per_b = [t / trials for t in ta], [t / trials for t in tb]
    med_a, med_b = statistics.median(per_a), statistics.median(per_b)
    ratio, lo, hi = median_interval([x / y for x, y in zip(ta, tb)])
    print(f"{trials} nop trials per run, 4 at once, {pairs} runs of each backend (A B A B), start-up included")
    print(f"  ray backend (2 nodes)   median {med_a:6.3f} s per trial   runs {[round(t, 1) for t in ta]} s")
    print(f"  local backend           median {med_b:6.3f} s per trial   runs {[round(t, 1) for t in tb]} s")
    print(f"  ratio {med_a / med_b:.3f}x (per pair: {ratio:.3f}x, 95% interval {lo:.3f}-{hi:.3f})  target <= "
          f"{TARGET:.2f}x  {'MET' if med_a / med_b <= TARGET else 'NOT MET'}")
    return 0 if med_a / med_b <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
