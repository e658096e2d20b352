"""An in-memory ``Sandbox``: its filesystem held in a dict, its commands run as host processes on a copy.

For code and tests that need a ``Sandbox`` without an engine (the agent session's logic, a tool's, the
export's): it keeps the contract's file and exec semantics and none of its isolation. **It is not a security
boundary**: a command runs on this host, as the sandbox user when trialbox runs as root (else as trialbox's own
user), with the network and every file the host lets that user reach. Trials always run in ``DockerSandbox``;
nothing chooses this class from a manifest.

What it keeps:

* the filesystem is the sandbox's alone: files, directories and symlinks by absolute path, seeded from the
  spec's ``workspace_seed``; ``read_file``, ``write_file``, ``copy_in`` and ``copy_out`` work on it directly
  (on a stopped sandbox too);
* ``exec`` materialises it in a private temporary folder, runs the command there with the working directory,
  ``HOME`` and ``TMPDIR`` inside it, and reads the whole tree back, deletions included. Paths in the command
  are relative to the working directory (an absolute ``/workspace/...`` means the host's);
* a timeout kills the command's process group and every process it started, background and ``setsid``
  children included (each carries the sandbox's token in its environment, which is how they are found);
* output is captured to ``CAPTURE_BYTES`` per stream with its full size counted, as in Docker.

What it cannot tell: OOM kills, throttling, CPU time and memory (``resources_used`` is ``unmeasured``).
"""

from __future__ import annotations

import io
import os
import posixpath
import signal
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import SandboxBroken, SandboxError
from .base import CAPTURE_BYTES, ExecResult, Sandbox, SandboxInfo, SandboxSpec
from .meter import Usage

TOKEN_VAR = "TRIALBOX_MEMORY_SANDBOX"
PATH = "/usr/local/bin:/usr/bin:/bin"


