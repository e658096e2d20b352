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


# Issue 26: the shapes real benchmarks have. One repository holding 45% of the tasks made the CR2 t interval on
# G - 1 degrees of freedom cover 82-93%; Zipf-like sizes 89-96%; pass^2 near 0 87-92%. With Bell-McCaffrey degrees of
# freedom and the sparse bound (orchestrator/stats.py) most cells of benchmarks/coverage.py are within 93-97%; the few
# below are marked here and in the README's table; some cells over-cover (up to 99-100% where successes are rarest):
# honest but wide, the table says which.
SHAPE_CELLS = [  # (estimand, shape, clusters, rate, repository sd)
    ("pass@1", "dominant", 20, 0.5, 1.0), ("pass@1", "dominant", 50, 0.02, 1.0),
    ("difference", "dominant", 50, 0.5, 1.0), ("difference", "zipf", 20, 0.5, 1.0),
    ("cost_per_accepted", "dominant", 20, 0.5, 1.0),
    ("cost_difference", "uniform", 20, 0.5, 1.0), ("cost_difference", "dominant", 50, 0.5, 1.0),
    ("pass^k", "uniform", 20, 0.1, 1.0), ("pass^k", "dominant", 20, 0.1, 1.0),
    # 50 Zipf-sized repositories (the largest 22% of the tasks, half of them of one or two tasks) with a strong
    # repository effect: measured just under the band (issue 26 stays open on it)
    pytest.param("pass@1", "zipf", 50, 0.5, 1.0, marks=pytest.mark.xfail(
        strict=True, reason="measured 92.5% here (94.4% over 1,000 other experiments): just under 93%")),
    pytest.param("cost_per_accepted", "zipf", 50, 0.5, 1.0, marks=pytest.mark.xfail(
        strict=True, reason="measured 91.8%: the linearized ratio at 50 Zipf-sized repositories")),
]


@pytest.mark.parametrize("estimand,shape,clusters,rate,sd", SHAPE_CELLS)
def test_coverage_where_repositories_are_unequal_and_successes_rare(estimand, shape, clusters, rate, sd):
    import dataclasses

    from orchestrator.simulate import coverage_and_width, mu_for_rate

    base = Model(clusters, cluster_sd=sd, shape=shape)
    held, width = coverage_and_width(dataclasses.replace(base, mu=mu_for_rate(rate, base)), estimand, 600,
                                     seed=4200 + clusters)
    assert 0.93 <= held <= 0.99, (estimand, shape, clusters, rate, held, width)


def test_equal_repositories_count_as_many_clusters_one_dominant_as_few():
    from orchestrator.stats import bm_df

    equal = [str(i // 5) for i in range(50)]
    assert bm_df(equal) == pytest.approx(9.0)  # G - 1 when sizes are equal
    dominant = [str(g) for g, n in enumerate([45] + [5] * 11) for _ in range(n)]
    assert bm_df(dominant) < 5  # twelve repositories, one of them 45% of the tasks: about four


def test_a_shape_measurement_near_an_edge_of_the_band_gets_more_experiments():
    """The report's own-shape coverage: 400 experiments leave a standard error of about 1.1 points, so a reading
    within two of them of 93% or 97% is measured on 1,600 more before it is called inside or outside."""
    from orchestrator.simulate import _near_edge, shape_coverage

    assert _near_edge(0.925, 400) and _near_edge(0.975, 400) and _near_edge(0.95, 400)
    assert not _near_edge(0.85, 400) and not _near_edge(0.995, 400) and not _near_edge(0.95, 20000)
    measured = shape_coverage((2, 1, 1), 3, 0.5, reps=40, more_reps=60)
    for name, m in measured.items():
        assert m["experiments"] in (40, 100), (name, m)
        if m["experiments"] == 40:  # left alone only when far from both edges
            assert not _near_edge(m["coverage"], 40), (name, m)
    assert any(m["experiments"] == 100 for m in measured.values())  # (2, 1, 1) has readings near an edge
