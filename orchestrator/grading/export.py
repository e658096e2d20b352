"""Exporting the final workspace from the stopped sandbox, as data, within bounds.

The engine streams ``/workspace`` as a tar; it is read member by member and
rewritten into a sanitized tar on the host: regular files (setuid, setgid and
sticky bits dropped), folders, and symlinks *as entries* (never followed);
hard links, devices and FIFOs are left out and noted; ``.git`` is never
exported; names with ``..`` or absolute paths are refused. Past ``max_bytes`` or
``max_files`` the export stops and says so. Nothing from the workspace is ever
extracted onto the host's filesystem or executed there.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.base import Sandbox


@dataclass(frozen=True)
class ExportLimits:
    max_bytes: int = 512 << 20
    max_files: int = 100_000


@dataclass
class Tree:
    """A workspace as data: file contents by path, symlink targets, and what was left out."""

    files: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    symlinks: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    truncated: bool = False

    def digest(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.files):
            h.update(f"f {p} {'x' if p in self.executable else '-'} ".encode() + hashlib.sha256(self.files[p]).digest())
        for p in sorted(self.symlinks):
            h.update(f"l {p} {self.symlinks[p]}\0".encode())
        return h.hexdigest()

    def to_tar(self, path: Path | None = None, uid: int = 1000, gid: int = 1000) -> bytes:
        """A tar of the tree (owned by uid:gid); written to ``path`` too when given."""
        buf = io.BytesIO()
        now = int(time.time())  # fresh mtimes: no bytecode cached against an old timestamp can match
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for d in sorted(self.dirs):
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
                tf.addfile(ti)
            for p in sorted(self.files):
                ti = tarfile.TarInfo(p)
                ti.size, ti.uid, ti.gid, ti.mtime = len(self.files[p]), uid, gid, now
                ti.mode = 0o755 if p in self.executable else 0o644
                tf.addfile(ti, io.BytesIO(self.files[p]))
            for p in sorted(self.symlinks):
                ti = tarfile.TarInfo(p)
                ti.type, ti.linkname, ti.uid, ti.gid, ti.mtime = tarfile.SYMTYPE, self.symlinks[p], uid, gid, now
                tf.addfile(ti)
        data = buf.getvalue()
        if path is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return data


class _ChunkReader(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.buf = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self.buf:
            try:
                self.buf = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def _clean(name: str, root: str) -> str | None:
    """The member's path relative to ``root`` ("" for none), or None when outside it or unsafe."""
    name = name[2:] if name.startswith("./") else name
    if root:
        if name == root or not name.startswith(root + "/"):
            return None
        name = name[len(root) + 1:]
    rel = name
    if not rel:
        return None
    norm = posixpath.normpath(rel)
    if norm.startswith("../") or norm == ".." or norm.startswith("/") or norm == ".":
        return None
    return norm


def read_tar(stream: io.RawIOBase | io.BufferedIOBase, root: str, limits: ExportLimits) -> Tree:
    """Read a tar stream whose members sit under ``root/`` into a ``Tree`` (bounded)."""
    tree, total = Tree(), 0
    with tarfile.open(fileobj=stream, mode="r|") as tf:
        for member in tf:
            rel = _clean(member.name, root)
            if rel is None:
                continue
            if rel == ".git" or rel.startswith(".git/"):
                continue
            if len(tree.files) + len(tree.symlinks) >= limits.max_files or total + max(member.size, 0) > limits.max_bytes:
                tree.truncated = True
                tree.skipped.append(f"{rel}: export limit reached ({limits.max_files} files, {limits.max_bytes} bytes)")
                break
            if member.isdir():
                tree.dirs.add(rel)
            elif member.isreg():
                data = tf.extractfile(member).read()  # type: ignore[union-attr]
                tree.files[rel] = data
                total += len(data)
                if member.mode & 0o111:
                    tree.executable.add(rel)
                if member.mode & 0o7000:
                    tree.skipped.append(f"{rel}: setuid/setgid/sticky bits dropped")
            elif member.issym():
                tree.symlinks[rel] = member.linkname
            elif member.islnk():
                tree.skipped.append(f"{rel}: hard link to {member.linkname} left out")
            else:
                tree.skipped.append(f"{rel}: special file (device or FIFO) left out")
    return tree


def export_workspace(sandbox: Sandbox, workdir: str = "/workspace", limits: ExportLimits = ExportLimits()) -> Tree:
    """The final workspace of a (stopped) sandbox, as data."""
    root = posixpath.basename(workdir.rstrip("/"))
    return read_tar(io.BufferedReader(_ChunkReader(iter(sandbox.copy_out(workdir)))), root, limits)


def tree_from_tar(path: Path, limits: ExportLimits = ExportLimits()) -> Tree:
    """A ``Tree`` from a tar on the host whose members are relative paths (the trusted
    original repository, or a stored final workspace)."""
    with open(path, "rb") as fh:
        return read_tar(fh, "", limits)
