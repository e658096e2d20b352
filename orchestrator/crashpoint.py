"""Crash injection, for the fault tests of a run: ``TRIALBOX_CRASH_AT=<point>[:<n>]`` in the environment of
``trialbox run`` kills its process with SIGKILL (no clean-up, no ``finally``: as a power cut, the OOM killer or
``kill -9`` would) the ``n``-th time (default 1) the run passes ``point``.

The points are the ends of a trial's stages (``stageclock.STAGES``, marked where ``lap`` marks them, in the
trial's own thread) and two of the run loop's: ``recorded`` (a trial's result committed to the store) and
``owed`` (a retry marked as owed). Unset, which is every normal use, each point costs one lookup. The test that
uses it (tests/docker/test_host_faults.py) kills a driver twice in a row at points across the stages and checks
that the run, run again, records every trial exactly once with the verdicts of a run without the fault."""

from __future__ import annotations

import os
import signal
import threading

ENV = "TRIALBOX_CRASH_AT"

_lock = threading.Lock()
_passed: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(ENV, "").strip()
    if not spec:
        return None
    point, _, count = spec.partition(":")
    return point, int(count) if count.strip().isdigit() else 1


def reached(point: str) -> None:
    """The run passed ``point``: the process dies here when ``TRIALBOX_CRASH_AT`` names it (and this is the
    n-th pass)."""
    target = _target()
    if target is None or target[0] != point:
        return
    with _lock:
        _passed[point] = _passed.get(point, 0) + 1
        if _passed[point] >= target[1]:
            os.kill(os.getpid(), signal.SIGKILL)
