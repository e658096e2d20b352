"""Removing what crashed runs left behind, and nothing else.

Every container, volume and disk trialbox creates carries its owner
(``host:pid:start-time`` of the creating process), and so does each folder of a
sandbox's copied mounts. ``collect_garbage`` removes those whose owner process
no longer exists on this host; with ``everything``
it removes every trialbox-labelled resource. Unlabelled resources are never
touched; resources owned by another host are left alone.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from ..engine import LABEL_PREFIX, MANAGED_LABEL, docker_errors
from ..log import get_logger
from ..settings import Settings
from .disks import destroy_disk, detach_orphans
from .docker import process_start

log = get_logger("gc")


@dataclass
class GcResult:
    """What was removed."""

    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    disks: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)
    """Folders of a sandbox's copied mounts (``SandboxSpec.copied_mounts``) whose owner is gone."""


COPIES_GRACE_S = 120
"""A copies folder without its owner file is left this long: its maker may be between making it and writing it."""


def _copies(root: Path, everything: bool) -> list[str]:
    """Remove ``root``'s folders (one per sandbox: ``DockerSandbox._copy_mounts``) whose owner process is gone."""
    removed = []
    if not root.is_dir():
        return removed
    for folder in sorted(root.iterdir()):
        owner_file = folder / "owner"
        try:
            owner = (owner_file.read_text().strip() if owner_file.exists() else None) or None  # empty: none yet
            young = owner is None and time.time() - folder.stat().st_mtime < COPIES_GRACE_S
        except OSError:
            continue
        if not everything and (young or (owner is not None and owner_alive(owner))):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder.name)
    return removed


def owner_alive(owner: str | None) -> bool:
    """Whether the process named by an owner label still runs (unknown owners count as alive)."""
    try:
        host, pid, start = (owner or "").rsplit(":", 2)
        pid_n = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname():
        return True
    return process_start(pid_n) == start


def _stale(labels: dict[str, str], everything: bool) -> bool:
    return everything or not owner_alive(labels.get(f"{LABEL_PREFIX}.owner"))


def remove_containers(client: docker.DockerClient, filters: dict[str, str],
                      select: Callable[[dict[str, str]], bool] = lambda labels: True,
                      best_effort: bool = False) -> list[str]:
    """Force-remove the containers ``filters`` lists whose labels ``select`` picks; returns their names.

    One listing call: listing then inspecting each (docker-py's ``containers.list``) races with sandboxes
    removing themselves. A container gone meanwhile is skipped; with ``best_effort`` so is one the engine
    refuses to remove."""
    removed = []
    for c in client.api.containers(all=True, filters=filters):
        if select(c.get("Labels") or {}):
            try:
                client.api.remove_container(c["Id"], force=True, v=True)
                removed.append(c["Names"][0].lstrip("/") if c.get("Names") else c["Id"][:12])
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if _removal_in_progress(exc):
                    continue  # another remover has it (two nodes' clean-ups on one engine): gone, not ours to count
                if not best_effort:
                    raise
    return removed


def _removal_in_progress(exc: docker.errors.APIError) -> bool:
    """The engine's 409 for a container another caller is already removing."""
    return exc.status_code == 409 and "already in progress" in str(exc.explanation or exc)


def collect_garbage(client: docker.DockerClient, settings: Settings, everything: bool = False) -> GcResult:
    """Remove labelled leftovers of dead owners (or all labelled resources with ``everything``)."""
    result = GcResult()
    flt = {"label": MANAGED_LABEL}
    with docker_errors():
        result.containers += remove_containers(client, flt, lambda labels: _stale(labels, everything))
        for v in client.volumes.list(filters=flt):
            labels = v.attrs.get("Labels") or {}
            if _stale(labels, everything):
                try:
                    v.remove(force=True)
                    result.volumes.append(v.name)
                except docker.errors.APIError as exc:
                    log.warning("volume still in use, left", volume=v.name, error=str(exc.explanation))
        live_disks = {(v.attrs.get("Labels") or {}).get(f"{LABEL_PREFIX}.disk") for v in client.volumes.list(filters=flt)}
    if settings.disks_dir.is_dir():
        for img in sorted(settings.disks_dir.glob("*.img")):
            owner_file = img.with_suffix(".owner")
            owner = owner_file.read_text().strip() if owner_file.exists() else None
            if str(img) in live_disks or (not everything and owner_alive(owner)):
                continue
            machine = settings.state_dir / "machines" / img.stem  # a machine-state sandbox's disk, on the host
            if os.path.ismount(machine):
                subprocess.run(["umount", "--lazy", str(machine)], capture_output=True)
            if machine.is_dir():
                try:
                    machine.rmdir()
                except OSError:
                    pass
            destroy_disk(img)
            owner_file.unlink(missing_ok=True)
            result.disks.append(img.name)
        # an owner file without its disk: its process died between naming itself and making the disk (a driver
        # killed there left one, seen in the host-fault tests); a live owner may be making it right now
        for owner_file in sorted(settings.disks_dir.glob("*.owner")):
            if owner_file.with_suffix(".img").exists():
                continue
            try:
                owner = owner_file.read_text().strip()
            except OSError:
                continue
            if everything or not owner_alive(owner):
                owner_file.unlink(missing_ok=True)
                result.disks.append(owner_file.name)
        if everything or os.geteuid() == 0:
            result.disks += detach_orphans(settings.disks_dir)
    views = settings.state_dir / "views"  # the host's archives' mount points (``hostdisk``), named for their process
    if views.is_dir():
        for view in views.glob("view-*"):
            pid = view.name.split("-")[1]
            if not everything and pid.isdigit() and Path(f"/proc/{pid}").exists():
                continue  # its process may still be archiving through it
            try:
                view.rmdir()
            except OSError:
                pass  # not empty: not a mount point of trialbox's
    result.copies += _copies(settings.state_dir / "mounts", everything)
    if everything:
        for golden in sorted((settings.state_dir / "golden").glob("*.img")):
            golden.unlink(missing_ok=True)  # a cache: rebuilt on demand
            result.disks.append(golden.name)
    if result.containers or result.volumes or result.disks or result.copies:
        log.info("garbage collected", containers=len(result.containers), volumes=len(result.volumes),
                 disks=len(result.disks), copies=len(result.copies))
    return result
