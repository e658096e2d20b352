"""Engine outages (issue 25): classification of the engine's errors, the wait with backoff and its bound, the run
loop that starts nothing and spends no retry while the engine is out, resume re-running infrastructure errors
whose retry was not spent, the store keeping one row per trial, and the report's first lines."""

from __future__ import annotations

import copy
import json
from collections import deque

import pytest
import requests.exceptions

from orchestrator.attempts import owes_retry, rerun_recorded, resumed
from orchestrator.errors import EngineOutage, EngineUnavailable, InfraErrorsAbove, SandboxError
from orchestrator.grading.verdict import infra_verdict
from orchestrator.job import _run_queue
from orchestrator.outage import (MAX_OUTAGE_ATTEMPTS, OUTAGE_KIND, EngineWatch, as_outage, outage_attempts,
                                 outage_error, outage_of, outage_text)
from orchestrator.result import TrialResult
from orchestrator.resultparts import PreviousAttempt
from orchestrator.store import RunPaths

from .conftest import MANIFEST
from .test_manifest import problems_of
from .test_run_loop import Scripted, accepted, spec


# --------------------------------------------------------------------------- what an outage looks like
@pytest.mark.parametrize("text", [
    "no Docker engine answers (is dockerd running? `make setup` starts one)",
    "engine refused: failed to create task for container: database not open",
    "('Connection aborted.', ConnectionRefusedError(111, 'Connection refused'))",
    "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))",
    "Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))",
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    "HTTPConnectionPool(host='localhost', port=None): Max retries exceeded (Caused by NewConnectionError("
    "'Failed to establish a new connection: [Errno 111] Connection refused'))",
    "('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))",
])
def test_the_engines_outage_errors_are_recognised(text):
    assert outage_text(text)


@pytest.mark.parametrize("text", ["the sandbox died (exit code 137)", "grader_broken: the untouched repository fails",
                                  "exec refused: container is paused", "", None])
def test_other_errors_are_not_outages(text):
    assert not outage_text(text)


def test_outage_exceptions_are_recognised_through_their_causes():
    assert outage_error(EngineUnavailable("no Docker engine answers"))
    assert outage_error(requests.exceptions.ConnectionError("boom"))
    try:
        try:
            raise FileNotFoundError(2, "No such file or directory", "/var/run/docker.sock")
        except FileNotFoundError as inner:
            raise SandboxError("engine call failed") from inner
    except SandboxError as exc:
        assert outage_error(exc)
    assert not outage_error(SandboxError("exec refused: container is paused"))


def result(s, verdict, **extra) -> TrialResult:
    doc = accepted(s).to_dict()
    doc["verdict"] = verdict.to_dict() if hasattr(verdict, "to_dict") else verdict
    doc.update(extra)
    return TrialResult.from_dict(doc)


def infra(s, kind="sandbox", detail="no Docker engine answers (is dockerd running?)") -> TrialResult:
    return result(s, infra_verdict(kind, detail))


def broken(s) -> TrialResult:
    """A sandbox that died under its agent (the engine's stop kills every container): the agent's, normally."""
    return result(s, {"outcome": "sandbox_broken_by_agent", "kind": None, "accepted": False,
                      "reasons": ["the sandbox died (exit code 137)"], "criteria": [], "grader_version": "t"})


def test_attribution_needs_an_outage_seen_or_the_engines_own_error():
    s = spec(0)
    watch = EngineWatch(lambda: None, clock=lambda: 1000.0)
    assert outage_of(broken(s), watch) is None  # no outage seen: the agent's
    assert outage_of(accepted(s), watch) is None
    assert outage_of(infra(s, "sandbox", "exec refused: container is paused"), watch) is None
    assert "no Docker engine answers" in outage_of(infra(s), watch)  # its own evidence says so
    # a provider's connection refused is the model API's fault, never the engine's
    assert outage_of(infra(s, "model_api", "connection refused"), watch) is None
    down = EngineWatch(lambda: (_ for _ in ()).throw(ConnectionRefusedError("refused")), clock=lambda: 1000.0)
    assert not down.answers_now()
    evidence = outage_of(broken(s), down, since=990.0)
    assert evidence and "did not answer" in evidence and "sandbox_broken_by_agent" in evidence
    assert outage_of(broken(s), down) is None  # no time of its own and none given: not placed in the outage
    # an attempt that ran while the engine was out is the outage's whatever its verdict (keeping the accepted
    # ones and retrying the rest would favour acceptance)
    assert "did not answer" in outage_of(accepted(s), down, since=990.0)


