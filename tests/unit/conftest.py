"""A tiny, valid project on disk (manifest, one task, its grader, an image folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

MANIFEST = {
    "experiment": {"name": "mini"},
    "candidates": [{"name": "a", "agent": "nop"}, {"name": "b", "agent": "oracle"}],
    "execution": {"trials_per_task": 3},
    "tasks": {"path": "tasks", "graders": "graders", "images": "images"},
    "analysis": {"k": [1, 3]},
}
TASK = {"id": "t1", "instruction": "instruction.md", "repo": {"dir": "repo"}, "image": "python",
        "difficulty": "easy", "scope": {"allowed": ["src/**"]}}
GRADER = {"tests": "tests/", "fail_to_pass": ["tests/test_a.py::test_new"],
          "pass_to_pass": ["tests/test_a.py::test_old"], "solution": "solution.patch"}


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.manifest = root / "m.yaml"

    def write(self, rel: str, data) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    def set_manifest(self, data) -> Path:
        return self.write("m.yaml", data)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project(tmp_path)
    p.set_manifest(MANIFEST)
    p.write("images/base/recipe.yaml", "suite: bookworm\n")
    p.write("images/python/Dockerfile", "ARG BASE\nFROM ${BASE}\n")
    p.write("tasks/t1/task.yaml", TASK)
    p.write("tasks/t1/instruction.md", "Do the thing.\n")
    p.write("tasks/t1/repo/src/a.py", "def old():\n    return 1\n")
    p.write("graders/t1/grader.yaml", GRADER)
    p.write("graders/t1/tests/test_a.py", "def test_old():\n    pass\n\ndef test_new():\n    pass\n")
    p.write("graders/t1/solution.patch", "")
    return p


@pytest.fixture
def store(tmp_path):
    """A run folder and its store, as the run loop's tests use them (``paths``, ``Store``)."""
    from orchestrator.store import RunPaths, Store

    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir()
    st = Store(paths)
    yield paths, st
    st.close()
