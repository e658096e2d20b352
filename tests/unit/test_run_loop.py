"""The run loop (``job._run_queue``) with a scripted backend: retries, lost spend, resume, cost cap."""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.grading.verdict import infra_verdict
from orchestrator.attempts import charged, resumed, retry_of
from orchestrator.job import _run_queue
from orchestrator.placement import nodes_section
from orchestrator.result import TrialResult
from orchestrator.store import RunPaths
from orchestrator.trial import TrialSpec


@dataclass
class Named:
    id: str = "t"
    name: str = "a"


def spec(i: int, block: int = 0) -> TrialSpec:
    return TrialSpec(f"t/a/{i}", "run", Named(), Named(), i, "sha256:x", None, None, block=block)


def accepted(s: TrialSpec, cost: float = 0.5, node: str = "n1") -> TrialResult:
    r = {"id": s.trial_id, "task": "t", "candidate": "a", "replicate": s.replicate, "attempt": s.attempt,
         "retries": s.retries, "block": s.block, "node": {"name": node}, "attempt_cost_usd": cost,
         "cost_usd": cost + s.prior_cost_usd, "duration_s": 1.0,
         "previous_attempts": [a.to_dict() for a in s.previous_attempts],
         "verdict": {"outcome": "accepted", "kind": None, "accepted": True, "reasons": [], "criteria": [],
                     "grader_version": "t"}}
    unknown = sum(a.cost_usd is None for a in s.previous_attempts)
    if unknown:
        r["attempts_with_unknown_cost"] = unknown
    return TrialResult.from_dict(r)


def lost(s: TrialSpec, node: str = "n2") -> TrialResult:
    unknown = sum(a.cost_usd is None for a in s.previous_attempts) + 1
    return TrialResult.from_dict({"id": s.trial_id, "task": "t", "candidate": "a", "replicate": s.replicate, "attempt": s.attempt,
            "retries": s.retries, "block": s.block, "node": {"name": node}, "attempt_cost_usd": None,
            "cost_usd": s.prior_cost_usd, "duration_s": None,
            "previous_attempts": [a.to_dict() for a in s.previous_attempts],
            "cost_is_lower_bound": True, "attempts_with_unknown_cost": unknown,
            "verdict": infra_verdict("node_lost", "node lost").to_dict()})


class Scripted:
    """Runs nothing: answers each submitted attempt with what ``answer`` returns for it."""

    name, slots = "scripted", 2

    def __init__(self, answer, expecting: int = 0) -> None:
        self.answer, self.pending, self.submitted = answer, [], []
        self.expecting = expecting  # how many admissions find no room while a node is "being probed"
        self.probing = False

    def describe(self) -> str:
        return "scripted"

    def admit(self, queue: deque):
        self.probing = self.expecting > 0  # the probe of a joining node is still out
        if self.probing:
            self.expecting -= 1
            return None
        return queue.popleft() if queue and len(self.pending) < self.slots else None

    def submit(self, s: TrialSpec) -> None:
        self.pending.append(s)
        self.submitted.append((s.trial_id, s.attempt))

    @property
    def running(self) -> int:
        return len(self.pending)

    @property
    def expecting_nodes(self) -> bool:
        return self.probing

    def wait(self):
        s = self.pending.pop(0)
        return [(s, self.answer(s))]

    def interrupt(self):
        return []

    def node_for(self, s: TrialSpec):
        return None

    def close(self) -> None:
        pass