def test_the_seconds_before_an_outage_was_seen_count_whatever_the_verdict():
    t = {"now": 1000.0}
    state = {"up": False}

    def probe():
        if not state["up"]:
            raise ConnectionRefusedError("refused")

    watch = EngineWatch(probe, clock=lambda: t["now"])
    watch.answers_now()
    s = spec(0)
    iso = lambda x: __import__("datetime").datetime.fromtimestamp(x, __import__("datetime").timezone.utc).isoformat()  # noqa: E731
    dying = result(s, broken(s).verdict, started_at=iso(990), finished_at=iso(998))
    assert outage_of(dying, watch) is not None  # its sandbox died just before the probe saw the engine gone
    # the same seconds for an accepted attempt: which attempts run again must not depend on their outcome
    graded = result(s, accepted(s).verdict, started_at=iso(990), finished_at=iso(998))
    assert outage_of(graded, watch) is not None
    for verdict in (accepted(s).verdict, broken(s).verdict):  # ended well before the outage was seen: stands
        assert outage_of(result(s, verdict, started_at=iso(980), finished_at=iso(990)), watch) is None


def test_an_outage_window_counts_for_attempts_that_overlap_it_only():
    t = {"now": 1000.0}
    state = {"up": False}

    def probe():
        if not state["up"]:
            raise ConnectionRefusedError("refused")

    watch = EngineWatch(probe, clock=lambda: t["now"])
    watch.answers_now()
    t["now"], state["up"] = 1010.0, True
    watch.answers_now()
    assert watch.windows[0].start == 1000.0 and watch.windows[0].end == 1010.0 and not watch.down
    iso = lambda x: __import__("datetime").datetime.fromtimestamp(x, __import__("datetime").timezone.utc).isoformat()  # noqa: E731
    assert watch.during(iso(990), iso(1001)) is not None
    assert watch.during(iso(992), iso(996)) is not None  # ended within the grace before the probe saw it
    assert watch.during(iso(900), iso(990)) is None
    assert watch.during(iso(1020), iso(1030)) is None


# --------------------------------------------------------------------------- the wait
class Engine:
    """An engine that is out until ``back_after`` sleeps have passed; time advances only by sleeping."""

    def __init__(self, back_after: float = 1e9) -> None:
        self.now, self.back_at, self.sleeps = 0.0, back_after, []

    def probe(self) -> None:
        if self.now < self.back_at:
            raise requests.exceptions.ConnectionError("('Connection aborted.', FileNotFoundError(2, 'No such file'))")

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def watch(self) -> EngineWatch:
        return EngineWatch(self.probe, clock=lambda: self.now, sleep=self.sleep)


def test_the_wait_backs_off_says_so_and_needs_steady_answers():
    engine = Engine(back_after=40)
    said: list[str] = []
    waited = engine.watch().wait_back(600, said.append)
    assert engine.sleeps[:6] == [1, 2, 4, 8, 15, 15]  # backoff from 1 s to 15 s
    assert engine.sleeps[-2:] == [1.0, 1.0]  # three answers in a row, a second apart
    assert waited >= 40
    progress = [line for line in said if line.startswith("engine outage:")]
    assert progress and all("no trial starts and no retry is spent" in line for line in progress)
    assert "of at most 600s" in progress[0]
    assert said[-1].startswith("engine outage over")


def test_past_its_bound_the_wait_stops_the_run_with_its_own_exit_code():
    engine = Engine()
    said: list[str] = []
    with pytest.raises(EngineOutage) as caught:
        engine.watch().wait_back(30, said.append)
    assert caught.value.exit_code == 75 and InfraErrorsAbove("x").exit_code == 4
    assert "execution.engine_outage_wait_s (30s)" in caught.value.message
    assert "run the same command again" in caught.value.message
    assert sum(engine.sleeps) <= 30  # never sleeps past the bound


