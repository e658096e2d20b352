"""The ``Sandbox`` contract: the only way trialbox touches a container.

Agents and graders see this class and nothing else; where the sandbox runs
(a local Docker engine, gVisor, later a remote engine) is chosen by the spec.
Keep it small: new features go into collaborators, not into this class.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .meter import Usage

DEFAULT_USER = "1000:1000"
"""The images' user (``agent``). A Docker sandbox given it runs as a host uid of its own (``hostuids``) under
that name: untrusted code of two containers never shares the kernel's per-user counts."""
WORKSPACE = "/workspace"
HOME = "/home/agent"
OTHER_HOME = "/trialbox-home"


def uid_gid(user: str) -> tuple[int, int]:
    """``uid:gid`` (or ``uid``) as numbers."""
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def home_for(workdir: str) -> str:
    """The sandbox user's ``$HOME`` (a tmpfs): ``/home/agent``, unless the workspace is there (a Harbor task whose
    working directory is ``/home/agent``), or holds it, or is inside it."""
    clash = workdir == HOME or workdir.startswith(HOME + "/") or HOME.startswith(workdir.rstrip("/") + "/")
    return OTHER_HOME if clash else HOME


@dataclass(frozen=True)
class SandboxSpec:
    """Everything that shapes one sandbox; resolved from the manifest by the planner."""

    image_id: str
    """Pinned image ID (``sha256:…``); never a tag, never pulled."""
    name: str
    """Unique per attempt (container name)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra labels (run, trial, attempt); trialbox adds its own."""
    cpu_limit: float = 1.0
    cpu_reservation: float = 1.0
    memory_limit_mb: int = 2048
    memory_reservation_mb: int = 1024
    pids_limit: int = 512
    disk_limit_mb: int = 2048
    """Size of the workspace disk (ext4 on a loop device, not counted as memory)."""
    tmp_limit_mb: int = 64
    """Size of each of /tmp and $HOME (tmpfs, counted against the memory limit)."""
    network: Literal["none", "bridge"] = "none"
    """Engine network mode. ``none``: loopback only. ``bridge`` exists for positive controls."""
    runtime: str = "runc"
    """Engine runtime name (the manifest allows runc or runsc)."""
    user: str = DEFAULT_USER
    workdir: str = WORKSPACE
    home: str = HOME
    env: dict[str, str] = field(default_factory=dict)
    mounts: tuple[tuple[str, str], ...] = ()
    """Read-only bind mounts ``(host path, container path)``, e.g. the model proxy's socket folder."""
    copied_mounts: tuple[tuple[str, str], ...] = ()
    """Read-only folders ``(host path, container path)`` given to this sandbox as a copy of its own, made when it is
    created and deleted when it is removed, readable by any user: no file of it is another sandbox's (a lock taken
    on a shared file is seen by every container that mounts it), and a host folder closed to others still reads.
    For trialbox's own folders and a task's held-out material (the grader's tools, a script grader's tests)."""
    init_user: str | None = None
    """``uid:gid`` of the container's init and its own command (None: ``user``). The pytest grader's are root's: the
    code under test, running as ``user``, can neither signal nor trace nor write into them (same-user processes
    can, where the kernel allows ptrace), so no process of its can pass for one of them and outlive its group."""
    workspace_owner: str | None = None
    """``uid:gid`` owning the workspace's root folder (None: ``user``). The pytest grader's is root's, so the
    code under test cannot move the folders of trusted files out of the way (see ``grading.runner``)."""
    workspace_seed: str | None = None
    """A tar on the host whose content the workspace starts with (e.g. the history-free repository)."""
    scratch_dirs: tuple[str, ...] = ()
    """Extra writable folders (tmpfs of ``tmp_limit_mb``, counted against memory, owned by the user): a
    script grader's test and reward folders, the oracle's solution folder."""
    machine: bool = False
    """The sandbox's state is the machine, not a folder (``sandbox.machine``): every top-level folder of the image
    is an overlay whose changes go to the sandbox's bounded disk; no workspace disk, no tmpfs over ``/tmp`` or
    ``$HOME`` (they are part of the machine). Only under ``runsc`` (gVisor), as the image's own user (root
    included): no leased uid, since the image's files belong to its users."""
    machine_changes: str | None = None
    """With ``machine``: an archive of another sandbox's changes (``machine.archive_changes``) that this one starts
    from, below its own (a grader's sandbox starts from the agent's final machine)."""


