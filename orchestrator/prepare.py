"""The first stage of a trial: everything it needs, resolved before any container starts.

``prepare`` makes the trial's canaries, materialises the task's repository once (the workspace is seeded from it, the grader compares
against it), and resolves the sandbox's spec: the trial's limits and labels (``trial.sandbox_spec``), the
repository as the workspace's seed, the task's run-time environment and the canaries' variables. What is
left to the next stage is only the agent's own part: the mounts its ``prepare()`` returns (a model proxy's
socket folder).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .canaries import Canaries, new_canaries
from .engine import ATTEMPT_LABEL, RUN_LABEL, TRIAL_LABEL
from .grading.tree import Tree, tree_from_tar
from .repos import materialize
from .sandbox.base import SandboxSpec, home_for
from .settings import load_settings
from .store import slug
from .tasks import Task

if TYPE_CHECKING:
    from .trial import TrialSpec


@dataclass(frozen=True)
class Prepared:
    """A trial ready to start: its resolved sandbox spec, its repository, its canaries."""

    spec: SandboxSpec
    repo_tar: Path
    """The repository at its commit, with no history beyond it (the workspace's seed)."""
    original: Tree
    """The same repository as a tree: what the agent's changes are measured against."""
    canaries: Canaries | None


def prepare(task: Task, spec: SandboxSpec, with_canaries: bool = False) -> Prepared:
    """Resolve ``spec`` for ``task`` (see the module docstring), with fresh canaries when ``with_canaries``
    (a trial's; the next stage plants them once its sandbox runs); ``RepoError`` when the repository cannot be
    materialised."""
    canaries = new_canaries() if with_canaries else None
    repo = materialize(task, load_settings().repos_dir)
    env = {**spec.env, **task.runtime.sandbox_env(), **(canaries.env() if canaries else {})}
    resolved = dataclasses.replace(spec, workspace_seed=str(repo.tar_path), env=env, workdir=task.config.workdir,
                                   home=home_for(task.config.workdir))
    return Prepared(resolved, repo.tar_path, tree_from_tar(repo.tar_path), canaries)


def sandbox_spec(spec: "TrialSpec") -> SandboxSpec:
    env = spec.environment
    return SandboxSpec(
        image_id=spec.image_id, name=f"tb-{spec.run_id[:12]}-{slug(spec.trial_id).replace('.', '-')}-a{spec.attempt}"[:120],
        labels={RUN_LABEL: spec.run_id, TRIAL_LABEL: spec.trial_id, ATTEMPT_LABEL: str(spec.attempt)},
        cpu_limit=env.cpu_limit, cpu_reservation=env.cpu_reservation, memory_limit_mb=env.memory_limit_mb,
        memory_reservation_mb=env.memory_reservation_mb, pids_limit=env.pids_limit, disk_limit_mb=env.disk_limit_mb,
        network="none", runtime=env.runtime, workdir=spec.task.config.workdir, home=home_for(spec.task.config.workdir),
        copied_mounts=solution_mount(spec))


def grader_labels(spec: "TrialSpec") -> tuple[str, dict[str, str]]:
    """The prefix of the trial's grader containers' names, and their labels."""
    return f"tb-{spec.run_id[:12]}-g", {RUN_LABEL: spec.run_id, TRIAL_LABEL: spec.trial_id}


def solution_mount(spec: "TrialSpec") -> tuple[tuple[str, str], ...]:
    """The oracle of a script-graded task gets the solution folder, read-only, in its own sandbox only: a copy of
    its own (``SandboxSpec.copied_mounts``), so a folder closed to others on the host still reads as the sandbox's
    uid, and nothing the sandbox does to it (a lock) is seen elsewhere."""
    g = spec.task.grader
    if spec.candidate.agent != "oracle" or not g.solution_is_script or g.solution is None:
        return ()
    return ((str(spec.task.grader_path(g.solution).resolve()), g.solution_mount),)