# --------------------------------------------------------------------------- the run loop
class Outaged(Scripted):
    """A scripted backend on an engine that can be out: every submission notes whether the engine was out."""

    def __init__(self, answer, engine: Engine) -> None:
        super().__init__(answer)
        self.engine, self.while_out, self.cleanups = engine, [], 0

    def submit(self, s) -> None:
        try:
            self.engine.probe()
        except Exception:  # noqa: BLE001
            self.while_out.append((s.trial_id, s.attempt))
        super().submit(s)

    def after_outage(self):
        self.cleanups += 1
        return ["tb-leftover"]


def test_an_outage_pauses_the_run_and_spends_no_retry(store):
    paths, st = store
    engine = Engine(back_after=0)

    def answer(s):
        if s.replicate == 0 and s.attempt == 1:  # the engine goes away under the first two trials
            engine.back_at = engine.now + 20
            return infra(s)
        if s.replicate == 1 and s.attempt == 1:
            return broken(s)  # its container killed by the engine's stop
        return accepted(s)

    backend = Outaged(answer, engine)
    said: list[str] = []
    _run_queue(deque(spec(i) for i in range(4)), 4, 0, None, 0.0, st, backend, paths, said.append, 1.0,
               watch=engine.watch(), outage_wait_s=600)
    rows = {r.id: r for r in st.trials()}
    assert len(rows) == 4 and all(r.accepted for r in rows.values())  # every trial once, as without the fault
    assert backend.while_out == []  # nothing started while the engine was out
    assert backend.submitted[:2] == [("t/a/0", 1), ("t/a/1", 1)]
    for i in (0, 1):
        r = rows[f"t/a/{i}"]
        assert r.attempt == 2 and [a.kind for a in r.previous_attempts] == [OUTAGE_KIND]
        assert "engine outage" in r.previous_attempts[0].detail
        assert owes_retry(infra(spec(i, ), "sandbox", "exec refused")) is True  # its own retry is still there
    assert backend.cleanups == 1
    assert any("no trial starts" in line for line in said) and any("engine outage over" in line for line in said)
    assert any("its retry is not spent" in line for line in said)
    # the attempt the outage ended says so in its own folder too
    doc = json.loads(paths.attempt("t/a/1", 1).verdict.read_text()) if paths.attempt("t/a/1", 1).verdict.exists() \
        else json.loads(paths.attempt("t/a/1", 1).retry_owed.read_text())
    assert doc["verdict"]["outcome"] == "infra_error" and doc["verdict"]["kind"] == OUTAGE_KIND


def test_a_trial_the_outage_ended_still_has_its_own_retry(store):
    paths, st = store
    engine = Engine(back_after=0)

    def answer(s):
        if s.attempt == 1:
            engine.back_at = engine.now + 5
            return infra(s)  # the outage
        if s.attempt == 2:
            return infra(s, "grader_start", "the grader could not start")  # its own infrastructure error
        return accepted(s)

    backend = Outaged(answer, engine)
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
               watch=engine.watch(), outage_wait_s=600)
    r = st.trial("t/a/0")
    assert r.accepted and r.attempt == 3 and [a.kind for a in r.previous_attempts] == [OUTAGE_KIND, "grader_start"]


def test_outages_cannot_retry_a_trial_forever(store):
    paths, st = store
    engine = Engine(back_after=0)

    def answer(s):
        engine.back_at = engine.now + 2
        return infra(s)

    backend = Outaged(answer, engine)
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
               watch=engine.watch(), outage_wait_s=600)
    r = st.trial("t/a/0")
    assert r.is_infra_error and r.verdict.kind == OUTAGE_KIND and r.attempt == MAX_OUTAGE_ATTEMPTS + 1
    assert backend.while_out == []


