"""What ``tasks check`` records of each task, and how ``trialbox run`` asks it.

Each task's verdict is kept under the state folder, keyed (``check_key``) by the task's hash, its repository's
content, its grader's hash, its image ID, its run-time settings, and the trialbox version and commit with the grader
tools' hash: a check is valid exactly as long as none of them changed. ``require_checked`` refuses a task whose
last check failed and names the tasks never checked (unless the run is ``--unchecked``); the run's lock records
each task's status. ``tasks check`` itself stands on a passed check of the same inputs with at least as many
replicates (``reusable_check``) unless ``--again``.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import TaskSetError
from .grading.runner import TOOLS
from .hashing import combine, tree_sha256
from .repos import source_identity
from .settings import load_settings
from .tasks import Task


CHECK_VERSION = 2


@dataclass
class TaskCheck:
    """One task's check: its problems, the root cause first."""

    task: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    reused: bool = False
    """Not run: a passed check of the same inputs was recorded (``reusable_check``)."""
    sealed: dict | None = None
    """``taskcheck.sealing``: which fail-to-pass tests fail on the untouched repository on a sealed value (code under
    test cannot pass them by forging the test process's reports); None for a script grader or an unfinished check."""
    strength: dict | None = None
    """``taskcheck.grader_strength``: the reference solution's mutants graded as trials are, how many the grader
    rejected, which survived; None when not asked for (``--mutants``) or the check stopped before."""
    untouched_times_out: bool = False
    """The script grader timed out on the untouched environment (counted as failing before: ``Task.
    untouched_times_out``)."""
    alternatives: dict | None = None
    """``taskcheck._alternatives``: the grader folder's other correct solutions, which were accepted and which not
    (None: it has none, or the check stopped before)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def checked_image(task: Task, images: dict[str, Any]) -> str:
    """What a check of ``task`` ran on, as ``check_key`` takes it: the environment's image ID, and the grader's own
    after a ``+`` when it has one (a new verifier image is a new check). ``images``: image IDs by key, or the lock's
    ``images`` section."""
    def of(key: str) -> str:
        v = images[key]
        return v["image_id"] if isinstance(v, dict) else v

    return of(task.image_key) + (f"+{of(task.grader_image_key)}" if task.grader_recipe is not None else "")


def check_key(task: Task, image_id: str) -> str:
    """What a check's verdict is valid for: the task, its repository, its grader, its image, and the trialbox that
    checked it (version and commit: another trialbox grades differently) with the grader's own tools."""
    return combine({"task": tree_sha256(task.folder), "grader": tree_sha256(task.grader_folder), "image": image_id,
                    "repo": source_identity(task), "tools": tree_sha256(TOOLS),
                    "trialbox": f"{json.dumps(_harness())}/{CHECK_VERSION}",
                    "runtime": json.dumps(task.runtime.describe(), sort_keys=True)})


@functools.lru_cache(maxsize=1)
def _harness() -> dict[str, str]:
    from .lock import harness_identity

    return harness_identity()


def record_path(task: Task, image_id: str) -> Path:
    """Where a task's last check is recorded (every problem it found is there)."""
    return load_settings().state_dir / "taskcheck" / f"{check_key(task, image_id)[:40]}.json"


def last_check(task: Task, image_id: str) -> dict[str, Any] | None:
    """The recorded verdict of this exact task, grader and image (None: never checked)."""
    try:
        return json.loads(record_path(task, image_id).read_text())
    except (OSError, ValueError):
        return None


