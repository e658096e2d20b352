"""Per task, then the mean: each task's trials in the denominator and accepted ones, and its value of a metric
(pass@k, pass^k or the acceptance rate), the values every candidate figure and paired comparison is taken over.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from .manifest import Manifest
from .stats import RatioEstimate, pass_at_k, pass_hat_k, ratio_interval
from .result import TrialResult

if TYPE_CHECKING:
    from .costs import TrialCost


def task_metric(metric: str, n: int, c: int, k: int) -> float | None:
    if metric == "pass_at_k":
        return pass_at_k(n, c, k)
    if metric == "pass_hat_k":
        return pass_hat_k(n, c, k)
    return c / n if n else None


def per_task_counts(rows: list[TrialResult], exclusions: set[str]) -> dict[str, tuple[int, int]]:
    """(trials in the denominator, accepted) per task; a task whose trials were all excluded stays, as (0, 0)."""
    counts: dict[str, list[int]] = {r.task: [0, 0] for r in rows}
    for r in rows:
        if r.outcome.value in exclusions:
            continue
        counts[r.task][0] += 1
        counts[r.task][1] += int(r.accepted)
    return {t: (n, c) for t, (n, c) in counts.items()}


def rate_per_task(per_task: dict[str, tuple[int, int]]) -> float | None:
    """The acceptance rate as every other figure is: per task (accepted / trials in the denominator), then the
    mean over tasks with at least one such trial (a task with many trials weighs no more than one with few)."""
    rates = [c / n for n, c in per_task.values() if n]
    return sum(rates) / len(rates) if rates else None


def per_task_values(rows: list[TrialResult], m: Manifest) -> dict[str, float]:
    metric, k = m.analysis.primary_metric, m.analysis.k[0]
    per_task = per_task_counts(rows, set(m.analysis.exclusions))
    return {t: v for t, (n, c) in per_task.items() if (v := task_metric(metric, n, c, k)) is not None}


def cost_per_accepted(rows: list[TrialResult], tasks: list[str], per_task: dict[str, tuple[int, int]],
                      cluster_of: dict[str, str], costs: dict[str, "TrialCost"], m: Manifest
                      ) -> tuple[RatioEstimate, list[float], list[int]]:
    """The cost of all of ``rows``' trials over their accepted ones, over ``tasks`` (``stats.ratio_interval``), with
    its per-task numerators (every trial's whole cost, excluded ones too: they were paid for) and denominators
    (accepted trials, from ``per_task``)."""
    spent: dict[str, float] = defaultdict(float)  # per task, in one pass over the trials
    for r in rows:
        spent[r.task] += costs[r.id].total
    num, den = [spent[t] for t in tasks], [per_task[t][1] for t in tasks]
    return (ratio_interval(num, den, [cluster_of[t] for t in tasks], m.analysis.confidence, seed=m.experiment.seed),
            num, den)