def test_past_the_bound_the_run_stops_owing_the_retries_and_a_resume_runs_them(store):
    paths, st = store
    engine = Engine(back_after=0)

    def answer(s):
        if s.replicate == 0:
            engine.back_at = 1e9  # gone for good
            return infra(s)
        return accepted(s)

    backend = Outaged(answer, engine)
    with pytest.raises(EngineOutage):
        _run_queue(deque(spec(i) for i in range(3)), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
                   watch=engine.watch(), outage_wait_s=60)
    assert backend.while_out == []
    stop = json.loads(paths.stopped.read_text())
    # t/a/1 was in flight when the engine went: the outage's too, whatever its verdict
    assert stop["cause"] == "engine_outage" and stop["unrecorded"] == ["t/a/0", "t/a/1"] and stop["not_started"] == 1
    assert st.trials() == []  # their retries are owed, not recorded as failures
    again = resumed(spec(0), paths)
    assert again.attempt == 2 and again.previous_attempts[0].kind == OUTAGE_KIND


def test_an_attempt_ended_on_the_outage_pauses_the_run_even_when_the_probe_still_answers(store):
    """Measured on the real engine: a daemon shutting down goes on answering a kept-alive connection while new
    ones fail; an attempt that ended on the outage pauses the run until the engine answers steadily."""
    paths, st = store
    engine = Engine(back_after=0)  # the probe always answers
    backend = Outaged(lambda s: infra(s, "harness", "ConnectionError(ProtocolError('Connection aborted.', "
                                          "FileNotFoundError(2, 'No such file or directory')))")
                      if s.attempt == 1 else accepted(s), engine)
    said: list[str] = []
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, backend, paths, said.append, 1.0,
               watch=engine.watch(), outage_wait_s=600)
    assert backend.submitted == [("t/a/0", 1), ("t/a/0", 2)]
    assert engine.sleeps == [1.0, 1.0]  # three answers in a row, a second apart, before the retry started
    assert any(line.startswith("engine outage over") for line in said)
    assert st.trial("t/a/0").previous_attempts[0].kind == OUTAGE_KIND


def test_ctrl_c_during_an_outage_owes_the_attempts_it_ended_and_records_none_of_them(store):
    """The trials in flight when Ctrl-C comes during an outage ended on the outage (here one accepted, one an
    infrastructure error of another kind): neither is a result, each is owed its retry as the outage's, and a
    resume runs it (a review's finding: the interrupt path recorded them as they came)."""
    paths, st = store
    engine = Engine(back_after=0)
    watch = engine.watch()

    class Interrupted(Outaged):
        def wait(self):
            engine.back_at = 1e9  # the engine goes away under the running trials, and the user presses Ctrl-C
            watch.answers_now()
            engine.now += 5
            raise KeyboardInterrupt

        def interrupt(self):
            ended = [(s, accepted(s) if s.replicate == 0 else infra(s, "grader_start", "the grader could not start"))
                     for s in self.pending]
            self.pending = []
            return ended

    first, second = spec(0), spec(1)
    backend = Interrupted(accepted, engine)
    with pytest.raises(KeyboardInterrupt):
        _run_queue(deque([first, second]), 2, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
                   watch=watch, outage_wait_s=600)
    assert backend.submitted == [("t/a/0", 1), ("t/a/1", 1)]
    assert st.trials() == []  # neither verdict is one a run without the fault gives
    for s in (first, second):
        again = resumed(s, paths)
        assert again.attempt == 2 and again.previous_attempts[0].kind == OUTAGE_KIND


def test_without_an_outage_an_infrastructure_error_is_retried_once_as_before(store):
    paths, st = store
    engine = Engine(back_after=0)
    backend = Outaged(lambda s: infra(s, "grader_start", "the grader could not start"), engine)
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
               watch=engine.watch(), outage_wait_s=600)
    r = st.trial("t/a/0")
    assert r.is_infra_error and r.attempt == 2 and backend.submitted == [("t/a/0", 1), ("t/a/0", 2)]


# --------------------------------------------------------------------------- resume and the store
def spent_during_outage(s) -> TrialResult:
    """What a run of an earlier version recorded: its retry spent within the outage's seconds."""
    return result(s, infra_verdict("sandbox", "engine refused: database not open"), attempt=2, retries=1,
                  previous_attempts=[PreviousAttempt(1, "sandbox", "no Docker engine answers").to_dict()])


def spent_on_its_own(s) -> TrialResult:
    return result(s, infra_verdict("grader_start", "the grader could not start"), attempt=2, retries=1,
                  previous_attempts=[PreviousAttempt(1, "grader_start", "the grader could not start").to_dict()])


