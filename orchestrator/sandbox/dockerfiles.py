"""The Docker sandbox's files: read, written and copied through the engine's archive API, or through exec.

The engine's archive API does not see the tmpfs mounts (``/tmp``, ``$HOME``) and refuses archives into them on
a read-only root: files there are read and written through the sandbox's shell, each read checked against the
file's length read in the same command (the engine can lose a fast exec's output) and tried again. Files in the
workspace go through the archive API, owned by the sandbox user. Everything here works on a stopped sandbox
too, except what needs exec.
"""

from __future__ import annotations

import base64
import io
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import docker.types
import docker.utils

from ..engine import docker_errors
from ..errors import OutputLost, SandboxError
from .base import CAPTURE_BYTES, READ_ATTEMPTS, uid_gid


class DockerFiles:
    """The file part of ``DockerSandbox`` (a mixin: it uses the sandbox's ``spec``, ``container``, ``exec`` and
    ``_require``)."""

    READ_ATTEMPTS = READ_ATTEMPTS

    def _in_workspace(self, path: str) -> bool:
        return path == self.spec.workdir or path.startswith(self.spec.workdir.rstrip("/") + "/")

    def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        if not self._in_workspace(path):
            return self._read_by_exec(path, max_bytes)  # the engine's archive API does not see tmpfs mounts
        stream = self.copy_out(path)
        buf = io.BytesIO()
        try:
            for chunk in stream:
                buf.write(chunk)
                if buf.tell() > max_bytes + 65536:
                    raise ValueError(f"{path} is larger than {max_bytes} bytes")
        finally:
            stream.close()  # type: ignore[attr-defined]
        buf.seek(0)
        with tarfile.open(fileobj=buf) as tf:
            member = tf.next()
            if member is None or not member.isfile():
                raise SandboxError(f"{path} is not a regular file", container=self.spec.name)
            if member.size > max_bytes:
                raise ValueError(f"{path} is larger than {max_bytes} bytes")
            return tf.extractfile(member).read()  # type: ignore[union-attr]

    def _read_by_exec(self, path: str, max_bytes: int) -> bytes:
        """A file's bytes through exec, checked against its length read in the same command.

        The engine sometimes returns the output of a short-lived exec empty or cut (docker-py #2042,
        moby #27289); a read whose length does not match is read again, and ``OutputLost`` ends it
        after ``READ_ATTEMPTS``. (``wc -c`` rather than ``stat``: gVisor's stat fails on this kernel.)"""
        if max_bytes > CAPTURE_BYTES - 64:
            max_bytes = CAPTURE_BYTES - 64
        script = 'test -f "$1" || exit 3; n=$(wc -c < "$1") || exit 3; echo "$n"; exec cat -- "$1"'
        for attempt in range(self.READ_ATTEMPTS):
            try:
                res = self.exec(["sh", "-c", script, "sh", path], timeout=60)
            except OutputLost:
                continue
            if res.exit_code == 3:
                raise SandboxError(f"{path} is not a readable regular file", container=self.spec.name)
            head, newline, body = res.stdout.partition(b"\n")
            if res.exit_code == 0 and newline and head.strip().isdigit():
                size = int(head)
                if size > max_bytes:
                    raise ValueError(f"{path} is larger than {max_bytes} bytes")
                if len(body) == size:
                    return body
            time.sleep(0.05 * (attempt + 1))
        raise OutputLost(f"reading {path}: the engine returned its output incomplete {self.READ_ATTEMPTS} times",
                         container=self.spec.name)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        parent, _, name = path.rstrip("/").rpartition("/")
        if not self._in_workspace(path):
            return self._write_by_exec(path, data, mode)  # the engine refuses archives into tmpfs on a read-only root
        uid, gid = uid_gid(self.spec.user)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.uid, ti.gid, ti.mtime = len(data), mode, uid, gid, int(time.time())
            tf.addfile(ti, io.BytesIO(data))
        self.copy_in(buf.getvalue(), parent or "/")

    def _write_by_exec(self, path: str, data: bytes, mode: int) -> None:
        """Write through the sandbox user's shell, in base64 chunks that fit one argument."""
        chunk = 64 * 1024
        parts = [data[i:i + chunk] for i in range(0, len(data), chunk)] or [b""]
        for i, part in enumerate(parts):
            redirect = ">" if i == 0 else ">>"
            script = f'printf %s "$1" | base64 -d {redirect} "$2" && chmod {mode:o} "$2"'
            res = self.exec(["sh", "-c", script, "sh", base64.b64encode(part).decode(), path], timeout=60)
            if res.exit_code != 0:
                raise SandboxError(f"cannot write {path}: {res.stderr.decode(errors='replace').strip()}",
                                   container=self.spec.name)

    def write_files(self, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Small files outside the workspace in one exec (parents made); anything else one by one."""
        args = [x for path, data in files.items() for x in (path, base64.b64encode(data).decode())]
        if any(self._in_workspace(p) for p in files) or sum(len(a) for a in args) > 96 * 1024:
            return super().write_files(files, mode)  # type: ignore[misc]
        script = ('set -e; while [ $# -gt 0 ]; do mkdir -p -- "${1%/*}"; printf %s "$2" | base64 -d > "$1"; '
                  f'chmod {mode:o} "$1"; shift 2; done')
        res = self.exec(["sh", "-c", script, "sh", *args], timeout=60)
        if res.exit_code != 0:
            raise SandboxError(f"cannot write {', '.join(files)}: {res.stderr.decode(errors='replace').strip()}",
                               container=self.spec.name)

    def copy_in(self, tar: bytes | Any, dest: str) -> None:
        with docker_errors(self.spec.name):
            try:
                ok = self._require().put_archive(dest, tar)
            except docker.errors.NotFound as exc:
                raise SandboxError(f"destination {dest} does not exist", container=self.spec.name) from exc
        if not ok:
            raise SandboxError(f"copy into {dest} failed", container=self.spec.name)

    def copy_out(self, path: str) -> Iterator[bytes]:
        """The engine's tar stream of ``path``. Close the generator when done reading (``close()``): the engine
        holds the container while a stream is open, so one left half-read would block every later copy."""
        container, api = self._require(), self.client.api
        with docker_errors(self.spec.name):
            try:
                res = api._get(api._url("/containers/{0}/archive", container.id), params={"path": path}, stream=True,
                               headers={"Accept-Encoding": "identity"})
                api._raise_for_status(res)
            except docker.errors.NotFound as exc:
                raise SandboxError(f"{path} does not exist", container=self.spec.name) from exc
        return _closing(res)


def _closing(res) -> Iterator[bytes]:
    """A response's body in chunks; closing the generator closes the response (the engine then stops)."""
    try:
        with docker_errors():
            yield from res.iter_content(1 << 20, False)
    finally:
        res.close()