@dataclass(frozen=True)
class ExecResult:
    """What one command did."""

    exit_code: int | None
    """None when the process was killed before it reported one."""
    stdout: bytes
    stderr: bytes
    stdout_size: int
    """Full size in bytes; ``stdout`` may be truncated to the capture bound."""
    stderr_size: int
    timed_out: bool
    duration_s: float
    oom_killed: bool = False
    """A process of this command was killed by the kernel's OOM killer (cgroup counter)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class SandboxInfo:
    """What the engine actually applied, read back after start."""

    container_id: str
    name: str
    image_id: str
    runtime: str
    host_config: dict[str, Any]


CAPTURE_BYTES = 8 << 20
"""How much of each of a command's streams is kept (its full size is counted beside)."""
READ_ATTEMPTS = 4
"""How often a read whose output came back incomplete is tried again before ``OutputLost`` (the engine can
lose a fast exec's output)."""


class Sandbox(abc.ABC):
    """One isolated, limited environment for one trial attempt.

    Use as a context manager: ``start()`` on entry, ``remove()`` on exit, in
    ``finally`` even when the body raised. Agents, grading and ``tasks check``
    receive a ``SandboxFactory`` and use only what is on this contract; every
    error a method raises is a ``SandboxError`` (named below where it matters).
    """

    own_pid_namespace: bool = True
    """Its processes are alone in their PID namespace (a container): killing every process inside reaches only
    them."""

    def create(self) -> None:
        """Prepare the sandbox without starting it (a Docker sandbox: disk and container created), so that
        ``start`` only starts it; ``start`` does this itself when it was not done. Idempotent."""

    def kill_leftovers(self) -> bool:
        """Kill every process inside but the sandbox's own init and command (what a command or an agent left
        running); True when none is left. A sandbox that cannot (not alone in its PID namespace) says False."""
        return False

    spec: SandboxSpec
    info: SandboxInfo | None = None
    """What the engine applied, read back by ``start`` (None before)."""

    @abc.abstractmethod
    def start(self) -> SandboxInfo:
        """Create and start the sandbox; returns what was applied.

        Raises ``ImageNotFound`` (image absent; nothing is pulled),
        ``RuntimeUnavailable``, ``DiskError``, ``EngineUnavailable``, ``SandboxError``.
        """

    @abc.abstractmethod
    def exec(self, cmd: list[str], timeout: float | None = None, *, user: str | None = None,
             env: dict[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        """Run ``cmd`` inside; on ``timeout`` seconds, kill its whole process group and
        every process it started (background children included) and return with
        ``timed_out=True``. A failing command is data (non-zero ``exit_code``).

        Raises ``SandboxBroken`` when the sandbox no longer accepts commands.
        """

    @abc.abstractmethod
    def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        """The content of a regular file (works on a stopped sandbox too).

        Raises ``FileNotFoundError``-like ``SandboxError`` when absent or not a regular file,
        ``ValueError`` when larger than ``max_bytes``.
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace a file, owned by the sandbox user; parents must exist.

        Raises ``SandboxError`` when it cannot be written, ``SandboxBroken`` when the sandbox is gone."""

    def write_files(self, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Create or replace several files, their parent folders made as needed (in one call where the sandbox
        can: a Docker sandbox writes small files outside the workspace in one exec)."""
        for path, data in files.items():
            self.exec(["mkdir", "-p", "--", path.rsplit("/", 1)[0] or "/"], timeout=30)
            self.write_file(path, data, mode)

    @abc.abstractmethod
    def copy_in(self, tar: bytes | Any, dest: str) -> None:
        """Extract a tar archive (bytes or a binary file) into ``dest``. Raises ``SandboxError``."""

    @abc.abstractmethod
    def copy_out(self, path: str) -> Iterator[bytes]:
        """A tar stream of ``path`` (works on a stopped sandbox); the caller bounds it.

        Raises ``SandboxError`` when ``path`` is absent or the engine refuses."""

    def host_archive(self, deadline: float | None = None) -> "HostArchive | None":
        """A tar stream of the stopped sandbox's workspace read on the host, from its disk (no engine, no
        command in the sandbox), cut off at ``deadline`` (monotonic); None when this sandbox cannot (the caller
        uses ``copy_out`` and a listing)."""
        return None

    archives_on_host: bool = False
    """Whether ``host_archive`` will be possible once the sandbox has stopped (then no listing is needed)."""

    @abc.abstractmethod
    def oom_kill_count(self) -> int | None:
        """OOM kills recorded by the sandbox's memory cgroup so far (None: cannot tell). Never raises."""

    def network_counters(self) -> dict[str, int] | None:
        """The kernel's count of packets the sandbox's network namespace tried to send with no route to send
        them on (IPv4 and IPv6: ``ipv4_out_no_routes``, ``ipv6_out_no_routes``): under network ``none`` every
        connection or datagram meant to leave the sandbox adds one, loopback adds nothing, and nothing in the
        sandbox can lower it. None: cannot tell (this backend, or the read failed). Never raises."""
        return None

    @abc.abstractmethod
    def is_running(self) -> bool:
        """Whether the sandbox's init process is alive. Raises ``EngineUnavailable`` when no engine answers."""

    @abc.abstractmethod
    def stop(self, timeout: float = 5) -> None:
        """Stop every process; the filesystem is kept for export. Raises ``SandboxError``."""

    @abc.abstractmethod
    def resume(self, timeout: float = 30) -> None:
        """Start a stopped sandbox again for inspection: its init only, nothing the agent left runs.

        Raises ``SandboxError`` when it does not come back within ``timeout`` seconds."""

    @abc.abstractmethod
    def remove(self) -> None:
        """Remove the container and everything created for it; idempotent, never raises on absence."""

    @abc.abstractmethod
    def conditions(self) -> dict[str, int | None]:
        """What the host did to the running sandbox: CPU throttling, peak memory (None: unknown). Never raises."""

    @abc.abstractmethod
    def resources_used(self) -> Usage:
        """CPU time and memory-time over every span the sandbox ran (a running span is ended: call it once the
        sandbox stopped). Never raises: what could not be measured is ``unmeasured``."""

    def __enter__(self) -> "Sandbox":
        try:
            self.start()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def remove_and_meter(sandbox: Sandbox, used: list | None, stage: str) -> None:
    """A sandbox's end, whatever happened in it: removed (the trial's ``stage`` marked), and what it used
    appended to ``used`` (a sandbox that failed still ran)."""
    from ..stageclock import lap

    try:
        sandbox.remove()
        lap(stage)
    finally:
        if used is not None:
            used.append(sandbox.resources_used())


SandboxFactory = Callable[[SandboxSpec], Sandbox]
"""Makes a sandbox from its spec (not started); agents, grading and ``tasks check`` receive one of these."""


class HostArchive(abc.ABC):
    """A tar of a stopped workspace made on the host (``Sandbox.host_archive``): read its ``chunks``, then
    ``close``; ``problems`` then says what kept the archive from being whole (empty: it is whole)."""

    problems: list[str]

    @abc.abstractmethod
    def chunks(self) -> Iterator[bytes]: ...

    def finish(self) -> None:
        """The reader took the whole archive: read the stream to its end, so the archiver's status is known."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "HostArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class SandboxHost:
    """Where a trial's containers run, as the trial sees it: the factory of its sandboxes, the machine's
    description recorded with its result, and a probe of the engine (its latency is one of the trial's
    recorded conditions; raises ``SandboxError`` when the engine does not answer)."""

    sandboxes: SandboxFactory
    node: dict[str, Any]
    ping: Callable[[], object]
"""Makes a sandbox (not started) from its spec: what agents, grading and ``tasks check`` are given."""


def within(timeout: float, fn: Callable[[], Any], what: str, pending: list[threading.Thread] | None = None) -> Any:
    """``fn()`` within ``timeout`` seconds, or ``TimeoutError``. An engine call cannot be interrupted, so
    on timeout it goes on in a background thread, appended to ``pending`` for whoever must wait for it
    (a file write cut off at the deadline lands before the workspace is exported, never after)."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))

    worker = threading.Thread(target=run, daemon=True, name=f"within-{what[:40]}")
    worker.start()
    worker.join(max(0.0, timeout))
    if not box:
        if pending is not None:
            pending.append(worker)
        raise TimeoutError(f"{what} did not finish within {timeout:.1f}s")
    ok, value = box[0]
    if not ok:
        raise value
    return value
