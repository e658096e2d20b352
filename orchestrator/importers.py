"""Importing task sets: SWE-bench instances into task and grader folders.

``import_swebench`` reads SWE-bench instances as they are published: a JSON
array, one JSON object per line (JSONL), or a single object, with
``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS`` (the two lists as lists or as JSON-encoded
strings). Per instance it writes ``<tasks>/<id>/`` (task.yaml,
instruction.md) and ``<graders>/<id>/`` (grader.yaml, test.patch,
solution.patch). The repository is looked up in ``--repos`` by
``owner/name`` (a folder holding a git repository, ``owner/name.git`` or
``owner/name.bundle``) and written as a path *relative to the task folder*, so
a task set can be moved and shared as a whole.

The specs file says, per repository and optionally per version, what the
instance data cannot::

    owner/name:
      image: mylib-env              # a recipe under the task set's images/ (required)
      env: {MYLIB_MODE: test}       # variables of the sandbox and the grader
      python_path: [src]            # entries put in front of Python's path
      install: pip install --user --no-deps --no-build-isolation --no-index -e .
      pytest_plugins: [pytest_mock] # plugins by module name, loaded explicitly
      test_command: python3 -m pytest
      scope: ["src/**"]             # default: everything
      difficulty: medium            # when the instance does not say
      versions:                     # by the instance's ``version``: fields that differ
        "1.2": {image: mylib-env-py312}

Unknown fields and values trialbox cannot honour are errors naming the
field. SWE-bench Verified's ``difficulty`` ("<15 min fix", "15 min - 1
hour", "1-4 hours", ">4 hours") maps to easy, medium, hard, hard. Fields of an
instance that have no trialbox meaning are listed per instance
(``ImportResult.unmapped``), never dropped silently.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from .environments import check_settings, parse_test_command
from .errors import Problem, ValidationFailed
from .grading.criteria import glob_regex
from .manifest import Model
from .loading import pydantic_problems
from .store import slug

DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
MAPPED = set(REQUIRED) | {"difficulty", "version"}


class _SpecFields(Model):
    env: dict[str, str] | None = None
    """Environment variables of the sandbox and the grader."""
    python_path: list[str] | None = None
    """Entries put in front of Python's path (relative to the workspace)."""
    install: str | None = None
    """Install step, run from the trusted initial commit in the sandbox and the grader."""
    pytest_plugins: list[str] | None = None
    """pytest plugins by module name."""
    test_command: str | None = None
    """``[VAR=value …] python3 -m pytest [options]`` or ``pytest [options]``."""
    scope: list[str] | None = None
    """Authorized paths (globs)."""
    difficulty: Literal["easy", "medium", "hard"] | None = None
    """When the instance does not say."""


class VersionSpec(_SpecFields):
    image: str | None = None
    """The recipe for instances of this version."""


class RepoSpec(_SpecFields):
    image: str
    """A recipe under the task set's images/."""
    versions: dict[str, VersionSpec] = {}
    """Fields that differ for instances of a version."""

    def for_version(self, version: str | None) -> dict[str, Any]:
        """The repository's fields with the version's over them."""
        base = self.model_dump(exclude={"versions"})
        over = self.versions.get(str(version)).model_dump(exclude_none=True) if str(version) in self.versions else {}
        return {**base, **over}


@dataclass
class ImportResult:
    """What an import wrote, and per instance the fields it could not map."""

    written: list[str] = field(default_factory=list)
    unmapped: dict[str, list[str]] = field(default_factory=dict)
    outside_scope: dict[str, list[str]] = field(default_factory=dict)
    """Files the instance's own fix changes outside the scope: its oracle would be rejected on scope."""


def patch_paths(patch: str) -> list[str]:
    """The files a unified diff changes."""
    paths = re.findall(r"^\+\+\+ b/(\S+)", patch, re.M) + re.findall(r"^--- a/(\S+)\n\+\+\+ /dev/null", patch, re.M)
    return sorted(set(paths))


