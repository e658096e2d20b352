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
  ``v_g ~ N(0, 0.5²)`` on the log cost (some repositories are dearer); for the
  cost difference, the second candidate's trials cost ``exp(N(cost_mu +
  cost_effect + v_g, 0.5²))`` (the same repositories are dearer for both).

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

from .stats import fieller_set, in_fieller_set, mean_interval, pass_hat_k, ratio_difference_interval, ratio_interval


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
    shape: str = "uniform"
    """Cluster sizes: ``uniform`` (drawn from ``sizes``), ``dominant`` (one cluster holds 45% of the tasks, the rest
    drawn from ``sizes``), ``zipf`` (the g-th largest proportional to 1/g, 7 tasks per cluster on average), or
    ``fixed`` (exactly ``fixed_sizes``: a run's own)."""
    fixed_sizes: tuple[int, ...] = ()
    cost_effect: float = 0.25
    """The second candidate's log-cost shift, for the cost per accepted run's difference."""


def cluster_sizes(model: Model, rng: np.random.Generator) -> np.ndarray:
    """One experiment's cluster sizes under ``model.shape``."""
    if model.shape == "fixed":
        return np.asarray(model.fixed_sizes, dtype=int)
    if model.shape == "dominant":
        others = rng.integers(model.sizes[0], model.sizes[1] + 1, size=model.clusters - 1)
        return np.concatenate([[int(round(0.45 / 0.55 * others.sum()))], others])
    if model.shape == "zipf":
        raw = 1.0 / np.arange(1, model.clusters + 1)
        return np.maximum(1, np.round(raw / raw.sum() * 7 * model.clusters)).astype(int)
    return rng.integers(model.sizes[0], model.sizes[1] + 1, size=model.clusters)


def mu_for_rate(rate: float, model: Model) -> float:
    """The logit location whose expected per-task pass@1 is ``rate`` (clamped to 0.02-0.98)."""
    rate = min(max(rate, 0.02), 0.98)
    lo, hi = -12.0, 12.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if truth(Model(model.clusters, mid, model.cluster_sd, model.task_sd), "pass@1") < rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


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
    if estimator == "cost_difference":
        mean_cost = math.exp(model.cost_mu + (0.5 ** 2 + 0.5 ** 2) / 2)
        return (mean_cost * math.exp(model.cost_effect) / _expected(lambda x: _expit(model.mu + model.effect + x), sd)
                - mean_cost / _expected(lambda x: _expit(model.mu + x), sd))
    raise ValueError(estimator)


def experiment(model: Model, rng: np.random.Generator, k: int = 1, ablation: bool = False, costs: bool = False
               ) -> dict[str, tuple[list[float], ...]]:
    """One simulated experiment: per-task values and clusters for each estimator (``share`` only with
    ``ablation``, ``cost_difference`` only with ``costs``: their extra draws come last, so the other estimators'
    streams do not change)."""
    sizes = cluster_sizes(model, rng)
    cluster = np.repeat(np.arange(len(sizes)), sizes)
    names = [str(c) for c in cluster]
    logit = model.mu + rng.normal(0, model.cluster_sd, model.clusters)[cluster] + rng.normal(0, model.task_sd, cluster.size)
    accepted = rng.binomial(model.trials, _expit(logit))
    accepted_b = rng.binomial(model.trials, _expit(logit + model.effect))
    dearer = rng.normal(0, 0.5, model.clusters)[cluster][:, None]
    cost = np.exp(model.cost_mu + dearer + rng.normal(0, 0.5, (cluster.size, model.trials))).sum(axis=1)
    out = {"pass@1": (list(accepted / model.trials), names),
           "pass^k": ([pass_hat_k(model.trials, int(c), k) for c in accepted], names),
           "difference": (list((accepted_b - accepted) / model.trials), names),
           "cost_per_accepted": (list(cost), list(accepted.astype(float)), names)}
    if ablation:
        accepted_c = rng.binomial(model.trials, _expit(logit + model.ablated_effect))
        out["share"] = (list((accepted_c - accepted) / model.trials), list((accepted_b - accepted) / model.trials), names)
    if costs:
        cost_b = np.exp(model.cost_mu + model.cost_effect + dearer
                        + rng.normal(0, 0.5, (cluster.size, model.trials))).sum(axis=1)
        out["cost_difference"] = (list(cost_b), list(accepted_b.astype(float)), list(cost),
                                  list(accepted.astype(float)), names)
    return out


