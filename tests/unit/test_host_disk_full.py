"""A host file system that fills up under a run (issue 25, item 3): ``hostspace`` and the run loop's stop.

The run loop is driven by the scripted backend of ``test_run_loop``; a full disk is an ``OSError`` with ENOSPC or
EDQUOT (or SQLite's "database or disk is full") raised where the real one would be."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from collections import deque
from pathlib import Path

import pytest

from orchestrator.attempts import resumed
from orchestrator.errors import DiskError, HostDiskFull, SandboxError
from orchestrator.hostspace import (HOST_FULL_EXIT_CODE, RESERVE_MB, Folder, SpaceGuard, failed_write, host_full,
                                    write_atomic)
from orchestrator.job import _run_queue
from orchestrator.store import RunPaths, Store

from .test_run_loop import Scripted, accepted, lost, spec

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def guard(free: dict[str, float], same_device: bool = False) -> SpaceGuard:
    """Two folders whose free space (MiB) the test sets; on one file system when ``same_device``."""
    folders = [Folder("run folder", Path("/r")), Folder("state folder", Path("/s"))]
    return SpaceGuard(folders, free=lambda p: free[str(p)],
                      device=lambda p: 1 if same_device else {"/r": 1, "/s": 2}[str(p)])


# --------------------------------------------------------------------------- recognising a full disk
def chained(inner: BaseException, outer: BaseException, cause: bool = True) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            if cause:
                raise outer from exc
            raise outer
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("exc", [
    OSError(errno.ENOSPC, "No space left on device", "/run/x/verdict.json"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    sqlite3.OperationalError("database or disk is full"),
    DiskError("cp --sparse=always a b failed: cp: error writing 'b': No space left on device"),
    HostDiskFull("stopped"),
])
def test_a_full_host_file_system_is_recognised(exc):
    assert host_full(exc)


def test_it_is_recognised_through_the_exceptions_causes_and_contexts():
    assert host_full(chained(ENOSPC, RuntimeError("export failed")))
    assert host_full(chained(sqlite3.OperationalError("database or disk is full"), ValueError("x"), cause=False))
    assert host_full(chained(chained(ENOSPC, KeyError("a")), RuntimeError("b")))


@pytest.mark.parametrize("exc", [
    OSError(errno.ENOENT, "No such file or directory"),
    OSError(errno.EIO, "Input/output error"),
    sqlite3.OperationalError("database is locked"),
    # what the engine or the sandbox says about the agent's own bounded disk: the agent filled it
    SandboxError("exec failed: write /workspace/x: no space left on device"),
    RuntimeError("OSError: [Errno 28] No space left on device"),
    DiskError("losetup --find failed: no free loop device"),
])
def test_other_errors_and_the_agents_own_full_disk_are_not(exc):
    assert not host_full(exc)


def test_what_failed_names_the_file():
    exc = chained(OSError(errno.ENOSPC, "No space left on device", "/run/a1/verdict.json"), RuntimeError("x"))
    assert failed_write(exc) == "writing /run/a1/verdict.json failed: No space left on device"
    assert "database or disk is full" in failed_write(sqlite3.OperationalError("database or disk is full"))


# --------------------------------------------------------------------------- whole or absent
def test_an_atomic_write_replaces_the_file_whole(tmp_path):
    target = tmp_path / "verdict.json"
    write_atomic(target, '{"a": 1}')
    write_atomic(target, b'{"a": 2}')
    assert json.loads(target.read_text()) == {"a": 2} and [p.name for p in tmp_path.iterdir()] == ["verdict.json"]


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_a_write_that_meets_a_full_disk_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch, where):
    target = tmp_path / "verdict.json"
    target.write_text('{"old": true}')

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    data = b'{"new": true}'
    if where == "write":
        real = os.fdopen

        class Refusing:  # the temporary file, whose write finds no room
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

            write = full

        monkeypatch.setattr(os, "fdopen", lambda fd, mode: Refusing(real(fd, mode)))
    else:
        monkeypatch.setattr(os, where, full)
    with pytest.raises(OSError) as caught:
        write_atomic(target, data)
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC and host_full(caught.value)
    assert caught.value.filename == str(target)  # the message says which record
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["verdict.json"]


def test_absent_stays_absent(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EDQUOT, "Disk quota exceeded")))
    with pytest.raises(OSError):
        write_atomic(tmp_path / "retry-owed.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_a_store_row_is_whole_or_absent_when_the_disk_fills(store, monkeypatch):
    paths, st = store
    st.record(accepted(spec(0)), [])
    real = st.db

    class Full:  # the connection, except that inserting criteria finds the disk full
        def __getattr__(self, name):
            return getattr(real, name)

        def executemany(self, sql, rows):
            if "criteria" in sql:
                raise sqlite3.OperationalError("database or disk is full")
            return real.executemany(sql, rows)

    st.db = Full()
    with pytest.raises(sqlite3.OperationalError):
        st.record(accepted(spec(1)), [])
    st.db = real
    assert [r.id for r in st.trials()] == ["t/a/0"] and not real.in_transaction
    st.record(accepted(spec(1)), [])  # the connection goes on once there is room
    assert [r.id for r in st.trials()] == ["t/a/0", "t/a/1"]


# --------------------------------------------------------------------------- the bound before a trial starts
def test_a_trial_needs_the_reserve_and_its_workspace_disk_free_on_each_folder():
    assert guard({"/r": 1000, "/s": 1000}).short(256) is None
    why = guard({"/r": 300, "/s": 1000}).short(256)
    assert why.startswith("the run folder /r has 300 MiB free on its file system, less than the "
                          f"{RESERVE_MB + 256} MiB a trial needs there")
    assert "state folder" in guard({"/r": 1000, "/s": 100}).short(256)
    assert guard({"/r": RESERVE_MB + 256, "/s": RESERVE_MB + 256}).short(256) is None


def test_two_folders_on_one_file_system_add_their_needs():
    need = RESERVE_MB + 256
    assert guard({"/r": 2 * need, "/s": 2 * need}, same_device=True).short(256) is None
    why = guard({"/r": 2 * need - 1, "/s": 2 * need - 1}, same_device=True).short(256)
    assert why.startswith("the run folder /r and the state folder /s have") and f"{2 * need} MiB" in why


def test_only_the_state_folder_can_be_asked_about():
    g = guard({"/r": 10, "/s": 10_000})
    assert g.short(256) is not None and g.short(256, only="state folder") is None


def test_the_real_free_space_is_read_from_the_nearest_existing_folder(tmp_path):
    g = SpaceGuard([Folder("run folder", tmp_path / "not" / "yet")])
    assert g.short(0) is None or "MiB free" in g.short(0)
    assert "MiB free" in g.describe()


# --------------------------------------------------------------------------- the run loop
def disk_full() -> BaseException:
    """What run_trial raised when the run folder filled as it wrote the workspace (the local backend hands it to
    the loop as the attempt's outcome)."""
    return chained(OSError(errno.ENOSPC, "No space left on device", "/run/trials/x/a1/final-workspace.tar"),
                   RuntimeError("export"))


def full_at(n: int, answer=accepted):
    """An answer that is a full disk for the ``n``th submitted attempt, ``answer`` for the others."""
    count = {"i": 0}

    def respond(s):
        count["i"] += 1
        return disk_full() if count["i"] == n else answer(s)

    return respond


def test_a_full_disk_mid_run_stops_it_records_nothing_half_and_spends_no_retry(store):
    paths, st = store
    said: list[str] = []
    backend = Scripted(full_at(3))
    with pytest.raises(HostDiskFull) as caught:
        _run_queue(deque(spec(i) for i in range(6)), 6, 0, None, 0.0, st, backend, paths, said.append, 1.0)
    assert caught.value.exit_code == HOST_FULL_EXIT_CODE == 74
    # two at once: t/a/2 met the full disk while t/a/3 ran; t/a/3 ended and was recorded; nothing started after
    assert backend.submitted == [("t/a/0", 1), ("t/a/1", 1), ("t/a/2", 1), ("t/a/3", 1)]
    assert sorted(r.id for r in st.trials()) == ["t/a/0", "t/a/1", "t/a/3"]
    assert not paths.attempt("t/a/2", 1).retry_owed.exists()  # no retry: the cause is still there
    message = caught.value.message
    assert "final-workspace.tar failed: No space left on device" in message
    assert "3/6 trial(s) are recorded" in message and "(t/a/2)" in message and "2 not started" in message
    assert "run the same command again" in message
    assert any(line.startswith("stopping: a host file system is (nearly) full") for line in said)
    stop = json.loads(paths.stopped.read_text())
    assert stop["cause"] == "host_disk_full" and stop["unrecorded"] == ["t/a/2"] and stop["not_started"] == 2

    # once space is freed, the same trials run again: each recorded once, the one the disk ended as attempt 1
    left = deque(resumed(s, paths) for s in (spec(i) for i in range(6)) if s.trial_id not in st.done())
    assert [(s.trial_id, s.attempt) for s in left] == [("t/a/2", 1), ("t/a/4", 1), ("t/a/5", 1)]
    _run_queue(left, 6, 3, None, 0.0, st, Scripted(accepted), paths, said.append, 1.0)
    rows = st.trials()
    assert len(rows) == 6 and all(r.accepted and r.attempt == 1 and not r.previous_attempts for r in rows)
    assert not paths.stopped.exists()


def test_a_nearly_full_folder_stops_the_run_before_any_trial_starts(store):
    paths, st = store
    backend = Scripted(accepted)
    g = guard({"/r": 40, "/s": 10_000})
    with pytest.raises(HostDiskFull) as caught:
        _run_queue(deque(spec(i) for i in range(3)), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
                   space=g)
    assert backend.submitted == [] and st.trials() == []
    assert "the run folder /r has 40 MiB free" in caught.value.message
    assert "Now: the run folder /r: 40 MiB free; the state folder /s: 10000 MiB free" in caught.value.message
    assert "0/3 trial(s) are recorded" in caught.value.message and "3 not started" in caught.value.message


def test_the_bound_is_checked_before_each_trial(store):
    paths, st = store
    free = {"/r": 10_000.0, "/s": 10_000.0}
    g = guard(free)
    backend = Scripted(lambda s: (free.update({"/r": 10.0}) if s.replicate == 1 else None) or accepted(s))
    backend.slots = 1
    with pytest.raises(HostDiskFull):
        _run_queue(deque(spec(i) for i in range(4)), 4, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
                   space=g)
    assert backend.submitted == [("t/a/0", 1), ("t/a/1", 1)]  # the folder filled while t/a/1 ran
    assert [r.id for r in st.trials()] == ["t/a/0", "t/a/1"]  # its records were written whole: kept


def test_an_attempt_that_ends_while_the_state_folder_is_short_is_no_result_whatever_its_verdict(store):
    paths, st = store
    free = {"/r": 10_000.0, "/s": 10_000.0}
    g = guard(free)

    def answer(s):
        if s.replicate == 1:
            free["/s"] = 5.0  # its workspace disk could not grow: what the agent saw failing was the host's
        return accepted(s)

    backend = Scripted(answer)
    backend.slots = 1
    with pytest.raises(HostDiskFull) as caught:
        _run_queue(deque(spec(i) for i in range(3)), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0,
                   space=g)
    assert [r.id for r in st.trials()] == ["t/a/0"]
    assert "the state folder /s has 5 MiB free" in caught.value.message and "t/a/1 ended while it was so" in \
        caught.value.message


def test_a_store_that_finds_the_disk_full_stops_the_run_without_the_row(store, monkeypatch):
    paths, st = store
    real = Store.record

    def record(self, result, events):
        if result.id == "t/a/1":
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, result, events)

    monkeypatch.setattr(Store, "record", record)
    backend = Scripted(accepted)
    backend.slots = 1
    with pytest.raises(HostDiskFull) as caught:
        _run_queue(deque(spec(i) for i in range(4)), 4, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert backend.submitted == [("t/a/0", 1), ("t/a/1", 1)]
    assert [r.id for r in st.trials()] == ["t/a/0"] and "database or disk is full" in caught.value.message


def test_a_retry_owed_that_cannot_be_written_is_not_owed_and_the_attempt_runs_again(store, monkeypatch):
    paths, st = store
    real = os.replace

    def replace(src, dst):  # the retry-owed record finds the disk full; every other write goes through
        if Path(dst).name == "retry-owed.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    backend = Scripted(lambda s: lost(s) if s.replicate == 0 else accepted(s))
    backend.slots = 1
    with pytest.raises(HostDiskFull) as caught:
        _run_queue(deque(spec(i) for i in range(3)), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert backend.submitted == [("t/a/0", 1)] and st.trials() == []
    assert "retry-owed.json failed: No space left on device" in caught.value.message
    assert [p.name for p in paths.trial("t/a/0", 1).iterdir()] == []  # no part, no temporary file
    assert resumed(spec(0), paths).attempt == 1  # nothing owed: the lost attempt runs again, no retry spent


def test_a_retry_already_owed_when_the_disk_fills_is_kept_for_the_resume(store):
    paths, st = store

    def answer(s):
        if s.replicate == 0 and s.attempt == 1:
            return lost(s)  # its retry is owed (retry-owed.json) and queued first
        return disk_full() if s.replicate == 1 else accepted(s)

    backend = Scripted(answer)  # two at once: t/a/1 meets the full disk, then t/a/0 ends owing its retry
    with pytest.raises(HostDiskFull):
        _run_queue(deque([spec(1), spec(0), spec(2)]), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert backend.submitted == [("t/a/1", 1), ("t/a/0", 1)]
    stop = json.loads(paths.stopped.read_text())
    assert stop["unrecorded"] == ["t/a/0", "t/a/1"] and stop["not_started"] == 1
    again = resumed(spec(0), paths)
    assert again.attempt == 2 and again.previous_attempts[0].kind == "node_lost"  # the retry, not a new start


def test_the_agents_full_disk_inside_its_sandbox_is_no_stop(store):
    paths, st = store
    backend = Scripted(lambda s: SandboxError("write /workspace/big: no space left on device") if s.replicate == 0
                       else accepted(s))
    _run_queue(deque(spec(i) for i in range(2)), 2, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    rows = {r.id: r for r in st.trials()}
    assert len(rows) == 2 and rows["t/a/0"].verdict.kind == "harness"  # an ordinary error, retried as before


# --------------------------------------------------------------------------- trial stages, the summary
def test_processing_the_agents_output_is_not_repeated_on_a_full_host_disk():
    from orchestrator.trial import _Gathered, _again_if_passing

    calls = []

    def step():
        calls.append(1)
        raise chained(OSError(errno.ENOSPC, "No space left on device"), ValueError("tar"))

    with pytest.raises(ValueError):
        _again_if_passing(_Gathered(stage="export"), step)
    assert len(calls) == 1


def test_a_run_stopped_by_a_full_disk_says_so_first():
    from orchestrator.summary import _run_lines

    stop = {"reason": "the run stopped: a host file system it writes to is (nearly) full: ...",
            "unrecorded": ["t/a/2"], "not_started": 2, "cause": "host_disk_full"}
    report = {"run": {"id": "r", "finished_trials": 3, "planned_trials": 6, "provisional": True, "stopped": stop},
              "nodes": {}, "warnings": []}
    lines = _run_lines(report)
    assert lines[0].startswith("RUN STOPPED on a full host disk: the run stopped")
    assert lines[1].endswith("2 not started; free space and run the same command again")


def test_an_agent_that_meets_the_hosts_full_disk_is_not_stopped_for_its_own_error(tmp_path):
    from orchestrator.agents import AgentContext, Budget, BudgetLimits, StopReason, ToolBox, run_agent
    from orchestrator.events import EventLog

    class Agent:
        name = "a"

        def __init__(self, exc):
            self.exc = exc

        def run(self, ctx):
            raise self.exc

    def run(exc, name):
        events = EventLog(tmp_path / f"{name}.jsonl", "t")
        budget = Budget(BudgetLimits(deadline_seconds=30))
        try:
            return run_agent(Agent(exc), AgentContext("Do it.", ToolBox(None, events, budget), budget, events))
        finally:
            events.close()

    with pytest.raises(DiskError):  # a trialbox error that is the host's full disk: raised, never AGENT_ERROR
        run(DiskError("cp: error writing 'x': No space left on device"), "full")
    with pytest.raises(OSError):
        run(OSError(errno.ENOSPC, "No space left on device"), "oserror")
    assert run(DiskError("losetup failed"), "other").stop_reason is StopReason.AGENT_ERROR  # as before


def test_an_event_log_that_cannot_be_closed_for_want_of_space_is_closed_all_the_same(tmp_path, monkeypatch):
    from orchestrator.events import EventLog

    log = EventLog(tmp_path / "events.jsonl", "t")
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
    with pytest.raises(OSError):
        log.close()
    monkeypatch.undo()
    assert log.closed and log._fh.closed
    assert log.close() == log.head  # the session's clean-up closes it again: nothing more is written


def test_a_tool_call_that_meets_the_hosts_full_disk_ends_the_attempt_instead_of_an_infra_stop(tmp_path):
    from orchestrator.agents import Budget, BudgetLimits, ToolBox
    from orchestrator.errors import AgentStop
    from orchestrator.events import EventLog

    class Sandbox:
        def __init__(self, exc):
            self.exc = exc

        def exec(self, *args, **kwargs):
            raise self.exc

    events = EventLog(tmp_path / "events.jsonl", "t")
    budget = Budget(BudgetLimits(deadline_seconds=30))
    with pytest.raises(OSError) as caught:  # to the trial, which leaves it to the run loop: the run stops
        ToolBox(Sandbox(OSError(errno.ENOSPC, "No space left on device")), events, budget).call(
            "bash", {"command": "true"})
    assert caught.value.errno == errno.ENOSPC
    with pytest.raises(AgentStop) as stop:  # any other host error stays the infrastructure stop it was
        ToolBox(Sandbox(OSError(errno.EIO, "Input/output error")), events, budget).call("bash", {"command": "true"})
    assert stop.value.reason.value == "infra_error"
    events.close()
