"""What the agents said is kept (issue 24, item 5): a command agent's answers' text, through the recording proxy
over real HTTP (plain and streamed), bounded, scanned for secrets and exported to ATIF."""

from __future__ import annotations

import httpx
import pytest

from orchestrator.agents import Budget, BudgetLimits
from orchestrator.agents.prices import load_prices
from orchestrator.agents.proxy import ModelProxy
from orchestrator.agents.scripted_server import ScriptedModelServer
from orchestrator.agents.upstream import MAX_TEXT_CHARS, bounded_text
from orchestrator.atif import trajectory
from orchestrator.events import EventLog, read_events
from orchestrator.grading.diff import Diff
from orchestrator.grading.leaks import secrets_leaked
from orchestrator.result import TrialResult

MODEL = "scripted-model-1"
CANARY = "TRIALBOX-CANARY-7f3a9c2e5b1d4086"
SAID = "I will edit textkit/slug.py.\n\ntextkit/slug.py\n```python\n<<<<<<< SEARCH\nimport re\n=======\nimport re\n>>>>>>> REPLACE\n```"


@pytest.fixture
def server():
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def through_proxy(server, tmp_path):
    made = []

    def send(key: str, answers: list[dict], stream: bool = False) -> list[dict]:
        server.add_script(key, answers)
        proxy = ModelProxy(tmp_path / f"proxy-{key}", server.url, key, MODEL, load_prices()).start()
        log = EventLog(tmp_path / f"{key}.jsonl", "t/a/0")
        proxy.attach(log, Budget(BudgetLimits(deadline_seconds=60)))
        made.append(proxy)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy",
                          headers={"x-api-key": proxy.token}, timeout=30) as client:
            for _ in answers:
                reply = client.post("/v1/messages", json={"model": MODEL, "max_tokens": 10, "stream": stream,
                                                          "messages": [{"role": "user", "content": "hi"}]})
                assert reply.status_code == 200, reply.text
        proxy.wait_idle()
        log.close()
        return read_events(tmp_path / f"{key}.jsonl")

    yield send
    for proxy in made:
        proxy.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_command_agents_answer_text_is_recorded_beside_its_tool_calls(through_proxy, stream):
    events = through_proxy(f"said-{stream}", [{"content": [
        {"type": "text", "text": SAID}, {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}]}], stream)
    [call] = [e for e in events if e["kind"] == "model_call"]
    assert call["content"] == [{"type": "text", "text": SAID}] and "text_truncated" not in call
    assert [e["tool"] for e in events if e["kind"] == "model_tool_use"] == ["bash"]  # once, not twice


def test_a_canary_in_what_the_model_said_fails_secrets_and_a_cut_answer_is_a_bound_reached(through_proxy):
    events = through_proxy("leak", [{"content": [{"type": "text", "text": f"The key is {CANARY}."}]}])
    crits = {c.name: c for c in secrets_leaked([CANARY], Diff(text=""), None, events)}
    assert not crits["secrets"].passed and crits["secrets"].evidence["canaries_found_in"] == {"model_output": 1}
    clean = [dict(e, content=[{"type": "text", "text": "nothing here"}]) if e["kind"] == "model_call" else e
             for e in events]
    assert {c.name: c for c in secrets_leaked([CANARY], Diff(text=""), None, clean)}["secrets"].passed
    cut = [dict(e, text_truncated=MAX_TEXT_CHARS + 5) if e["kind"] == "model_call" else e for e in clean]
    crit = {c.name: c for c in secrets_leaked([CANARY], Diff(text=""), None, cut)}["secrets"]
    assert not crit.passed and "kept only that far" in crit.evidence["scan_bounds_reached"][0]


def test_text_beyond_the_bound_is_cut_and_counted_other_blocks_kept():
    blocks = [{"type": "text", "text": "a" * 6}, {"type": "tool_use", "name": "x", "input": {}},
              {"type": "thinking", "thinking": "b" * 6}]
    assert bounded_text(blocks, limit=12) == (blocks, 0)
    kept, total = bounded_text(blocks, limit=8)
    assert total == 12 and kept == [{"type": "text", "text": "a" * 6}, {"type": "tool_use", "name": "x", "input": {}},
                                    {"type": "thinking", "thinking": "bb"}]


def test_the_atif_export_carries_a_command_agents_messages(through_proxy):
    events = through_proxy("atif", [{"content": [{"type": "text", "text": "Looking first."},
                                                 {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}]},
                                    {"content": [{"type": "text", "text": "Done: fixed."}]}])
    verdict = {"outcome": "accepted", "kind": None, "accepted": True, "reasons": [], "criteria": [],
               "grader_version": "g"}
    result = TrialResult.from_dict({"id": "t/a/0", "task": "t", "candidate": "a", "replicate": 0, "attempt": 1,
                                    "cost_usd": 0.0, "verdict": verdict})
    steps = trajectory(result, events, "fix it", {"name": "a", "version": "1", "model": MODEL}, "run")["steps"]
    agent = [s for s in steps if s["source"] == "agent"]
    assert [s["message"] for s in agent] == ["Looking first.", "Done: fixed."]
    assert [c["function_name"] for c in agent[0]["tool_calls"]] == ["bash"] and "tool_calls" not in agent[1]
