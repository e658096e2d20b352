"""Suspect tasks: some agent ran them and none solved them, in this run or in the runs declared as evidence.

A task whose grader rejects correct work looks, from the results, like a task every agent fails. trialbox cannot
tell the two apart, so it names such tasks *suspect* and lets a person look (``tasks check --mutants``,
``alternatives/``). One run is thin evidence: a hard task may go unsolved in one run and be solved in the next. So
a manifest may name earlier run folders as evidence (``analysis.suspect_evidence``); a task solved in one of them
is not suspect here, **but only where that run graded the same task with the same grader** (the task folder's and
the grader folder's hashes in both locks agree): a solve under another grader says nothing of this one.

The evidence is declared in the manifest, before the run, because ``analysis.exclude_suspect_tasks`` leaves
suspects out of every figure: a list chosen after seeing the results could move any rate. An evidence run that
cannot be read when the report is made (moved, not a run folder, its lock unreadable) is named in the report and
the suspects are computed without it (more suspects, never fewer: it can only have cleared tasks).

"Solved" means a trial accepted for a candidate whose agent is neither ``oracle`` nor ``nop`` (those are the
task's own references; they say nothing of what an agent can reach).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REFERENCES = ("oracle", "nop")
"""Agents that are the task's own references, never evidence that an agent can solve it."""


@dataclass(frozen=True)
class Evidence:
    """What one declared evidence run says: the tasks a solver solved there under the same task and grader."""

    run: str
    """The folder as the manifest declared it."""
    read: bool
    solved: frozenset[str] = frozenset()
    other_grader: tuple[str, ...] = ()
    """Tasks solved there whose task or grader folder differed from this run's (not counted)."""
    problem: str = ""
    """Why it was not read (empty when it was)."""

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "read": self.read, "solved": sorted(self.solved),
                "not_counted_other_grader": list(self.other_grader), **({"problem": self.problem} if self.problem else {})}


@dataclass(frozen=True)
class Suspects:
    tasks: list[str]
    """Suspect: a solver ran it here, and no solver solved it here or in a read evidence run."""
    unsolved_here: frozenset[str] = frozenset()
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def cleared(self) -> list[str]:
        """Tasks no solver solved here that an evidence run solved (not suspect because of it)."""
        return sorted(self.unsolved_here - set(self.tasks))


def identity(lock: dict[str, Any], task: str) -> tuple[Any, Any] | None:
    """A task's (task folder hash, grader folder hash) as a lock recorded them; None when it recorded neither."""
    tasks = lock.get("tasks") if isinstance(lock.get("tasks"), dict) else {}
    graders = lock.get("graders") if isinstance(lock.get("graders"), dict) else {}
    entry = tasks.get(task) if isinstance(tasks.get(task), dict) else {}
    got = (entry.get("task_sha256"), graders.get(task))
    return None if got == (None, None) else got


def _solvers(manifest: Path) -> set[str]:
    """The candidates of a run's own manifest copy whose agent is not a reference (raw YAML: an older run's
    manifest need not validate against today's schema to say which agents it ran)."""
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    cands = doc.get("candidates") if isinstance(doc, dict) else None
    if not isinstance(cands, list):
        raise ValueError("its manifest.yaml lists no candidates")
    return {str(c["name"]) for c in cands if isinstance(c, dict) and "name" in c and c.get("agent") not in REFERENCES}


def read_evidence(declared: str, folder: Path, lock: dict[str, Any], tasks: set[str]) -> Evidence:
    """The tasks of ``tasks`` that a solver solved in the run at ``folder``, under the task and grader ``lock``
    (this run's) records. Read only: nothing is written in the folder of a run that ended cleanly."""
    db, their_lock, their_manifest = folder / "results.sqlite", folder / "lock.json", folder / "manifest.yaml"
    if not db.is_file():
        return Evidence(declared, False, problem=f"{folder}: not a run folder (no results.sqlite)")
    try:
        theirs = json.loads(their_lock.read_text(encoding="utf-8"))
        if not isinstance(theirs, dict):
            raise ValueError("not a JSON object")
        solvers = _solvers(their_manifest)
        # a finished run's database has no write-ahead log beside it: opened immutable, nothing is written there
        # (read-only WAL access still creates an index file); with a log left by a crash, read-only with the log
        mode = "mode=ro" if db.with_name(db.name + "-wal").exists() else "immutable=1"
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?{mode}", uri=True)
        try:
            rows = conn.execute("SELECT DISTINCT task, candidate FROM trials WHERE accepted = 1").fetchall()
        finally:
            conn.close()
    except (OSError, ValueError, yaml.YAMLError, sqlite3.Error) as exc:
        return Evidence(declared, False, problem=f"{folder}: cannot be read ({type(exc).__name__}: {exc})")
    solved = {t for t, c in rows if c in solvers and t in tasks}
    same = {t for t in solved if identity(lock, t) is not None and identity(lock, t) == identity(theirs, t)}
    return Evidence(declared, True, frozenset(same), tuple(sorted(solved - same)))


def suspect_tasks(rows: list[Any], candidates: list[Any], lock: dict[str, Any],
                  evidence: list[tuple[str, Path]] = ()) -> Suspects:
    """Tasks a solver ran in this run (``rows``) that no solver solved, here or in an evidence run; ``candidates``
    are this run's (``name``, ``agent``), ``evidence`` the declared runs as (declared text, resolved folder)."""
    solvers = {c.name for c in candidates if c.agent not in REFERENCES}
    ran = {r.task for r in rows if r.candidate in solvers}
    unsolved = ran - {r.task for r in rows if r.candidate in solvers and r.accepted}
    read = [read_evidence(d, f, lock, unsolved) for d, f in evidence]
    cleared = set().union(*(e.solved for e in read)) if read else set()
    return Suspects(sorted(unsolved - cleared), frozenset(unsolved), read)
