"""The coverage of a run's intervals, measured by simulation at the run's own shape (issue 26, item 3).

A coverage table measured on other cluster sizes says little about a run whose repositories are unequal: one
holding 45% of the tasks leaves about four effective clusters whatever their number. So the report simulates
experiments of exactly the run's shape (its cluster sizes, trials per task, and a success rate near its own, under
``orchestrator.simulate``'s model) and prints the coverage and median width each interval reached there, flagging
any estimand outside 93-97%: 400 simulated experiments per estimand, and 1,600 more for one that those left
within two standard errors of 93% or 97% (whether it is inside is then told apart from the measurement's own
noise). Results are cached under the state folder by shape, so a report costs the simulation once (seconds; up to
about a minute for a large shape near an edge).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .settings import load_settings
from .simulate import BAND, EDGE_SES, SHAPE_MORE_REPS, SHAPE_REPS, shape_coverage


def _key(sizes: tuple[int, ...], trials: int, rate: float, confidence: float) -> str:
    doc = json.dumps({"sizes": sorted(sizes), "trials": trials, "rate": round(rate, 2), "confidence": confidence,
                      "reps": SHAPE_REPS, "more": [SHAPE_MORE_REPS, EDGE_SES], "model": 2}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:24]


def measured_at_shape(sizes: tuple[int, ...], trials: int, rate: float, confidence: float) -> dict[str, Any] | None:
    """``simulate.shape_coverage`` for this shape (None with fewer than 2 clusters), read from the cache when it
    was measured before; a cache that cannot be written is no error (the figure is measured again next time)."""
    if len(sizes) < 2 or trials < 1:
        return None
    rate = round(min(max(rate, 0.02), 0.98), 2)  # shapes within a rounding share one measurement
    cache: Path = load_settings().state_dir / "coverage" / f"{_key(sizes, trials, rate, confidence)}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    measured = shape_coverage(tuple(sorted(sizes)), trials, rate, confidence=confidence)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(measured))
        tmp.replace(cache)
    except OSError:
        pass
    return measured


def outside_band(measured: dict[str, Any] | None) -> list[str]:
    """The estimands whose measured coverage falls outside ``BAND``, each with its figure."""
    return [f"{name} {m['coverage']:.1%}" for name, m in (measured or {}).items()
            if not BAND[0] <= m["coverage"] <= BAND[1]]
