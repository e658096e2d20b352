"""A finished run, again: graded again with the current graders (``regrade_run``), its judge held against human labels
(``calibrate_run``), or run again from its lock (``reproduce_run``, which refuses anything that drifted by name and
names every trial whose verdict changed).

``regrade`` calls the same grade stage a run does (``grading.grade.grade_trial``), on the stored final workspace,
events and canaries, and records the new verdict beside the old ones (the store keeps every verdict). A trial
whose grading failed on infrastructure (its grader's container, twice) kept its agent's stop and its exported
workspace, so it is graded here like any other; one that never stopped an agent, or whose workspace could not be
exported, keeps its verdict and is named.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from .engine import RUN_LABEL
from .errors import DriftError
from .events import read_events
from .grading.tree import tree_from_tar
from .grading.grade import grade_trial
from .grading.judge import calibrate, make_judge
from .job import run_experiment
from .grading.runner import GraderLimits
from .checkrecords import with_check_facts
from .lock import lock_path, resolve_lock
from .manifest import LoadedManifest
from .repos import materialize
from .sandbox.docker import docker_sandboxes
from .settings import load_settings
from .store import RunPaths, Store
from .tasks import Task


def regrade_run(paths: RunPaths, loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient,
                say: Callable[[str], None] = print) -> int:
    """Grade every stored final workspace again with the current graders; returns how many verdicts changed."""
    by_id = {t.id: t for t in with_check_facts(tasks, json.loads(paths.lock.read_text()))}  # as the run graded
    originals: dict[str, Any] = {}  # the trusted original tree, read once per task
    judge = make_judge(loaded)
    store = Store(paths)
    changed = 0
    try:
        for row in store.trials():
            task = by_id[row.task]
            folder = paths.attempt(row.id, row.attempt)
            if row.agent is None or row.agent.stop_reason is None or not folder.final_workspace.exists():
                # nothing to grade: the attempt never stopped an agent (its sandbox failed, its node was lost),
                # or its workspace could not be exported; its verdict stays, and is named
                say(f"{row.id:50s} {row.verdict.label}: not regraded (no exported workspace of a stopped agent)")
                continue
            final = tree_from_tar(folder.final_workspace)
            if task.id not in originals:
                originals[task.id] = tree_from_tar(materialize(task, load_settings().repos_dir).tar_path)
            cand = next(c for c in loaded.manifest.candidates if c.name == row.candidate)
            graded = grade_trial(docker_sandboxes(client), row.grader_image_id or row.image_id, task, originals[task.id], final,
                                 read_events(folder.events), row.agent.agent_result(row.cost.model_usd or 0.0),
                                 json.loads(folder.canaries.read_text()), loaded.manifest.environment.network_policy,
                                 cand.agent, GraderLimits.for_environment(loaded.manifest.environment),
                                 f"tb-{paths.key[:12]}-rg", judge, row.id, {RUN_LABEL: paths.key},
                                 setup_outputs=row.setup_outputs, tool_map=getattr(cand, "tool_map", None),
                                 text_edits=getattr(cand, "text_edits", "none"),
                                 owned_paths=tuple(getattr(cand, "owned_paths", ()) or ()))
            verdict = graded.verdict  # its grader_version names the grader folder's content, as a run's
            changed += verdict.outcome is not row.outcome
            store.regrade(row.id, verdict)
            say(f"{row.id:50s} {row.outcome.value} -> {verdict.outcome.value}  ({verdict.grader_version})")
    finally:
        store.close()
    return changed


def calibrate_run(paths: RunPaths, labels: dict[str, str]) -> dict[str, Any]:
    """The judge's answers in a run against human labels (trial id → pass | fail)."""
    store = Store(paths)
    try:
        judged = {}
        for row in store.trials():
            for c in row.verdict.criteria:
                if c.name == "semantic_judge":
                    judged[row.id] = c.evidence["verdict"]
    finally:
        store.close()
    return calibrate(judged, labels)


def reproduce_run(paths: RunPaths, loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, out: Path,
                  say: Callable[[str], None] = print, backend: str | None = None,
                  ray_address: str | None = None, unchecked: bool = False) -> list[str]:
    """Run the experiment again from the run's lock into ``out``; ``DriftError`` lists anything that drifted.

    Returns the trials whose verdict differs from the original run's."""
    from .lock import drift

    locked = json.loads(paths.lock.read_text())
    current = resolve_lock(loaded, tasks, client, load_settings())
    drifted = drift(locked, current)
    if drifted:
        raise DriftError(drifted)
    if lock_path(loaded.path).exists():
        lock_path(loaded.path).unlink()  # the run's lock is the reference: write it as the manifest's lock
    lock_path(loaded.path).write_text(json.dumps(locked, indent=2, sort_keys=True) + "\n")
    from .errors import InfraErrorsAbove

    try:
        run_experiment(loaded, tasks, client, out, say, backend, ray_address, unchecked)
    except InfraErrorsAbove as exc:  # every trial is recorded: the comparison below names them as differing
        say(exc.message)
    before, after = Store(paths), Store(RunPaths(out))
    try:
        old = {r.id: (r.outcome, r.verdict.reasons) for r in before.trials()}
        new = {r.id: (r.outcome, r.verdict.reasons) for r in after.trials()}
    finally:
        before.close()
        after.close()
    return sorted(t for t in old.keys() | new.keys() if old.get(t) != new.get(t))
