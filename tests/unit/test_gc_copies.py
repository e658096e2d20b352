"""``gc`` and the folders of sandboxes' copied mounts: a dead owner's go, a live owner's stay, a fresh one without
its owner file yet stays for a grace period."""

from __future__ import annotations

import os
import socket
import time

from orchestrator.sandbox import gc
from orchestrator.sandbox.docker import owner_label


def _folder(root, name, owner=None, age=0.0):
    folder = root / name
    (folder / "0").mkdir(parents=True)
    (folder / "0" / "run_tests.py").write_text("print('x')\n")
    if owner is not None:
        (folder / "owner").write_text(owner)
    if age:
        then = time.time() - age
        os.utime(folder, (then, then))
    return folder


def test_a_dead_owners_copies_go_and_a_live_owners_stay(tmp_path):
    dead = f"{socket.gethostname()}:{os.getpid()}:not-its-start"  # this pid, another start: a process gone
    _folder(tmp_path, "tb-dead", dead)
    _folder(tmp_path, "tb-live", owner_label())
    _folder(tmp_path, "tb-other-host", "elsewhere:1:2")  # another host's: never ours to judge
    _folder(tmp_path, "tb-fresh")  # its maker has not written the owner yet
    _folder(tmp_path, "tb-old", age=gc.COPIES_GRACE_S + 60)  # no owner, long ago: left by an older trialbox
    removed = gc._copies(tmp_path, everything=False)
    assert sorted(removed) == ["tb-dead", "tb-old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tb-fresh", "tb-live", "tb-other-host"]


def test_everything_removes_every_copies_folder(tmp_path):
    _folder(tmp_path, "tb-live", owner_label())
    _folder(tmp_path, "tb-fresh")
    assert sorted(gc._copies(tmp_path, everything=True)) == ["tb-fresh", "tb-live"]
    assert list(tmp_path.iterdir()) == []


def test_no_folder_is_nothing_to_do(tmp_path):
    assert gc._copies(tmp_path / "absent", everything=False) == []


def test_an_empty_owner_file_counts_as_none_yet(tmp_path):
    # an owner file is written whole (renamed into place), but one left empty by an older trialbox or a full disk
    # must not read as a dead owner while its maker may still be at work
    _folder(tmp_path, "tb-empty-fresh", "")
    _folder(tmp_path, "tb-empty-old", "", age=gc.COPIES_GRACE_S + 60)
    assert gc._copies(tmp_path, everything=False) == ["tb-empty-old"]
