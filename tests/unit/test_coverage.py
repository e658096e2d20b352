"""Interval coverage by simulation at the cluster counts real task sets have (10, 20 and 50 repositories).

The generating model is documented in ``orchestrator/simulate.py``: a repository effect as strong as the task
effect on the logit of success, unequal repository sizes, 5 trials per task, success rates near 0, middling and
near 1. Each cell runs 1,000 seeded simulated experiments (a coverage standard error of about 0.7 points, so the
93–97% band is meaningful); ``benchmarks/coverage.py`` runs the longer version. The table the report quotes
(``stats.COVERAGE``) is checked against the same measurement.
"""

from __future__ import annotations

import pytest

from orchestrator.simulate import Model, coverage
from orchestrator.stats import COVERAGE

RATES = {"low": -2.5, "middle": 0.0, "high": 2.5}
REPS = 1000


@pytest.mark.parametrize("clusters", [10, 20, 50])
@pytest.mark.parametrize("estimator", ["pass@1", "difference", "cost_per_accepted", "pass^k", "share"])
def test_coverage_at_small_cluster_counts(clusters, estimator):
    measured = {rate: coverage(Model(clusters, mu), estimator, REPS, seed=7000 + clusters + int(mu * 10))
                for rate, mu in RATES.items()}
    for rate, value in measured.items():
        assert abs(value - COVERAGE[estimator][clusters][rate]) <= 0.03, (rate, value)  # the quoted table holds
        assert 0.93 <= value <= 0.97, (estimator, clusters, rate, value)
