"""A sandbox whose state is the machine, not a folder (issue 28: most Terminal-Bench tasks work in ``~/.ssh``,
``/etc``, ``/usr/local``, ``/var/lib``…).

The container's root filesystem stays read-only, as every sandbox's. Each top-level folder of the image (``/etc``,
``/root``, ``/home``, ``/usr``, ``/var``, ``/opt``, ``/app``…; not ``/proc``, ``/sys``, ``/dev``, nor a link such
as ``/bin → usr/bin``) is mounted over by an **overlay** of its own: the image's layers as its read-only lower
folders, and an upper folder on the sandbox's bounded disk (an ext4 filesystem of ``disk_limit_mb`` on a loop
device, ``disks.py``), mounted on the host with ``nosuid,nodev``. So:

* every folder of the machine is writable as the image's permissions allow (as root, only under gVisor: the
  sandbox refuses root under runc), and filling them gives ``ENOSPC`` inside, never a full host disk;
* **what changed is exactly the upper folders**: a new or changed file is there whole, a deleted one is a
  whiteout (a character device 0/0), a folder replaced whole carries the ``trusted.overlay.opaque`` attribute.
  The host reads them once the container has stopped (``archive_changes``): no command inside the sandbox, no
  process the agent left, takes part;
* the grader's sandbox is fresh: its overlays have the agent's changes (``extract_changes`` of that archive, onto
  the grader's own disk) as their topmost lower folder, above the image's layers, and an upper folder of their
  own. Processes the agent left running are not carried over: a task cannot check a service the agent started,
  only what it left on disk.

The engine's own mount targets (``/etc/hosts``, ``/etc/hostname``, ``/etc/resolv.conf``, created empty in the
upper folder when the engine mounts over them) are not changes. A new top-level folder cannot be made (the root
stays read-only). Needs the engine's ``overlay2`` storage driver (the image's layers as host folders) and root on
the engine's host, as the workspace disks do.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from .disks import LoopDisk, create_disk, destroy_disk

SKIPPED = frozenset({"proc", "sys", "dev"})
"""Top-level folders that are the kernel's or the engine's, never overlaid."""

ENGINE_FILES = ("etc/hosts", "etc/hostname", "etc/resolv.conf")
"""Files the engine mounts over: their empty mount targets in an upper folder are not the agent's changes."""

MAX_OPTIONS = 4000
"""The kernel takes mount options of at most a page: an overlay of more layers than fit is refused by name."""

OPAQUE = "trusted.overlay.opaque"


@dataclass
class MachineDisk:
    """One sandbox's machine state: its disk, where the host mounted it, and the overlaid top-level folders."""

    disk: LoopDisk
    mountpoint: Path
    folders: tuple[str, ...]
    layers: tuple[str, ...]
    volumes: list[Any] = field(default_factory=list)

    def upper(self, folder: str) -> Path:
        return self.mountpoint / "upper" / folder

    def work(self, folder: str) -> Path:
        return self.mountpoint / "work" / folder

    def final(self, folder: str) -> Path:
        return self.mountpoint / "final" / folder

    def options(self, folder: str) -> str:
        """The overlay's mount options for ``folder``: the final state below it (a grader's), the image's layers
        that hold it (topmost first), this sandbox's upper and work folders."""
        lowers = ([str(self.final(folder))] if self.final(folder).is_dir() else []) + \
            [f"{layer}/{folder}" for layer in self.layers if _is_dir(Path(layer) / folder)]
        opts = f"lowerdir={':'.join(lowers)},upperdir={self.upper(folder)},workdir={self.work(folder)}"
        if len(opts) > MAX_OPTIONS:
            raise SandboxError(f"the image has too many layers under /{folder} for one overlay "
                               f"({len(lowers)} folders, {len(opts)} characters of mount options; the kernel takes "
                               f"{MAX_OPTIONS}): squash the image's layers")
        return opts


def image_layers(client: Any, image_id: str) -> list[str]:
    """The image's layer folders on the host, topmost first (the engine's ``overlay2`` storage driver)."""
    attrs = client.images.get(image_id).attrs
    driver = attrs.get("GraphDriver") or {}
    if driver.get("Name") != "overlay2":
        raise SandboxError(f"a machine-state sandbox needs the engine's overlay2 storage driver (this engine uses "
                           f"{driver.get('Name')!r}): the image's layers must be folders on the host")
    data = driver.get("Data") or {}
    layers = [data["UpperDir"]] if data.get("UpperDir") else []
    layers += [p for p in (data.get("LowerDir") or "").split(":") if p]
    missing = [p for p in layers if not os.path.isdir(p)]
    if missing or not layers:
        raise SandboxError(f"the image's layers are not on this host ({missing[:2] or 'none listed'}): a "
                           "machine-state sandbox needs the engine on this machine")
    return layers


