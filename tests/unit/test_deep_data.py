"""Agent data nested thousands of levels deep cannot crash the harness: every walk over it is bounded, the event
log records it to a depth and names what it cut, and what cannot be handled is the agent's outcome."""

from __future__ import annotations

import json

import pytest

from orchestrator.agents import AgentContext, Budget, BudgetLimits, StopReason, ToolBox, make_agent, run_agent
from orchestrator.agents.openai_wire import server_side
from orchestrator.events import EventLog, read_events, verify_events
from orchestrator.loading import load_manifest
from orchestrator.log import _printable_value
from orchestrator.manifest import ClaudeCandidate
from orchestrator.taskload import load_tasks
from orchestrator.textsafe import DEPTH_MARKER, MAX_DEPTH, recordable_data
from tests.rawmodel import SUBMIT, RawModelServer, deep, message, tool_use


def nested(levels: int, leaf=("x",)):
    """A Python value ``levels`` containers deep (dicts and lists in turn), built without recursion."""
    value = list(leaf)
    for i in range(levels - 1):
        value = {"k": value} if i % 2 == 0 else [value]
    return value


def depth_of(value) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [c for v in level for c in ((v.values() if isinstance(v, dict) else v)
                                            if isinstance(v, (dict, list)) else ())]
        level = [c for c in level if isinstance(c, (dict, list))]
    return depth


def test_the_walk_is_iterative_and_capped():
    capped: list[str] = []
    out = recordable_data({"arguments": nested(5000)}, capped=capped)
    assert capped and capped[0].startswith("arguments")
    assert depth_of(out) == MAX_DEPTH
    json.dumps(out)  # whatever walks it next has a bounded depth
    assert DEPTH_MARKER in json.dumps(out)


def test_shallow_data_is_copied_as_before_with_escapes_in_order():
    value = {"a": "ok", "b\udcff": ["x", {"c": "\ud800"}, ("t", "\udcfe")], "n": 1, "z": None}
    escaped: list[str] = []
    out = recordable_data(value, escaped=escaped, raw_bytes=False)
    assert out == {"a": "ok", "b\\udcff": ["x", {"c": "\\ud800"}, ["t", "\\udcfe"]], "n": 1, "z": None}
    assert list(out) == ["a", "b\\udcff", "n", "z"]
    assert escaped == ["b\\udcff(key)", "b\\udcff[1].c", "b\\udcff[2][1]"]
    capped: list[str] = []
    assert recordable_data(nested(MAX_DEPTH), capped=capped) == nested(MAX_DEPTH) and capped == []
    assert recordable_data(nested(MAX_DEPTH + 1), capped=capped) != nested(MAX_DEPTH + 1) and len(capped) == 1


def test_the_event_log_records_5000_levels_and_verifies(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", "t")
    log.append("tool_started", tool="bash", arguments={"command": "ls", "x": nested(5000)})
    log.append("model_call", content=[{"type": "tool_use", "input": nested(5000)}])
    log.append("odd", value={1: "a", "b": 2})  # keys JSON cannot sort together: recorded as unrecordable
    log.close()
    assert verify_events(tmp_path / "events.jsonl").ok
    events = read_events(tmp_path / "events.jsonl")
    assert events[1]["depth_capped"] and events[1]["arguments"]["command"] == "ls"
    assert events[2]["depth_capped"][0].startswith("content[0].input")
    assert events[3]["unrecordable"] == ["value"] and "TypeError" in events[3]["error"]


def test_log_values_and_namespaces_are_walked_to_a_depth():
    shown = _printable_value({"a": nested(5000)})
    assert "…" in json.dumps(shown, ensure_ascii=False)
    tools = {"type": "function", "name": "f"}
    for _ in range(3000):
        tools = {"type": "namespace", "tools": [tools]}
    assert any("nested deeper" in f for f in server_side({"tools": [tools]}))
    shallow = {"type": "namespace", "tools": [{"type": "namespace", "tools": [{"type": "web_search"}]}]}
    assert server_side({"tools": [shallow]}) == ["web_search"]


@pytest.fixture
def claude(repo_root):
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    task = {t.id: t for t in load_tasks(loaded)}["textkit-slug-unicode"]

    def make(url: str):
        cand = ClaudeCandidate(name="c", agent="claude", model_snapshot="scripted-model-1")
        return make_agent(cand, task, loaded, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url})
    return make


