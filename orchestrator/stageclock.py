"""Where a trial's time goes: the duration of each stage, recorded with the trial.

``run_trial`` opens a clock for its attempt (``timing()``); the stages mark the end of each period as they pass
it (``lap("agent")``: the time since the previous mark was the agent's). Marks go to the clock of the current
context (a ``ContextVar``: each trial runs in its own thread, and everything of one trial, its grading included,
runs in that thread), so the modules that do the work need no clock passed through them, and a mark with no
clock open (a unit test, ``tasks check``'s untouched runs) does nothing. A stage passed more than once (a
grader's baseline run, a retried grading) adds up.

The stages, in order (``STAGES``): ``prepare`` (the repository materialised, the spec resolved, the canaries),
``sandbox`` (the agent's container created and started, its workspace disk seeded), ``setup`` (the install step,
the canaries planted), ``agent``, ``stop`` (the container stopped, cut-off file operations joined), ``export``
(the final workspace read out), ``cleanup`` (the agent's container and disk removed), ``grader_start`` (each
grader container created and started, the workspace and tests put in), ``grading`` (the tests or the script, the
results read), ``grader_cleanup`` (each grader container removed), and ``record`` (the verdict and the
artifacts written).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

from . import crashpoint

STAGES = ("prepare", "sandbox", "setup", "agent", "stop", "export", "cleanup", "grader_start", "grading",
          "grader_cleanup", "record")


class StageClock:
    """Seconds per stage of one attempt, by laps of the monotonic clock."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + (now - self._last)
        self._last = now

    def restart(self) -> None:
        """Start the next period now (what passed since the last lap belongs to no stage)."""
        self._last = time.monotonic()

    def rounded(self) -> dict[str, float]:
        return {s: round(self.seconds[s], 4) for s in STAGES if s in self.seconds} | \
            {s: round(v, 4) for s, v in self.seconds.items() if s not in STAGES}


_CURRENT: contextvars.ContextVar[StageClock | None] = contextvars.ContextVar("trialbox_stage_clock", default=None)


@contextlib.contextmanager
def timing() -> Iterator[StageClock]:
    """A clock for the stages run in this context until the block ends."""
    clock = StageClock()
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


def lap(stage: str) -> None:
    """The time since the previous mark was ``stage``'s (nothing when no clock is open)."""
    clock = _CURRENT.get()
    if clock is not None:
        clock.lap(stage)
        crashpoint.reached(stage)  # fault injection only (``TRIALBOX_CRASH_AT``): a no-op in normal use


def restart() -> None:
    clock = _CURRENT.get()
    if clock is not None:
        clock.restart()
