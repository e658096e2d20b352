"""The run folder and its SQLite store.

``RunPaths`` is the layout, as code::

    <run>/
      manifest.yaml          the manifest as run
      lock.json              the lock as run
      source.json            where the manifest was (its relative paths resolve there)
      run-key                the run's unique key (its containers' labels and names)
      plan.json              the order and arrangement of the trials
      run.json               how the run ended (cost cap, backend, slots)
      results.sqlite         trials (one row each: the final outcome), criteria, events index, verdict
                             history, superseded attempts
      trials/<trial>/a<attempt>/          (``AttemptPaths``)
        events.jsonl         the host-side event log (hash-chained)
        canaries.json        the attempt's canary values (host only; kept for regrading)
        final-workspace.tar  the exported workspace (sanitized; no .git)
        final-workspace.json what the export could not bring over whole, and why
        diff.patch           the change, computed on the host
        grader.log           the grader's output (tail)
        verdict.json         the verdict with every criterion and its evidence
        retry-owed.json      (a1 only) the infrastructure failure whose retry the run still owes

No other module spells these names: they ask ``RunPaths`` and ``AttemptPaths``.

A trial's row is written in one transaction after its artifacts are on disk:
a trial is either fully in the store or absent (a crash in between leaves
files that the next run overwrites, never a half-recorded result).

A trial has one row in ``trials``, its final outcome, and every figure reads that table only. When a resumed
run runs a trial recorded as an infrastructure error again, the new attempt's row replaces the old one in
the same transaction and the old row moves to ``superseded`` (history, never counted; the new result also
lists it in ``previous_attempts``).
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .result import TrialResult

if TYPE_CHECKING:
    from .grading.verdict import Verdict

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
  id TEXT PRIMARY KEY, task TEXT NOT NULL, candidate TEXT NOT NULL, replicate INTEGER NOT NULL,
  attempt INTEGER NOT NULL, retries INTEGER NOT NULL DEFAULT 0, outcome TEXT NOT NULL, outcome_kind TEXT,
  accepted INTEGER NOT NULL, reasons TEXT NOT NULL, stop_reason TEXT, cost_usd REAL, duration_s REAL,
  started_at TEXT, finished_at TEXT, events_anchor TEXT, grader_version TEXT, result TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS criteria (
  trial_id TEXT NOT NULL, name TEXT NOT NULL, critical INTEGER NOT NULL, passed INTEGER NOT NULL,
  evidence TEXT NOT NULL, PRIMARY KEY (trial_id, name));
CREATE TABLE IF NOT EXISTS events (
  trial_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, source TEXT, tool TEXT, summary TEXT,
  PRIMARY KEY (trial_id, seq));
CREATE TABLE IF NOT EXISTS verdicts (
  trial_id TEXT NOT NULL, grader_version TEXT NOT NULL, outcome TEXT NOT NULL, accepted INTEGER NOT NULL,
  created_at TEXT NOT NULL, verdict TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS superseded (
  trial_id TEXT NOT NULL, attempt INTEGER NOT NULL, outcome TEXT NOT NULL, outcome_kind TEXT,
  superseded_at TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (trial_id, attempt));
"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:120]


FINAL_WORKSPACE = "final-workspace.tar"
"""An attempt's exported workspace, by name (``AttemptPaths.final_workspace``)."""