def _list(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def _repo_path(repos: Path, repo: str) -> Path | None:
    for candidate in (repos / repo, repos / f"{repo}.bundle", repos / f"{repo}.git"):
        if candidate.exists():
            return candidate.resolve()
    return None


def read_instances(path: Path) -> tuple[list[tuple[str, Any]], list[Problem]]:
    """(where, instance) pairs from a JSON array, a single object or JSON lines; a problem per bad line."""
    text = path.read_text()
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            return [], [Problem(str(path), "", f"not JSON: {exc}")]
        return [(f"[{i}]", inst) for i, inst in enumerate(data)], []
    if stripped.startswith("{") and "\n{" not in stripped.rstrip():
        try:
            return [("[0]", json.loads(text))], []
        except ValueError:
            pass  # one object per line after all: read as lines below
    out, problems = [], []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", json.loads(line)))
        except ValueError as exc:
            problems.append(Problem(str(path), f"line {n}", f"not JSON: {exc}"))
    return out, problems


def read_specs(path: Path) -> tuple[dict[str, RepoSpec], list[Problem]]:
    """Every repository's spec; a problem per field that is unknown or cannot be honoured."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        return {}, [Problem(str(path), "", f"cannot read specs: {exc}")]
    if not isinstance(raw, dict):
        return {}, [Problem(str(path), "", "expected a mapping of owner/name to a spec")]
    specs, problems = {}, []
    for repo, value in raw.items():
        try:
            spec = RepoSpec.model_validate(value)
        except ValidationError as exc:
            problems += [Problem(p.file, f"{repo}.{p.field}", p.message) for p in pydantic_problems(str(path), exc)]
            continue
        for where, fields in [("", spec.for_version(None))] + [(f"versions.{v}.", spec.for_version(v)) for v in spec.versions]:
            command = fields.get("test_command") or "python3 -m pytest"
            parsed, why = parse_test_command(command)
            if parsed is None:
                problems.append(Problem(str(path), f"{repo}.{where}test_command", why or ""))
            for f, m in check_settings(fields.get("env") or {}, fields.get("python_path") or [],
                                       fields.get("pytest_plugins") or []):
                problems.append(Problem(str(path), f"{repo}.{where}{f}", m))
        specs[str(repo)] = spec
    return specs, problems


def _check(where: str, inst: Any, path: Path, specs: dict[str, RepoSpec], specs_path: Path, repos: Path) -> list[Problem]:
    if not isinstance(inst, dict):
        return [Problem(str(path), where, "expected a JSON object")]
    missing = [k for k in REQUIRED if k not in inst]
    if missing:
        return [Problem(str(path), where, f"missing {missing}")]
    out = []
    if inst["repo"] not in specs:
        out.append(Problem(str(specs_path), inst["repo"], "no spec (image, test_command, …) for this repository"))
    elif _repo_path(repos, inst["repo"]) is None:
        out.append(Problem(str(path), f"{where}.repo", f"{inst['repo']} not found under {repos}"))
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        try:
            value = _list(inst[key])
            if not all(isinstance(v, str) for v in value):
                raise ValueError("not a list of strings")
        except (ValueError, TypeError) as exc:
            out.append(Problem(str(path), f"{where}.{key}", f"expected a list of test ids (or its JSON text): {exc}"))
    return out


def import_swebench(instances_path: Path, repos: Path, specs_path: Path, tasks_out: Path, graders_out: Path) -> ImportResult:
    """Write task and grader folders for every instance; ``ValidationFailed`` lists every bad instance and spec
    field (nothing is written then)."""
    specs, problems = read_specs(specs_path)
    read, bad = read_instances(instances_path)
    problems += bad
    for where, inst in read:
        problems += _check(where, inst, instances_path, specs, specs_path, repos)
    if problems:
        raise ValidationFailed(problems)
    result = ImportResult()
    for _, inst in read:
        tid = _write(inst, specs[inst["repo"]], repos, tasks_out, graders_out)
        result.written.append(tid)
        extra = sorted(k for k in inst if k not in MAPPED)
        if extra:
            result.unmapped[tid] = extra
        scope = specs[inst["repo"]].for_version(inst.get("version")).get("scope") or ["**"]
        outside = [p for p in patch_paths(inst["patch"]) if not any(glob_regex(g).match(p) for g in scope)]
        if outside:
            result.outside_scope[tid] = outside
    return result


def _write(inst: dict[str, Any], repo_spec: RepoSpec, repos: Path, tasks_out: Path, graders_out: Path) -> str:
    spec = repo_spec.for_version(inst.get("version"))
    tid = slug(inst["instance_id"])
    tdir, gdir = tasks_out / tid, graders_out / tid
    tdir.mkdir(parents=True, exist_ok=True)
    gdir.mkdir(parents=True, exist_ok=True)
    (tdir / "instruction.md").write_text(inst["problem_statement"].rstrip() + "\n")
    repo_path = _repo_path(repos, inst["repo"])
    task: dict[str, Any] = {
        "id": tid, "instruction": "instruction.md",
        "repo": {"git": os.path.relpath(repo_path, tdir.resolve()), "commit": inst["base_commit"]},
        "image": spec["image"],
        "difficulty": DIFFICULTY.get(inst.get("difficulty", ""), spec.get("difficulty") or "medium"),
        "split": "public", "cluster": inst["repo"], "scope": {"allowed": spec.get("scope") or ["**"]}}
    for key in ("env", "python_path", "install", "pytest_plugins"):
        if spec.get(key):
            task[key] = spec[key]
    (tdir / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (gdir / "test.patch").write_text(inst["test_patch"])
    (gdir / "solution.patch").write_text(inst["patch"])
    grader = {"test_patch": "test.patch", "fail_to_pass": _list(inst["FAIL_TO_PASS"]),
              "pass_to_pass": _list(inst["PASS_TO_PASS"]),
              "command": spec.get("test_command") or "python3 -m pytest", "solution": "solution.patch"}
    (gdir / "grader.yaml").write_text(yaml.safe_dump(grader, sort_keys=False))
    return tid
