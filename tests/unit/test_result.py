"""The typed result: its three constructors, and the stored document it writes and reads back."""

from __future__ import annotations

import json
from dataclasses import dataclass

from orchestrator.grading.verdict import infra_verdict
from orchestrator.result import TrialResult
from orchestrator.resultparts import AgentRun, PreviousAttempt, Tokens
from orchestrator.stops import Outcome, StopReason
from orchestrator.trial import TrialSpec


@dataclass
class Named:
    id: str = "t"
    name: str = "a"


def spec(previous=()) -> TrialSpec:
    return TrialSpec("t/a/0", "run", Named(), Named(), 0, "sha256:x", None, None, attempt=len(previous) + 1,
                     retries=len(previous), prior_cost_usd=sum(p.cost_usd or 0.0 for p in previous),
                     previous_attempts=tuple(previous))


AGENT = AgentRun(StopReason.SUBMITTED, "", "done", False, 7, 3, Tokens(100, 20, 5, 1), 2)


def test_an_infrastructure_error_after_the_agent_stopped_keeps_what_the_agent_did_and_spent():
    r = TrialResult.failed(spec(), infra_verdict("sandbox", "the grader's container died"), AGENT, 0.25,
                           events_anchor="abc", node={"name": "n1"})
    doc = r.to_dict()
    assert doc["stop_reason"] == "submitted" and doc["events_anchor"] == "abc" and doc["tool_calls"] == 7
    assert doc["cost_usd"] == 0.25 and doc["attempt_cost_usd"] == 0.25 and doc["verdict"]["outcome"] == "infra_error"
    assert TrialResult.from_dict(json.loads(json.dumps(doc))) == r


def test_a_lost_attempt_after_a_lost_one_is_a_lower_bound_twice_over():
    lost = PreviousAttempt(1, "node_lost", "node lost", "n2", None, None, 0)
    r = TrialResult.ended(spec([lost]), infra_verdict("node_lost", "again"), None, {"name": "n3"}, "spend unknown")
    doc = r.to_dict()
    assert doc["cost_is_lower_bound"] is True and doc["attempts_with_unknown_cost"] == 2
    assert doc["attempt_cost_usd"] is None and doc["cost_note"] == "spend unknown" and doc["stop_reason"] is None
    assert doc["previous_attempts"][0]["kind"] == "node_lost" and r.agent is None and r.interventions == 0
    assert TrialResult.from_dict(doc) == r


def test_retried_spend_is_carried_and_counted_once():
    first = PreviousAttempt(1, "sandbox", "engine down", "n1", 0.1, None, 1)
    r = TrialResult.graded(spec([first]), infra_verdict("sandbox", "x"), AGENT, 0.3)
    assert (r.cost.model_usd, r.cost.attempt_usd, r.cost.retried_usd, r.cost.unknown_attempts) == (0.4, 0.3, 0.1, 0)
    assert r.to_dict()["cost_of_retried_attempts_usd"] == 0.1


def test_documents_of_earlier_versions_are_read():
    # an infrastructure error of an earlier version: its stop reason overwritten with null, the agent's counts kept
    old = {"id": "t/a/0", "task": "t", "candidate": "a", "replicate": 0, "attempt": 2, "retries": 1,
           "stop_reason": None, "tool_calls": 4, "interventions": 1, "cost_usd": 0.42,
           "verdict": {"outcome": "infra_error", "kind": "sandbox", "accepted": False, "reasons": ["x"],
                       "criteria": [{"name": "scope", "critical": True, "passed": True, "evidence": {}}]}}
    r = TrialResult.from_dict(old)
    assert r.agent is not None and r.agent.stop_reason is None and r.tool_calls == 4 and r.interventions == 1
    assert r.outcome is Outcome.INFRA_ERROR and r.cost.attempt_usd == 0.42 and r.verdict.criteria[0].name == "scope"
    assert r.to_dict()["stop_reason"] is None


def test_what_the_proxy_saw_of_a_command_agent_is_kept_and_reported(tmp_path):
    from orchestrator.manifest import Manifest
    from orchestrator.report import build_report
    from orchestrator.store import RunPaths, Store

    agent = AgentRun(StopReason.SUBMITTED, reported_tool_calls=5, refused_requests={"path_not_relayed": 2})
    r = TrialResult.graded(spec(), infra_verdict("sandbox", "x"), agent, 0.0)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["model_reported_tool_calls"] == 5 and doc["proxy_refused_requests"] == {"path_not_relayed": 2}
    assert TrialResult.from_dict(doc) == r
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    for i in range(2):
        store.record(TrialResult.from_dict({**doc, "id": f"t/a/{i}", "replicate": i}), [])
    store.close()
    m = Manifest.model_validate({"experiment": {"name": "r", "seed": 3}, "candidates": [{"name": "a", "agent": "nop"}],
                                 "execution": {"trials_per_task": 2}, "analysis": {"k": [1]}})
    report = build_report(paths, m, {}, {"t": "t"}, 2)
    assert report["candidates"]["a"]["proxy"] == {"requests_refused": {"path_not_relayed": 4},
                                                  "model_reported_tool_calls": 10}
    assert report["candidates"]["a"]["efficiency"]["model_reported_tool_calls"] == 5.0