@dataclass(frozen=True)
class AttemptPaths:
    """The artifacts of one attempt of one trial (``trials/<trial>/a<attempt>/``)."""

    folder: Path

    @property
    def events(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def canaries(self) -> Path:
        return self.folder / "canaries.json"

    @property
    def final_workspace(self) -> Path:
        """The tar; its notes (what could not be brought over whole) sit beside it as ``.json``."""
        return self.folder / FINAL_WORKSPACE

    @property
    def diff(self) -> Path:
        return self.folder / "diff.patch"

    @property
    def grader_log(self) -> Path:
        return self.folder / "grader.log"

    @property
    def verdict(self) -> Path:
        return self.folder / "verdict.json"

    @property
    def retry_owed(self) -> Path:
        return self.folder / "retry-owed.json"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.yaml"

    @property
    def lock(self) -> Path:
        return self.root / "lock.json"

    @property
    def source(self) -> Path:
        """Where the manifest was when the run started (its relative paths resolve there)."""
        return self.root / "source.json"

    @property
    def db(self) -> Path:
        return self.root / "results.sqlite"

    @property
    def run_key(self) -> Path:
        return self.root / "run-key"

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def run_record(self) -> Path:
        """How the run ended: stopped by its cost cap, the backend, its slots."""
        return self.root / "run.json"

    @property
    def stopped(self) -> Path:
        """Why the run's last session stopped on a configuration error, and the attempts it left unrecorded
        (absent once a session ends without one)."""
        return self.root / "stopped.json"

    def trial(self, trial_id: str, attempt: int) -> Path:
        """The folder of one attempt of a trial (``attempt`` names its artifacts)."""
        return self.root / "trials" / slug(trial_id) / f"a{attempt}"

    def attempt(self, trial_id: str, attempt: int) -> AttemptPaths:
        return AttemptPaths(self.trial(trial_id, attempt))

    @property
    def key(self) -> str:
        """The run's unique key (``run-key``, made when the run starts, kept on resume): it labels and names
        the run's containers, so that two runs whose folders share a name never touch each other's."""
        return self.run_key.read_text().strip() if self.run_key.exists() else self.root.name


class Store:
    """SQLite in the run folder; one transaction per trial."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        paths.root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(paths.db, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def done(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT id FROM trials")}

    def record(self, result: TrialResult, events: list[dict[str, Any]]) -> None:
        doc = result.to_dict()
        v = doc["verdict"]
        with self._tx() as db:
            old = db.execute("SELECT attempt, outcome, outcome_kind, result FROM trials WHERE id = ?",
                             (result.id,)).fetchone()
            if old is not None and old[0] != result.attempt:  # a later attempt supersedes it: kept as history
                db.execute("INSERT OR REPLACE INTO superseded VALUES (?,?,?,?,datetime('now'),?)",
                           (result.id, old[0], old[1], old[2], old[3]))
            db.execute("DELETE FROM criteria WHERE trial_id = ?", (result.id,))
            db.execute("DELETE FROM events WHERE trial_id = ?", (result.id,))
            db.execute(
                "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (result.id, result.task, result.candidate, result.replicate, result.attempt, result.retries,
                 v["outcome"], v["kind"], int(v["accepted"]), json.dumps(v["reasons"]), doc["stop_reason"],
                 doc["cost_usd"], result.duration_s, result.started_at, result.finished_at, result.events_anchor,
                 v["grader_version"], json.dumps(doc)))
            self._criteria(db, result.id, v)
            db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?)", [
                (result.id, e["seq"], e["kind"], e.get("source"), e.get("tool"),
                 str(e.get("reason") or e.get("exit_code") or "")[:200]) for e in events])

    def _criteria(self, db: sqlite3.Connection, trial_id: str, v: dict[str, Any]) -> None:
        db.executemany("INSERT INTO criteria VALUES (?,?,?,?,?)", [
            (trial_id, c["name"], int(c["critical"]), int(c["passed"]), json.dumps(c["evidence"], default=str))
            for c in v["criteria"]])
        db.execute("INSERT INTO verdicts VALUES (?,?,?,?,datetime('now'),?)",
                   (trial_id, v["grader_version"], v["outcome"], int(v["accepted"]), json.dumps(v, default=str)))

    def regrade(self, trial_id: str, verdict: Verdict) -> None:
        """Replace a trial's verdict and criteria, and nothing else of its stored document (the history keeps
        every verdict)."""
        row = self.db.execute("SELECT result FROM trials WHERE id = ?", (trial_id,)).fetchone()
        if row is None:
            raise KeyError(trial_id)
        doc = json.loads(row[0])
        doc["verdict"] = v = verdict.to_dict()
        with self._tx() as db:
            db.execute("DELETE FROM criteria WHERE trial_id = ?", (trial_id,))
            db.execute("UPDATE trials SET outcome=?, outcome_kind=?, accepted=?, reasons=?, grader_version=?, result=? "
                       "WHERE id=?", (v["outcome"], v["kind"], int(v["accepted"]), json.dumps(v["reasons"]),
                                      v["grader_version"], json.dumps(doc), trial_id))
            self._criteria(db, trial_id, v)

    def trial(self, trial_id: str) -> TrialResult | None:
        row = self.db.execute("SELECT result FROM trials WHERE id = ?", (trial_id,)).fetchone()
        return TrialResult.from_dict(json.loads(row[0])) if row else None

    def trials(self) -> list[TrialResult]:
        return [TrialResult.from_dict(json.loads(r[0]))
                for r in self.db.execute("SELECT result FROM trials ORDER BY task, candidate, replicate")]

    def superseded(self, trial_id: str | None = None) -> list[TrialResult]:
        """Recorded attempts a later attempt of their trial replaced (history: no figure counts them)."""
        rows = self.db.execute("SELECT result FROM superseded" + (" WHERE trial_id = ?" if trial_id else "")
                               + " ORDER BY trial_id, attempt", (trial_id,) if trial_id else ())
        return [TrialResult.from_dict(json.loads(r[0])) for r in rows]

    def _tx(self):
        store = self

        class _Tx:
            def __enter__(self) -> sqlite3.Connection:
                store.db.execute("BEGIN IMMEDIATE")
                return store.db

            def __exit__(self, exc_type, *rest) -> None:
                # a failed write (a full disk: "database or disk is full") may have ended the transaction itself;
                # a failed COMMIT leaves it open: either way the row is whole or absent, and the first error stands
                if exc_type is None:
                    try:
                        store.db.execute("COMMIT")
                        return
                    except sqlite3.Error:
                        if store.db.in_transaction:
                            store.db.execute("ROLLBACK")
                        raise
                if store.db.in_transaction:
                    store.db.execute("ROLLBACK")

        return _Tx()