def test_a_lost_attempt_is_retried_once_and_its_unknown_spend_is_kept(store):
    paths, st = store
    backend = Scripted(lambda s: lost(s) if s.attempt == 1 and s.replicate == 0 else accepted(s))
    _run_queue(deque([spec(0), spec(1)]), 2, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    results = {r.id: r for r in st.trials()}
    rows = {k: r.to_dict() for k, r in results.items()}  # the stored documents
    assert backend.submitted.count(("t/a/0", 1)) == 1 and backend.submitted.count(("t/a/0", 2)) == 1
    assert len(rows) == 2 and rows["t/a/0"]["retries"] == 1
    assert rows["t/a/0"]["previous_attempts"][0]["kind"] == "node_lost"
    assert rows["t/a/0"]["attempts_with_unknown_cost"] == 1
    nodes = nodes_section(list(results.values()), ["a"], 1.0)
    assert nodes["lost_attempts"] == 1 and nodes["attempts_with_unknown_cost"] == 1
    assert nodes["unknown_cost_at_most_usd"] == 1.0


def test_a_trial_lost_twice_is_recorded_with_both_losses(store):
    paths, st = store
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(lost), paths, lambda _: None, 1.0)
    [result] = st.trials()
    row = result.to_dict()
    assert row["attempt"] == 2 and row["verdict"]["kind"] == "node_lost"
    assert row["attempts_with_unknown_cost"] == 2 and row["cost_is_lower_bound"] is True
    nodes = nodes_section([result], ["a"], 1.0)
    assert nodes["lost_attempts"] == 2 and nodes["attempts_with_unknown_cost"] == 2


def test_the_loop_waits_for_a_node_being_probed_instead_of_ending(store):
    paths, st = store
    stopped, left = _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(accepted, expecting=3), paths,
                             lambda _: None, 1.0)
    assert (stopped, left) == (False, 0) and len(st.trials()) == 1


def test_lost_spend_counts_against_the_cost_cap_at_the_per_trial_maximum(store):
    paths, st = store
    backend = Scripted(lambda s: lost(s) if s.attempt == 1 else accepted(s, cost=0.0))
    backend.slots = 1
    stopped, left = _run_queue(deque([spec(0), spec(1), spec(2)]), 3, 0, 1.5, 0.0, st, backend, paths,
                             lambda _: None, 1.0)
    # each recorded trial carries one lost attempt, charged at max_cost_usd (1.0): the cap (1.5) stops after two
    assert stopped and [r.id for r in st.trials()] == ["t/a/0", "t/a/1"]
    assert charged(st.trials()[0], 1.0) == 1.0


def test_a_result_that_names_another_trial_is_a_harness_failure(store):
    paths, st = store
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(lambda s: accepted(spec(9))), paths,
             lambda _: None, 1.0)
    [row] = [r.to_dict() for r in st.trials()]
    assert row["id"] == "t/a/0" and row["verdict"]["kind"] == "harness" and row["attempt"] == 2


def test_resume_turns_a_recorded_infrastructure_failure_into_its_retry(tmp_path):
    paths = RunPaths(tmp_path)
    s = spec(0)
    folder = paths.trial(s.trial_id, 1)
    folder.mkdir(parents=True)
    (folder / "verdict.json").write_text(json.dumps(lost(s).to_dict()))
    assert resumed(s, paths).attempt == 1  # an infrastructure record alone (say, left by Ctrl-C) owes nothing
    paths.attempt(s.trial_id, 1).retry_owed.write_text(json.dumps(lost(s).to_dict()))
    again = resumed(s, paths)
    assert again.attempt == 2 and again.retries == 1
    assert again.previous_attempts[0].kind == "node_lost" and again.previous_attempts[0].cost_usd is None
    assert resumed(spec(1), paths).attempt == 1  # nothing recorded for it: a fresh first attempt
    paths.attempt(s.trial_id, 1).retry_owed.write_text(json.dumps(accepted(s).to_dict()))
    assert resumed(s, paths).attempt == 1


def test_one_node_name_on_two_machines_is_reported(tmp_path):
    rows = [accepted(spec(0)), accepted(spec(1))]
    rows[0] = dataclasses.replace(rows[0], node={"name": "n1", "cpus": 2, "cpu_model": "x"})
    rows[1] = dataclasses.replace(rows[1], node={"name": "n1", "cpus": 64, "cpu_model": "y"})
    assert nodes_section(rows, ["a"], 1.0)["names_covering_several_machines"] == ["n1"]


def test_report_paths_key_survives_resume(tmp_path):
    paths = RunPaths(tmp_path / "r")
    assert paths.key == "r"  # a run from before run keys
    paths.root.mkdir()
    (paths.root / "run-key").write_text("abc123\n")
    assert RunPaths(Path(paths.root)).key == "abc123"


