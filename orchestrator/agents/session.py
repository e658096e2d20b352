"""One agent working on one task in one fresh sandbox: the piece a trial builds on.

``agent_session`` prepares what the agent needs before its sandbox exists (the
model proxy's socket for ``command``), starts the sandbox with the task's
history-free repository in its workspace, runs the agent to a typed stop, and
yields the result with the sandbox still there (stopped, filesystem kept) for
whoever grades it. The event log is closed and the sandbox removed on exit,
whatever happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

from ..errors import InstallFailed, SandboxError
from ..events import EventLog
from ..install import run_install
from ..canaries import Canaries
from ..prepare import Prepared
from ..grading.export import Listing, list_workspace
from ..stageclock import lap
from ..sandbox.base import Sandbox, SandboxFactory, remove_and_meter
from ..sandbox.meter import Usage
from ..tasks import Task
from .base import Agent, AgentContext, AgentResult, run_agent
from .budget import Budget, BudgetLimits
from .toolbox import ToolBox

PENDING_JOIN_S = 60.0
LISTING_TIMEOUT_S = 120.0
"""The listing taken before the stop: bounded like the export's own."""


@dataclasses.dataclass
class Session:
    result: AgentResult
    sandbox: Sandbox
    events: EventLog
    anchor: str = ""
    usage: dict = dataclasses.field(default_factory=dict)
    setup_outputs: tuple[str, ...] = ()
    """Workspace paths the task's install step created before the agent started (trialbox's, not the agent's)."""
    listing: Listing | None = None
    """The workspace's own listing, taken once no process of the agent was left, before the stop (the export
    checks its archive against it without starting the sandbox again); None when it could not be taken so."""


@contextlib.contextmanager
def agent_session(agent: Agent, task: Task, prepared: Prepared, sandboxes: SandboxFactory, events_path: Path,
                  limits: BudgetLimits, trial_id: str, usage: list[Usage] | None = None,
                  on_ready: Callable[[], None] | None = None, sandbox: Sandbox | None = None) -> Iterator[Session]:
    """Run ``agent`` on ``task`` in a fresh sandbox made from the prepared spec (``prepare.prepare``) plus the
    agent's own mounts; yields the session after the agent stopped.

    The prepared canaries are planted outside the workspace before the agent starts: in the
    environment, ``~/.netrc`` and a cloud credentials file. What the sandbox used (CPU time, memory-time)
    is appended to ``usage`` when it is removed, whether or not the session got as far as the agent.
    ``on_ready`` is called once the sandbox is ready, just before the agent starts (the trial prepares its grader
    then, while the agent works). ``sandbox``: one made ahead (``ahead.ready_trial``) from the prepared spec plus
    the agent's mounts, its ``prepare()`` already called; it is started here like a fresh one.
    """
    with structlog.contextvars.bound_contextvars(trial_id=trial_id):
        with _session(agent, task, prepared, sandboxes, events_path, limits, trial_id, usage, on_ready,
                      sandbox) as session:
            yield session


def sandbox_for(agent: Agent, prepared: Prepared, sandboxes: SandboxFactory) -> Sandbox:
    """The agent's sandbox, not created yet: the prepared spec plus the mounts the agent's own ``prepare()``
    returns (a model proxy's socket folder: the proxy starts here)."""
    mounts = agent.prepare() if hasattr(agent, "prepare") else []  # the agent's own part of the spec
    return sandboxes(dataclasses.replace(prepared.spec, mounts=tuple(prepared.spec.mounts) + tuple(mounts)))


def _listing_before_stop(sandbox: Sandbox, workdir: str) -> Listing | None:
    """The workspace's listing with every process of the agent killed first (nothing can change the files from
    then until the export); None when they could not all be killed or the listing failed (the export then lists
    after the stop, the sandbox started again with its command only)."""
    if sandbox.archives_on_host or not sandbox.own_pid_namespace or not ptrace_restricted():
        return None  # archived on the host from its disk once stopped: no listing needed
    try:
        listing = list_workspace(sandbox, workdir, LISTING_TIMEOUT_S, kill_first=True)  # one command: kill, then list
    except SandboxError:
        return None
    return listing if listing is not None and listing.entries is not None else None


