"""A stopped sandbox's workspace archived on the host, from its disk: no engine, no command in the sandbox.

A workspace is an ext4 filesystem on a loop device (``disks``). Once its container has stopped, nothing of the
agent's runs and nothing can change it; so the host mounts it **read-only** (and ``nosuid,nodev,noexec``) in a
mount namespace of its own (``unshare --mount``: the mount is never visible to the host's other processes and
goes away with the namespace, a crash included), and GNU tar archives it to a pipe. The tar is read like the
engine's (``grading.tree.read_tar``: as data, bounded, never extracted on the host). tar walks the tree through
open directories, so no path is too long for it (the engine's archive silently leaves such paths out), and it
runs as root on the host, so no permission the agent set hides a file: the archive is whole or tar says what
it could not read, which becomes a problem of the export. Nothing in the workspace is trusted: the filesystem
was written by the kernel's own ext4 driver on behalf of the container (the container never sees the block
device, and has no capability to make one), names and links are data to tar, and a sparse file of huge
apparent size is cut off by the export's bounds.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .base import HostArchive

TAR_MEMORY_KB = 1 << 20
"""tar's address space (``ulimit -v``, KiB): a tree of very long paths costs tar memory growing with its depth;
past this bound tar fails, which is a problem of the export, never the host's memory."""
SCRIPT = r"""mount -t ext4 -o ro,noload,nosuid,nodev,noexec -- "$1" "$2" || exit 90
cd "$2" || exit 91
ulimit -v %d || exit 92
exec tar --sort=name --numeric-owner --anchored --exclude=./.git --one-file-system --format=gnu -cf - .""" % TAR_MEMORY_KB
NOT_MOUNTED = (90, 91, 92)
"""The script's own exits before tar ran: the host could not archive the disk (the engine's archive is used)."""
CHUNK = 1 << 20
TRAILER_BYTES = 1 << 20
"""What may follow tar's end-of-archive marker (its record padding) when the rest of the stream is drained."""


@functools.lru_cache(maxsize=1)
def host_archive_possible() -> bool:
    """Whether this process can mount a disk in a namespace of its own: root, with unshare, mount and tar, and a
    mount namespace actually made (a container without CAP_SYS_ADMIN cannot); probed once."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "mount", "tar")):
        return False
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def loop_backing_file(device: str) -> str | None:
    """The file a loop device is attached to (None when it is not one, or not attached)."""
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return None


class DiskArchive(HostArchive):
    """GNU tar of the read-only mounted ``device`` (see the module docstring). ``unavailable`` after ``close``:
    the host could not mount it (the caller archives through the engine instead). ``notes``: what tar left out
    by design (sockets)."""

    def __init__(self, device: str, scratch: Path, deadline: float | None = None) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f"view-{os.getpid()}-", dir=scratch))
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.unavailable = False
        self.read = 0
        self._ended = self._finished = False
        self._timer: threading.Timer | None = None
        try:
            self.err = tempfile.TemporaryFile()  # a file, not a pipe: tar's warnings can never block its output
            self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", SCRIPT, "sh",
                                          device, str(self.dir)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self.err, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
        except BaseException:
            self.dir.rmdir()
            raise
        if deadline is not None:
            self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self.proc.kill)
            self._timer.daemon = True
            self._timer.start()

    def chunks(self) -> Iterator[bytes]:
        assert self.proc.stdout is not None
        while True:
            data = self.proc.stdout.read1(CHUNK)
            if not data:
                self._ended = True
                return
            self.read += len(data)
            yield data

    def finish(self) -> None:
        """The reader got the whole archive: read what follows its end marker to the end of the stream, so tar's
        exit status is known (a tar that skipped what it could not read still ends its archive cleanly)."""
        assert self.proc.stdout is not None
        left = 0
        while not self._ended and left <= TRAILER_BYTES:
            data = self.proc.stdout.read1(CHUNK)
            if not data:
                self._ended = True
            left += len(data)
        self._finished = self._ended

    def close(self) -> None:
        try:
            if not self._finished:
                self.proc.kill()  # the reader stopped early (the export's bounds, or an unreadable archive)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            rc = self.proc.wait()
            if self._timer is not None:
                self._timer.cancel()
            self.err.seek(0)
            said = self.err.read(1 << 20).decode("utf-8", "surrogateescape")
            lines = [line for line in said.splitlines() if line.strip()]
            self.notes = [f"{line.removeprefix('tar: ./').removesuffix(': socket ignored')}: special file "
                          "(device, FIFO or socket) left out" for line in lines if line.endswith(": socket ignored")]
            errors = "; ".join(line for line in lines if not line.endswith(": socket ignored"))[:1500]
            if rc in NOT_MOUNTED and self.read == 0:
                self.unavailable = True  # no mount (no namespace, no loop device): nothing was archived
                self.problems.append(f"the host could not mount the workspace's disk (exit {rc}): {errors}")
            elif self._finished and rc != 0:
                self.problems.append(f"tar on the host did not archive the whole workspace (exit {rc}): {errors}")
        finally:
            self.err.close()
            try:
                self.dir.rmdir()
            except OSError:
                pass  # gc removes an empty view folder left behind