def top_folders(layers: list[str]) -> tuple[str, ...]:
    """The top-level folders of the image as the container sees it: for each name at the root of any layer, the
    topmost layer that has it decides (a folder is overlaid; a link, a file or a whiteout is not)."""
    seen: dict[str, bool] = {}
    for layer in layers:  # topmost first: the first layer naming an entry decides what it is
        try:
            entries = list(os.scandir(layer))
        except OSError as exc:
            raise SandboxError(f"cannot read the image's layer {layer}: {exc.strerror}") from None
        for e in entries:
            if e.name not in seen:
                seen[e.name] = e.is_dir(follow_symlinks=False)  # a whiteout (a device) or a link is no folder
    return tuple(sorted(n for n, is_dir in seen.items() if is_dir and n not in SKIPPED))


def _lstat(path: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _is_dir(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                                    "LC_ALL": "C"})
    if proc.returncode != 0:
        raise SandboxError(f"{' '.join(cmd[:3])}… failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def mount_machine(disk_path: Path, mountpoint: Path, size_mb: int, layers: list[str],
                  changes: Path | None = None) -> MachineDisk:
    """Make and mount the sandbox's disk, with an upper and a work folder per top-level folder; with ``changes``
    (an archive of ``archive_changes``), the agent's final state below them (a grader's sandbox)."""
    folders = top_folders(layers)
    disk = create_disk(disk_path, size_mb, 0, 0)
    mountpoint.mkdir(parents=True, exist_ok=True)
    try:
        _run("mount", "-o", "nosuid,nodev", disk.device, str(mountpoint))
    except SandboxError:
        destroy_disk(disk_path)
        raise
    machine = MachineDisk(disk, mountpoint, folders, tuple(layers))
    try:
        for folder in folders:
            machine.upper(folder).mkdir(parents=True)
            machine.work(folder).mkdir(parents=True)
        if changes is not None:
            extract_changes(changes, mountpoint / "final", folders)
    except BaseException:
        unmount_machine(machine)
        raise
    return machine


def unmount_machine(machine: MachineDisk) -> None:
    """Unmount the disk from the host and delete it (the volumes are the sandbox's to remove first)."""
    if os.path.ismount(machine.mountpoint):
        subprocess.run(["umount", "--lazy", str(machine.mountpoint)], capture_output=True)
    destroy_disk(machine.disk.path)
    try:
        machine.mountpoint.rmdir()
    except OSError:
        pass


def archive_changes(machine: MachineDisk, out: Path) -> list[str]:
    """Every change the sandbox made, as one tar of its upper folders (``<folder>/<path>``: files, links, folders,
    whiteouts as character devices 0/0, opaque folders with their attribute), read on the host; returns the
    engine's mount targets it left out."""
    upper = machine.mountpoint / "upper"
    left_out = [f for f in ENGINE_FILES if _empty_file(upper / f)]
    names = sorted(_walk(upper, set(left_out)))
    proc = subprocess.run(["tar", "--create", "--file", str(out), "--directory", str(upper), "--numeric-owner",
                           "--sparse", "--xattrs", f"--xattrs-include={OPAQUE}", "--no-recursion", "--null",
                           "--verbatim-files-from", "--files-from", "-"],
                          input=b"\0".join(os.fsencode(n) for n in names), capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    if proc.returncode != 0:
        raise SandboxError(f"the machine's changes could not be archived: {proc.stderr.decode(errors='replace')[-500:]}")
    return left_out


def _empty_file(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0


def _walk(root: Path, skip: set[str]) -> list[str]:
    """Every entry under ``root`` (relative names), folders before what they hold, never following a link."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) + sorted(filenames):
            r = name if rel == "." else f"{rel}/{name}"
            if r not in skip:
                out.append(r)
    return out


def extract_changes(archive: Path, dest: Path, folders: tuple[str, ...]) -> None:
    """An archive of ``archive_changes`` into ``dest`` (the grader's disk), whiteouts and opaque folders kept so
    that the overlay reads it as the agent's final state. Only members under the image's top-level folders are
    taken, and only whiteouts among devices (anything else there is refused by name)."""
    dest.mkdir(parents=True, exist_ok=True)
    _run("tar", "--extract", "--file", str(archive), "--directory", str(dest), "--numeric-owner",
         "--same-permissions", "--xattrs", f"--xattrs-include={OPAQUE}", "--no-overwrite-dir")
    for entry in list(os.scandir(dest)):
        if entry.name not in folders:
            _remove(Path(entry.path))
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if (stat.S_ISCHR(st.st_mode) and st.st_rdev != 0) or stat.S_ISBLK(st.st_mode):
                raise SandboxError(f"the machine's changes hold a device that is not a whiteout: "
                                   f"{os.path.relpath(path, dest)}")


def _remove(path: Path) -> None:
    if _is_dir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
