"""The generating model behind the report's coverage table, and the coverage it measures.

Tasks come grouped in repositories (clusters), as real task sets do. For one
simulated experiment with ``G`` clusters:

* cluster sizes are drawn uniformly from ``sizes`` (unequal clusters);
* each cluster has an effect ``u_g ~ N(0, cluster_sd²)`` and each task an
  effect ``e_i ~ N(0, task_sd²)`` on the logit of its success probability:
  ``p_i = expit(mu + u_g + e_i)`` (``cluster_sd = 1`` is a strong repository
  effect: as large as the task effect);
* each task has ``trials`` Bernoulli(p_i) trials;
* a second candidate, for paired differences, shifts every logit by
  ``effect`` (the same tasks, the same repositories: paired); for ablations,
  it is the full design and a third candidate, the full design without one
  component, shifts every logit by ``ablated_effect``: the share of the full
  design's improvement that persists is the ratio of the two expected
  improvements;
* a trial's cost is ``exp(N(cost_mu + v_g, 0.5²))`` with a cluster effect
  ``v_g ~ N(0, 0.5²)`` on the log cost (some repositories are dearer).

The truth is the superpopulation value (a new experiment draws new clusters
and tasks): the expected per-task pass@1 / pass^k, the expected paired
difference, the expected cost over the expected number of accepted trials;
each computed by numerical integration over the effects' normal distribution.
``coverage`` repeats the experiment and counts how often the nominal 95%
interval of ``orchestrator.stats`` holds the truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .stats import fieller_set, in_fieller_set, mean_interval, pass_hat_k, ratio_interval


@dataclass(frozen=True)
class Model:
    clusters: int
    mu: float = 0.0
    cluster_sd: float = 1.0
    task_sd: float = 1.0
    trials: int = 5
    sizes: tuple[int, int] = (2, 12)
    effect: float = 0.5
    cost_mu: float = -3.0
    ablated_effect: float = 0.25


def _expected(fn, sd: float, points: int = 4001) -> float:
    """E[fn(Z * sd)] for Z standard normal, by the trapezoid rule on a fine grid (±8 sd)."""
    z = np.linspace(-8.0, 8.0, points)
    w = np.exp(-z * z / 2.0)
    return float(np.sum(fn(z * sd) * w) / np.sum(w))


def _expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def truth(model: Model, estimator: str, k: int = 1) -> float:
    sd = math.hypot(model.cluster_sd, model.task_sd)
    if estimator == "pass@1":
        return _expected(lambda x: _expit(model.mu + x), sd)
    if estimator == "pass^k":
        return _expected(lambda x: _expit(model.mu + x) ** k, sd)
    if estimator == "difference":
        return _expected(lambda x: _expit(model.mu + model.effect + x) - _expit(model.mu + x), sd)
    if estimator == "share":
        base = lambda x: _expit(model.mu + x)  # noqa: E731
        return (_expected(lambda x: _expit(model.mu + model.ablated_effect + x) - base(x), sd)
                / _expected(lambda x: _expit(model.mu + model.effect + x) - base(x), sd))
    if estimator == "cost_per_accepted":
        mean_cost = math.exp(model.cost_mu + (0.5 ** 2 + 0.5 ** 2) / 2)
        return mean_cost / _expected(lambda x: _expit(model.mu + x), sd)
    raise ValueError(estimator)


def experiment(model: Model, rng: np.random.Generator, k: int = 1, ablation: bool = False
               ) -> dict[str, tuple[list[float], ...]]:
    """One simulated experiment: per-task values and clusters for each estimator (``share`` only with
    ``ablation``: its third candidate's draws come last, so the other estimators' streams do not change)."""
    sizes = rng.integers(model.sizes[0], model.sizes[1] + 1, size=model.clusters)
    cluster = np.repeat(np.arange(model.clusters), sizes)
    names = [str(c) for c in cluster]
    logit = model.mu + rng.normal(0, model.cluster_sd, model.clusters)[cluster] + rng.normal(0, model.task_sd, cluster.size)
    accepted = rng.binomial(model.trials, _expit(logit))
    accepted_b = rng.binomial(model.trials, _expit(logit + model.effect))
    cost = np.exp(model.cost_mu + rng.normal(0, 0.5, model.clusters)[cluster][:, None]
                  + rng.normal(0, 0.5, (cluster.size, model.trials))).sum(axis=1)
    out = {"pass@1": (list(accepted / model.trials), names),
           "pass^k": ([pass_hat_k(model.trials, int(c), k) for c in accepted], names),
           "difference": (list((accepted_b - accepted) / model.trials), names),
           "cost_per_accepted": (list(cost), list(accepted.astype(float)), names)}
    if ablation:
        accepted_c = rng.binomial(model.trials, _expit(logit + model.ablated_effect))
        out["share"] = (list((accepted_c - accepted) / model.trials), list((accepted_b - accepted) / model.trials), names)
    return out


def coverage(model: Model, estimator: str, reps: int, seed: int = 0, confidence: float = 0.95, k: int = 2) -> float:
    """The share of ``reps`` simulated experiments whose interval holds the truth."""
    rng = np.random.default_rng(seed)
    target = truth(model, estimator, k)
    held = 0
    for _ in range(reps):
        data = experiment(model, rng, k, ablation=estimator == "share")[estimator]
        if estimator == "share":  # the Fieller set, bounded or not, holds the truth or not
            coefficients = fieller_set(data[0], data[1], data[2], confidence)
            held += coefficients is not None and in_fieller_set(target, coefficients)
            continue
        if estimator == "cost_per_accepted":
            est = ratio_interval(data[0], data[1], data[2], confidence, resamples=1)
        else:
            est = mean_interval(data[0], data[1], confidence, bounded=estimator != "difference")
        held += est.interval is not None and est.interval[0] <= target <= est.interval[1]
    return held / reps