class MemorySandbox(Sandbox):
    """See the module's docstring."""

    own_pid_namespace = False  # its commands run on the host
    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.token = uuid.uuid4().hex
        self.files: dict[str, tuple[bytes, int]] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = {"/", spec.workdir, spec.home, "/tmp", *spec.scratch_dirs}
        self.running = False
        self.spans: list[float] = []
        self._since: float | None = None

    # ---- lifecycle
    def start(self) -> SandboxInfo:
        if self.spec.workspace_seed is not None:
            with open(self.spec.workspace_seed, "rb") as fh:
                self.copy_in(fh, self.spec.workdir)
        self.running, self._since = True, time.monotonic()
        self.info = SandboxInfo(f"memory-{self.token[:12]}", self.spec.name, self.spec.image_id, "memory",
                                {"NetworkMode": "host", "Memory": None, "NanoCpus": None, "PidsLimit": None})
        return self.info

    def is_running(self) -> bool:
        return self.running

    def stop(self, timeout: float = 5) -> None:
        self._kill_all()
        if self.running and self._since is not None:
            self.spans.append(time.monotonic() - self._since)
        self.running, self._since = False, None

    def resume(self, timeout: float = 30) -> None:
        self.running, self._since = True, time.monotonic()

    def remove(self) -> None:
        self.stop()
        self.files.clear()
        self.links.clear()

    # ---- files
    def _path(self, path: str) -> str:
        if not path.startswith("/"):
            path = posixpath.join(self.spec.workdir, path)
        return posixpath.normpath(path) if path != "/" else "/"

    def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        p = self._path(path)
        if p not in self.files:
            raise SandboxError(f"{path}: no such regular file in the sandbox")
        data = self.files[p][0]
        if len(data) > max_bytes:
            raise ValueError(f"{path}: {len(data)} bytes, more than {max_bytes}")
        return data

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        p = self._path(path)
        if posixpath.dirname(p) not in self.dirs:
            raise SandboxError(f"{path}: its folder does not exist in the sandbox")
        if p in self.dirs:
            raise SandboxError(f"{path}: is a folder")
        self.links.pop(p, None)
        self.files[p] = (bytes(data), mode & 0o7777)

    def copy_in(self, tar: bytes | Any, dest: str) -> None:
        root = self._path(dest)
        try:
            with tarfile.open(fileobj=io.BytesIO(tar) if isinstance(tar, (bytes, bytearray)) else tar) as archive:
                for m in archive:
                    name = posixpath.normpath(m.name.lstrip("/"))
                    if name == "." or name.startswith("../"):
                        continue  # nothing lands outside ``dest``
                    self._add_parents(posixpath.join(root, name))
                    target = posixpath.join(root, name)
                    if m.isdir():
                        self.dirs.add(target)
                    elif m.issym():
                        self.links[target] = m.linkname
                    elif m.isfile():
                        fh = archive.extractfile(m)
                        self.files[target] = (fh.read() if fh else b"", m.mode & 0o7777)
        except tarfile.TarError as exc:
            raise SandboxError(f"copy into {dest}: {exc}") from exc

    def _add_parents(self, path: str) -> None:
        parent = posixpath.dirname(path)
        while parent not in self.dirs:
            self.dirs.add(parent)
            parent = posixpath.dirname(parent)

    def copy_out(self, path: str) -> Iterator[bytes]:
        root = self._path(path)
        if root not in self.dirs and root not in self.files and root not in self.links:
            raise SandboxError(f"{path}: not in the sandbox")
        base = posixpath.dirname(root)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for p in sorted(self.dirs | set(self.files) | set(self.links)):
                if p != root and not p.startswith(root.rstrip("/") + "/"):
                    continue
                info = tarfile.TarInfo(posixpath.relpath(p, base))
                if p in self.dirs:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif p in self.links:
                    info.type, info.linkname = tarfile.SYMTYPE, self.links[p]
                    tar.addfile(info)
                else:
                    data, info.mode = self.files[p]
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        yield buf.getvalue()

    # ---- commands
    def exec(self, cmd: list[str], timeout: float | None = None, *, user: str | None = None,
             env: dict[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        if not self.running:
            raise SandboxBroken("the sandbox is not running", container=self.spec.name)
        with tempfile.TemporaryDirectory(prefix="trialbox-memory-") as tmp:
            root = Path(tmp)
            uid, gid = self._ids(user)
            self._materialise(root, uid, gid)
            environ = {"PATH": PATH, "LANG": "C.UTF-8", **self.spec.env, **(env or {}),
                       "HOME": str(root / self.spec.home.lstrip("/")), "TMPDIR": str(root / "tmp"),
                       TOKEN_VAR: self.token}
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, cwd=root / self._path(cwd or self.spec.workdir).lstrip("/"), env=environ,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, user=uid, group=gid,
                                    extra_groups=[] if uid is not None else None)
            timed_out = False
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._kill_all(proc.pid)
                out, err = proc.communicate()
            duration = time.monotonic() - t0
            self._read_back(root)
        return ExecResult(None if timed_out else proc.returncode, out[:CAPTURE_BYTES], err[:CAPTURE_BYTES],
                          len(out), len(err), timed_out, duration)

    def _ids(self, user: str | None) -> tuple[int | None, int | None]:
        """The sandbox user's ids when trialbox may switch to them (it runs as root), else None: its own."""
        if os.geteuid() != 0:
            return None, None
        uid, _, gid = (user or self.spec.user).partition(":")
        return int(uid), int(gid or uid)

    def _materialise(self, root: Path, uid: int | None, gid: int | None) -> None:
        for d in sorted(self.dirs):
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for p, (data, mode) in self.files.items():
            target = root / p.lstrip("/")
            target.write_bytes(data)
            target.chmod(mode)
        for p, link in self.links.items():
            os.symlink(link, root / p.lstrip("/"))
        if uid is not None:
            for dirpath, dirnames, filenames in os.walk(root):
                for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                    os.lchown(name, uid, gid)

    def _read_back(self, root: Path) -> None:
        files: dict[str, tuple[bytes, int]] = {}
        links: dict[str, str] = {}
        dirs = {"/"}
        for dirpath, dirnames, filenames in os.walk(root):
            here = "/" + os.path.relpath(dirpath, root) if dirpath != str(root) else "/"
            for name in dirnames + filenames:
                full, inner = os.path.join(dirpath, name), posixpath.join(here, name)
                st = os.lstat(full)
                if os.path.islink(full):
                    links[inner] = os.readlink(full)
                elif name in dirnames:
                    dirs.add(inner)
                elif os.path.isfile(full):
                    files[inner] = (Path(full).read_bytes(), st.st_mode & 0o7777)
        self.files, self.links, self.dirs = files, links, dirs

    def _kill_all(self, pid: int | None = None) -> None:
        """Kill the command's process group and every process carrying this sandbox's token."""
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        marker = f"{TOKEN_VAR}={self.token}".encode()
        for _ in range(3):  # a process forking as it is killed: look again
            found = False
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    if marker in (entry / "environ").read_bytes().split(b"\0"):
                        os.kill(int(entry.name), signal.SIGKILL)
                        found = True
                except (OSError, ValueError):
                    continue
            if not found:
                return
            time.sleep(0.05)

    # ---- what the host can tell
    def oom_kill_count(self) -> int | None:
        return None

    def conditions(self) -> dict[str, int | None]:
        return {"cpu_throttled_periods": None, "cpu_throttled_ns": None, "memory_peak_bytes": None}

    def resources_used(self) -> Usage:
        spans = self.spans + ([time.monotonic() - self._since] if self._since is not None else [])
        return Usage(wall_s=sum(spans), source="unmeasured" if spans else "none", spans=len(spans),
                     unmeasured_spans=len(spans))


def memory_sandboxes(spec: SandboxSpec) -> MemorySandbox:
    """The ``SandboxFactory`` of in-memory sandboxes."""
    return MemorySandbox(spec)


__all__ = ["MemorySandbox", "memory_sandboxes"]