def coverage(model: Model, estimator: str, reps: int, seed: int = 0, confidence: float = 0.95, k: int = 2) -> float:
    """The share of ``reps`` simulated experiments whose interval holds the truth."""
    return coverage_and_width(model, estimator, reps, seed, confidence, k)[0]


def coverage_and_width(model: Model, estimator: str, reps: int, seed: int = 0, confidence: float = 0.95,
                       k: int = 2) -> tuple[float, float | None]:
    """The share of ``reps`` simulated experiments whose interval holds the truth, and the median width of the
    bounded intervals (None for the ablation share, whose Fieller set may be unbounded)."""
    rng = np.random.default_rng(seed)
    target = truth(model, estimator, k)
    held = 0
    widths: list[float] = []
    for _ in range(reps):
        data = experiment(model, rng, k, ablation=estimator == "share", costs=estimator == "cost_difference")[estimator]
        if estimator == "share":  # the Fieller set, bounded or not, holds the truth or not
            coefficients = fieller_set(data[0], data[1], data[2], confidence)
            held += coefficients is not None and in_fieller_set(target, coefficients)
            continue
        if estimator == "cost_per_accepted":
            est = ratio_interval(data[0], data[1], data[2], confidence, resamples=1)
        elif estimator == "cost_difference":
            est = ratio_difference_interval(*data, confidence=confidence)
        else:
            est = mean_interval(data[0], data[1], confidence, bounded=estimator != "difference")
        held += est.interval is not None and est.interval[0] <= target <= est.interval[1]
        if est.interval is not None:
            widths.append(est.interval[1] - est.interval[0])
    return held / reps, (float(np.median(widths)) if widths else None)


SHAPE_ESTIMANDS = ("pass@1", "pass^k", "difference", "cost_per_accepted", "cost_difference")
SHAPE_REPS = 400
"""Simulated experiments per estimand for a run's own shape (a coverage standard error of about 1.1 points)."""
SHAPE_MORE_REPS = 1600
"""More experiments for an estimand whose first ``SHAPE_REPS`` left it within ``EDGE_SES`` standard errors of an
edge of ``BAND`` (2,000 in all: a standard error of about 0.5 points), so that whether it is inside is told apart
from the noise of the measurement itself: at 400 alone, a cell covering 92% reads 93% or more one time in five."""
EDGE_SES = 2.0
BAND = (0.93, 0.97)
"""Coverage of a nominal 95% interval counted as honest: below is too narrow, above needlessly wide."""


def _near_edge(held: float, reps: int) -> bool:
    se = max(math.sqrt(held * (1 - held) / reps), 1.0 / reps)
    return any(abs(held - edge) < EDGE_SES * se for edge in BAND)


def shape_coverage(sizes: tuple[int, ...], trials: int, rate: float, reps: int = SHAPE_REPS, seed: int = 0,
                   confidence: float = 0.95, more_reps: int = SHAPE_MORE_REPS) -> dict[str, dict[str, float | None]]:
    """The coverage (and median width) of each estimand's interval for experiments of exactly this shape: these
    cluster sizes, ``trials`` per task, per-task success rates spread around ``rate`` as in ``Model`` (a
    repository effect as strong as the task effect); pass^k at k = 2 when there are at least 2 trials."""
    base = Model(len(sizes), shape="fixed", fixed_sizes=tuple(int(s) for s in sizes), trials=max(1, trials))
    model = Model(**{**base.__dict__, "mu": mu_for_rate(rate, base)})
    out: dict[str, dict[str, float | None]] = {}
    for i, estimator in enumerate(SHAPE_ESTIMANDS):
        if estimator == "pass^k" and trials < 2:
            continue
        held, width = coverage_and_width(model, estimator, reps, seed + i, confidence, k=2)
        done = reps
        if more_reps and _near_edge(held, reps):  # told apart from the measurement's own noise
            more, more_width = coverage_and_width(model, estimator, more_reps, seed + 1000 + i, confidence, k=2)
            held = (held * reps + more * more_reps) / (reps + more_reps)
            width = more_width if more_width is not None else width  # the median of the larger batch
            done += more_reps
        out[estimator] = {"coverage": round(held, 3), "median_width": None if width is None else round(width, 4),
                          "experiments": done}
    return out
