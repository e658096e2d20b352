"""A host file system that fills up under a run: the run folder (its records) or the state folder (the
sandboxes' workspace disks, the repository cache). It is the host's fault, never the agent's, and it does not
pass by itself, so it is neither a verdict nor a retry: the run stops, saying which folder, how much is free and
what to do, with exit ``HOST_FULL_EXIT_CODE`` (74), and ``trialbox run`` on the same folder finishes the run
once space is freed.

Three parts:

* ``host_full``: whether an exception (or one it was raised from) is the host's file system out of space or
  quota: an ``OSError`` with ``ENOSPC``/``EDQUOT``, SQLite's "database or disk is full", or a command trialbox ran
  on its own disk images (``DiskError``) that said so. Text alone is never read elsewhere: "no space left on
  device" in what the engine or the sandbox says is the agent's own bounded disk, filled by the agent.
* ``SpaceGuard``: before each trial starts, whether each folder has ``need_mb`` free (``RESERVE_MB`` for the run's
  records, plus the trial's ``disk_limit_mb``: its workspace disk in the state folder can grow to that size, and
  its exported workspace in the run folder is bounded by it); two folders on one file system add their needs.
* ``write_atomic``: a record file is whole or absent (a temporary file in the same folder, flushed and synced,
  then renamed over the name); a failed write leaves the name as it was and no temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import DiskError, HostDiskFull

HOST_FULL_EXIT_CODE = HostDiskFull.exit_code
"""``trialbox run``'s exit code when a file system it writes to is full (74, EX_IOERR); ``trialbox run`` on the same
folder goes on once space is freed."""

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""No space left on the device; the user's disk quota exceeded."""

SQLITE_FULL = "database or disk is full"
"""What SQLite says when a write finds no space (SQLITE_FULL)."""

RESERVE_MB = 64
"""What a folder must have free besides a trial's own worst case: the store's rows and write-ahead log, the
attempt's records (events, verdict, diff, grader log: tens of KiB to a few MiB for the sample tasks), the stop
record. Small against the trial's own part (``disk_limit_mb``, 2048 by default)."""

MiB = 1 << 20


def host_full(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, is a host file system out of space."""
    seen: set[int] = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, HostDiskFull):
            return True
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
            return True
        if isinstance(e, sqlite3.Error) and (SQLITE_FULL in str(e).lower()
                                             or getattr(e, "sqlite_errorcode", None) == 13):  # SQLITE_FULL
            return True
        if isinstance(e, DiskError) and any(s in str(e).lower() for s in ("no space left on device",
                                                                          "disk quota exceeded")):
            return True  # a command on trialbox's own disk images in the state folder (cp, mkfs.ext4)
        e = e.__cause__ or e.__context__
    return False


def failed_write(exc: BaseException) -> str:
    """What the full file system refused, in a few words: the first out-of-space error in the chain."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
            return f"writing {e.filename} failed: {os.strerror(e.errno)}" if e.filename else \
                f"a write failed: {os.strerror(e.errno)}"
        if isinstance(e, (sqlite3.Error, DiskError)) and host_full(e) and e.__cause__ is None:
            return f"{type(e).__name__}: {e}"[:300]
        e = e.__cause__ or e.__context__
    return f"{type(exc).__name__}: {exc}"[:300]


def free_mb(path: Path) -> float:
    """Free space for an unprivileged writer on ``path``'s file system (its nearest existing folder), in MiB."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / MiB


def _device(path: Path) -> int:
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.stat(path).st_dev


@dataclass(frozen=True)
class Folder:
    """A folder a run writes to: ``what`` names it in messages (``run folder``, ``state folder``)."""

    what: str
    path: Path


@dataclass
class SpaceGuard:
    """The free space of the folders a run writes to, checked before each trial starts (``short``)."""

    folders: list[Folder]
    free: Callable[[Path], float] = free_mb
    device: Callable[[Path], int] = _device

    def need_mb(self, disk_limit_mb: int) -> int:
        """What one folder needs free for a trial to start (``RESERVE_MB`` plus its workspace disk's size)."""
        return RESERVE_MB + max(0, int(disk_limit_mb or 0))

    def short(self, disk_limit_mb: int, only: str | None = None) -> str | None:
        """Why a trial of workspace disk ``disk_limit_mb`` must not start, or None: a folder's file system has
        less free than the folders on it need (``need_mb`` each); ``only``: the file system of that folder alone
        (``state folder``)."""
        groups: dict[int, list[Folder]] = {}
        for f in self.folders:
            try:
                groups.setdefault(self.device(f.path), []).append(f)
            except OSError:
                continue
        for folders in groups.values():
            if only is not None and all(f.what != only for f in folders):
                continue
            need = self.need_mb(disk_limit_mb) * len(folders)
            try:
                free = self.free(folders[0].path)
            except OSError:
                continue
            if free < need:
                names = " and ".join(f"the {f.what} {f.path}" for f in folders)
                one = len(folders) == 1
                return (f"{names} {'has' if one else 'have'} {int(free)} MiB free on {'its' if one else 'their'} "
                        f"file system, less than the {need} MiB a trial needs there before it starts "
                        f"({RESERVE_MB} MiB for the run's records + the trial's disk_limit_mb {disk_limit_mb}"
                        + (f", for each of the {len(folders)} folders" if len(folders) > 1 else "") + ")")
        return None

    def describe(self) -> str:
        """Each folder's free space now, for the message of a run the full disk stopped."""
        parts = []
        for f in self.folders:
            try:
                parts.append(f"the {f.what} {f.path}: {int(self.free(f.path))} MiB free")
            except OSError as exc:
                parts.append(f"the {f.what} {f.path}: {exc.strerror or exc}")
        return "; ".join(parts)


def stop_message(why: str, guard: SpaceGuard | None, recorded: int, total: int, unrecorded: list[str],
                 not_started: int) -> str:
    """The message of ``HostDiskFull``: why, where and how much is free, what is kept, what to do."""
    now = f" Now: {guard.describe()}." if guard is not None else ""
    if not total:  # the run's own records, outside the trials
        return (f"the run stopped: a host file system it writes to is (nearly) full: {why}.{now} Every record is "
                "whole or absent. Free space there (or point --out / TRIALBOX_STATE_DIR at a larger file system) and run the "
                "same command again: it finishes the run.")
    ended = (f" {len(unrecorded)} trial(s) ended on it or owe a retry and are not recorded "
             f"({', '.join(unrecorded[:10])}{' ...' if len(unrecorded) > 10 else ''});") if unrecorded else ""
    return (f"the run stopped: a host file system it writes to is (nearly) full: {why}.{now} No trial started after "
            f"it and no retry was spent on it: {recorded}/{total} trial(s) are recorded, each whole;{ended} "
            f"{not_started} not started. "
            "Free space there (or point --out / TRIALBOX_STATE_DIR at a larger file system) and run the same "
            "command again: it finishes the run.")


def write_atomic(path: Path, data: str | bytes, errors: str = "strict") -> None:
    """``path`` holds ``data`` whole, or is left as it was: written to a temporary file beside it (flushed and
    synced, so a deferred out-of-space error shows here), then renamed over it; the temporary file is removed
    when anything fails."""
    path = Path(path)
    raw = data.encode("utf-8", errors) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # which record could not be written (a write error names no file)
        raise


__all__ = ["FULL_ERRNOS", "HOST_FULL_EXIT_CODE", "RESERVE_MB", "Folder", "HostDiskFull", "SpaceGuard", "failed_write",
           "free_mb", "host_full", "stop_message", "write_atomic"]
