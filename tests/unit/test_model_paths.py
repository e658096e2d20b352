"""The Claude agent and the proxy's stream parsing against the scripted server, over real HTTP.

These use no sandbox: the scripted model only calls ``submit`` or ``ask_user``,
which need none. The full loops with tools run in tests/docker.
"""

from __future__ import annotations

import json

import httpx
import pytest

from orchestrator.agents import AgentContext, Budget, BudgetLimits, StopReason, ToolBox, make_agent, run_agent
from orchestrator.agents.anthropic_wire import parse_sse
from orchestrator.agents.scripted_server import ScriptedModelServer
from orchestrator.errors import ConfigError
from orchestrator.events import EventLog, read_events, verify_events
from orchestrator.manifest import ClaudeCandidate
from orchestrator.loading import load_manifest
from orchestrator.taskload import load_tasks

SUBMIT = {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "done"}}]}


@pytest.fixture
def server():
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def task_and_manifest(repo_root):
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    return {t.id: t for t in load_tasks(loaded)}["textkit-slug-unicode"], loaded


def _run(agent, tmp_path, limits=BudgetLimits(deadline_seconds=30), reply=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    events = EventLog(tmp_path / "events.jsonl", "t")
    budget = Budget(limits)
    ctx = AgentContext("Do it.", ToolBox(None, events, budget, ask_user_reply=reply), budget, events)
    result = run_agent(agent, ctx)
    events.close()
    return result, read_events(tmp_path / "events.jsonl")


def _claude(task, loaded, env, model="scripted-model-1", **overrides):
    cand = ClaudeCandidate(name="c", agent="claude", model_snapshot=model, **overrides)
    return make_agent(cand, task, loaded, env=env)


def test_missing_key_is_a_clear_error_before_anything_starts(task_and_manifest):
    task, loaded = task_and_manifest
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        _claude(task, loaded, env={})
    with pytest.raises(ConfigError, match="not in the price table"):
        _claude(task, loaded, env={"ANTHROPIC_API_KEY": "k"}, model="claude-unknown-1")


def test_prompt_hash_is_checked(task_and_manifest):
    task, loaded = task_and_manifest
    with pytest.raises(ConfigError, match="differs from the manifest's system_prompt_sha256"):
        _claude(task, loaded, env={"ANTHROPIC_API_KEY": "k"}, system_prompt="prompts/terse.md",
                system_prompt_sha256="a" * 64)


def test_retries_are_recorded_and_usage_priced(server, task_and_manifest, tmp_path):
    task, loaded = task_and_manifest
    server.add_script("key-r", [
        {"error": {"status": 429, "type": "rate_limit_error", "message": "slow", "retry_after": 0}},
        {"error": {"status": 529, "type": "overloaded_error", "message": "busy", "retry_after": 0}},
        dict(SUBMIT, usage={"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 2000,
                            "cache_creation_input_tokens": 400}),
    ])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "key-r", "ANTHROPIC_BASE_URL": server.url})
    result, events = _run(agent, tmp_path)
    assert result.stop_reason is StopReason.SUBMITTED and result.summary == "done"
    retries = [e for e in events if e["kind"] == "model_retry"]
    assert [r["status"] for r in retries] == [429, 529]
    call = next(e for e in events if e["kind"] == "model_call")
    assert call["retries"] == 2 and call["request_id"].startswith("req_scripted_")
    expected = (1000 * 3.0 + 100 * 15.0 + 2000 * 0.30 + 400 * 3.75) / 1e6
    assert call["cost_usd"] == pytest.approx(expected) and result.cost_usd == pytest.approx(expected)
    assert (result.input_tokens, result.output_tokens, result.cache_read_tokens, result.cache_write_tokens) == (1000, 100, 2000, 400)
    assert "key-r" not in (tmp_path / "events.jsonl").read_text()
    request = server.requests["key-r"][-1]
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert {t["name"] for t in request["tools"]} == {"bash", "read_file", "write_file", "edit_file", "submit", "ask_user"}


def test_non_retryable_errors_are_classified(server, task_and_manifest, tmp_path):
    task, loaded = task_and_manifest
    server.add_script("key-e", [{"error": {"status": 400, "type": "invalid_request_error", "message": "prompt is too long"}}])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "key-e", "ANTHROPIC_BASE_URL": server.url})
    result, _ = _run(agent, tmp_path)
    assert result.stop_reason is StopReason.AGENT_ERROR and "HTTP 400" in result.detail  # the design's own failure
    server.add_script("key-f", [{"error": {"status": 403, "type": "permission_error", "message": "no access"}}])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "key-f", "ANTHROPIC_BASE_URL": server.url})
    result, _ = _run(agent, tmp_path / "f")
    assert result.stop_reason is StopReason.MODEL_ERROR  # the operator's or provider's: an infrastructure error