def test_resume_reruns_infrastructure_errors_whose_retry_was_not_spent(tmp_path):
    a, b, c = spent_during_outage(spec(0)), spent_on_its_own(spec(1)), accepted(spec(2))
    assert outage_attempts(a) == 2 and outage_attempts(b) == 0
    assert set(rerun_recorded([a, b, c])) == {"t/a/0"}
    assert set(rerun_recorded([a, b, c], every=True)) == {"t/a/0", "t/a/1"}
    nxt = resumed(spec(0), RunPaths(tmp_path), a)
    assert nxt.attempt == 3 and nxt.retries == 2 and [p.attempt for p in nxt.previous_attempts] == [1, 2]


def test_a_plain_resume_runs_the_retry_a_rerun_session_owes(store):
    """A session with ``--rerun-infra-errors`` ran a spent infrastructure error again, that attempt failed on
    infrastructure too, and the session stopped before its retry: a plain ``run`` runs the owed retry (a review's
    finding: it looked at the recorded row only, whose retry was spent, and the owed retry was never run)."""
    paths, st = store
    old = spent_on_its_own(spec(1))
    st.record(old, [])
    assert rerun_recorded(st.trials(), paths=paths) == {}  # its retry spent and nothing owed: kept as it is
    third = resumed(spec(1), paths, old)  # the rerun session's attempt
    assert third.attempt == 3
    again = result(third, infra_verdict("grader_start", "the grader could not start"), attempt=3, retries=2)
    owed = paths.attempt("t/a/1", 3)
    owed.folder.mkdir(parents=True)
    owed.retry_owed.write_text(json.dumps(again.to_dict()))
    assert set(rerun_recorded(st.trials(), paths=paths)) == {"t/a/1"}
    nxt = resumed(spec(1), paths, rerun_recorded(st.trials(), paths=paths)["t/a/1"])
    assert nxt.attempt == 4 and [p.attempt for p in nxt.previous_attempts] == [1, 2, 3]


def test_a_rerun_trial_is_stored_once_its_old_record_kept_as_history(store):
    paths, st = store
    old = spent_during_outage(spec(0))
    st.record(old, [])
    st.record(accepted(spec(1)), [])
    nxt = resumed(spec(0), paths, old)
    st.record(accepted(nxt), [])
    rows = st.trials()
    assert len(rows) == 2 and all(r.accepted for r in rows)
    history = st.superseded("t/a/0")
    assert [(h.attempt, h.is_infra_error) for h in history] == [(2, True)]
    assert st.trial("t/a/0").attempt == 3 and len(st.trial("t/a/0").previous_attempts) == 2
    assert st.done() == {"t/a/0", "t/a/1"}


