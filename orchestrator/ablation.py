"""An ablation: how much of a full design's improvement over the baseline persists without one of its components.

On the tasks where the baseline, the full design and the ablation all have the trials the primary metric needs:
the full design's improvement (F − B), the ablation's (A − B), what the component adds (F − A), each paired per
task with its cluster-robust interval, and the share (A − B) / (F − B) with Fieller's interval (none when the full
design did not improve on the baseline: there is no improvement to share).
"""

from __future__ import annotations

from typing import Any

from .pertask import per_task_values
from .manifest import Manifest
from .stats import paired_difference, share_interval
from .result import TrialResult


def ablation(c, baseline: str, by_cand: dict[str, list[TrialResult]], m: Manifest, cluster_of: dict[str, str]) -> dict[str, Any]:
    """How much of the full design's improvement over the baseline persists without one component, on the tasks
    all three have the trials the primary metric needs: the full design's improvement (F − B), the ablation's
    (A − B), what the component adds (F − A), all paired per task, and the share (A − B) / (F − B) with
    Fieller's interval."""
    values = {n: per_task_values(by_cand[n], m) for n in (baseline, c.ablation_of, c.name)}
    b, f, a = values[baseline], values[c.ablation_of], values[c.name]
    tasks = sorted(set(b) & set(f) & set(a))
    clusters = [cluster_of[t] for t in tasks]
    conf, seed = m.analysis.confidence, m.experiment.seed
    out: dict[str, Any] = {"candidate": c.name, "full": c.ablation_of, "without": c.without, "baseline": baseline,
                           "metric": f"{m.analysis.primary_metric}@{m.analysis.k[0]}", "paired_tasks": len(tasks),
                           "tasks_left_out": sorted(set(cluster_of) - set(tasks))}
    if not tasks:
        none = {"value": None, "interval": None, "reason": "no task on which all three have the trials the metric needs"}
        return out | {"full_improvement": none, "ablated_improvement": none, "component_adds": none, "share_persisting": none}
    fb, ab = [f[t] - b[t] for t in tasks], [a[t] - b[t] for t in tasks]
    out["full_improvement"] = paired_difference([f[t] for t in tasks], [b[t] for t in tasks], clusters, conf, seed=seed).to_dict()
    out["ablated_improvement"] = paired_difference([a[t] for t in tasks], [b[t] for t in tasks], clusters, conf, seed=seed).to_dict()
    out["component_adds"] = paired_difference([f[t] for t in tasks], [a[t] for t in tasks], clusters, conf, seed=seed).to_dict()
    share = share_interval(ab, fb, clusters, conf)
    out["share_persisting"] = share.to_dict() if share.value is not None and sum(fb) > 0 else {
        "value": None, "interval": None,
        "reason": "the full design did not improve on the baseline on these tasks: there is no improvement to share"}
    return out
