"""What the viewer's pages show, read from one run folder and never written.

The store is opened read-only for each request (``mode=ro``: a run that is still writing it keeps its WAL; the
viewer sees every trial committed so far). The run page needs only the ``trials`` and ``criteria`` columns, so a
run of 10,000 trials opens without parsing any trial's stored document; a trial page reads one document, its
event log and its files.

Rows are incremental: every trial row carries its SQLite ``rowid``, and ``rows(after=N)`` returns the rows
written after N (a trial recorded again, after an infrastructure error, gets a new rowid and replaces its earlier
row on the page by id). That is how a page follows a live run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..store import RunPaths, slug

FLAG_CRITERIA = {"evaluator_tampering_attempts": "tamper", "near_identical_to_reference": "near-identical",
                 "secret_read": "secret-read", "submitted": "no-submit", "export": "export-incomplete"}
"""Diagnostic criteria whose failure is a flag a person filters on (the failed criterion's name → the flag)."""

RUNNING_WITHIN_S = 120.0
"""A planned trial not yet recorded counts as running while its event log was written within this many seconds."""

MAX_TEXT = 2_000_000
"""Characters of one file shown on a page (a diff, a grader log); the whole file is a raw link away."""

RAW_FILES = ("events.jsonl", "diff.patch", "grader.log", "verdict.json", "final-workspace.tar",
             "final-workspace.json", "retry-owed.json")
"""The attempt files the viewer serves raw, by name; nothing else of the folder (``canaries.json`` stays)."""


def group(outcome: str) -> str:
    """accepted, infra (an infrastructure error: never the agent's) or rejected (every other graded outcome)."""
    return "accepted" if outcome == "accepted" else "infra" if outcome == "infra_error" else "rejected"


@dataclass
class RunData:
    """One run folder, by the name the viewer gives it in URLs."""

    name: str
    root: Path
    _plan: tuple[float, list[str]] | None = field(default=None, repr=False)

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.root)

    def connect(self) -> sqlite3.Connection:
        """The store, read-only (a missing store is an error here, never a new empty file)."""
        db = self.paths.db
        if not db.exists():
            raise FileNotFoundError(f"{self.root}: no results.sqlite")
        return sqlite3.connect(f"file:{quote(str(db.resolve()))}?mode=ro", uri=True, timeout=10)

    def planned(self) -> list[str]:
        """The planned trial ids (``plan.json``), re-read only when the file changes."""
        try:
            mtime = self.paths.plan.stat().st_mtime
        except OSError:
            return []
        if self._plan is None or self._plan[0] != mtime:
            try:
                trials = [str(t) for t in json.loads(self.paths.plan.read_text()).get("trials") or []]
            except (OSError, ValueError, AttributeError):
                trials = []
            self._plan = (mtime, trials)
        return self._plan[1]

    def rows(self, after: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The trial rows written after rowid ``after``, each with its failed criteria and flags; and the last
        rowid (what the next call passes)."""
        db = self.connect()
        try:
            cur = db.execute(
                "SELECT rowid, id, task, candidate, replicate, attempt, retries, outcome, outcome_kind, reasons, "
                "stop_reason, cost_usd, duration_s, finished_at FROM trials WHERE rowid > ? ORDER BY rowid", (after,))
            rows = [{"rowid": r[0], "id": r[1], "task": r[2], "candidate": r[3], "replicate": r[4], "attempt": r[5],
                     "retries": r[6], "outcome": r[7], "kind": r[8], "group": group(r[7]), "reasons": _list(r[9]),
                     "stop": r[10], "cost": r[11], "duration": r[12], "finished": r[13], "failed": [], "flags": []}
                    for r in cur]
            if not rows:
                return [], after
            by_id = {r["id"]: r for r in rows}
            for trial_id, name, critical in db.execute(
                    "SELECT c.trial_id, c.name, c.critical FROM criteria c JOIN trials t ON t.id = c.trial_id "
                    "WHERE c.passed = 0 AND t.rowid > ? ORDER BY c.trial_id, c.name", (after,)):
                row = by_id.get(trial_id)
                if row is None:
                    continue
                row["failed"].append(name)
                if name in FLAG_CRITERIA and not critical:
                    row["flags"].append(FLAG_CRITERIA[name])
            for row in rows:
                if row["retries"]:
                    row["flags"].append("retried")
            return rows, rows[-1]["rowid"]
        finally:
            db.close()

    def progress(self, now: float | None = None) -> dict[str, Any]:
        """Counts so far: done, running, left, accepted / rejected / infrastructure errors, cost, and the time left
        estimated from the finished trials' pace."""
        now = time.time() if now is None else now
        db = self.connect()
        try:
            counts = dict(db.execute("SELECT CASE WHEN outcome = 'accepted' THEN 'accepted' WHEN outcome = "
                                     "'infra_error' THEN 'infra' ELSE 'rejected' END, count(*) FROM trials GROUP BY 1"))
            cost, first, last, last_rowid = db.execute(
                "SELECT coalesce(sum(cost_usd), 0), min(started_at), max(finished_at), max(rowid) FROM trials").fetchone()
            recorded = {r[0] for r in db.execute("SELECT id FROM trials")}
        finally:
            db.close()
        done = sum(counts.values())
        planned = self.planned()
        left_ids = [t for t in planned if t not in recorded]
        running = [t for t in left_ids if self._written_within(t, now)]
        total = max(len(planned), done)
        eta = None
        if running and first and last and done:
            pace = (_epoch(last) - _epoch(first)) / done if _epoch(last) and _epoch(first) else None
            eta = round(pace * len(left_ids), 1) if pace else None
        return {"done": done, "planned": total, "left": total - done, "running": len(running), "running_ids": running[:50],
                "accepted": counts.get("accepted", 0), "rejected": counts.get("rejected", 0),
                "infra": counts.get("infra", 0), "cost_usd": cost, "eta_s": eta, "live": bool(running),
                "last_rowid": last_rowid or 0}

    def _written_within(self, trial_id: str, now: float) -> bool:
        folder = self.root / "trials" / slug(trial_id)
        try:
            attempts = [e for e in os.scandir(folder) if e.name.startswith("a")]
        except OSError:
            return False
        for a in attempts:
            try:
                if now - os.stat(os.path.join(a.path, "events.jsonl")).st_mtime < RUNNING_WITHIN_S:
                    return True
            except OSError:
                continue
        return False

    def trial_document(self, trial_id: str) -> dict[str, Any] | None:
        db = self.connect()
        try:
            row = db.execute("SELECT result FROM trials WHERE id = ?", (trial_id,)).fetchone()
        finally:
            db.close()
        return json.loads(row[0]) if row else None

    def recorded(self, trial_id: str) -> bool:
        """Whether the store has the trial (its row, or an attempt a later one superseded)."""
        db = self.connect()
        try:
            return db.execute("SELECT 1 FROM trials WHERE id = ? UNION SELECT 1 FROM superseded WHERE trial_id = ?",
                              (trial_id, trial_id)).fetchone() is not None
        finally:
            db.close()

    def task_trials(self, task: str, candidate: str) -> list[dict[str, Any]]:
        """The recorded documents of one task's trials by one candidate, by replicate."""
        db = self.connect()
        try:
            return [json.loads(r[0]) for r in db.execute(
                "SELECT result FROM trials WHERE task = ? AND candidate = ? ORDER BY replicate", (task, candidate))]
        finally:
            db.close()

    def candidates_and_tasks(self) -> tuple[list[str], list[str]]:
        db = self.connect()
        try:
            cands = [r[0] for r in db.execute("SELECT DISTINCT candidate FROM trials ORDER BY candidate")]
            tasks = [r[0] for r in db.execute("SELECT DISTINCT task FROM trials ORDER BY task")]
        finally:
            db.close()
        return cands, tasks

    def attempt_file(self, trial_id: str, attempt: int, name: str) -> Path | None:
        """One of ``RAW_FILES`` of an attempt of a recorded trial, when it exists (any other name, or a trial the
        store does not have: None)."""
        if name not in RAW_FILES or not 0 < attempt < 1_000_000 or not self.recorded(trial_id):
            return None
        path = self.paths.attempt(trial_id, attempt).folder / name
        return path if path.is_file() else None

    def text(self, trial_id: str, attempt: int, name: str) -> tuple[str | None, bool]:
        """A text file of an attempt, at most ``MAX_TEXT`` characters of it, and whether it was cut."""
        path = self.attempt_file(trial_id, attempt, name)
        if path is None:
            return None, False
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TEXT * 4 + 1)
        text = raw.decode("utf-8", errors="replace")
        cut = len(text) > MAX_TEXT or len(raw) > MAX_TEXT * 4
        return text[:MAX_TEXT], cut


def _list(raw: str | None) -> list[str]:
    try:
        value = json.loads(raw or "[]")
    except ValueError:
        return [str(raw)]
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _epoch(stamp: str | None) -> float | None:
    from datetime import datetime

    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
