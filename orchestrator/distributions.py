"""The distributions the intervals need, without scipy: Student's t (its CDF and quantile through the regularized
incomplete beta function), the beta quantile, the exact (Clopper–Pearson) binomial interval, and how many labelled
cases a calibration needs for an interval of a given width.
"""

from __future__ import annotations

import functools
import math


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m)),
                   -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (bisection on ``t_cdf``; exact to about 1e-12)."""
    lo, hi = -1e4, 1e4
    for _ in range(120):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def beta_quantile(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b) (bisection on the regularized incomplete beta function)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def exact_binomial_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Clopper-Pearson: never below its nominal coverage, whatever n and the rate (None when n is 0)."""
    if n == 0:
        return None
    alpha = 1.0 - confidence
    lo = 0.0 if successes == 0 else beta_quantile(alpha / 2, successes, n - successes + 1)
    hi = 1.0 if successes == n else beta_quantile(1 - alpha / 2, successes + 1, n - successes)
    return lo, hi


MAX_CALIBRATION_WIDTH = 0.2
"""A judge's error rate counts as calibrated only when its 95% interval is at most this wide (±10 points)."""


def cases_for_width(rate: float, width: float = MAX_CALIBRATION_WIDTH, confidence: float = 0.95,
                    limit: int = 2000) -> int | None:
    """The fewest labelled cases whose exact interval, at this observed rate, is at most ``width`` wide."""
    for n in range(1, limit + 1):
        c = round(rate * n)
        iv = exact_binomial_interval(c, n, confidence)
        if iv is not None and iv[1] - iv[0] <= width:
            return n
    return None
