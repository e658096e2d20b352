"""Faults on the model's side are not the agent's (issue 24): both model paths against the scripted server over
real HTTP, and the rules that turn what they record into a verdict and a run stop."""

from __future__ import annotations

import httpx
import pytest

from orchestrator.agents import Budget, BudgetLimits, StopReason
from orchestrator.agents.prices import load_prices
from orchestrator.agents.proxy import ModelProxy
from orchestrator.agents.scripted_server import ScriptedModelServer
from orchestrator.agents.upstream import run_fault, trial_fault
from orchestrator.events import EventLog, read_events
from orchestrator.grading.criteria import Criterion
from orchestrator.grading.verdict import decide
from orchestrator.stops import Outcome

from orchestrator.agents import AgentContext, ToolBox, make_agent, run_agent
from orchestrator.loading import load_manifest
from orchestrator.manifest import ClaudeCandidate
from orchestrator.taskload import load_tasks

MODEL = "scripted-model-1"
SUBMIT = {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "done"}}]}


@pytest.fixture
def task_and_manifest(repo_root):
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    return {t.id: t for t in load_tasks(loaded)}["textkit-slug-unicode"], loaded


def _run(agent, folder):
    folder.mkdir(parents=True, exist_ok=True)
    events = EventLog(folder / "events.jsonl", "t")
    budget = Budget(BudgetLimits(deadline_seconds=30))
    result = run_agent(agent, AgentContext("Do it.", ToolBox(None, events, budget), budget, events))
    events.close()
    return result, read_events(folder / "events.jsonl")


def _claude(task, loaded, env, **overrides):
    return make_agent(ClaudeCandidate(name="c", agent="claude", model_snapshot=MODEL, **overrides), task, loaded, env=env)


@pytest.fixture
def server():
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def proxied(server, tmp_path):
    made = []

    def make(key, aliases=()):
        proxy = ModelProxy(tmp_path / f"proxy-{key}", server.url, key, MODEL, load_prices(),
                           aliases=tuple(aliases)).start()
        events = EventLog(tmp_path / f"{key}.jsonl", "t/a/0")
        proxy.attach(events, Budget(BudgetLimits(deadline_seconds=60)))
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy",
                              headers={"x-api-key": proxy.token}, timeout=30)
        made.append((proxy, client, events))
        return proxy, client, events, tmp_path / f"{key}.jsonl"

    yield make
    for proxy, client, events in made:
        client.close()
        proxy.stop()
        events.close()


