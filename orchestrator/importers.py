"""Importing task sets: SWE-bench instances into task and grader folders.

``import_swebench`` reads SWE-bench instances (JSON lines with ``instance_id,
repo, base_commit, problem_statement, patch, test_patch, FAIL_TO_PASS,
PASS_TO_PASS``; the two lists may be JSON-encoded strings, as in the
published data sets) and writes, per instance, ``<tasks>/<id>/`` (task.yaml,
instruction.md) and ``<graders>/<id>/`` (grader.yaml, test.patch,
solution.patch). The repository is looked up in ``--repos`` by ``owner/name``
(a folder holding a git repository, or ``owner/name.bundle``); the image, test
command, scope and default difficulty per repository come from the specs
file::

    owner/name:
      image: python                 # an image under images/
      test_command: python3 -m pytest
      scope: ["src/**"]             # default: everything
      difficulty: medium            # when the instance does not say

SWE-bench Verified's ``difficulty`` ("<15 min fix", "15 min - 1 hour", "1-4
hours", ">4 hours") maps to easy, medium, hard, hard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem, ValidationFailed
from .store import slug

DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")


def _list(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def _repo_path(repos: Path, repo: str) -> Path | None:
    for candidate in (repos / repo, repos / f"{repo}.bundle", repos / f"{repo}.git"):
        if candidate.exists():
            return candidate.resolve()
    return None


def import_swebench(jsonl: Path, repos: Path, specs_path: Path, tasks_out: Path, graders_out: Path) -> list[str]:
    """Write task and grader folders for every instance; ``ValidationFailed`` lists every bad instance."""
    specs = yaml.safe_load(specs_path.read_text()) or {}
    problems: list[Problem] = []
    written: list[str] = []
    instances = []
    for n, line in enumerate(jsonl.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            inst = json.loads(line)
        except ValueError as exc:
            problems.append(Problem(str(jsonl), f"line {n}", f"not JSON: {exc}"))
            continue
        missing = [k for k in REQUIRED if k not in inst]
        if missing:
            problems.append(Problem(str(jsonl), f"line {n}", f"missing {missing}"))
            continue
        if inst["repo"] not in specs:
            problems.append(Problem(str(specs_path), inst["repo"], "no spec (image, test_command) for this repository"))
            continue
        if _repo_path(repos, inst["repo"]) is None:
            problems.append(Problem(str(jsonl), f"line {n}.repo", f"{inst['repo']} not found under {repos}"))
            continue
        instances.append(inst)
    if problems:
        raise ValidationFailed(problems)
    for inst in instances:
        spec = specs[inst["repo"]]
        tid = slug(inst["instance_id"])
        tdir, gdir = tasks_out / tid, graders_out / tid
        tdir.mkdir(parents=True, exist_ok=True)
        gdir.mkdir(parents=True, exist_ok=True)
        (tdir / "instruction.md").write_text(inst["problem_statement"].rstrip() + "\n")
        task = {"id": tid, "instruction": "instruction.md",
                "repo": {"git": str(_repo_path(repos, inst["repo"])), "commit": inst["base_commit"]},
                "image": spec["image"],
                "difficulty": DIFFICULTY.get(inst.get("difficulty", ""), spec.get("difficulty", "medium")),
                "split": "public", "cluster": inst["repo"], "scope": {"allowed": spec.get("scope", ["**"])}}
        (tdir / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
        (gdir / "test.patch").write_text(inst["test_patch"])
        (gdir / "solution.patch").write_text(inst["patch"])
        grader = {"test_patch": "test.patch", "fail_to_pass": _list(inst["FAIL_TO_PASS"]),
                  "pass_to_pass": _list(inst["PASS_TO_PASS"]),
                  "command": spec.get("test_command", "python3 -m pytest"), "solution": "solution.patch"}
        (gdir / "grader.yaml").write_text(yaml.safe_dump(grader, sort_keys=False))
        written.append(tid)
    return written
