"""Engine outages: the Docker engine stopping to answer is the host's fault, waited out, never scored.

``EngineWatch`` probes the engine (a ping and a one-container listing, each bounded by a short timeout) in a
background thread while a run's trials run, and keeps the windows during which it did not answer. The run
loop (``job._run_queue``) asks it before it admits trials (``answers_now``): while the engine does not answer,
or once an attempt ended on the outage (whatever the last probe said), no trial starts. Once the trials in flight have ended, the loop waits (``wait_back``: backoff from 1 s to
15 s, one progress line each time, up to ``execution.engine_outage_wait_s``) until the engine answers again,
steadily (three probes in a row, a second apart), and then goes on; past the bound it raises ``EngineOutage``
(exit 75): ``trialbox run`` on the same folder finishes the run.

An attempt is **ended by the outage** (``outage_of``) when the engine was seen not answering while it ran,
or within a few seconds after its end, whatever its verdict (the engine's stop killed its sandbox or its grader,
and the probe sees it up to a second or two late: were only the failed attempts given those seconds, the ones
retried would be chosen by their outcome, which favours acceptance); or when it ended on an infrastructure
error, or on a sandbox that died under its agent, and its evidence is one of the engine's own outage errors (``outage_text``: connection refused,
the socket gone, "database not open" while it restarts...). Such an attempt is recorded nowhere: it is marked
as ``infra_error(engine_outage)`` with the outage in its evidence, and its trial runs again once the engine
answers, without spending the trial's retry (``MAX_OUTAGE_ATTEMPTS`` bounds how often).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineOutage

OUTAGE_KIND = "engine_outage"
"""The ``infra_error`` kind of an attempt an engine outage ended."""

MAX_OUTAGE_ATTEMPTS = 5
"""How many times one trial runs again after an attempt an engine outage ended (a sixth such attempt is recorded
as ``infra_error(engine_outage)``)."""

OUTAGE_EXIT_CODE = EngineOutage.exit_code
"""``trialbox run``'s exit code when an engine outage outlasted ``execution.engine_outage_wait_s`` (75, EX_TEMPFAIL:
try again later; ``trialbox run`` on the same folder goes on)."""

GRACE_S = 5.0
"""An outage seen within this many seconds after an attempt ended still counts as during it (the probe runs
every second; a trial's last engine calls can fail just before the probe sees the engine gone)."""

NOT_ENGINE = ("model_api", "install")
"""Infrastructure kinds whose connection errors are another service's, never the engine's: the model provider's,
and a package index's during the install step (pip's "Failed to establish a new connection ... Connection
refused" reads like the engine's socket refusing)."""

SIGNATURES = (
    "no docker engine answers",
    "cannot connect to the docker daemon",
    "is the docker daemon running",
    "connection refused",
    "connection aborted",
    "connection reset by peer",
    "remote end closed connection",
    "failed to establish a new connection",
    "database not open",
    "daemon is shutting down",
    "transport is closing",
    "client connection is closing",
    "docker.sock",
)
"""What the engine's clients say when the engine is gone or half there (stopping, restarting), lower case."""


def outage_text(text: str | None) -> bool:
    """Whether an error's text is one of the engine's outage errors (``SIGNATURES``)."""
    low = (text or "").lower()
    return any(s in low for s in SIGNATURES)


def outage_error(exc: BaseException) -> bool:
    """Whether an exception (or one it was raised from) says the engine does not answer."""
    import requests.exceptions

    from .errors import EngineUnavailable

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (EngineUnavailable, requests.exceptions.ConnectionError, ConnectionRefusedError)):
            return True
        if outage_text(f"{type(e).__name__}: {e}"):
            return True
        e = e.__cause__ or e.__context__
    return False


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")


