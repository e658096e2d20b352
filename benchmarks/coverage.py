"""Interval coverage by simulation, the long version of tests/unit/test_coverage.py.

Prints, per estimator, cluster count and success rate, the coverage of the nominal 95% interval over
10,000 simulated experiments (standard error about 0.2 points) beside the table the report quotes
(``orchestrator.stats.COVERAGE``, 2,000 experiments per cell) and their ratio.
Run: .venv/bin/python benchmarks/coverage.py [experiments]
"""

from __future__ import annotations

import sys
import time

from orchestrator.simulate import Model, coverage
from orchestrator.stats import COVERAGE

RATES = {"low": -2.5, "middle": 0.0, "high": 2.5}


def main(reps: int) -> None:
    print(f"{'estimator':18s} {'clusters':>8s} {'rate':>7s} {'measured':>9s} {'table':>7s} {'ratio':>6s}")
    for estimator, table in COVERAGE.items():
        for clusters in sorted(table):
            for rate, mu in RATES.items():
                t0 = time.monotonic()
                value = coverage(Model(clusters, mu), estimator, reps, seed=90_000 + clusters + int(mu * 10))
                quoted = table[clusters][rate]
                print(f"{estimator:18s} {clusters:8d} {rate:>7s} {value:9.3f} {quoted:7.3f} {value / quoted:6.3f}"
                      f"   ({time.monotonic() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
