"""Estimators, intervals and comparisons (DESIGN.md "Statistics").

Per task, from n trials with c accepted: ``pass@k = 1 − C(n−c,k)/C(n,k)`` (the
chance that at least one of k trials drawn without replacement is accepted)
and ``pass^k = C(c,k)/C(n,k)`` (the chance that all k are), then the mean over
tasks; never pooled across tasks first. Intervals are cluster-robust: tasks
that share a repository (the declared cluster) are not independent, and real
task sets have few repositories, where the percentile cluster bootstrap is too
narrow (83–92% at 10–20 clusters in its simulation). So every interval is a CR2
(small-sample-corrected) cluster-robust standard error with a t reference on
clusters − 1 degrees of freedom: rates on the logit scale, paired differences
as they are, cost per accepted run (the cost of *all* trials over the accepted
ones) as a linearized ratio on the log scale. ``COVERAGE`` holds what they
reach under ``orchestrator.simulate``'s model; the tests measure it again.
Below ``MIN_CLUSTERS`` nothing is claimed. Comparisons are paired per task.
Every function is pure and seeded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .distributions import t_quantile


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


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def bm_df(clusters: Sequence[str]) -> float:
    """The Bell-McCaffrey degrees of freedom of the CR2 variance of a mean over these clusters: the Satterthwaite
    approximation of that variance's distribution under independent, equal-variance tasks. G - 1 when clusters
    are equal in size; far fewer when one is large (one repository of 45 tasks beside eleven of 5: about 4), where
    a t on G - 1 is too narrow. With ``n_g`` tasks in cluster g of N, the CR2 weights are ``a_g = c_g / N`` on its
    tasks (``c_g = (1 - n_g/N)^-1/2``), and the variance is a quadratic form in the residuals whose matrix, over the
    clusters, is ``B = diag(n_g c_g^2 / N^2) - s s' / N`` with ``s_g = n_g c_g / N``: the degrees of freedom are
    ``tr(B)^2 / ||B||_F^2``."""
    groups = _groups(clusters)
    n = np.array([len(g) for g in groups], dtype=float)
    if n.size < 2:
        return 0.0
    big_n = float(n.sum())
    c2 = 1.0 / (1.0 - n / big_n)
    d = n * c2 / big_n ** 2
    ss = n * n * c2 / big_n ** 2  # s_g^2
    trace = float(d.sum() - ss.sum() / big_n)
    frobenius = float((d * d).sum() - 2.0 * (d * ss).sum() / big_n + (ss.sum() / big_n) ** 2)
    return trace * trace / frobenius if frobenius > 0 else float(n.size - 1)


def cluster_mean_se(values: Sequence[float], clusters: Sequence[str]) -> tuple[float, float, int]:
    """The mean of per-task values, its cluster-robust standard error and the number of clusters.

    The variance is CR2 (Bell and McCaffrey) for a mean, each cluster's squared residual sum scaled by
    ``1 / (1 - n_g / N)`` (its leverage), times ``G / (G - 1)``: with a t reference on G - 1 degrees of freedom
    this is what held 95% coverage from 10 clusters up in ``orchestrator.simulate`` (CR2 alone fell to 93% with
    skewed rates at 10 clusters; CR1 alone, which ignores unequal cluster sizes, lower still)."""
    v = np.asarray(values, dtype=float)
    g = len(set(clusters))
    var = _cluster_covariance(v, v, clusters) if g > 1 else 0.0
    return float(v.mean()), math.sqrt(max(var, 0.0)), g


METHOD_MEAN = ("cluster-robust (CR2) t interval, Bell-McCaffrey degrees of freedom, on the logit scale, of the sample "
               "with one success and one failure added as one more cluster; where successes (failures) come from fewer "
               "than half the clusters, the near bound no closer than the exact Poisson bound on those clusters")
PSEUDO_CLUSTER = "\x00trialbox-pseudo-cluster"
"""The cluster of the pseudo success and failure a rate's interval adds (a name no task's cluster has)."""
METHOD_DIFFERENCE = ("cluster-robust (CR2) t interval, Bell-McCaffrey degrees of freedom (a spread of 0 taken as that of "
                     "the sample with +1 and -1 added as one more cluster)")
METHOD_RATIO = "cluster-robust (CR2) linearized ratio, t interval with Bell-McCaffrey degrees of freedom, on the log scale"


def mean_interval(values: Sequence[float], clusters: Sequence[str], confidence: float = 0.95,
                  resamples: int = 2000, seed: int = 0, bounded: bool = True) -> Estimate:
    """The mean of per-task values with a cluster-robust small-sample interval.

    ``bounded`` values (rates in [0, 1]) get their interval on the logit scale, computed on the sample with one
    success and one failure added as one more cluster: it stays inside [0, 1], follows the skew of a rate near
    0 or 1, and keeps its width where only a few clusters ever pass; otherwise the interval is symmetric. The reference is Student's t with (clusters - 1) degrees of freedom. Coverage of the
    nominal 95% under the model of ``orchestrator.simulate`` is in ``COVERAGE`` (checked by the tests).
    ``resamples`` and ``seed`` are accepted for the callers that passed them; the interval needs neither."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Estimate(None, None, "no task")
    if len(set(clusters)) < 2:  # no between-cluster variation can be seen: no interval, and no decision on it
        return Estimate(float(v.mean()), None, "fewer than 2 clusters: no interval")
    mean, se, g = cluster_mean_se(v, clusters)
    t = t_quantile((1 + confidence) / 2, bm_df(clusters))
    if bounded and v.min() >= 0.0 and v.max() <= 1.0:
        t = t_quantile((1 + confidence) / 2, bm_df(list(clusters) + [PSEUDO_CLUSTER, PSEUDO_CLUSTER]))
        # The interval of the sample with one success and one failure added, as one more cluster (the
        # Agresti-Coull idea at the cluster level): its centre is never on a bound, and its spread never
        # vanishes when only a few clusters ever pass (there the data's own spread is too unstable to trust:
        # pass^k near 0 covered 90% without it). The t reference keeps the real G - 1.
        augmented = list(clusters) + [PSEUDO_CLUSTER, PSEUDO_CLUSTER]
        shrunk, se, _ = cluster_mean_se(np.concatenate([v, [1.0, 0.0]]), augmented)
        scale = shrunk * (1.0 - shrunk)
        se_logit = se / scale if se > 0 else 1.0 / math.sqrt(g * scale)  # no spread at all: a binomial guess on G
        centre = math.log(shrunk / (1.0 - shrunk))
        lo, hi = _expit(centre - t * se_logit), _expit(centre + t * se_logit)
        lo, hi = _sparse_bounds(v, clusters, mean, min(lo, mean), max(hi, mean), confidence)
        return Estimate(mean, (lo, hi))
    if se == 0 and v.size:  # every task agrees: no spread is seen, which is not no uncertainty
        span = max(1.0, float(np.abs(v).max()))
        # +span and -span as two clusters of their own: in one cluster they cancel, and a difference of 0 on every
        # task was [0, 0] (seen on the offline demo's two tasks)
        _, se, _ = cluster_mean_se(np.concatenate([v, [span, -span]]),
                                   list(clusters) + [PSEUDO_CLUSTER, PSEUDO_CLUSTER + "-2"])
    return Estimate(mean, (mean - t * se, mean + t * se))


