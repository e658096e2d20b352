"""The preparer of the next trials (``ahead.Ahead``): which trials it makes ready, what it discards, what a trial
may take (the readiness itself is stubbed here: what it makes is exercised against the engine in
tests/docker/test_ahead.py)."""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest

import orchestrator.ahead as ahead
from orchestrator.ahead import Ahead, Readied, discard_readied, take


@dataclass
class Spec:
    trial_id: str
    attempt: int = 1


@dataclass
class Made:
    """Stands for what readiness makes: records its removal."""

    removed: list = field(default_factory=list)

    def remove(self) -> None:
        self.removed.append(True)

    def discard(self) -> None:
        self.removed.append(True)


def readied(spec: Spec, inputs: dict | None = None) -> Readied:
    return Readied((spec.trial_id, spec.attempt), agent=object(), prepared=None, sandbox=Made(), grader=Made(),
                   inputs=inputs or {"repo_source": "dir:a"})


@pytest.fixture
def made(monkeypatch):
    """Every readiness the preparer runs, by trial; each finishes at once unless its trial is in ``hold``."""
    log: dict[str, Readied] = {}
    hold: dict[str, threading.Event] = {}

    def ready(spec, *rest) -> Readied:
        if spec.trial_id in hold:
            hold[spec.trial_id].wait(10)
        log[spec.trial_id] = readied(spec)
        return log[spec.trial_id]

    monkeypatch.setattr(ahead, "ready_trial", ready)
    monkeypatch.setattr(ahead.GraderLimits, "for_environment", classmethod(lambda cls, env: None))
    monkeypatch.setattr(ahead, "trial_inputs", lambda spec, loaded: {"repo_source": "dir:a"})
    return log, hold


def _spec(tid: str) -> Spec:
    s = Spec(tid)
    s.environment = None  # type: ignore[attr-defined]
    return s


def test_the_first_depth_trials_of_the_queue_are_made_ready_and_claimed_once(made):
    log, _ = made
    a = Ahead(loaded=None, host=None, depth=2)
    queue = deque(_spec(t) for t in ("t1", "t2", "t3"))
    a.keep(queue)
    f1 = a.claim(queue[0])
    assert f1 is not None and f1.result().key == ("t1", 1)
    assert a.claim(queue[0]) is None  # claimed once: no longer the preparer's
    a.pool.submit(lambda: None).result()  # t2's preparation ran
    a.close()
    assert sorted(log) == ["t1", "t2"]  # never more than depth, never t3
    assert log["t2"].sandbox.removed and log["t2"].grader.removed  # unclaimed: removed at close
    assert not log["t1"].sandbox.removed  # claimed: the trial's own to remove


def test_a_trial_no_longer_next_is_discarded(made):
    log, _ = made
    a = Ahead(loaded=None, host=None, depth=1)
    queue = deque([_spec("t1"), _spec("t2")])
    a.keep(queue)
    a.pool.submit(lambda: None).result()  # the preparation ran
    queue.appendleft(_spec("retry"))  # a retry goes first
    a.keep(queue)
    a.close()
    assert log["t1"].sandbox.removed and log["t1"].grader.removed
    assert "t2" not in log


def test_a_preparation_discarded_while_it_runs_is_removed_when_it_ends(made):
    log, hold = made
    hold["t1"] = threading.Event()
    a = Ahead(loaded=None, host=None, depth=1)
    a.keep(deque([_spec("t1")]))
    a.keep(deque())  # the queue emptied (the cost cap) while t1 was being made
    hold["t1"].set()
    a.close()
    assert log["t1"].sandbox.removed and log["t1"].grader.removed


def test_depth_zero_prepares_nothing(made):
    log, _ = made
    a = Ahead(loaded=None, host=None, depth=0)
    a.keep(deque([_spec("t1")]))
    assert a.claim(_spec("t1")) is None
    a.close()
    assert log == {}


def test_a_preparation_not_started_at_close_is_never_made(made):
    log, hold = made
    hold["t1"] = threading.Event()
    a = Ahead(loaded=None, host=None, depth=2)
    a.keep(deque([_spec("t1"), _spec("t2")]))
    threading.Timer(0.2, hold["t1"].set).start()
    a.close()  # t1 was being made: removed once made; t2 had not started: cancelled
    assert log["t1"].sandbox.removed and "t2" not in log


def test_take_uses_a_readied_trial_whose_inputs_held_and_discards_one_that_drifted(monkeypatch):
    s = _spec("t1")
    good: Future = Future()
    good.set_result(readied(s))
    monkeypatch.setattr(ahead, "trial_inputs", lambda spec, loaded: {"repo_source": "dir:a"})
    got = take(good, s, None)
    assert got is not None and got.used and not got.sandbox.removed

    drifted: Future = Future()
    drifted.set_result(readied(s))
    monkeypatch.setattr(ahead, "trial_inputs", lambda spec, loaded: {"repo_source": "dir:b"})
    assert take(drifted, s, None) is None
    assert drifted.result().sandbox.removed and drifted.result().grader.removed

    other: Future = Future()  # made for another attempt: never used for this one
    other.set_result(readied(Spec("t1", attempt=2)))
    monkeypatch.setattr(ahead, "trial_inputs", lambda spec, loaded: {"repo_source": "dir:a"})
    assert take(other, s, None) is None and other.result().sandbox.removed

    failed: Future = Future()
    failed.set_exception(RuntimeError("the engine refused"))
    assert take(failed, s, None) is None
    assert take(None, s, None) is None


def test_what_a_trial_that_ended_early_was_given_is_removed():
    s = _spec("t1")
    f: Future = Future()
    f.set_result(readied(s))
    discard_readied(f)
    assert f.result().sandbox.removed and f.result().grader.removed
    pending: Future = Future()
    discard_readied(pending)  # not started yet: cancelled, nothing made
    assert pending.cancelled()
    taken = readied(s)
    taken.used = True
    discard_readied(None, taken)  # taken by the trial, which ended before its stages: removed all the same
    assert taken.sandbox.removed