def body():
    return {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_an_upstream_401_through_the_proxy_stops_the_trial_at_once_and_names_the_run_fault(server, proxied):
    proxy, client, events, path = proxied("wrong-key")  # the scripted server knows no such key: HTTP 401
    first = client.post("/v1/messages", json=body())
    assert first.status_code == 401  # the agent sees what the provider said
    again = client.post("/v1/messages", json=body())
    assert again.status_code == 403  # never relayed again: no agent spends minutes retrying a key that cannot work
    assert proxy.stop_reason is not None and proxy.stop_reason.reason is StopReason.MODEL_ERROR
    events.close()
    recorded = read_events(path)
    [error] = [e for e in recorded if e["kind"] == "model_upstream_error"]
    assert error["status"] == 401 and error["error_type"] == "authentication_error"
    assert "unknown API key" in error["message"]
    fault = run_fault(recorded)
    assert fault is not None and "HTTP 401 authentication_error: unknown API key" in fault


def test_overload_beyond_the_agents_retries_is_the_model_sides_fault(server, proxied):
    server.add_script("busy", [{"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}] * 3)
    proxy, client, events, path = proxied("busy")
    for _ in range(3):
        assert client.post("/v1/messages", json=body()).status_code == 529
    fault = proxy.fault()
    assert fault is not None and "never got a model answer" in fault and "HTTP 529 overloaded_error" in fault
    events.close()
    assert run_fault(read_events(path)) is None  # the provider was busy: the run goes on


def test_a_retry_that_got_its_answer_leaves_no_fault(server, proxied):
    server.add_script("flaky", [{"error": {"status": 429, "type": "rate_limit_error", "message": "slow"}}, SUBMIT])
    proxy, client, _, _ = proxied("flaky")
    assert client.post("/v1/messages", json=body()).status_code == 429
    assert client.post("/v1/messages", json=body()).status_code == 200
    assert proxy.fault() is None and proxy.stop_reason is None


def test_the_last_request_failing_after_answers_is_the_model_sides_fault(server, proxied):
    server.add_script("late", [SUBMIT, {"error": {"status": 500, "type": "api_error", "message": "oops"}}])
    proxy, client, _, _ = proxied("late")
    client.post("/v1/messages", json=body())
    client.post("/v1/messages", json=body())
    assert "last model request" in (proxy.fault() or "")


def test_a_served_model_that_is_not_the_pinned_one_is_refused_and_priced_as_pinned(server, proxied):
    server.add_script("other", [dict(SUBMIT, model="scripted-model-2")] * 2)
    proxy, client, events, path = proxied("other")
    assert client.post("/v1/messages", json=body()).status_code == 200
    assert proxy.stop_reason is not None and "'scripted-model-2'" in proxy.stop_reason.detail
    assert client.post("/v1/messages", json=body()).status_code == 403
    events.close()
    recorded = read_events(path)
    [call] = [e for e in recorded if e["kind"] == "model_call"]
    assert call["model_served"] == "scripted-model-2" and call["model_requested"] == MODEL
    assert call["cost_usd"] == pytest.approx(load_prices().price(MODEL).cost(
        call["input_tokens"], call["output_tokens"], 0, 0))
    assert "model_aliases" in (run_fault(recorded) or "")


def test_a_declared_alias_answers_for_the_pinned_model(server, proxied):
    server.add_script("alias", [dict(SUBMIT, model="scripted-model-1-latest")] * 2)
    proxy, client, events, path = proxied("alias", aliases=["scripted-model-1-latest"])
    assert client.post("/v1/messages", json=body()).status_code == 200
    assert client.post("/v1/messages", json=body()).status_code == 200
    assert proxy.stop_reason is None
    events.close()
    assert run_fault(read_events(path)) is None


def test_the_built_in_agent_records_the_401_and_a_served_mismatch(server, task_and_manifest, tmp_path):
    task, loaded = task_and_manifest
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "nobody", "ANTHROPIC_BASE_URL": server.url})
    result, events = _run(agent, tmp_path / "401")
    assert result.stop_reason is StopReason.MODEL_ERROR and "HTTP 401" in result.detail
    assert "HTTP 401 authentication_error" in (run_fault(events) or "")
    server.add_script("k-other", [dict(SUBMIT, model="scripted-model-2")])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "k-other", "ANTHROPIC_BASE_URL": server.url})
    result, events = _run(agent, tmp_path / "mismatch")
    assert result.stop_reason is StopReason.MODEL_ERROR and "'scripted-model-2'" in result.detail
    assert "'scripted-model-2'" in (run_fault(events) or "")
    server.add_script("k-alias", [dict(SUBMIT, model="scripted-model-2")])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "k-alias", "ANTHROPIC_BASE_URL": server.url},
                    model_aliases=["scripted-model-2"])
    result, events = _run(agent, tmp_path / "alias")
    assert result.stop_reason is StopReason.SUBMITTED and run_fault(events) is None


def test_the_built_in_agent_out_of_retries_leaves_a_trial_fault(server, task_and_manifest, tmp_path, monkeypatch):
    from orchestrator.agents import claude

    monkeypatch.setattr(claude, "MAX_ATTEMPTS", 3)
    task, loaded = task_and_manifest
    server.add_script("k-busy", [{"error": {"status": 529, "type": "overloaded_error", "message": "busy",
                                            "retry_after": 0}}] * 3)
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "k-busy", "ANTHROPIC_BASE_URL": server.url})
    result, events = _run(agent, tmp_path)
    assert result.stop_reason is StopReason.MODEL_ERROR and "3 requests in a row" in result.detail
    assert "3 request(s) failed" in (trial_fault(events) or "")


def _crit(name, passed):
    return Criterion(name, True, passed, {})


def test_a_model_fault_is_an_infrastructure_error_unless_the_agents_conduct_failed():
    crits = [_crit("fail_to_pass", False), _crit("secrets", True)]
    v = decide(crits, StopReason.AGENT_ERROR, model_fault="the agent never got a model answer: HTTP 529")
    assert v.outcome is Outcome.INFRA_ERROR and v.kind == "model_api" and "HTTP 529" in v.reasons[0]
    accepted = decide([_crit("fail_to_pass", True)], StopReason.SUBMITTED, model_fault="the provider failed the last")
    assert accepted.outcome is Outcome.INFRA_ERROR  # cut short either way: a retry is drawn for both (no bias)
    leaked = decide([_crit("fail_to_pass", False), _crit("secrets", False)], StopReason.MODEL_ERROR,
                    model_fault="HTTP 529")
    assert leaked.outcome is Outcome.REJECTED and "secrets" in leaked.reasons  # a provoked fault hides no leak


def test_what_the_agent_never_asked_for_is_no_model_fault():
    assert trial_fault([]) is None
    assert trial_fault([{"kind": "model_upstream_error", "status": 400, "error_type": "invalid_request_error"}]) is None
    assert trial_fault([{"kind": "model_upstream_error", "status": "connection"}]) is not None
