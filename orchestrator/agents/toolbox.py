"""Tool contract v1, executed against a ``Sandbox`` and recorded on the host.

The ``ToolBox`` is the only handle an agent gets on its sandbox: every call
goes through ``call()``, which charges the budget, runs the tool, and appends
one ``tool`` event to the host-side log before returning, so an agent cannot
act without being recorded. A failing command or a bad argument is data for
the model (``is_error``); a dead sandbox or a breached budget stops the agent
(``AgentStop``) and is never shown to the model as output.

Tools: ``bash(command, timeout)``, ``read_file(path)``,
``write_file(path, content)``, ``edit_file(path, old, new)``,
``submit(summary, abstain=false)``, ``ask_user(question)`` (answered from the
task's canned reply, counted as an intervention).
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker.errors
import requests.exceptions

from ..errors import AgentStop, SandboxBroken, SandboxError, ToolError
from ..events import EventLog, now_iso
from ..hostspace import host_full
from ..sandbox.base import WORKSPACE, Sandbox, within
from ..textsafe import MAX_DEPTH, recordable_data
from .budget import Budget, StopReason

TOOL_CONTRACT_REVISION = "v1"
DEFAULT_BASH_TIMEOUT = 120.0
MAX_BASH_TIMEOUT = 1800.0
MODEL_OUTPUT_CHARS = 16_000
EVENT_OUTPUT_CHARS = 64_000
MAX_READ_BYTES = 1 << 20

TOOL_SPECS: list[dict[str, Any]] = [
    {"name": "bash", "description": "Run a bash command in the repository (working directory /workspace). "
                                    "Returns stdout, stderr and the exit code.",
     "input_schema": {"type": "object", "properties": {
         "command": {"type": "string", "description": "The command line."},
         "timeout": {"type": "number", "description": f"Seconds before the command is killed (default {DEFAULT_BASH_TIMEOUT:.0f})."}},
         "required": ["command"]}},
    {"name": "read_file", "description": "Read a text file (path relative to /workspace or absolute).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write_file", "description": "Create or replace a file with the given content (parents are created).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                      "required": ["path", "content"]}},
    {"name": "edit_file", "description": "Replace the one occurrence of `old` in a file by `new`.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                       "new": {"type": "string"}}, "required": ["path", "old", "new"]}},
    {"name": "submit", "description": "Finish: submit the work with a one-line summary, or abstain when the task "
                                      "cannot or should not be done as asked.",
     "input_schema": {"type": "object", "properties": {"summary": {"type": "string"}, "abstain": {"type": "boolean"}},
                      "required": ["summary"]}},
    {"name": "ask_user", "description": "Ask the person who gave the task a question (use sparingly).",
     "input_schema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
]
TOOL_NAMES = {t["name"] for t in TOOL_SPECS}


def tool_specs(workdir: str = WORKSPACE) -> list[dict[str, Any]]:
    """The tool definitions a model is given, naming the task's workspace (``/workspace`` unless the task
    sets ``workdir``: the text is then otherwise identical)."""
    if workdir == WORKSPACE:
        return [dict(t) for t in TOOL_SPECS]
    return [{**t, "description": t["description"].replace(WORKSPACE, workdir)} for t in TOOL_SPECS]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gives back to the agent: ``output`` clipped for a model, ``full`` whole."""

    output: str
    is_error: bool = False
    full: str | None = None


@dataclass
class Submission:
    summary: str
    abstain: bool


def _check_unicode(arguments: dict[str, Any]) -> None:
    """Arguments must be valid Unicode: JSON can carry a lone surrogate, which no file or command can hold
    (``recordable_data`` walks them as the event log does and names what it would have to escape), and no
    deeper than the event log records them."""
    escaped: list[str] = []
    capped: list[str] = []
    recordable_data(arguments, escaped=escaped, raw_bytes=False, capped=capped)
    if escaped:
        raise ToolError(f"argument {escaped[0]!r} is not valid Unicode: it holds a lone surrogate", kind="bad_arguments")
    if capped:  # no tool takes such a value, and walking it further (repr, json) would exhaust the recursion limit
        raise ToolError(f"argument {capped[0].split('.')[0].split('[')[0]!r} nests deeper than {MAX_DEPTH} levels",
                        kind="bad_arguments")


def clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` within ``limit`` characters, with a marker of what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


@dataclass
class ToolBox:
    """Runs tool calls of contract v1 against one sandbox, recording each on the host."""

    sandbox: Sandbox
    events: EventLog
    budget: Budget
    ask_user_reply: str | None = None
    submission: Submission | None = None
    interventions: int = 0
    pending: list[threading.Thread] = field(default_factory=list)
    """File operations cut off at the deadline, still running in the background."""

    def call(self, tool: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Run one tool call; ``AgentStop`` when the budget, the deadline or the sandbox ends the trial.

        The call is recorded (``tool_started``, with its arguments as they came, escaped where they are not
        valid Unicode) before anything runs, and its result (``tool``) after; so a call that never returned
        (the harness died under it) is still in the log. Where a fault lies decides what happens: arguments the
        model got wrong (a missing one, a lone surrogate) and any error raised while handling what the agent
        sent are tool errors it sees; a dead sandbox is the agent's ``sandbox_broken``; only the engine or the
        host failing under a well-formed call is an infrastructure error."""
        arguments = arguments if isinstance(arguments, dict) else {}
        self.budget.charge_tool_call()
        started, t0 = now_iso(), time.monotonic()
        opened = self.events.append("tool_started", tool=str(tool), arguments=arguments, started_at=started)
        record: dict[str, Any] = {"exit_code": None, "timed_out": False, "error_kind": None}
        stop: AgentStop | None = None
        try:
            _check_unicode(arguments)
            result = self._dispatch(tool, arguments, record)
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
            record["error_kind"] = exc.kind
        except SandboxBroken as exc:
            result = ToolResult("", is_error=True)
            record["error_kind"] = f"sandbox_broken:{exc.reason}"
            stop = AgentStop(StopReason.SANDBOX_BROKEN, exc.message)
        except AgentStop as exc:
            result = ToolResult("", is_error=True)
            record["error_kind"] = exc.reason.value
            stop = exc
        except SandboxError as exc:  # the engine failed under the agent: an infrastructure error, never output
            result = ToolResult("", is_error=True)
            record["error_kind"] = "infra_error"
            stop = AgentStop(StopReason.INFRA_ERROR, exc.message)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
            if host_full(exc):
                raise  # the host's file system is full: the run stops (``hostspace``), the attempt is no result
            result = ToolResult("", is_error=True)  # the engine or the host, not the agent's input
            record["error_kind"] = "infra_error"
            stop = AgentStop(StopReason.INFRA_ERROR, f"{type(exc).__name__}: {exc}"[:500])
        except Exception as exc:  # raised while handling what the agent sent: the agent's, shown to it
            result = ToolResult(f"the tool could not handle these arguments ({type(exc).__name__}: {exc})"[:2000],
                                is_error=True)
            record["error_kind"] = "tool_failed"
        full = result.output
        self.events.append("tool", tool=str(tool), arguments=arguments, output=clip(full, EVENT_OUTPUT_CHARS),
                           output_size=len(full.encode("utf-8", "surrogatepass")), error=result.is_error,
                           started_at=started, started_seq=opened["seq"], ended_at=now_iso(),
                           duration_s=round(time.monotonic() - t0, 6), **record)
        if stop is not None:
            raise stop
        return ToolResult(clip(full, MODEL_OUTPUT_CHARS), result.is_error, full)

    def _bounded(self, fn: Callable[[], Any], what: str) -> Any:
        """A file operation on the sandbox within the time left; at the deadline the agent stops
        (the operation may still finish in the background: ``pending`` is joined before the export)."""
        try:
            return within(self.budget.remaining(), fn, what, self.pending)
        except TimeoutError as exc:
            raise AgentStop(StopReason.DEADLINE, f"{what} was still running at the deadline") from exc

    # ------------------------------------------------------------------ tools
    def _dispatch(self, tool: str, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        if tool not in TOOL_NAMES:
            raise ToolError(f"unknown tool {tool!r}; the tools are {sorted(TOOL_NAMES)}", kind="unknown_tool")
        return getattr(self, f"_{tool}")(args, record)

    @staticmethod
    def _arg(args: dict[str, Any], name: str, kind: type = str, default: Any = ...) -> Any:
        if name not in args:
            if default is ...:
                raise ToolError(f"missing argument {name!r}")
            return default
        value = args[name]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind):
            raise ToolError(f"argument {name!r} must be a {kind.__name__}")
        return value

    def _path(self, path: str) -> str:
        if not path or "\0" in path:
            raise ToolError("path must be a non-empty string")
        workdir = getattr(getattr(self.sandbox, "spec", None), "workdir", WORKSPACE)
        return posixpath.normpath(path if path.startswith("/") else posixpath.join(workdir, path))

    def _bash(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        command = self._arg(args, "command")
        asked = self._arg(args, "timeout", float, DEFAULT_BASH_TIMEOUT)
        timeout = max(0.1, min(asked, MAX_BASH_TIMEOUT))
        remaining = self.budget.remaining()
        res = self.sandbox.exec(["bash", "-c", command], timeout=min(timeout, remaining))
        record.update(exit_code=res.exit_code, timed_out=res.timed_out, oom_killed=res.oom_killed)
        out = res.stdout.decode("utf-8", errors="replace")
        err = res.stderr.decode("utf-8", errors="replace")
        if res.timed_out and remaining <= timeout:
            raise AgentStop(StopReason.DEADLINE, f"a command was still running at the deadline: {command[:200]}")
        text = out + (f"\n[stderr]\n{err}" if err else "")
        if res.stdout_size > len(res.stdout) or res.stderr_size > len(res.stderr):
            text += f"\n[output truncated: {res.stdout_size} bytes of stdout, {res.stderr_size} of stderr]"
        if res.timed_out:
            text += f"\n[killed after {timeout:.0f}s]"
        if res.oom_killed:
            text += "\n[a process was killed: out of memory]"
        text += f"\n[exit code: {res.exit_code}]"
        return ToolResult(text, is_error=not res.ok)

    def _read(self, path: str) -> str:
        try:
            data = self._bounded(lambda: self.sandbox.read_file(path, max_bytes=MAX_READ_BYTES), f"reading {path}")
        except ValueError as exc:
            raise ToolError(str(exc), kind="too_large") from exc
        except SandboxBroken:
            raise
        except SandboxError as exc:
            if not self.sandbox.is_running():
                raise SandboxBroken("the sandbox stopped", reason="exited") from exc
            raise ToolError(f"cannot read {path}: {exc.message}", kind="not_found") from exc
        return data.decode("utf-8", errors="replace")

    def _write(self, path: str, content: str) -> None:
        parent = posixpath.dirname(path)
        made = self.sandbox.exec(["mkdir", "-p", "--", parent], timeout=min(30.0, self.budget.remaining()))
        if made.timed_out:
            raise AgentStop(StopReason.DEADLINE, f"creating {parent} was still running at the deadline")
        if made.exit_code != 0:
            raise ToolError(f"cannot create {parent}: {made.stderr.decode(errors='replace').strip()}", kind="write_failed")
        try:
            data = content.encode()
            self._bounded(lambda: self.sandbox.write_file(path, data), f"writing {path}")
        except SandboxBroken:
            raise
        except SandboxError as exc:
            raise ToolError(f"cannot write {path}: {exc.message}", kind="write_failed") from exc

    def _read_file(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        return ToolResult(self._read(self._path(self._arg(args, "path"))))

    def _write_file(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        path, content = self._path(self._arg(args, "path")), self._arg(args, "content")
        self._write(path, content)
        return ToolResult(f"wrote {len(content.encode())} bytes to {path}")

    def _edit_file(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        path = self._path(self._arg(args, "path"))
        old, new = self._arg(args, "old"), self._arg(args, "new")
        if not old:
            raise ToolError("'old' must not be empty")
        text = self._read(path)
        count = text.count(old)
        if count != 1:
            raise ToolError(f"'old' occurs {count} times in {path}; it must occur exactly once", kind="no_unique_match")
        self._write(path, text.replace(old, new, 1))
        return ToolResult(f"edited {path}")

    def _submit(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        self.submission = Submission(self._arg(args, "summary"), self._arg(args, "abstain", bool, False))
        return ToolResult("submitted")

    def _ask_user(self, args: dict[str, Any], record: dict[str, Any]) -> ToolResult:
        self._arg(args, "question")
        if self.ask_user_reply is None:
            raise ToolError("no one is available to answer; decide yourself", kind="no_reply")
        self.interventions += 1
        return ToolResult(self.ask_user_reply)
