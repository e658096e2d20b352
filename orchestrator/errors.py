"""The one exception tree of trialbox.

Every error trialbox raises on purpose is a ``TrialboxError``; the command line
prints its message (no traceback) and exits with its ``exit_code``. Leaves also
inherit the matching builtin so callers can catch either.

::

    TrialboxError
    ├── ConfigError (ValueError)         bad input: manifest, task or grader folder
    │   ├── ValidationFailed             many problems at once (``problems``)
    │   └── TaskSetError                 tasks that failed their last check, or were never checked
    ├── LockError                        the lock is missing, unreadable, or the run folder is another's
    │   └── DriftError                   identifiers differ from the lock (``drifted``)
    ├── CapacityError                    this host cannot hold even one trial's reservations
    ├── EngineOutage                     the engine did not answer again within the run's bound (exit 75)
    ├── HostDiskFull                     the run folder's or state folder's file system is full (exit 74)
    ├── InfraErrorsAbove                 a run ended with more infrastructure errors than it allows (exit 4)
    ├── ClusterError                     the Ray cluster cannot run this experiment
    │   └── NodeError                    trialbox failed while running a trial on a node (``spend``)
    ├── ImageError
    │   ├── ImageNotFound (LookupError)  an image the manifest or lock names is absent
    │   └── ImageBuildError              a build under images/ failed (``log_tail``)
    ├── RepoError                        a task repository could not be materialised
    ├── TestPatchError                   a task's test patch does not apply to its repository
    ├── GraderInfraError                 the grader itself could not run (``kind``, ``detail``)
    └── SandboxError                     anything about a container
        ├── EngineUnavailable (ConnectionError)   no Docker engine answers
        ├── RuntimeUnavailable           e.g. ``runsc`` is not registered with the engine
        ├── SandboxBroken                the sandbox no longer works (PID 1 gone, exec refused; ``reason``)
        ├── OutputLost                   the engine returned a command's output incomplete, again and again
        ├── InstallFailed                a task's install step failed before its agent started
        └── DiskError (OSError)          the bounded workspace disk could not be set up

Control flow, never an error shown to a person (not ``TrialboxError``, so no
handler of errors can swallow them by accident)::

    Exception
    ├── AgentStop                        the agent must stop now (``reason``: a ``StopReason``)
    ├── ToolError                        a tool call the model got wrong: returned to it as an error result
    └── Cancelled                        the run was interrupted: this trial is neither graded nor recorded
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class TrialboxError(Exception):
    """Root of every error trialbox raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(TrialboxError, ValueError):
    """A manifest, task or grader folder is invalid."""


@dataclass(frozen=True)
class Problem:
    """One validation problem: the file, the field path inside it, what was expected."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class ValidationFailed(ConfigError):
    """Several problems found at once; ``problems`` lists each with its file and field."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(str(p) for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s):\n{lines}")


class LockError(TrialboxError):
    """The lock file is missing or unreadable."""


class DriftError(LockError):
    """Identifiers no longer match the lock; ``drifted`` lists each one."""

    def __init__(self, drifted: list[str]) -> None:
        self.drifted = list(drifted)
        lines = "\n".join(f"  {d}" for d in self.drifted)
        super().__init__(f"{len(self.drifted)} identifier(s) drifted from the lock:\n{lines}\n"
                         "(when the change is intended, `trialbox lock MANIFEST` writes a new lock; a run folder "
                         "keeps the lock it started with)")


class CapacityError(TrialboxError):
    """This host cannot hold even one trial's reservations (CPUs, memory)."""


class TaskSetError(ConfigError):
    """Tasks that failed their last check, or were never checked: ``trialbox run`` refuses them."""


class EngineOutage(TrialboxError):
    """The Docker engine did not answer again within ``execution.engine_outage_wait_s``: the run stopped, its
    finished trials kept and the retries the outage owes marked (``trialbox run`` on the folder goes on).
    Exit 75 (EX_TEMPFAIL: try again later)."""

    exit_code = 75


