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

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .base import HostArchive

SCRIPT = r"""mount -t ext4 -o ro,noload,nosuid,nodev,noexec -- "$1" "$2" || exit 90
cd "$2" || exit 91
exec tar --sort=name --numeric-owner --anchored --exclude=./.git --one-file-system --format=gnu -cf - ."""
CHUNK = 1 << 20


def host_archive_possible() -> bool:
    """Whether this process can mount a disk in a namespace of its own (root, with unshare, mount and tar)."""
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("unshare", "mount", "tar"))


class DiskArchive(HostArchive):
    """GNU tar of the read-only mounted ``device`` (see the module docstring). ``unavailable`` after ``close``:
    the host could not mount it (nothing was read; the caller archives through the engine instead)."""

    def __init__(self, device: str, scratch: Path, deadline: float | None = None) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="view-", dir=scratch))
        self.err = tempfile.TemporaryFile()  # a file, not a pipe: tar's warnings can never block its output
        self.problems: list[str] = []
        self.unavailable = False
        self.read = 0
        self._ended = False
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", SCRIPT, "sh",
                                      device, str(self.dir)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.err, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
        self._timer = None
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

    def close(self) -> None:
        try:
            if not self._ended:
                self.proc.kill()  # the reader stopped early (the export's bounds): not a gap of the archive
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            rc = self.proc.wait()
            if self._timer is not None:
                self._timer.cancel()
            self.err.seek(0)
            said = self.err.read(2000).decode("utf-8", "backslashreplace").strip()
            if self._ended and rc != 0:
                if self.read == 0:
                    self.unavailable = True  # no mount (no namespace, no loop device): nothing was archived
                    self.problems.append(f"the host could not mount the workspace's disk (exit {rc}): {said}")
                else:
                    self.problems.append(f"tar on the host did not archive the whole workspace (exit {rc}): {said}")
        finally:
            self.err.close()
            try:
                self.dir.rmdir()
            except OSError:
                pass  # gc removes an empty view folder left behind