def _wall(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


@dataclass
class Window:
    """A time (wall clock, seconds) during which the engine did not answer; ``end`` None while it lasts."""

    start: float
    end: float | None = None
    error: str = ""

    def overlaps(self, start: float, end: float, grace: float = 0.0) -> bool:
        return self.start <= end + grace and (self.end is None or self.end >= start)

    def describe(self) -> str:
        until = f" to {_iso(self.end)}" if self.end is not None else ", still out"
        return f"the Docker engine did not answer from {_iso(self.start)}{until} ({self.error})"


@dataclass
class EngineWatch:
    """The engine's answers over a run (see the module docstring). ``probe`` raises when the engine does not
    answer; ``clock`` is wall time (attempts record wall times), ``sleep`` waits."""

    probe: Callable[[], Any]
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    interval: float = 1.0
    windows: list[Window] = field(default_factory=list)
    probes: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- probing
    def answers_now(self) -> bool:
        """Probe now; record the start or the end of an outage."""
        try:
            self.probe()
            ok, error = True, ""
        except Exception as exc:  # noqa: BLE001 - any failure to answer is the engine not answering
            ok, error = False, f"{type(exc).__name__}: {exc}"[:300]
        now = self.clock()
        with self._lock:
            self.probes += 1
            current = self.windows[-1] if self.windows and self.windows[-1].end is None else None
            if ok and current is not None:
                current.end = now
            elif not ok and current is None:
                self.windows.append(Window(now, None, error))
        return ok

    @property
    def down(self) -> bool:
        """Whether the last probe found the engine not answering."""
        with self._lock:
            return bool(self.windows) and self.windows[-1].end is None

    def start(self) -> "EngineWatch":
        """Probe every ``interval`` seconds in a background thread until ``stop``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, daemon=True, name="engine-watch")
            self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.answers_now()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    # ---- attribution
    def during(self, started_at: str | None, finished_at: str | None, since: float | None = None,
               grace: float = GRACE_S) -> Window | None:
        """The outage window that overlaps an attempt (up to ``grace`` seconds after its end): its recorded wall
        times, else from ``since`` (when the run loop submitted it) to now."""
        end = _wall(finished_at) or self.clock()
        start = _wall(started_at) or since
        if start is None:
            return None
        with self._lock:
            return next((w for w in reversed(self.windows) if w.overlaps(start, end, grace)), None)

    # ---- waiting
    def wait_back(self, bound_s: float, say: Callable[[str], None], steady: int = 3) -> float:
        """Wait until the engine answers ``steady`` probes in a row (a second apart), with backoff from 1 s to
        15 s while it does not, saying so each time; returns how long it waited. Past ``bound_s`` seconds
        (counted from the outage's start), raises ``EngineOutage``."""
        t0 = self.clock()
        with self._lock:
            since = self.windows[-1].start if self.windows and self.windows[-1].end is None else t0
        delay, in_row = 1.0, 0
        while True:
            if self.answers_now():
                in_row += 1
                if in_row >= steady:
                    waited = self.clock() - since
                    say(f"engine outage over: the Docker engine answers again after {waited:.0f}s; going on")
                    return waited
                self.sleep(1.0)
                continue
            in_row = 0
            out_for = self.clock() - since
            if out_for >= bound_s:
                last = self.windows[-1].error if self.windows else ""
                raise EngineOutage(
                    f"the run stopped: the Docker engine has not answered for {out_for:.0f}s, longer than "
                    f"execution.engine_outage_wait_s ({bound_s:g}s) ({last}). Finished trials are kept and the "
                    "trials the outage ended owe their retry; start the engine (`make engine`) and run the same "
                    "command again to finish the run.")
            pause = min(delay, max(0.0, bound_s - out_for))
            say(f"engine outage: the Docker engine does not answer ({self.windows[-1].error if self.windows else ''}); "
                f"no trial starts and no retry is spent; out for {out_for:.0f}s of at most {bound_s:g}s, "
                f"probing again in {pause:.0f}s")
            self.sleep(pause)
            delay = min(15.0, delay * 2)


def suspect(result: Any) -> bool:
    """Whether an attempt ended in a way an engine outage can cause: an infrastructure error, or a sandbox
    that died under its agent (the engine's shutdown kills every container)."""
    from .stops import Outcome, StopReason

    if result.is_infra_error or result.outcome is Outcome.SANDBOX_BROKEN_BY_AGENT:
        return True
    return result.agent is not None and result.agent.stop_reason is StopReason.SANDBOX_BROKEN


def evidence_of(result: Any) -> str:
    """An attempt's own account of how it ended: its verdict's kind and reasons, its agent's stop detail."""
    v = result.verdict
    detail = result.agent.detail if result.agent is not None else ""
    return "; ".join(x for x in [f"{v.outcome.value}({v.kind})" if v.kind else v.outcome.value,
                                 *(str(r) for r in v.reasons), detail] if x)


def outage_of(result: Any, watch: "EngineWatch | None", since: float | None = None) -> str | None:
    """Why an attempt counts as ended by an engine outage (the evidence to record), or None (see the module
    docstring); ``since``: when it was submitted (for an attempt that recorded no times of its own).

    Whatever its verdict: an attempt that ran while the engine was out lost its sandbox or its grader to the
    engine's stop, so its verdict, accepted or rejected, is not one a run without the fault gives (and keeping
    the accepted ones while retrying the others would favour acceptance). The same holds for the ``GRACE_S``
    after its end (the probe's lateness), whatever its verdict too: given only to attempts that ended in a way an
    outage causes (``suspect``), it chose the attempts run again by their outcome (a review's finding). Such an
    attempt also counts when its own evidence is the engine's outage error."""
    if result.is_infra_error and result.verdict.kind == OUTAGE_KIND:
        return "; ".join(result.verdict.reasons)
    odd = suspect(result)
    own = evidence_of(result)
    window = watch.during(result.started_at, result.finished_at, since, GRACE_S) \
        if watch is not None else None
    if window is not None:
        return f"engine outage: {window.describe()}; the attempt ended on it: {own}"[:1000]
    if odd and outage_text(own) and result.verdict.kind not in NOT_ENGINE:
        return f"engine outage: the attempt ended on the engine's outage error: {own}"[:1000]
    return None


def as_outage(result: Any, evidence: str) -> Any:
    """The attempt's result as ``infra_error(engine_outage)``, the outage named in its evidence."""
    import dataclasses

    from .grading.verdict import infra_verdict

    return dataclasses.replace(result, verdict=infra_verdict(OUTAGE_KIND, evidence))


def outage_attempts(result: Any) -> int:
    """How many of a trial's attempts (this one and those it replaced) an engine outage ended: the recorded
    kind, or, in runs of earlier versions, an infrastructure error whose evidence is the engine's outage."""
    def ended(kind: str | None, detail: str) -> bool:
        return kind == OUTAGE_KIND or (kind not in NOT_ENGINE and outage_text(detail))

    mine = result.is_infra_error and ended(result.verdict.kind, "; ".join(map(str, result.verdict.reasons)))
    return int(mine) + sum(ended(a.kind, a.detail) for a in result.previous_attempts)


def docker_probe(client: Any, timeout: float = 5.0) -> Callable[[], None]:
    """A probe of the engine ``client`` talks to, on a client and connection of its own with a short timeout: a
    ping and a one-container listing (a restarting engine can answer the one and not the other)."""
    import docker

    def probe() -> None:
        # a new connection each time: a kept-alive one goes on being answered by a daemon that is shutting down
        # (its socket already gone, new connections refused), which would hide the outage
        fresh = docker.from_env(version=client.api.api_version, timeout=timeout)  # as ``engine.connect`` does
        try:
            fresh.api.ping()
            fresh.api.containers(all=True, limit=1)
        finally:
            fresh.close()

    return probe


__all__ = ["EngineOutage", "EngineWatch", "MAX_OUTAGE_ATTEMPTS", "OUTAGE_EXIT_CODE", "OUTAGE_KIND", "Window",
           "as_outage", "docker_probe", "outage_attempts", "outage_error", "outage_of", "outage_text", "suspect"]