def test_the_retry_owed_marker_is_written_when_a_retry_is_queued(store):
    paths, st = store
    seen = []

    def answer(s):
        if s.attempt == 1:
            paths.trial(s.trial_id, 1).mkdir(parents=True, exist_ok=True)
            return lost(s)
        seen.append(paths.attempt(s.trial_id, 1).retry_owed.exists())
        return accepted(s)

    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(answer), paths, lambda _: None, 1.0)
    assert seen == [True]


def test_a_record_from_before_attempt_costs_keeps_its_cost():
    old = accepted(spec(0), cost=0.42).to_dict()
    del old["attempt_cost_usd"]
    old["verdict"] = infra_verdict("sandbox", "x").to_dict()
    again = retry_of(spec(0), TrialResult.from_dict(old))
    assert again.prior_cost_usd == 0.42 and again.previous_attempts[0].cost_usd == 0.42


def test_a_harness_failure_carries_its_node_so_no_block_looks_split(store):
    paths, st = store
    backend = Scripted(lambda s: RuntimeError("boom"))
    backend.node_for = lambda s: {"name": "n1"}
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    [result] = st.trials()
    row = result.to_dict()
    assert row["node"] == {"name": "n1"} and row["attempt"] == 2
    assert nodes_section([result, accepted(spec(1))], ["a"], 1.0)["split_blocks"] == []


def test_regrading_replaces_the_verdict_and_nothing_else_of_the_stored_document(store):
    paths, st = store
    st.record(accepted(spec(0)), [])
    raw = json.loads(st.db.execute("SELECT result FROM trials").fetchone()[0])
    raw["written_by_a_later_version"] = {"kept": True}  # a field this version does not model
    st.db.execute("UPDATE trials SET result = ?", (json.dumps(raw),))
    st.regrade("t/a/0", infra_verdict("sandbox", "regraded"))
    again = json.loads(st.db.execute("SELECT result FROM trials").fetchone()[0])
    assert again["written_by_a_later_version"] == {"kept": True}
    assert again["verdict"]["outcome"] == "infra_error" and again["verdict"]["reasons"] == ["regraded"]
    assert {k: v for k, v in again.items() if k != "verdict"} == {k: v for k, v in raw.items() if k != "verdict"}
    assert st.trial("t/a/0").is_infra_error


def test_an_owed_retry_record_that_is_not_an_infrastructure_failure_owes_nothing(tmp_path):
    paths = RunPaths(tmp_path)
    s = spec(0)
    owed = paths.attempt(s.trial_id, 1)
    owed.folder.mkdir(parents=True)
    for doc in ({}, [], {"attempt": 1}, {"attempt": 1, "verdict": "infra_error"}, {"attempt": 2, "verdict": {"outcome": "infra_error"}}):
        owed.retry_owed.write_text(json.dumps(doc))
        assert resumed(s, paths) == s, doc