class HostDiskFull(TrialboxError):
    """A file system the run writes to (the run folder's, the state folder's) is full or over quota, or has less
    free than a trial needs to start (``hostspace``): the run stopped, no new trial started, no retry spent, every
    record whole or absent (``trialbox run`` on the folder goes on once space is freed). Exit 74 (EX_IOERR)."""

    exit_code = 74


class InfraErrorsAbove(TrialboxError):
    """A run ended with more trials recorded as infrastructure errors than ``execution.max_infra_errors``
    (everything is recorded; the exit code says the figures rest on fewer trials than planned). Exit 4."""

    exit_code = 4


class ClusterError(TrialboxError):
    """The Ray cluster cannot run this experiment (unreachable, no Docker node, a node that does not match)."""


class NodeError(ClusterError):
    """trialbox failed while running a trial on a node (its traceback is in the driver's log).

    ``spend``: what the attempt cost when known otherwise than from its events; absent when it must be read
    from them."""

    _READ_EVENTS = object()

    def __init__(self, message: str, spend: Any = _READ_EVENTS) -> None:
        super().__init__(message)
        if spend is not NodeError._READ_EVENTS:
            self.spend = spend


class TestPatchError(TrialboxError):
    """The task's test patch does not apply to its untouched repository (a task-set error)."""

    __test__ = False


class GraderInfraError(TrialboxError):
    """The grader itself could not run (never the agent's failure): ``kind`` names the stage."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


class ImageError(TrialboxError):
    """Something about an image."""


class ImageNotFound(ImageError, LookupError):
    """An image the manifest or lock names is not on the engine (nothing is ever pulled)."""

    def __init__(self, message: str, image: str) -> None:
        super().__init__(message)
        self.image = image


class ImageBuildError(ImageError):
    """Building an image under images/ failed."""

    def __init__(self, message: str, image: str, log_tail: str = "") -> None:
        super().__init__(message + (f"\n--- build log (tail) ---\n{log_tail}" if log_tail else ""))
        self.image = image
        self.log_tail = log_tail


class RepoError(TrialboxError):
    """A task repository could not be materialised at its commit."""


class SandboxError(TrialboxError):
    """Anything about a sandbox container."""

    def __init__(self, message: str, container: str | None = None) -> None:
        super().__init__(message)
        self.container = container


class EngineUnavailable(SandboxError, ConnectionError):
    """No Docker engine answers."""


class RuntimeUnavailable(SandboxError):
    """The requested container runtime (e.g. runsc) is not registered with the engine."""


class SandboxBroken(SandboxError):
    """The sandbox stopped working (PID 1 gone, exec refused); never shown to a model as output.

    ``reason`` is ``oom`` (the engine saw an OOM kill), ``exited`` or ``unresponsive``.
    """

    def __init__(self, message: str, container: str | None = None, reason: str = "exited") -> None:
        super().__init__(message, container=container)
        self.reason = reason


class OutputLost(SandboxError):
    """The engine returned a command's output incomplete, again and again (a known race of ``docker exec``
    with short-lived commands): what was read cannot be trusted, and it is nobody's fault but ours."""


class InstallFailed(SandboxError):
    """A task's install step failed on the untouched repository (the task's problem, never the agent's)."""


class DiskError(SandboxError, OSError):
    """The bounded writable disk of a sandbox could not be created or removed."""


# --------------------------------------------------------------------------- control flow
class AgentStop(Exception):
    """Control flow: the agent must stop now, for ``reason`` (a ``agents.budget.StopReason``)."""

    def __init__(self, reason: Any, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


class ToolError(Exception):
    """A tool call the model got wrong: returned to it as an error result."""

    def __init__(self, message: str, kind: str = "bad_arguments") -> None:
        super().__init__(message)
        self.kind = kind


class Cancelled(Exception):
    """The run was interrupted: this trial is not graded and not recorded."""
