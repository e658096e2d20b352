"""Bounded workspace disks: a sparse file, formatted ext4, on a loop device.

The engine refuses ``--storage-opt size`` on overlay2 over ext4, and tmpfs
would charge the agent's files to its memory limit and vanish when the
container stops. So each sandbox's workspace is an ext4 filesystem of exactly
``disk_limit_mb`` on a loop device, given to the engine as a labelled local
volume (``type=ext4, device=/dev/loopN``). Filling it gives ENOSPC inside, never
a full host disk (the sparse file cannot grow past its size), and it survives
the container's stop so the final workspace can be exported.

Needs root on the engine's host (losetup, mkfs.ext4): the engine must be local.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import DiskError


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


def create_disk(path: Path, size_mb: int, uid: int, gid: int) -> LoopDisk:
    """Create a sparse ext4 image of ``size_mb`` owned (root dir) by uid:gid and attach it."""
    if os.geteuid() != 0:
        raise DiskError("bounded workspace disks need root (losetup, mkfs.ext4)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    try:
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
             "-E", f"root_owner={uid}:{gid},lazy_itable_init=1", str(path))
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