def test_an_agent_asking_for_another_model_stops_the_run_as_a_configuration_error(store):
    from orchestrator.errors import ConfigError
    from orchestrator.events import EventLog

    paths, st = store

    def answer(s):
        log = EventLog(paths.attempt(s.trial_id, s.attempt).events, s.trial_id)
        log.append("model_refused", reason="model_not_pinned", detail="claude-opus-4-1-20250805")
        log.close()
        return accepted(s)

    backend = Scripted(answer)
    backend.slots = 1
    with pytest.raises(ConfigError) as info:
        _run_queue(deque([spec(0), spec(1), spec(2)]), 3, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert "candidate a" in info.value.message and "claude-opus-4-1-20250805" in info.value.message
    # the trial ended on the setup, not on the agent: listed as stopped, never recorded; no new trial started
    assert st.trials() == [] and backend.submitted == [("t/a/0", 1)]
    stop = json.loads(paths.stopped.read_text())
    assert stop["unrecorded"] == ["t/a/0"] and stop["not_started"] == 2 and "claude-opus-4-1" in stop["reason"]
    assert "2 not started" in info.value.message and "t/a/0" in info.value.message


def _ending(paths, s, *events):
    from orchestrator.events import EventLog

    log = EventLog(paths.attempt(s.trial_id, s.attempt).events, s.trial_id)
    for kind, fields in events:
        log.append(kind, **fields)
    log.close()


def test_an_upstream_401_stops_the_run_before_its_retry_and_records_no_trial(store):
    """The provider refusing the key is the operator's setup: no retry is spent on it, nothing is recorded as the
    agent's, the trials still running that end on it are listed too, and one that ends well is recorded."""
    from orchestrator.errors import ConfigError

    paths, st = store

    def answer(s):
        if s.replicate == 1:  # running beside it, unaffected
            _ending(paths, s, ("model_call", {"model_requested": "m", "cost_usd": 0.0}))
            return accepted(s)
        _ending(paths, s, ("model_upstream_error", {"status": 401, "error_type": "authentication_error",
                                                    "message": "invalid x-api-key"}))
        return TrialResult.from_dict({**accepted(s).to_dict(),
                                      "verdict": infra_verdict("model_api", "refused").to_dict()})

    backend = Scripted(answer)
    said: list[str] = []
    with pytest.raises(ConfigError) as info:
        _run_queue(deque([spec(0), spec(1), spec(2), spec(3)]), 4, 0, None, 0.0, st, backend, paths, said.append, 1.0)
    assert "HTTP 401 authentication_error: invalid x-api-key" in info.value.message
    assert [r.id for r in st.trials()] == ["t/a/1"]
    assert all(attempt == 1 for _, attempt in backend.submitted)  # no retry spent on a key that cannot work
    assert set(json.loads(paths.stopped.read_text())["unrecorded"]) == {"t/a/0"}
    assert not any("retrying" in line for line in said)


def test_a_served_model_that_is_not_the_pinned_one_stops_the_run(store):
    from orchestrator.errors import ConfigError

    paths, st = store

    def answer(s):
        _ending(paths, s, ("model_call", {"model_requested": "pinned-1", "model_served": "other-2"}),
                ("model_mismatch", {"pinned": "pinned-1", "served": "other-2"}))
        return accepted(s)

    backend = Scripted(answer)
    backend.slots = 1
    with pytest.raises(ConfigError) as info:
        _run_queue(deque([spec(0), spec(1)]), 2, 0, None, 0.0, st, backend, paths, lambda _: None, 1.0)
    assert "'other-2'" in info.value.message and "'pinned-1'" in info.value.message
    assert "model_aliases" in info.value.message and st.trials() == []


def test_a_session_that_ends_without_a_stop_removes_the_last_stop_record(store):
    paths, st = store
    paths.stopped.write_text(json.dumps({"reason": "earlier", "unrecorded": ["t/a/0"], "not_started": 1}))
    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(accepted), paths, lambda _: None, 1.0)
    assert not paths.stopped.exists() and [r.id for r in st.trials()] == ["t/a/0"]


def test_a_resumed_run_counts_what_its_earlier_session_recorded(store):
    paths, st = store
    said: list[str] = []
    _run_queue(deque([spec(2)]), 3, 2, None, 0.0, st, Scripted(accepted), paths, said.append, 1.0, None, 1)
    [line] = [s for s in said if s.startswith("[3/3]")]
    assert "accepted 2, rejected 1, infra errors 0" in line  # the earlier session's trials still count


def test_an_agent_that_reached_its_model_cannot_keep_its_trial_out_of_the_results(store):
    from orchestrator.events import EventLog

    paths, st = store

    def answer(s):
        log = EventLog(paths.attempt(s.trial_id, s.attempt).events, s.trial_id)
        log.append("model_call", model_requested="scripted-model-1", cost_usd=0.01)
        log.append("model_refused", reason="model_not_pinned", detail="another-model")  # asked on purpose
        log.close()
        return accepted(s)

    _run_queue(deque([spec(0)]), 1, 0, None, 0.0, st, Scripted(answer), paths, lambda _: None, 1.0)
    assert [r.id for r in st.trials()] == ["t/a/0"]  # recorded like any trial
