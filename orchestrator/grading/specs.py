"""The grader container's spec, by the grader's kind: the pytest grader's (``runner.pytest_grader_spec``) or the
script grader's (``script.script_grader_spec``). Above both, so that neither imports the other's."""

from __future__ import annotations

from ..sandbox.base import SandboxSpec
from ..tasks import Task
from .runner import GraderLimits, pytest_grader_spec
from .script import script_grader_spec


def grader_spec(image_id: str, task: Task, limits: GraderLimits, name: str,
                labels: dict[str, str] | None = None) -> SandboxSpec:
    """The grader container of ``task``, for its grader's kind."""
    if task.grader.kind == "script":
        return script_grader_spec(image_id, task, limits, name, labels)
    return pytest_grader_spec(image_id, task, limits, name, labels)
