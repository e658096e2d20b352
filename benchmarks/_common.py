"""Shared helpers: run two implementations alternately (A B A B …) and report ratios.

Each pair runs back to back, so slow drifts of the machine hit both sides
alike; the ratio is taken per pair, and its median gets a bootstrap interval.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def alternate(a: Callable[[int], None], b: Callable[[int], None], pairs: int, warmup: int = 2) -> tuple[list[float], list[float]]:
    """Time ``pairs`` runs of each, alternating which goes first; returns seconds per run."""
    for i in range(warmup):
        a(-1 - i)
        b(-1 - i)
    ta, tb = [], []
    for i in range(pairs):
        order = [(a, ta), (b, tb)] if i % 2 == 0 else [(b, tb), (a, ta)]
        for fn, out in order:
            t0 = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t0)
    return ta, tb


def median_interval(values: list[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median with a percentile-bootstrap interval."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    lo = meds[int((1 - confidence) / 2 * resamples)]
    hi = meds[int((1 + confidence) / 2 * resamples) - 1]
    return statistics.median(values), lo, hi


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def report(name: str, label_a: str, ta: list[float], label_b: str, tb: list[float], target: float) -> bool:
    """Print absolute medians and the per-pair ratio A/B with its interval; True when within target."""
    ratios = [x / y for x, y in zip(ta, tb)]
    med, lo, hi = median_interval(ratios)
    ok = med <= target
    print(f"{name}: {len(ratios)} pairs")
    print(f"  {label_a:28s} median {statistics.median(ta) * 1000:8.1f} ms   p95 {quantile(ta, 0.95) * 1000:8.1f} ms")
    print(f"  {label_b:28s} median {statistics.median(tb) * 1000:8.1f} ms   p95 {quantile(tb, 0.95) * 1000:8.1f} ms")
    print(f"  ratio per pair: median {med:.3f}x  (95% interval {lo:.3f}-{hi:.3f})  target <= {target:.2f}x  "
          f"{'MET' if ok else 'NOT MET'}")
    return ok
