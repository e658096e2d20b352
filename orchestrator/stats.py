"""Estimators, intervals and comparisons (DESIGN.md "Statistics").

Per task, from n trials with c accepted: ``pass@k = 1 − C(n−c,k)/C(n,k)`` (the
chance that at least one of k trials drawn without replacement is accepted)
and ``pass^k = C(c,k)/C(n,k)`` (the chance that all k are), then the mean over
tasks; never pooled across tasks first. Intervals are percentile bootstraps
over tasks, or over whole clusters (e.g. the repository) when declared:
resampling clusters keeps tasks that share a repository together, since they
are not independent. Cost per accepted run is the cost of *all* trials over
the accepted ones; its interval is the ratio of resampled sums, and resamples
with no accepted trial are counted, not silently dropped. Comparisons are
paired per task. Every function is pure and seeded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEW_CLUSTERS = 20


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """1 − C(n−c, k) / C(n, k); None when fewer than k trials."""
    if k > n or k < 1:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """C(c, k) / C(n, k) (0 when c < k); None when fewer than k trials."""
    if k > n or k < 1:
        return None
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Estimate:
    value: float | None
    interval: tuple[float, float] | None
    reason: str | None = None

    def to_dict(self) -> dict:
        out: dict = {"value": self.value, "interval": list(self.interval) if self.interval else None}
        if self.reason:
            out["reason"] = self.reason
        return out


def _groups(clusters: Sequence[str]) -> list[np.ndarray]:
    order: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        order.setdefault(c, []).append(i)
    return [np.array(v) for v in order.values()]


def bootstrap_indices(clusters: Sequence[str], resamples: int, seed: int) -> list[np.ndarray]:
    """Task indices of each resample: whole clusters drawn with replacement."""
    groups = _groups(clusters)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(resamples, len(groups)))
    return [np.concatenate([groups[g] for g in row]) for row in picks]


def mean_interval(values: Sequence[float], clusters: Sequence[str], confidence: float = 0.95,
                  resamples: int = 2000, seed: int = 0) -> Estimate:
    """The mean of per-task values with a cluster-bootstrap percentile interval."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Estimate(None, None, "no task")
    if len(set(clusters)) < 2:  # every resample would be the same: no interval, and no decision on it
        return Estimate(float(v.mean()), None, "fewer than 2 clusters: no interval")
    sums = _cluster_sums(v, clusters)
    counts = _cluster_sums(np.ones_like(v), clusters)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sums), size=(resamples, len(sums)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    lo, hi = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Estimate(float(v.mean()), (float(lo), float(hi)))


def _cluster_sums(values: np.ndarray, clusters: Sequence[str]) -> np.ndarray:
    return np.array([values[idx].sum() for idx in _groups(clusters)])


@dataclass(frozen=True)
class RatioEstimate:
    value: float | None
    interval: tuple[float, float] | None
    resamples_without_denominator: int
    reason: str | None = None

    def to_dict(self) -> dict:
        out: dict = {"value": self.value, "interval": list(self.interval) if self.interval else None,
                     "resamples_without_accepted": self.resamples_without_denominator}
        if self.reason:
            out["reason"] = self.reason
        return out


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float], clusters: Sequence[str],
                   confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> RatioEstimate:
    """sum(numerators) / sum(denominators) with a cluster bootstrap of the ratio of resampled sums."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if den.sum() == 0:
        return RatioEstimate(None, None, resamples, "no accepted trial: cost per accepted run is undefined")
    if len(set(clusters)) < 2:
        return RatioEstimate(float(num.sum() / den.sum()), None, 0, "fewer than 2 clusters: no interval")
    ns, ds = _cluster_sums(num, clusters), _cluster_sums(den, clusters)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ns), size=(resamples, len(ns)))
    rn, rd = ns[picks].sum(axis=1), ds[picks].sum(axis=1)
    ok = rd > 0
    empty = int((~ok).sum())
    if not ok.any():
        return RatioEstimate(float(num.sum() / den.sum()), None, empty, "every resample lacked an accepted trial")
    ratios = rn[ok] / rd[ok]
    lo, hi = np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2])
    return RatioEstimate(float(num.sum() / den.sum()), (float(lo), float(hi)), empty)


def paired_difference(candidate: Sequence[float], baseline: Sequence[float], clusters: Sequence[str],
                      confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Estimate:
    """Mean per-task difference (candidate − baseline) with a paired cluster bootstrap."""
    diff = np.asarray(candidate, float) - np.asarray(baseline, float)
    return mean_interval(diff, clusters, confidence, resamples, seed)


def sample_size_hint(differences: Sequence[float], min_effect: float, confidence: float = 0.95,
                     power: float = 0.8) -> int | None:
    """Tasks needed to detect ``min_effect`` (declared, never observed) with a paired test."""
    d = np.asarray(differences, float)
    if d.size < 2 or not min_effect:
        return None
    sd = float(d.std(ddof=1)) or 1e-9
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + confidence) / 2) + NormalDist().inv_cdf(power)
    return math.ceil((z * sd / abs(min_effect)) ** 2)


def quantile(values: Sequence[float], q: float) -> float | None:
    return float(np.quantile(np.asarray(values, float), q)) if len(values) else None


def few_clusters_warning(clusters: Sequence[str]) -> str | None:
    n = len(set(clusters))
    if n < FEW_CLUSTERS:
        return f"only {n} cluster(s): bootstrap intervals are unreliable below about {FEW_CLUSTERS}"
    return None
