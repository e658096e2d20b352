"""Interval coverage by simulation over the shapes real benchmarks have (issue 26), the long version of
tests/unit/test_coverage.py.

For every estimand the report prints an interval for (pass@1, pass^2 of 5, the paired difference, cost per accepted
run and its difference between two candidates, the ablation share), at 10, 20 and 50 clusters whose sizes are equal-ish (2-12 tasks), one cluster holding 45%
of the tasks, or Zipf-like (the g-th largest proportional to 1/g), at per-task success rates near 2%, 50% and 98%,
with a repository effect as strong as the task effect and with none: the coverage of the nominal 95% interval and
its median width over N simulated experiments per cell (1,000 by default: a coverage standard error of about 0.7
points). Cells outside 93-97% are marked. The README's statistics section holds its last table.
Run: .venv/bin/python benchmarks/coverage.py [experiments] [estimand ...]
"""

from __future__ import annotations

import dataclasses
import sys
import time

from orchestrator.simulate import Model, coverage_and_width, mu_for_rate

SHAPES = ("uniform", "dominant", "zipf")
CLUSTERS = (10, 20, 50)
RATES = (0.02, 0.5, 0.98)
EFFECTS = (1.0, 0.0)
ESTIMANDS = ("pass@1", "pass^k", "difference", "cost_per_accepted", "cost_difference", "share")


def main(reps: int, only: tuple[str, ...] = ()) -> None:
    print(f"{'estimand':18s} {'shape':9s} {'G':>3s} {'rate':>5s} {'repo sd':>7s} {'coverage':>9s} {'width':>7s}")
    outside = 0
    cells = 0
    for estimand in only or ESTIMANDS:
        for shape in SHAPES:
            for clusters in CLUSTERS:
                for rate in RATES:
                    for sd in EFFECTS:
                        base = Model(clusters, cluster_sd=sd, shape=shape)
                        model = dataclasses.replace(base, mu=mu_for_rate(rate, base))
                        t0 = time.monotonic()
                        held, width = coverage_and_width(model, estimand, reps,
                                                         seed=90_000 + clusters + int(rate * 100) + int(sd * 7))
                        flag = "" if 0.93 <= held <= 0.97 else "  OUTSIDE"
                        outside += bool(flag)
                        cells += 1
                        print(f"{estimand:18s} {shape:9s} {clusters:3d} {rate:5.2f} {sd:7.1f} {held:9.3f} "
                              f"{width if width is not None else float('nan'):7.3f}{flag}"
                              f"   ({time.monotonic() - t0:.1f}s)", flush=True)
    print(f"{outside} of {cells} cells outside 93-97%")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, tuple(sys.argv[2:]))
