"""What a command agent's model-reported tool calls are, in the tool contract's terms.

A command-line agent runs its own tools inside the sandbox, unseen by trialbox; what trialbox does see is what the
model *reported* calling (the proxy records each ``tool_use`` block as a ``model_tool_use`` event). To check a
task's trajectory constraints on such an agent, each reported call is mapped onto the contract's tools (``bash``,
``read_file``, ``write_file``, ``edit_file``): its name through a map, its arguments renamed (the first of the
reported names present wins; a list, as Codex sends a command, is joined by spaces).

``DEFAULT_TOOL_MAP`` covers the contract's own names and the tool names of the agents people evaluate (Claude
Code's ``Bash``, ``Read``, ``Write``, ``Edit``, ``MultiEdit``; Codex's ``exec_command`` and ``shell``; OpenHands' ``execute_bash``);
a command candidate's ``tool_map`` adds to it or overrides it. The evidence is the model's word, and the verdict
says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTRACT_TOOLS = ("bash", "read_file", "write_file", "edit_file")
"""The contract's tools a reported call can be mapped onto (``submit`` and ``ask_user`` have no counterpart)."""

_BASH = {"tool": "bash", "arguments": {"command": ["command", "cmd"]}}
_READ = {"tool": "read_file", "arguments": {"path": ["path", "file_path", "filename"]}}
_WRITE = {"tool": "write_file", "arguments": {"path": ["path", "file_path", "filename"], "content": ["content", "text"]}}
_EDIT = {"tool": "edit_file", "arguments": {"path": ["path", "file_path", "filename"], "old": ["old", "old_string", "old_str"],
                                            "new": ["new", "new_string", "new_str"]}}
DEFAULT_TOOL_MAP: dict[str, dict[str, Any]] = {
    "bash": _BASH, "Bash": _BASH, "shell": _BASH, "exec_command": _BASH, "execute_bash": _BASH,
    "run_shell_command": _BASH,
    "read_file": _READ, "Read": _READ, "view": _READ,
    "write_file": _WRITE, "Write": _WRITE, "create_file": _WRITE,
    "edit_file": _EDIT, "Edit": _EDIT, "MultiEdit": _EDIT, "str_replace": _EDIT,
}


def effective_map(overrides: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The defaults with a candidate's ``tool_map`` over them (models or plain dicts)."""
    out = dict(DEFAULT_TOOL_MAP)
    for name, m in (overrides or {}).items():
        m = m.model_dump() if hasattr(m, "model_dump") else dict(m)
        out[name] = {"tool": m["tool"], "arguments": {k: [v] if isinstance(v, str) else list(v)
                                                       for k, v in (m.get("arguments") or {}).items()}}
    return out


def mapped_calls(events: list[dict[str, Any]], tool_map: Mapping[str, Any] | None
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """The model-reported tool calls as contract calls (``tool``, ``arguments``, ``seq``), and the reported tool
    names no entry maps."""
    table = effective_map(tool_map)
    calls, unmapped = [], set()
    for e in events:
        if e.get("kind") != "model_tool_use":
            continue
        name = str(e.get("tool"))
        entry = table.get(name)
        if entry is None:
            unmapped.add(name)
            continue
        reported = e.get("arguments") if isinstance(e.get("arguments"), dict) else {}
        args = {}
        for contract_arg, names in entry["arguments"].items():
            value = next((reported[n] for n in names if n in reported), None)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if value is not None:
                args[contract_arg] = value
        calls.append({"tool": entry["tool"], "arguments": args, "seq": e.get("seq"), "reported_as": name})
    return calls, sorted(unmapped)


def mappable(tool_map: Mapping[str, Any] | None) -> set[str]:
    """The contract tools some reported call can be mapped onto."""
    return {entry["tool"] for entry in effective_map(tool_map).values()}
