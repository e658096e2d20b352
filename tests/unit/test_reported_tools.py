"""Trajectory constraints on a command agent: checked on the tool calls its model reported, mapped onto the
tool contract; what cannot be mapped is not applicable, never a rejection."""

from __future__ import annotations

import pytest

from orchestrator.grading.criteria import trajectory
from orchestrator.loading import load_manifest
from orchestrator.manifest import ToolMapping
from orchestrator.taskload import load_tasks
from orchestrator.toolnames import mapped_calls


@pytest.fixture(scope="module")
def tasks(repo_root):
    return {t.id: t for t in load_tasks(load_manifest(repo_root / "examples" / "compare-prompts.yaml"))}


def reported(*calls):
    events = [{"kind": "model_call", "seq": 0}]
    events += [{"kind": "model_tool_use", "source": "model_reported", "tool": name, "arguments": args, "seq": i + 1}
               for i, (name, args) in enumerate(calls)]
    return events


def test_claude_codes_tool_names_count_as_the_contracts(tasks):
    task = tasks["textkit-wrap-long-words"]  # forbidden_tools [ask_user], order [read_file, write_file]
    good = trajectory(task, reported(("Read", {"file_path": "a.py"}), ("Write", {"file_path": "a.py", "content": "x"})),
                      "command")
    assert good.passed, good.evidence
    assert good.evidence["source"] == "model_reported" and good.evidence["tools_used"] == ["read_file", "write_file"]
    assert not good.evidence["not_applicable"]  # without offered tools recorded, the map's tools (ask_user too)
    bad = trajectory(task, reported(("Write", {"file_path": "a.py", "content": "x"}), ("Read", {"file_path": "a.py"})),
                     "command")
    assert not bad.passed and "'write_file' happened before 'read_file'" in bad.evidence["problems"]


def test_a_forbidden_command_is_found_in_a_reported_shell_call(tasks):
    task = tasks["textkit-slug-unicode"]  # forbidden_commands ["pip install"]
    codex = trajectory(task, reported(("shell", {"command": ["bash", "-lc", "pip install requests"]})), "command")
    assert not codex.passed and any("pip install" in p for p in codex.evidence["problems"])
    clean = trajectory(task, reported(("Bash", {"command": "pytest -q"})), "command")
    assert clean.passed, clean.evidence


def test_an_agent_that_reports_no_tool_call_is_not_applicable_rather_than_rejected(tasks):
    task = tasks["textkit-slug-unicode"]
    c = trajectory(task, [{"kind": "model_call", "seq": 0}], "command")
    assert c.passed and c.evidence["not_applicable"] and "reported no tool call" in c.evidence["not_applicable"][0]


def test_a_candidate_maps_its_own_tool_names(tasks):
    calls, unmapped = mapped_calls(reported(("run", {"script": "pip install x"}), ("mystery", {})),
                                   {"run": ToolMapping(tool="bash", arguments={"command": "script"})})
    assert [(c["tool"], c["arguments"]) for c in calls] == [("bash", {"command": "pip install x"})]
    assert unmapped == ["mystery"]
    task = tasks["textkit-slug-unicode"]
    c = trajectory(task, reported(("run", {"script": "pip install x"})), "command",
                   {"run": ToolMapping(tool="bash", arguments={"command": "script"})})
    assert not c.passed


def test_harness_observed_tools_are_checked_as_before(tasks):
    task = tasks["textkit-wrap-long-words"]
    events = [{"kind": "tool", "source": "harness", "tool": "ask_user", "arguments": {}, "seq": 1}]
    c = trajectory(task, events, "claude")
    assert not c.passed and "forbidden tool 'ask_user' used" in c.evidence["problems"] and "source" not in c.evidence