def _run(agent, tmp_path):
    events = EventLog(tmp_path / "events.jsonl", "t")
    budget = Budget(BudgetLimits(deadline_seconds=30))
    ctx = AgentContext("Do it.", ToolBox(None, events, budget), budget, events)
    result = run_agent(agent, ctx)
    events.close()
    assert verify_events(tmp_path / "events.jsonl").ok
    return result, read_events(tmp_path / "events.jsonl")


@pytest.mark.parametrize("levels", [600, 5000])
def test_a_tool_argument_nested_deep_is_the_models_error_not_the_harness(claude, tmp_path, levels):
    answers = [message(tool_use("submit", '{"summary":"done","extra":' + deep(levels) + "}")), SUBMIT]
    with RawModelServer(answers) as server:
        result, events = _run(claude(server.url), tmp_path)
    stop = [e for e in events if e["kind"] == "stop"][0]
    if levels == 600:  # decodable: a tool error the model sees, then it submits
        tool = [e for e in events if e["kind"] == "tool"][0]
        assert tool["error"] and tool["error_kind"] == "bad_arguments" and "nests deeper" in tool["output"]
        assert tool["depth_capped"] and result.stop_reason is StopReason.SUBMITTED and server.requests == 2
    else:  # deeper than the client's JSON decoder goes: the agent's failure, typed, graded as any other
        assert result.stop_reason is StopReason.AGENT_ERROR and "nests too deeply" in stop["detail"]


@pytest.mark.parametrize("levels", [600, 5000])
def test_a_model_answer_nested_deep_is_recorded_to_a_depth(claude, tmp_path, levels):
    answers = [message('[{"type":"text","text":"thinking"},{"type":"tool_use","id":"t1","name":"nothing",'
                       '"input":{"plan":' + deep(levels) + "}}]"), SUBMIT]
    with RawModelServer(answers) as server:
        result, events = _run(claude(server.url), tmp_path)
    assert result.stop_reason in (StopReason.SUBMITTED, StopReason.AGENT_ERROR)
    calls = [e for e in events if e["kind"] == "model_call"]
    if levels == 600:
        assert result.stop_reason is StopReason.SUBMITTED and calls[0]["depth_capped"]
    else:
        assert result.stop_reason is StopReason.AGENT_ERROR


def test_the_proxys_readers_take_an_answer_nested_5000_deep():
    """What the proxy reads of an answer (usage, model, tool calls) is read whatever depth the content has."""
    from orchestrator.agents import anthropic_wire, openai_wire
    from orchestrator.textsafe import loads_bounded

    answer = message(tool_use("bash", '{"command":"ls","x":' + deep(5000) + "}"))
    read = anthropic_wire.read_answer("/v1/messages", answer)
    assert read["usage"] == (10, 10, 0, 0) and read["tool_uses"][0][0] == "bash"
    assert read["tool_uses"][0][1]["command"] == "ls" and DEPTH_MARKER in json.dumps(read["tool_uses"][0][1])
    chat = ('{"model":"m","choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[{"id":"c1","function":'
            '{"name":"bash","arguments":' + json.dumps('{"x":' + deep(5000) + "}") + "}}]}}],"
            '"usage":{"prompt_tokens":5,"completion_tokens":3}}').encode()
    read = openai_wire.read_answer("/v1/chat/completions", chat)
    assert read["usage"] == (5, 3, 0, 0) and read["tool_uses"][0][0] == "bash"
    deep_request = ('{"stream":true,"messages":' + deep(5000) + "}").encode()
    assert openai_wire.with_stream_usage("/v1/chat/completions", deep_request) == deep_request
    tricky = '{"s":"[[[{{\\"]]","v":' + deep(3000) + ',"after":1}'
    parsed = loads_bounded(tricky)
    assert parsed["s"] == '[[[{{"]]' and parsed["after"] == 1
    with pytest.raises(ValueError):
        loads_bounded("{" * 3000)
