"""The command line: one clear line per problem, no traceback, exit codes."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

from .conftest import MANIFEST


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_validate_prints_one_line_per_problem(project):
    data = copy.deepcopy(MANIFEST)
    data["analysis"]["k"] = [7]
    data["environment"] = {"memory_limit_mb": 128, "memory_reservation_mb": 512, "colour": "red"}
    project.set_manifest(data)
    res = run_cli("validate", str(project.manifest))
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[:-1] == sorted(lines[:-1], key=lines.index)  # stable order
    assert f"{project.manifest}: environment.colour: unknown field" in lines
    assert f"{project.manifest}: analysis.k[0]: expected 1 ≤ k ≤ execution.trials_per_task (3), got 7" in lines
    assert any(line.startswith(f"{project.manifest}: environment.memory_reservation_mb: expected ≤") for line in lines)
    assert lines[-1] == f"{project.manifest}: 3 problem(s)"


def test_validate_reports_task_problems_too(project):
    project.write("tasks/t1/task.yaml", "id: t1\nrepo: {dir: repo}\nimage: python\n")
    res = run_cli("validate", str(project.manifest))
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"{project.root}/tasks/t1/task.yaml: difficulty: required field is missing" in res.stderr


def test_validate_ok(project):
    res = run_cli("validate", str(project.manifest))
    assert res.returncode == 0, res.stderr
    assert "ok (2 candidate(s), 1 task(s), 3 trial(s) per task)" in res.stdout


def test_missing_engine_is_one_clear_line(project):
    res = run_cli("gc", env={"DOCKER_HOST": f"unix://{project.root}/no-engine.sock"})
    assert res.returncode == 1
    assert res.stderr.startswith("error: no Docker engine answers") and "Traceback" not in res.stderr
    res = run_cli("lock", str(project.manifest), env={"DOCKER_HOST": f"unix://{project.root}/no-engine.sock"})
    assert res.returncode == 1 and "no Docker engine answers" in res.stderr and "Traceback" not in res.stderr
