"""Environment reuse: tasks of one repository at N commits build one environment, and a second build
builds nothing.

A generated repository with N commits; N tasks, one per commit, all naming the recipe ``lib-env`` (a
Dockerfile on ``python`` with a build step that takes a moment), plus N tasks each carrying an identical
copy of that recipe in its own folder (``image: ./environment``). Counts the images built by the first
``build_environments`` over all 2N tasks and by a second one, and times both, against building the one
recipe once with docker-py directly (the floor).
Run: .venv/bin/python benchmarks/env_reuse.py [N]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

import _common  # noqa: F401  (puts the repository on the path)

from orchestrator.engine import connect
from orchestrator.loading import load_manifest
from orchestrator.taskcheck import build_environments
from orchestrator.taskload import load_tasks

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("TRIALBOX_BENCH_DIR", "/tmp/trialbox-bench")) / "env-reuse"


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "PATH": os.environ["PATH"], "HOME": str(repo)}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_set(n: int) -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "repo").mkdir(parents=True)
    repo = WORK / "repo"
    git(repo, "init", "-q")
    commits = []
    for i in range(n):
        (repo / "lib.py").write_text(f"VALUE = {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    for name in ("base", "python"):
        shutil.copytree(ROOT / "images" / name, WORK / "images" / name)
    marker = uuid.uuid4().hex  # a recipe no earlier run has built
    recipe = f"ARG BASE\nFROM ${{BASE}}\nRUN sleep 2 && echo {marker} > /opt/lib-env\n"
    (WORK / "images/lib-env").mkdir()
    (WORK / "images/lib-env/Dockerfile").write_text(recipe)
    (WORK / "images/lib-env/environment.yaml").write_text("from: python\n")
    for i, commit in enumerate(commits):
        for kind in ("shared", "own"):
            tid = f"{kind}-{i}"
            folder = WORK / "tasks" / tid
            folder.mkdir(parents=True)
            (folder / "instruction.md").write_text("x\n")
            image = "lib-env"
            if kind == "own":
                shutil.copytree(WORK / "images/lib-env", folder / "environment")
                (folder / "environment/Dockerfile").write_text(recipe.replace(marker, marker + "-own"))
                image = "./environment"
            (folder / "task.yaml").write_text(yaml.safe_dump({
                "id": tid, "repo": {"git": "../../repo", "commit": commit}, "image": image, "difficulty": "easy"}))
            g = WORK / "graders" / tid
            g.mkdir(parents=True)
            (g / "tests").mkdir()
            (g / "tests/test_x.py").write_text("def test_x():\n    assert True\n")
            (g / "grader.yaml").write_text(yaml.safe_dump({"tests": "tests", "fail_to_pass": ["tests/test_x.py::test_x"],
                                                       "solution": None}))
    (WORK / "m.yaml").write_text(yaml.safe_dump({
        "experiment": {"name": "reuse"}, "candidates": [{"name": "nop", "agent": "nop"}],
        "tasks": {"path": "tasks", "graders": "graders", "images": "images"}}))
    return WORK / "m.yaml"


def main(n: int) -> None:
    client = connect()
    loaded = load_manifest(make_set(n))
    tasks = load_tasks(loaded)
    runs = []
    for attempt in ("first", "second"):
        lines: list[str] = []
        t0 = time.perf_counter()
        records, failed = build_environments(loaded, tasks, client, lines.append)
        runs.append((attempt, sum(line.startswith("building ") for line in lines), time.perf_counter() - t0))
        assert not failed, failed
    ids = {records[t.image_key].image_id for t in tasks}
    t0 = time.perf_counter()
    ctx = WORK / "images/lib-env"
    base = records["python"].image_id
    for _ in client.api.build(path=str(ctx), buildargs={"BASE": base}, rm=True, pull=False, nocache=True, decode=True):
        pass
    floor = time.perf_counter() - t0
    print(f"environment reuse: {len(tasks)} tasks ({n} commits x one shared recipe, {n} task-local identical copies)")
    for attempt, built, seconds in runs:
        print(f"  {attempt} build: {built} image(s) built in {seconds:.1f} s")
    print(f"  distinct images for the {len(tasks)} tasks: {len(ids)}  (target 2: the shared recipe and the task-local one)")
    print(f"  one docker build of the recipe, no cache (floor): {floor:.1f} s; first build / floor = "
          f"{runs[0][2] / floor:.2f}x (2 recipes built); second build builds {runs[1][1]} "
          f"({'MET' if runs[1][1] == 0 and runs[0][1] == 2 else 'NOT MET'})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
