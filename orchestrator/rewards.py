"""Every metric a script grader's reward holds, as a figure of its own beside acceptance.

A Harbor task's test script may write several named numbers (``reward.json``: ``correctness``, ``performance``,
``style``…); acceptance reads only the ones its grader declares (``tasks.Acceptance``). The others are still
measurements a user may want to compare, so the report gives each metric, per candidate, as the mean over tasks of
its per-task mean, with the same cluster-robust interval as acceptance (``stats.mean_interval``; on the logit
scale when every value lies in [0, 1]).

What a metric's mean is taken over, stated in the figure: the trials in the acceptance denominator (the
manifest's exclusions apply) that **wrote** the metric. A trial whose script wrote no reward, or a reward without
that metric (it timed out, it crashed), has no value: it is counted in ``trials_without_it`` rather than taken as
0, because trialbox cannot know what 0 would mean for an arbitrary metric; only the tasks where some trial wrote the
metric are its tasks (a task whose script never writes it is not counted against it). Read a metric beside that
count: many trials without it make its mean a mean over the trials that got far enough to be measured.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .result import TrialResult
from .stats import mean_interval


def trial_rewards(r: TrialResult) -> dict[str, float]:
    """The metrics of a trial's reward (its ``reward`` criterion's evidence), empty when it has none."""
    for c in r.verdict.criteria:
        if c.name == "reward" and isinstance(c.evidence, dict) and isinstance(c.evidence.get("metrics"), dict):
            return {str(k): float(v) for k, v in c.evidence["metrics"].items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    return {}


def reward_metrics(rows: list[TrialResult], exclusions: set[str], cluster_of: dict[str, str],
                   confidence: float) -> dict[str, dict[str, Any]]:
    """Per metric any of ``rows`` wrote: its mean over tasks with an interval, the tasks and trials it is taken
    over, and the trials of those tasks that did not write it (see the module docstring). Empty when no trial
    has a reward (a pytest-graded task set)."""
    kept = [r for r in rows if r.outcome.value not in exclusions]
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in kept:
        for name, v in trial_rewards(r).items():
            values[name][r.task].append(v)
    trials_of: dict[str, int] = defaultdict(int)
    for r in kept:
        trials_of[r.task] += 1
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(values):
        per_task = {t: sum(vs) / len(vs) for t, vs in sorted(values[name].items())}
        tasks = list(per_task)
        bounded = all(0.0 <= v <= 1.0 for vs in values[name].values() for v in vs)
        est = mean_interval([per_task[t] for t in tasks], [cluster_of.get(t, t) for t in tasks], confidence,
                            bounded=bounded)
        written = sum(len(vs) for vs in values[name].values())
        out[name] = {**est.to_dict(), "tasks": len(tasks), "trials": written,
                     "trials_without_it": sum(trials_of[t] for t in tasks) - written, "bounded_0_1": bounded}
    return out
