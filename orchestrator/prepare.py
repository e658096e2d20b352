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

from .canaries import Canaries, new_canaries
from .grading.tree import Tree, tree_from_tar
from .repos import materialize
from .sandbox.base import SandboxSpec, home_for
from .settings import load_settings
from .tasks import Task


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