def poisson_lower(events: int, alpha: float) -> float:
    """The exact lower confidence bound (one-sided ``alpha / 2``) of a Poisson mean with ``events`` observed."""
    if events <= 0:
        return 0.0
    lo, hi = 0.0, events + 10.0 * math.sqrt(events) + 10.0
    for _ in range(100):
        lam = (lo + hi) / 2.0
        below = math.exp(-lam) * sum(lam ** j / math.factorial(j) for j in range(events))  # P(X < events)
        if 1.0 - below < alpha / 2.0:
            lo = lam
        else:
            hi = lam
    return (lo + hi) / 2.0


def _sparse_bounds(v: np.ndarray, clusters: Sequence[str], mean: float, lo: float, hi: float,
                   confidence: float) -> tuple[float, float]:
    """A rate's bounds where successes (or failures) come from few clusters: then the whole estimate rests on those
    few, whatever the number of tasks, and the logit interval's near bound is too close (pass^k near 0 covered
    88-90% with it). With ``m`` clusters holding any success, fewer than half of them (and fewer than 5 when there
    are under 10), the lower bound is at most ``mean * L(m) / m``, ``L`` the exact Poisson lower bound of ``m``
    events; the upper bound likewise from the clusters holding any failure."""
    alpha = 1.0 - confidence
    groups = _groups(clusters)
    few = max(5, len(groups) // 2)
    with_success = sum(1 for g in groups if v[g].max() > 0)
    with_failure = sum(1 for g in groups if v[g].min() < 1)
    if 0 < with_success < few:
        lo = min(lo, mean * poisson_lower(with_success, alpha) / with_success)
    if 0 < with_failure < few:
        hi = max(hi, 1.0 - (1.0 - mean) * poisson_lower(with_failure, alpha) / with_failure)
    return lo, hi


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
    """sum(numerators) / sum(denominators) (cost of all trials over accepted ones) with a cluster-robust
    interval: the ratio linearized per cluster (residual ``N_g - R D_g``), scaled as in ``cluster_mean_se``,
    t with G-1 degrees of freedom, on the log scale (a cost ratio is positive and right-skewed). A cluster bootstrap still counts the
    resamples that would have had no accepted trial (how fragile the denominator is), reported beside it."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if den.sum() == 0:
        return RatioEstimate(None, None, resamples, "no accepted trial: cost per accepted run is undefined")
    value = float(num.sum() / den.sum())
    g = len(set(clusters))
    if g < 2:
        return RatioEstimate(value, None, 0, "fewer than 2 clusters: no interval")
    ns, ds = _cluster_sums(num, clusters), _cluster_sums(den, clusters)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ns), size=(resamples, len(ns)))
    empty = int((ds[picks].sum(axis=1) == 0).sum())
    if value <= 0:
        return RatioEstimate(value, (0.0, 0.0), empty, "no cost recorded: the ratio is 0 with no spread")
    resid = ns - value * ds
    sizes = _cluster_sums(np.ones_like(num), clusters)
    var = g / (g - 1) * float(np.sum(resid ** 2 / (1.0 - sizes / num.size))) / float(ds.sum()) ** 2
    se_log = math.sqrt(var) / value
    t = t_quantile((1 + confidence) / 2, bm_df(clusters))
    return RatioEstimate(value, (value * math.exp(-t * se_log), value * math.exp(t * se_log)), empty)


METHOD_RATIO_DIFFERENCE = ("cluster-robust (CR2) linearized difference of two ratios over the same tasks, t interval "
                           "with Bell-McCaffrey degrees of freedom")


def ratio_difference_interval(candidate_num: Sequence[float], candidate_den: Sequence[float],
                              baseline_num: Sequence[float], baseline_den: Sequence[float], clusters: Sequence[str],
                              confidence: float = 0.95) -> RatioEstimate:
    """sum(candidate_num)/sum(candidate_den) - sum(baseline_num)/sum(baseline_den) over the same tasks (one entry
    per task in each list, ``clusters`` the tasks' clusters): the cost per accepted run of a candidate minus the
    baseline's, on the tasks both ran. Each ratio is linearized per cluster as in ``ratio_interval`` (residual
    ``N_g - R D_g`` over ``sum D``); the difference's residual is the candidate's minus the baseline's, so a cluster
    that is costly for both counts once, as the pairing warrants; its CR2-scaled variance with t on Bell-McCaffrey
    degrees of freedom, on the natural scale (a difference can have either sign). None where either side has no
    accepted trial."""
    xs = [np.asarray(v, float) for v in (candidate_num, candidate_den, baseline_num, baseline_den)]
    if xs[1].sum() == 0 or xs[3].sum() == 0:
        return RatioEstimate(None, None, 0, "no accepted trial on one side: a cost per accepted run is undefined")
    rc, rb = float(xs[0].sum() / xs[1].sum()), float(xs[2].sum() / xs[3].sum())
    value = rc - rb
    g = len(set(clusters))
    if g < 2:
        return RatioEstimate(value, None, 0, "fewer than 2 clusters: no interval")
    nc, dc, nb, db = (_cluster_sums(v, clusters) for v in xs)
    resid = (nc - rc * dc) / float(xs[1].sum()) - (nb - rb * db) / float(xs[3].sum())
    sizes = _cluster_sums(np.ones_like(xs[0]), clusters)
    var = g / (g - 1) * float(np.sum(resid ** 2 / (1.0 - sizes / xs[0].size)))
    half = t_quantile((1 + confidence) / 2, bm_df(clusters)) * math.sqrt(max(var, 0.0))
    return RatioEstimate(value, (value - half, value + half), 0)


def paired_difference(candidate: Sequence[float], baseline: Sequence[float], clusters: Sequence[str],
                      confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Estimate:
    """Mean per-task difference (candidate − baseline) with a paired cluster bootstrap."""
    c, b = np.asarray(candidate, float), np.asarray(baseline, float)
    est = mean_interval(c - b, clusters, confidence, resamples, seed, bounded=False)
    if est.interval is not None and c.size and min(c.min(), b.min()) >= 0.0 and max(c.max(), b.max()) <= 1.0:
        # a difference of two rates lies in [-1, 1]: an interval past it (few clusters, t on few degrees of
        # freedom: [-9.5, 8.5] on the demo's two tasks) says nothing more there, and covers no less for the cut
        est = Estimate(est.value, (max(-1.0, est.interval[0]), min(1.0, est.interval[1])), est.reason)
    return est


def _cluster_covariance(x: np.ndarray, y: np.ndarray, clusters: Sequence[str]) -> float:
    """The CR2-scaled cluster-robust covariance of the means of ``x`` and ``y``: each cluster's residual sums
    scaled by ``1 / (1 - n_g / N)``, times ``G / (G - 1)`` (``cluster_mean_se`` is its square root for x = y)."""
    groups = _groups(clusters)
    n = np.array([len(g) for g in groups], dtype=float)
    big_n, g = x.size, len(groups)
    rx = np.array([x[i].sum() for i in groups]) - n * float(x.mean())
    ry = np.array([y[i].sum() for i in groups]) - n * float(y.mean())
    return g / (g - 1) * float(np.sum(rx * ry / (1.0 - n / big_n))) / big_n ** 2


METHOD_SHARE = "Fieller interval on cluster-robust (CR2) variances, t with Bell-McCaffrey degrees of freedom"


def fieller_set(numerators: Sequence[float], denominators: Sequence[float], clusters: Sequence[str],
                confidence: float = 0.95) -> tuple[float, float, float] | None:
    """The coefficients (a, b, c) of the Fieller confidence set {θ : a θ² − 2 b θ + c ≤ 0} of mean(num)/mean(den);
    None with fewer than 2 clusters."""
    x, y = np.asarray(numerators, float), np.asarray(denominators, float)
    g = len(set(clusters))
    if x.size == 0 or g < 2:
        return None
    t2 = t_quantile((1 + confidence) / 2, bm_df(clusters)) ** 2
    mx, my = float(x.mean()), float(y.mean())
    vxx, vyy, vxy = (_cluster_covariance(p, q, clusters) for p, q in ((x, x), (y, y), (x, y)))
    return my * my - t2 * vyy, mx * my - t2 * vxy, mx * mx - t2 * vxx


def in_fieller_set(theta: float, coefficients: tuple[float, float, float]) -> bool:
    a, b, c = coefficients
    return a * theta * theta - 2 * b * theta + c <= 0


def share_interval(numerators: Sequence[float], denominators: Sequence[float], clusters: Sequence[str],
                   confidence: float = 0.95) -> Estimate:
    """mean(numerators) / mean(denominators) of paired per-task values (the ablation's improvement over the
    full design's) with Fieller's interval: the ratios θ whose paired residual ``num − θ·den`` has a mean within
    its cluster-robust t interval of 0. Unlike the delta method it stays honest when the denominator is small:
    when the full design's improvement cannot be told from 0 the set is unbounded, and no interval is given."""
    coefficients = fieller_set(numerators, denominators, clusters, confidence)
    y = np.asarray(denominators, float)
    if y.size == 0:
        return Estimate(None, None, "no task")
    value = float(np.mean(numerators)) / float(y.mean()) if float(y.mean()) != 0 else None
    if coefficients is None:
        return Estimate(value, None, "fewer than 2 clusters: no interval")
    a, b, c = coefficients
    if a <= 0:
        return Estimate(value, None, "the full design's improvement over the baseline cannot be told from 0 at this "
                                     "confidence: the share that persists is unbounded")
    root = math.sqrt(max(b * b - a * c, 0.0))
    return Estimate(value, ((b - root) / a, (b + root) / a))


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


MIN_CLUSTERS = 10
"""Below this many clusters no interval here was shown to hold its coverage: the report says so and decides nothing."""

COVERAGE: dict[str, dict[int, dict[str, float]]] = {
    # Measured coverage of the nominal 95% intervals under ``orchestrator.simulate.Model`` (2,000 simulated
    # experiments per cell, seed = clusters * 100 + mu * 10), at success rates near 0 (mu -2.5: pass@1 13%),
    # middling (mu 0: 50%) and near 1 (mu 2.5: 87%); the lowest of the three is what the report quotes.
    # tests/unit/test_coverage.py measures it again and checks this table.
    "pass@1": {10: {"low": 0.965, "middle": 0.948, "high": 0.973}, 20: {"low": 0.956, "middle": 0.952, "high": 0.957},
               50: {"low": 0.951, "middle": 0.955, "high": 0.945}},
    "difference": {10: {"low": 0.949, "middle": 0.955, "high": 0.947}, 20: {"low": 0.947, "middle": 0.951, "high": 0.945},
                   50: {"low": 0.946, "middle": 0.948, "high": 0.948}},
    "cost_per_accepted": {10: {"low": 0.948, "middle": 0.941, "high": 0.932},
                          20: {"low": 0.948, "middle": 0.942, "high": 0.940},
                          50: {"low": 0.950, "middle": 0.943, "high": 0.932}},
    "share": {10: {"low": 0.965, "middle": 0.954, "high": 0.958}, 20: {"low": 0.951, "middle": 0.951, "high": 0.954},
              50: {"low": 0.960, "middle": 0.943, "high": 0.951}},
    "pass^k": {10: {"low": 0.959, "middle": 0.950, "high": 0.966}, 20: {"low": 0.960, "middle": 0.944, "high": 0.955},
               50: {"low": 0.940, "middle": 0.957, "high": 0.943}},
}
"""pass^k is pass^2 of 5 trials. Its cell near 0 (a 4% true value, few tasks ever pass twice) covered 90.1% at 10
clusters before rates added a pseudo success and failure as one more cluster (``mean_interval``)."""


def interval_note(clusters: int, labels: Sequence[str] | None = None) -> dict:
    """What the report says about its intervals: the method, the number of clusters and (given each task's cluster
    ``labels``) how many they count for (``effective_clusters``: the Bell-McCaffrey degrees of freedom plus one),
    and the coverage measured at the largest tabulated cluster count not above it (None below ``MIN_CLUSTERS``:
    nothing was shown to hold)."""
    rows = [g for g in sorted(next(iter(COVERAGE.values()))) if g <= clusters]
    at = rows[-1] if rows else None
    df = bm_df(list(labels)) if labels is not None and len(set(labels)) > 1 else None
    return {"methods": {"rates": METHOD_MEAN, "paired_differences": METHOD_DIFFERENCE, "cost_per_accepted": METHOD_RATIO,
                        "ablation_share": METHOD_SHARE},
            "clusters": clusters, "coverage_table_clusters": at,
            "degrees_of_freedom": None if df is None else round(df, 2),
            "effective_clusters": None if df is None else round(df + 1, 1),
            "measured_coverage": ({name: min(cells[at].values()) for name, cells in COVERAGE.items()}
                                  if at is not None else None),
            "model": "orchestrator/simulate.py (repository and task effects on the logit, unequal cluster sizes)"}


def few_clusters_warning(clusters: Sequence[str]) -> str | None:
    n = len(set(clusters))
    if n < MIN_CLUSTERS:
        return (f"only {n} cluster(s): no interval method here was shown to hold 95% coverage below {MIN_CLUSTERS} "
                "clusters; the intervals are indicative only and no adoption decision is made on them")
    return None