def test_slow_model_hits_the_deadline(server, task_and_manifest, tmp_path):
    task, loaded = task_and_manifest
    server.add_script("key-slow", [dict(SUBMIT, delay_s=5)])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "key-slow", "ANTHROPIC_BASE_URL": server.url})
    result, _ = _run(agent, tmp_path, BudgetLimits(deadline_seconds=1.5))
    assert result.stop_reason is StopReason.DEADLINE and result.duration_s < 4


def test_ask_user_is_an_intervention_and_abstention_is_typed(server, task_and_manifest, tmp_path):
    task, loaded = task_and_manifest
    server.add_script("key-a", [
        {"content": [{"type": "tool_use", "name": "ask_user", "input": {"question": "which one?"}}]},
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "cannot", "abstain": True}}]},
    ])
    agent = _claude(task, loaded, env={"ANTHROPIC_API_KEY": "key-a", "ANTHROPIC_BASE_URL": server.url})
    result, events = _run(agent, tmp_path, reply="the first one")
    assert result.stop_reason is StopReason.ABSTAINED and result.abstained and result.interventions == 1
    answer = server.requests["key-a"][1]["messages"][-1]["content"][0]
    assert answer["content"] == "the first one" and not answer["is_error"]
    assert verify_events(tmp_path / "events.jsonl").ok


def test_stream_is_parsed_like_the_plain_answer(server):
    server.add_script("key-s", [{"content": [{"type": "text", "text": "hi"},
                                             {"type": "tool_use", "name": "bash", "input": {"command": "ls -a"}}],
                                 "usage": {"input_tokens": 7, "output_tokens": 9}}] * 2)
    body = {"model": "scripted-model-1", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    plain = httpx.post(server.url + "/v1/messages", json=body, headers={"x-api-key": "key-s"}).json()
    streamed = httpx.post(server.url + "/v1/messages", json=dict(body, stream=True), headers={"x-api-key": "key-s"})
    assert streamed.headers["content-type"] == "text/event-stream"
    parsed = parse_sse(streamed.content)
    strip = lambda m: [{k: v for k, v in b.items() if k != "id"} for b in m["content"]]  # noqa: E731
    assert strip(parsed) == strip(plain)
    assert parsed["usage"]["output_tokens"] == 9 and parsed["usage"]["input_tokens"] == 7
    assert parsed["stop_reason"] == "tool_use"
    unknown = httpx.post(server.url + "/v1/messages", json=body, headers={"x-api-key": "nobody"})
    assert unknown.status_code == 401 and json.loads(unknown.content)["error"]["type"] == "authentication_error"


def test_the_proxy_relays_only_the_messages_endpoint_of_its_upstream(tmp_path):
    from orchestrator.agents.prices import load_prices
    from orchestrator.agents.proxy import ModelProxy

    proxy = ModelProxy(tmp_path, "https://api.anthropic.com", "real", None, load_prices())
    try:
        assert str(proxy._upstream_url("/v1/messages")) == "https://api.anthropic.com/v1/messages"
        assert str(proxy._upstream_url("/v1/messages?beta=true")) == "https://api.anthropic.com/v1/messages?beta=true"
        assert str(proxy._upstream_url("/v1/messages/count_tokens")) == "https://api.anthropic.com/v1/messages/count_tokens"
        assert proxy._upstream_url("/v1/messages?x=1@evil.example/").host == "api.anthropic.com"  # a query is no host
        for path in (".attacker.example/v1/messages", "@attacker.example/v1/messages", "//evil/v1/messages",
                     "/v1/files", "/v1/messages/batches", "/v1/messages/count_tokens/../../files"):
            assert proxy._upstream_url(path) is None, path
    finally:
        proxy.stop()


def test_streamed_usage_is_not_lost_to_nulls():
    stream = (b'event: message_start\ndata: {"type": "message_start", "message": {"model": "m", "content": [], '
              b'"usage": {"input_tokens": 120, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 7, "output_tokens": 1}}}\n\n'
              b'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, '
              b'"usage": {"input_tokens": null, "cache_read_input_tokens": null, "output_tokens": 33}}\n\n')
    message = parse_sse(stream)
    assert message["usage"] == {"input_tokens": 120, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 7,
                                "output_tokens": 33}
