"""Agents without a model: ``nop``, ``oracle`` and ``script``.

* ``nop`` submits at once, changing nothing (and does not abstain): the floor
  every task must reject.
* ``oracle`` applies the grader folder's reference patch *through the host*:
  the files the patch touches are read from the sandbox, patched on the host
  with GNU patch, and written back with the tool contract. The patch itself
  never enters the agent's container.
* ``script`` runs a YAML list of steps, each one tool call of the contract.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .base import Agent, AgentContext
from .toolbox import TOOL_NAMES


class NopAgent(Agent):
    name = "nop"

    def run(self, ctx: AgentContext) -> None:
        ctx.toolbox.call("submit", {"summary": "nothing done"})


PATCH_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
PATCH_SOURCE = re.compile(r"^--- (?:a/)?(\S+)", re.MULTILINE)


class OracleAgent(Agent):
    name = "oracle"

    def __init__(self, patch: Path | None) -> None:
        self.patch = patch

    def run(self, ctx: AgentContext) -> None:
        if self.patch is None:
            ctx.toolbox.call("submit", {"summary": "no reference solution: abstaining", "abstain": True})
            return
        text = self.patch.read_text()
        paths = sorted({p for p in PATCH_TARGET.findall(text) + PATCH_SOURCE.findall(text) if p != "/dev/null"})
        with tempfile.TemporaryDirectory(prefix="trialbox-oracle-") as tmp:
            root = Path(tmp)
            for rel in paths:
                res = ctx.toolbox.call("read_file", {"path": rel})
                if not res.is_error:
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_text(res.full if res.full is not None else res.output)
            proc = subprocess.run(["patch", "-p1", "--batch", "--forward", "-d", str(root), "-i", str(self.patch)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise ConfigError(f"the reference patch {self.patch} does not apply: {proc.stdout}{proc.stderr}")
            for rel in paths:
                if (root / rel).exists():
                    ctx.toolbox.call("write_file", {"path": rel, "content": (root / rel).read_text()})
                else:
                    ctx.toolbox.call("bash", {"command": f"rm -f -- '{rel}'"})
        ctx.toolbox.call("submit", {"summary": "applied the reference solution"})


class SolutionScriptAgent(Agent):
    """The oracle of a script-graded task (an imported Harbor task): its ``solution`` folder is mounted
    read-only in this sandbox only (``trial.solution_mount``), and its script runs through the tool contract,
    in the workspace, within the trial's deadline."""

    name = "oracle"

    def __init__(self, script: str, mount: str, env: dict[str, str]) -> None:
        self.script, self.mount, self.env = script, mount, env

    def run(self, ctx: AgentContext) -> None:
        assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(self.env.items()))
        command = f"env {assignments} bash {shlex.quote(posixpath.join(self.mount, self.script))}"
        result = ctx.toolbox.call("bash", {"command": command, "timeout": max(1.0, ctx.budget.remaining() - 5)})
        ctx.toolbox.call("submit", {"summary": "ran the reference solution script"
                                               + (" (it failed)" if result.is_error else "")})


def load_steps(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Parse a script file: ``steps`` is a list of one-key mappings ``tool: {arguments}``."""
    data = yaml.safe_load(path.read_text())
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise ConfigError(f"{path}: steps: expected a list of tool calls")
    out = []
    for i, step in enumerate(steps):
        if not (isinstance(step, dict) and len(step) == 1):
            raise ConfigError(f"{path}: steps[{i}]: expected one tool name mapping to its arguments")
        (tool, args), = step.items()
        if tool not in TOOL_NAMES:
            raise ConfigError(f"{path}: steps[{i}]: unknown tool {tool!r} (expected one of {sorted(TOOL_NAMES)})")
        if not isinstance(args, dict):
            raise ConfigError(f"{path}: steps[{i}].{tool}: expected a mapping of arguments")
        out.append((tool, args))
    return out


class ScriptAgent(Agent):
    name = "script"

    def __init__(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        self.steps = steps

    def run(self, ctx: AgentContext) -> None:
        for tool, args in self.steps:
            ctx.toolbox.call(tool, args)
            if ctx.toolbox.submission is not None:
                return