def ptrace_restricted() -> bool:
    """Whether the host's kernel keeps a process from tracing one it did not start (Yama ``ptrace_scope`` ≥ 1).
    Without it, a process of the agent could take over the sandbox's own command (same user) and so survive the
    kill and forge the listing; the export then lists after the stop, the sandbox started again (nothing of the
    agent's runs in it)."""
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()) >= 1
    except (OSError, ValueError):
        return False


def _record_network(events: EventLog, before: dict[str, int] | None, after: dict[str, int] | None) -> None:
    """The ``network_counters`` event: the sandbox's no-route counts when the agent started and once it stopped
    (its processes killed first when the listing was taken), and their difference, the attempts to reach
    beyond the sandbox (null when either reading failed)."""
    attempts = None
    if before is not None and after is not None:
        attempts = sum(max(0, after.get(k, 0) - before.get(k, 0)) for k in after)
    events.append("network_counters", before=before, after=after, attempts=attempts)


def _plant(sandbox: Sandbox, canaries: Canaries) -> None:
    sandbox.write_files({path: content.encode() for path, content in canaries.files(sandbox.spec.home).items()},
                        mode=0o600)


def _install(sandbox: Sandbox, task: Task, repo_tar: Path) -> tuple[str, ...]:
    """Run the task's install step on the untouched repository; ``InstallFailed`` when it fails (the task's
    problem: the agent has not started)."""
    if task.runtime.install is None:
        return ()
    with tarfile.open(repo_tar) as tf:
        paths = [m.name.removeprefix("./") for m in tf.getmembers() if not m.isdir()]
    result = run_install(sandbox, task.runtime.install, paths)
    if not result.ok:
        raise InstallFailed(f"the install step of task {task.id} failed on the untouched repository "
                            f"(exit {result.exit_code}): {result.log_tail[-1500:]}")
    return result.outputs


@contextlib.contextmanager
def _session(agent: Agent, task: Task, prepared: Prepared, sandboxes: SandboxFactory, events_path: Path,
             limits: BudgetLimits, trial_id: str, used: list[Usage] | None = None,
             on_ready: Callable[[], None] | None = None, ready: Sandbox | None = None) -> Iterator[Session]:
    canaries = prepared.canaries
    sandbox: Sandbox | None = ready
    events: EventLog | None = None
    try:
        if sandbox is None:
            sandbox = sandbox_for(agent, prepared, sandboxes)
        spec = sandbox.spec
        events = EventLog(events_path, trial_id)
        sandbox.start()
        lap("sandbox")
        outputs = _install(sandbox, task, prepared.repo_tar)
        if canaries is not None:
            _plant(sandbox, canaries)
        network_before = sandbox.network_counters()  # the install step's own traffic is not the agent's
        lap("setup")
        if on_ready is not None:
            on_ready()
        budget = Budget(limits)  # the clock starts once the sandbox is ready
        toolbox = ToolBox(sandbox, events, budget, ask_user_reply=task.config.ask_user_reply)
        instruction = (task.folder / task.config.instruction).read_text()
        ctx = AgentContext(instruction, toolbox, budget, events, task.config.constraints.max_steps,
                           canaries.values if canaries else [], trial_id)
        result = run_agent(agent, ctx)
        lap("agent")
        running = sandbox.is_running()
        conditions = sandbox.conditions() if running else {}
        listing = _listing_before_stop(sandbox, task.config.workdir) if running and not toolbox.pending else None
        _record_network(events, network_before, sandbox.network_counters() if running else None)
        sandbox.stop()
        for worker in toolbox.pending:  # a file operation cut off at the deadline finishes now (its lease holder is
            worker.join(PENDING_JOIN_S)  # gone) or never: it cannot land after the export
        if any(w.is_alive() for w in toolbox.pending):
            raise SandboxError("a file operation on the sandbox did not end after the sandbox stopped",
                               container=spec.name)
        lap("stop")
        session = Session(result, sandbox, events, usage=conditions, setup_outputs=outputs, listing=listing)
        session.anchor = events.close()
        yield session
    finally:
        try:
            if events is not None:
                events.close()  # may fail (a full disk): the sandbox is removed all the same
        finally:
            try:
                if sandbox is not None:
                    remove_and_meter(sandbox, used, "cleanup")
            finally:
                if hasattr(agent, "close"):
                    agent.close()
