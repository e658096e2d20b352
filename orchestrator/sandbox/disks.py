"""Bounded workspace disks: a sparse file, formatted ext4, on a loop device.

The engine refuses ``--storage-opt size`` on overlay2 over ext4, and tmpfs
would charge the agent's files to its memory limit and vanish when the
container stops. So each sandbox's workspace is an ext4 filesystem of exactly
``disk_limit_mb`` on a loop device, given to the engine as a labelled local
volume (``type=ext4, device=/dev/loopN``). Filling it gives ENOSPC inside, never
a full host disk (the sparse file cannot grow past its size), and it survives
the container's stop so the final workspace can be exported.

A workspace can start with content (the task's history-free repository): the
filesystem is then a sparse copy of a golden image built once per (content,
size, owner) with ``mkfs.ext4 -d``, so no file crosses the engine's API.

Needs root on the engine's host (losetup, mkfs.ext4): the engine must be local.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import DiskError

GOLDEN_FORMAT = 2  # bump when the way golden images are made changes


def workspace_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Extraction of a repository's files on the host: the ``data`` filter's rules (no name outside ``dest``, no
    device, no hard link out, no set-id bits), except that a symbolic link keeps its target as it is, absolute or
    leading out (``/usr/bin/python3`` in a virtual environment): a link is data, never followed on the host, and
    a later member whose path would pass through it is still refused."""
    if member.issym():
        return tarfile.tar_filter(member, dest)
    return tarfile.data_filter(member, dest)


def _run(*cmd: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise DiskError(f"{cmd[0]} is not installed (needed for bounded workspace disks)") from exc
    if proc.returncode != 0:
        raise DiskError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


@dataclass(frozen=True)
class LoopDisk:
    """One attached disk: its backing file and loop device."""

    path: Path
    device: str


def _mkfs(path: Path, size_mb: int, uid: int, gid: int, content: Path | None = None) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    extra = ["-d", str(content)] if content is not None else []
    _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
         "-E", f"root_owner={uid}:{gid},lazy_itable_init=1", *extra, str(path))
    # lost+found would be a root-owned folder in the agent's workspace (and noise in git status)
    _run("debugfs", "-w", "-R", "rmdir lost+found", str(path))


def golden_disk(seed_tar: Path, size_mb: int, uid: int, gid: int, golden_dir: Path) -> Path:
    """An ext4 image of ``size_mb`` holding the extracted ``seed_tar``, made once and cached.

    The key is the tar's identity on disk (path, size, mtime, inode): seed tars are
    written atomically and never changed in place (see ``repos.materialize``).
    """
    st = seed_tar.stat()
    key = hashlib.sha256(f"{GOLDEN_FORMAT}\0{seed_tar}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode()).hexdigest()[:24]
    golden = golden_dir / f"{key}-{size_mb}m-{uid}-{gid}.img"
    if golden.exists():
        return golden
    golden_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=golden_dir, prefix="seed-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with tarfile.open(seed_tar) as tf:
            tf.extractall(root, filter=workspace_filter)
        for dirpath, dirnames, filenames in os.walk(root):
            os.chown(dirpath, uid, gid)
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), uid, gid)
        part = Path(tmp) / "golden.img"
        _mkfs(part, size_mb, uid, gid, content=root)
        os.replace(part, golden)
    return golden


def create_disk(path: Path, size_mb: int, uid: int, gid: int, seed_tar: Path | None = None,
                golden_dir: Path | None = None) -> LoopDisk:
    """Create a sparse ext4 image of ``size_mb`` owned (root dir) by uid:gid and attach it.

    With ``seed_tar`` the filesystem starts with that tar's content: a sparse copy of a
    cached golden image (a few milliseconds) instead of copying files in through the engine.
    """
    if os.geteuid() != 0:
        raise DiskError("bounded workspace disks need root (losetup, mkfs.ext4)")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if seed_tar is not None:
            golden = golden_disk(seed_tar, size_mb, uid, gid, golden_dir or path.parent / "golden")
            _run("cp", "--sparse=always", str(golden), str(path))
        else:
            _mkfs(path, size_mb, uid, gid)
        device = _run("losetup", "--find", "--show", str(path))
    except DiskError:
        path.unlink(missing_ok=True)
        raise
    return LoopDisk(path, device)


def devices_backed_by(path: Path) -> list[str]:
    """Loop devices whose backing file is ``path``."""
    out = _run("losetup", "--noheadings", "--output", "NAME", "--associated", str(path)) if path.exists() else ""
    return [line.strip() for line in out.splitlines() if line.strip()]


def destroy_disk(path: Path) -> None:
    """Detach every loop device backed by ``path`` and delete it; absent is fine."""
    for device in devices_backed_by(path):
        subprocess.run(["losetup", "--detach", device], capture_output=True)
    path.unlink(missing_ok=True)


def detach_orphans(disks_dir: Path) -> list[str]:
    """Detach loop devices backed by a deleted file under ``disks_dir`` (left by a crash)."""
    try:
        out = _run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE")
    except DiskError:
        return []
    detached = []
    for line in out.splitlines():
        name, _, back = line.partition(" ")
        back = back.replace("\\x20", " ")
        if back.startswith(str(disks_dir)) and (back.endswith("(deleted)") or not Path(back).exists()):
            subprocess.run(["losetup", "--detach", name], capture_output=True)
            detached.append(name)
    return detached
