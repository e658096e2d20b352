"""ATIF trajectories from host-recorded events, validated against the schema transcribed from the ATIF RFC."""

from __future__ import annotations

import json

import jsonschema
import pytest

from orchestrator.atif import trajectory
from orchestrator.events import EventLog, read_events
from orchestrator.result import TrialResult
from tests.conftest import ROOT

SCHEMA = json.loads((ROOT / "schemas" / "atif-v1.4.schema.json").read_text())
VERDICT = {"outcome": "accepted", "kind": None, "accepted": True, "reasons": [], "criteria": [], "grader_version": "g"}


def result(candidate: str) -> TrialResult:
    return TrialResult.from_dict({"id": f"t/{candidate}/0", "task": "t", "candidate": candidate, "replicate": 0,
                                  "attempt": 1, "cost_usd": 0.02, "verdict": VERDICT})


def record(tmp_path, name, steps):
    log = EventLog(tmp_path / f"{name}.jsonl", f"t/{name}/0")
    for kind, fields in steps:
        log.append(kind, **fields)
    log.close()
    return read_events(tmp_path / f"{name}.jsonl")


CALL = {"model_served": "m", "input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50,
        "cache_write_tokens": 10, "cost_usd": 0.01, "started_at": "2026-12-01T10:00:00+00:00",
        "ended_at": "2026-12-01T10:00:01+00:00"}


def test_a_model_agents_calls_and_the_harness_observations_make_its_steps(tmp_path):
    events = record(tmp_path, "claude", [
        ("model_call", {**CALL, "content": [{"type": "text", "text": "Let me look."},
                                            {"type": "tool_use", "id": "tu1", "name": "bash", "input": {"command": "ls"}}]}),
        ("tool", {"tool": "bash", "arguments": {"command": "ls"}, "output": "a.py\n", "started_at": "x"}),
        ("model_call", {**CALL, "content": [{"type": "tool_use", "id": "tu2", "name": "submit", "input": {"summary": "ok"}}]}),
        ("tool", {"tool": "submit", "arguments": {"summary": "ok"}, "output": "", "started_at": "y"})])
    t = trajectory(result("claude"), events, "Fix it.", {"name": "claude", "version": "1", "model": "m"}, "run1")
    jsonschema.validate(t, SCHEMA)
    user, first, second = t["steps"]
    assert (user["source"], user["message"]) == ("user", "Fix it.")
    assert first["message"] == "Let me look." and first["tool_calls"][0]["tool_call_id"] == "tu1"
    assert first["observation"]["results"] == [{"content": "a.py\n", "source_call_id": "tu1"}]
    assert first["metrics"] == {"prompt_tokens": 160, "completion_tokens": 20, "cached_tokens": 50, "cost_usd": 0.01,
                                "extra": {"cache_creation_input_tokens": 10}}  # ATIF's prompt: every input token
    assert t["final_metrics"]["total_prompt_tokens"] == 320 and t["final_metrics"]["total_steps"] == 3
    assert t["extra"]["trialbox"]["outcome"] == "accepted" and t["session_id"] == "run1/t/claude/0/a1"


def test_a_command_agents_tool_calls_are_marked_model_reported(tmp_path):
    events = record(tmp_path, "cmd", [
        ("agent_command", {"command": "mini"}),
        ("model_call", CALL),
        ("model_tool_use", {"source": "model_reported", "tool": "bash", "arguments": {"command": "ls"},
                            "tool_use_id": "r1"})])
    t = trajectory(result("cmd"), events, "Fix it.", {"name": "mini-swe-agent", "version": "2.4.6"}, "run1")
    jsonschema.validate(t, SCHEMA)
    step = t["steps"][1]
    assert step["tool_calls"] == [{"tool_call_id": "r1", "function_name": "bash", "arguments": {"command": "ls"}}]
    assert step["extra"]["tool_calls_source"] == "model_reported" and "observation" not in step


def test_a_script_agents_tool_calls_are_steps_of_their_own(tmp_path):
    events = record(tmp_path, "script", [("tool", {"tool": "write_file", "arguments": {"path": "a.py"},
                                                   "output": "wrote", "started_at": "z"})])
    t = trajectory(result("script"), events, "Fix it.", {"name": "script", "version": "trialbox-1"}, "run1")
    jsonschema.validate(t, SCHEMA)
    [_, step] = t["steps"]
    assert step["tool_calls"][0]["function_name"] == "write_file" and step["extra"]["tool_calls_source"] == "harness"
    assert step["observation"]["results"][0]["content"] == "wrote" and "metrics" not in step


def test_the_schema_refuses_what_atif_does_not_allow():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "a", "version": "1"},
                             "steps": [{"step_id": 1, "source": "tool", "message": ""}]}, SCHEMA)
