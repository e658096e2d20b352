"""Comparisons on common ground: what a comparison prints for each side is taken over the tasks it compares.

A candidate's headline figures (``report._candidate``) are over every task it ran; a paired difference is over the
tasks both candidates have the trials the primary metric needs. Where the two sets differ (a task one candidate
never finished, a pass^k needing k trials), the two headline figures need not subtract to the difference, and a
difference of two costs per accepted run over different tasks compares different work. So each comparison
carries, for each side, the primary metric and the cost per accepted run over exactly the compared tasks (their
difference is the paired difference), the cost difference with its interval
(``stats.ratio_difference_interval``), and the clusters those tasks come from, which is what the adoption rule's
minimum of ``stats.MIN_CLUSTERS`` is checked on (a comparison over 8 repositories is not one over 10 because the
run had 10).
"""

from __future__ import annotations

from typing import Any

from .costs import TrialCost
from .manifest import Manifest
from .pertask import cost_per_accepted, per_task_counts
from .result import TrialResult
from .stats import METHOD_RATIO_DIFFERENCE, bm_df, mean_interval, ratio_difference_interval


def _side(rows: list[TrialResult], values: dict[str, float], tasks: list[str], m: Manifest,
          cluster_of: dict[str, str], costs: dict[str, TrialCost]) -> tuple[dict[str, Any], list[float], list[int]]:
    """One side's primary metric (its per-task ``values``, as ``report._compare`` has them) and cost per accepted
    run over ``tasks``, with the cost's per-task numerators and denominators."""
    metric = mean_interval([values[t] for t in tasks], [cluster_of[t] for t in tasks], m.analysis.confidence,
                           seed=m.experiment.seed)
    cost, num, den = cost_per_accepted(rows, tasks, per_task_counts(rows, set(m.analysis.exclusions)), cluster_of,
                                       costs, m)
    return {"metric": metric.to_dict(), "cost_per_accepted_usd": cost.to_dict()}, num, den


def common_ground(baseline: tuple[list[TrialResult], dict[str, float]], candidate: tuple[list[TrialResult], dict[str, float]],
                  tasks: list[str], m: Manifest, cluster_of: dict[str, str], costs: dict[str, TrialCost]) -> dict[str, Any]:
    """The figures of both sides of one comparison over ``tasks`` (the compared ones; each side its trials and its
    per-task values of the primary metric), the cost per accepted run's
    difference (candidate minus baseline) with its interval, and the clusters and effective clusters (the
    Bell-McCaffrey degrees of freedom plus one) of those tasks."""
    clusters = [cluster_of[t] for t in tasks]
    if not tasks:
        return {"tasks": 0, "clusters": 0, "effective_clusters": 0.0, "baseline": None, "candidate": None,
                "cost_per_accepted_difference": {"value": None, "interval": None, "reason": "no task in common"}}
    base, bn, bd = _side(*baseline, tasks, m, cluster_of, costs)
    cand, cn, cd = _side(*candidate, tasks, m, cluster_of, costs)
    diff = ratio_difference_interval(cn, cd, bn, bd, clusters, m.analysis.confidence)
    distinct = len(set(clusters))
    difference = {k: v for k, v in diff.to_dict().items() if k != "resamples_without_accepted"}  # none drawn here
    return {"tasks": len(tasks), "clusters": distinct,
            "effective_clusters": round(bm_df(clusters) + 1, 2) if distinct > 1 else float(distinct),
            "baseline": base, "candidate": cand,
            "cost_per_accepted_difference": {**difference, "method": METHOD_RATIO_DIFFERENCE}}
