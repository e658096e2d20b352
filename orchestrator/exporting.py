"""``trialbox export``: a run's trajectories in formats other tools read (``atif``: one ATIF file per trial)."""

from __future__ import annotations

import json
from pathlib import Path

from .atif import trajectory
from .events import read_events
from .manifest import LoadedManifest
from .store import RunPaths, Store, slug
from .tasks import Task


def export_atif(paths: RunPaths, loaded: LoadedManifest, tasks: list[Task], out: Path) -> list[Path]:
    """Write every recorded trial's trajectory to ``out/<trial>.json``; returns the files written."""
    from .report import _agent_identity
    from . import __version__

    by_task = {t.id: t for t in tasks}
    candidates = {c.name: c for c in loaded.manifest.candidates}
    out.mkdir(parents=True, exist_ok=True)
    store = Store(paths)
    try:
        rows = store.trials()
    finally:
        store.close()
    written = []
    for r in rows:
        events_file = paths.attempt(r.id, r.attempt).events
        events = read_events(events_file) if events_file.exists() else []
        task = by_task.get(r.task)
        instruction = (task.folder / task.config.instruction).read_text() if task is not None else ""
        ident = _agent_identity(candidates[r.candidate]) if r.candidate in candidates else {}
        name = ident.get("preset") or ident.get("kind") or r.candidate
        agent = {"name": str(name), "version": str(ident.get("version") or f"trialbox-{__version__}"),
                 "model": ident.get("model")}
        file = out / f"{slug(r.id)}.json"
        file.write_text(json.dumps(trajectory(r, events, instruction, agent, paths.key), indent=2,
                                   ensure_ascii=False) + "\n")
        written.append(file)
    return written