def test_a_resumed_loop_reruns_the_trial_and_counts_it_once(store):
    paths, st = store
    old = spent_during_outage(spec(0))
    st.record(old, [])
    st.record(accepted(spec(1)), [])
    queue = deque([resumed(spec(0), paths, rerun_recorded(st.trials())["t/a/0"])])
    backend = Scripted(lambda s: accepted(s))
    _run_queue(queue, 2, 1, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert backend.submitted == [("t/a/0", 3)]
    assert len(st.trials()) == 2 and all(r.accepted for r in st.trials())


# --------------------------------------------------------------------------- manifest, lock, report
def test_the_manifest_declares_the_bound_and_the_threshold_with_clear_problems(project):
    data = copy.deepcopy(MANIFEST)
    data.setdefault("execution", {}).update(engine_outage_wait_s=0, max_infra_errors=-1)
    found = problems_of(project, data)
    assert any(p.startswith("execution.engine_outage_wait_s") for p in found), found
    assert any(p.startswith("execution.max_infra_errors") for p in found), found
    data["execution"].update(engine_outage_wait_s="soon", max_infra_errors=0)
    assert any(p.startswith("execution.engine_outage_wait_s") for p in problems_of(project, data))
    from orchestrator.manifest import ExecutionConfig

    ex = ExecutionConfig()
    assert ex.engine_outage_wait_s == 600 and ex.max_infra_errors == 0


def test_neither_field_is_in_the_lock():
    import inspect

    from orchestrator import lock

    src = inspect.getsource(lock.resolve_lock)
    assert '"engine_outage_wait_s"' in src and '"max_infra_errors"' in src


def test_the_reports_first_lines_say_how_many_trials_were_infrastructure_errors_and_why():
    from orchestrator.manifest import Manifest
    from orchestrator.report import _infra_errors
    from orchestrator.summary import _run_lines

    m = Manifest.model_validate({"experiment": {"name": "x"}, "candidates": [{"name": "a", "agent": "nop"}]})
    rows = [spent_on_its_own(spec(0)), accepted(spec(1)),
            TrialResult.from_dict({**accepted(spec(2)).to_dict(), "attempt": 2, "retries": 1, "previous_attempts": [
                PreviousAttempt(1, OUTAGE_KIND, "engine outage: ...").to_dict()]})]
    section = _infra_errors(rows, m)
    assert section["trials"] == 1 and section["above_allowed"] and section["by_kind"] == {"grader_start": 1}
    assert section["attempts_ended_by_engine_outage"] == 1
    report = {"run": {"id": "r", "finished_trials": 3, "planned_trials": 3, "provisional": False, "stopped": None,
                      "infra_errors": section}, "nodes": {}, "warnings": []}
    lines = _run_lines(report)
    assert lines[0].startswith("infrastructure errors: 1 trial(s) (grader_start 1), ABOVE execution.max_infra_errors (0)")
    assert "t/a/0: grader_start: the grader could not start" in lines[1]


def test_as_outage_keeps_everything_but_the_verdict():
    r = broken(spec(0))
    o = as_outage(r, "engine outage: x")
    assert o.is_infra_error and o.verdict.kind == OUTAGE_KIND and o.verdict.reasons == ["engine outage: x"]
    assert o.id == r.id and o.attempt == r.attempt and o.cost == r.cost


def test_a_run_stopped_by_an_outage_says_so_first():
    from orchestrator.summary import _run_lines

    stop = {"reason": "the run stopped: the Docker engine has not answered for 601s", "unrecorded": ["t/a/0"],
            "not_started": 3, "cause": "engine_outage"}
    report = {"run": {"id": "r", "finished_trials": 1, "planned_trials": 5, "provisional": True, "stopped": stop},
              "nodes": {}, "warnings": []}
    lines = _run_lines(report)
    assert lines[0].startswith("RUN STOPPED on an engine outage: the run stopped: the Docker engine")
    assert "1 trial(s) that ended on it (t/a/0), 3 not started; start the engine and run the same command again" \
        in lines[1]
    stop["cause"] = "configuration"
    assert _run_lines(report)[0].startswith("RUN STOPPED on a configuration error")


def test_a_chain_of_errors_read_as_outages_by_their_text_ends(store):
    """A tenth (read-only) review: on a backend that does not watch the engine (Ray), a node whose engine stays down
    keeps failing with 'no Docker engine answers' under kind sandbox; outage_attempts counted each as an outage's, so
    the trial's own errors stayed at one and owes_retry said yes forever. The whole chain is bounded."""
    from orchestrator.attempts import INFRA_RETRIES

    chain: list[bool] = []
    for n in range(12):
        r = result(spec(0), infra_verdict("sandbox", "no Docker engine answers (is dockerd running?)"),
                   attempt=n + 1, previous_attempts=[PreviousAttempt(i + 1, "sandbox", "no Docker engine answers").to_dict()
                                                     for i in range(n)])
        chain.append(owes_retry(r))
    assert chain == [True] * (INFRA_RETRIES + MAX_OUTAGE_ATTEMPTS) + [False] * (12 - INFRA_RETRIES - MAX_OUTAGE_ATTEMPTS)


def test_a_package_indexs_refused_connection_during_install_is_no_engine_outage():
    """A tenth (read-only) review: pip's refused connection in the install log read as the engine's outage (five
    retries instead of one, the run paused each time)."""
    pip = ("install failed: WARNING: Retrying after connection broken by 'NewConnectionError('Failed to establish a "
           "new connection: [Errno 111] Connection refused')'")
    r = result(spec(0), infra_verdict("install", pip))
    assert outage_attempts(r) == 0 and outage_of(r, None) is None