def save_check(task: Task, image_id: str, check: TaskCheck, replicates: int | None = None) -> None:
    path = record_path(task, image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{uuid.uuid4().hex[:6]}")
    tmp.write_text(json.dumps({"task": task.id, "ok": check.ok, "problems": check.problems, "image_id": image_id,
                               "replicates": replicates, "seconds": round(check.seconds, 3), "sealed": check.sealed,
                               "strength": check.strength, "untouched_times_out": check.untouched_times_out,
                               "alternatives": check.alternatives, "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))
    tmp.replace(path)


def reusable_check(task: Task, image_id: str, replicates: int, mutants: int = 0) -> dict[str, Any] | None:
    """The recorded check ``tasks check`` can stand on instead of checking again: one that passed, for exactly
    these inputs (``check_key``), with at least ``replicates`` oracle replicates and, when ``mutants`` are asked
    for, a grader strength measured on at least as many. A failed check is never reused
    (what failed may have been the machine's, and the user is likely fixing it), nor any check while trialbox's own
    checkout has uncommitted changes (its identity is then ``<commit>+dirty`` whatever they are)."""
    if _harness()["commit"].endswith("+dirty"):  # uncommitted changes to trialbox: the key cannot tell them apart
        return None
    record = last_check(task, image_id)
    if record is None or not record.get("ok") or not isinstance(record.get("replicates"), int) \
            or record["replicates"] < replicates:
        return None
    strength = record.get("strength")
    if mutants and not (isinstance(strength, dict) and isinstance(strength.get("asked"), int)
                        and strength["asked"] >= mutants):
        return None
    return record


def require_checked(tasks: list[Task], lock: dict[str, Any], unchecked: bool) -> dict[str, str]:
    """Each task's check status (``passed`` | ``unchecked``); ``TaskSetError`` naming the tasks whose last check
    failed (always) and those never checked (unless ``unchecked``)."""
    failed, never, status = [], [], {}
    for t in tasks:
        record = last_check(t, checked_image(t, lock["images"]))
        if record is None:
            never.append(t.id)
            status[t.id] = "unchecked"
        elif not record.get("ok"):
            failed.append(f"{t.id}: {(record.get('problems') or ['failed'])[0]}")
        else:
            status[t.id] = "passed"
    lines = []
    if failed:
        lines.append(f"{len(failed)} task(s) failed their last `trialbox tasks check` (a task-set error, fix the task):")
        lines += [f"  {f}" for f in failed]
    if never and not unchecked:
        lines.append(f"{len(never)} task(s) were never checked as they are now: {', '.join(never)}; run "
                     f"`trialbox tasks check MANIFEST` first (or `trialbox run --unchecked` to run them anyway)")
    if lines:
        raise TaskSetError("\n".join(lines))
    return status


def grader_strengths(tasks: list[Task], lock: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """What the run's lock records of each task's grader strength (``tasks check --mutants``), from its check
    record for the locked image: strength, mutants graded, survivors, when checked; None when never measured."""
    out: dict[str, dict[str, Any] | None] = {}
    for t in tasks:
        record = last_check(t, checked_image(t, lock["images"])) or {}
        s = record.get("strength")
        if isinstance(s, dict) and isinstance(s.get("graded"), int) and s["graded"] > 0:
            out[t.id] = {"strength": s.get("strength"), "graded": s["graded"],
                         "survivors": [v.get("id") for v in s.get("survivors") or [] if isinstance(v, dict)],
                         "checked_at": record.get("checked_at"), "record": record_path(t, checked_image(t, lock["images"])).name}
        else:
            out[t.id] = None
    return out


def untouched_timeouts(tasks: list[Task], lock: dict[str, Any]) -> list[str]:
    """The tasks whose last passed check, for the locked image, saw the untouched environment time out (the lock
    records them: they decide whether a trial's timed-out grading is the agent's failure)."""
    out = []
    for t in tasks:
        record = last_check(t, checked_image(t, lock["images"])) or {}
        if record.get("ok") and record.get("untouched_times_out") is True:
            out.append(t.id)
    return sorted(out)


def with_check_facts(tasks: list[Task], lock: dict[str, Any]) -> list[Task]:
    """``tasks`` with what their checks taught that shapes grading, as the run's lock recorded it
    (``untouched_timeouts``); a lock without the section (an older run) teaches nothing."""
    slow = set(lock.get("untouched_timeouts") or [])
    return [t.model_copy(update={"untouched_times_out": True}) if t.id in slow else t for t in tasks]
