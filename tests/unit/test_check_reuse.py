"""``tasks check`` stands on a passed check recorded for the same inputs (issue 24, item 9): with at least as
many replicates, never a failed one, never while trialbox's checkout has uncommitted changes."""

from __future__ import annotations

import pytest

from orchestrator import checkrecords
from orchestrator.checkrecords import TaskCheck, reusable_check, save_check
from orchestrator.loading import load_manifest
from orchestrator.taskload import load_tasks


@pytest.fixture
def task(repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIALBOX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(checkrecords, "_harness", lambda: {"version": "1", "commit": "abc"})
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    return {t.id: t for t in load_tasks(loaded)}["textkit-slug-unicode"]


def test_a_passed_check_is_reused_with_as_many_replicates_and_no_more(task):
    assert reusable_check(task, "sha256:img", 2) is None  # never checked
    save_check(task, "sha256:img", TaskCheck(task.id, [], 12.5), replicates=2)
    record = reusable_check(task, "sha256:img", 2)
    assert record is not None and record["replicates"] == 2 and record["seconds"] == 12.5
    assert reusable_check(task, "sha256:img", 1) is not None
    assert reusable_check(task, "sha256:img", 3) is None      # a stronger check was asked for
    assert reusable_check(task, "sha256:other", 2) is None    # another image: other inputs


def test_a_failed_check_or_a_dirty_checkout_is_checked_again(task, monkeypatch):
    save_check(task, "sha256:img", TaskCheck(task.id, ["the oracle was not accepted"]), replicates=2)
    assert reusable_check(task, "sha256:img", 1) is None
    save_check(task, "sha256:img", TaskCheck(task.id, []), replicates=2)
    assert reusable_check(task, "sha256:img", 1) is not None
    monkeypatch.setattr(checkrecords, "_harness", lambda: {"version": "1", "commit": "abc+dirty"})
    assert reusable_check(task, "sha256:img", 1) is None


def test_a_record_from_before_replicates_were_recorded_is_not_reused(task):
    import json

    save_check(task, "sha256:img", TaskCheck(task.id, []))  # replicates unknown
    assert json.loads(checkrecords.record_path(task, "sha256:img").read_text())["replicates"] is None
    assert reusable_check(task, "sha256:img", 1) is None
