"""The oracle of a script-graded task gets the solution folder as a copy of its own, never a bind mount of the
user's folder (the twelfth review's finding 8: a folder closed to others on the host does not read as the sandbox's
own uid; and a lock taken on a bind-mounted file is seen by every container that mounts it)."""

from __future__ import annotations

import types
from pathlib import Path

from orchestrator.manifest import EnvironmentConfig
from orchestrator.taskload import load_task
from orchestrator.prepare import sandbox_spec
from orchestrator.trial import TrialSpec

ROOT = Path(__file__).resolve().parents[2]


def _spec(agent: str, solution: Path) -> TrialSpec:
    task, problems = load_task(ROOT / "tasks" / "ledger-float-dollars", ROOT / "graders", ROOT / "images")
    assert task is not None and not problems, problems
    # the same task as a script-graded one whose solution is a script in a folder (as Harbor's are imported)
    task = task.model_copy(update={"grader": task.grader.model_copy(update={"kind": "script", "solution": solution})})
    assert task.grader.solution_is_script
    return TrialSpec("ledger-float-dollars/x/0", "run0123456789", task, types.SimpleNamespace(agent=agent), 0,
                     "sha256:" + "0" * 64, EnvironmentConfig(), None)


def test_the_oracles_solution_folder_is_a_copy_not_a_bind_mount(tmp_path):
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "solve.sh").write_text("echo solved\n")
    trial = _spec("oracle", tmp_path / "solution")
    spec = sandbox_spec(trial)
    assert spec.mounts == ()
    assert spec.copied_mounts == ((str((tmp_path / "solution").resolve()), trial.task.grader.solution_mount),)


def test_another_agent_gets_no_solution_at_all(tmp_path):
    spec = sandbox_spec(_spec("nop", tmp_path / "solution"))
    assert spec.mounts == () and spec.copied_mounts == ()
