"""Task and grader folders: loading and one clear problem per mistake."""

from __future__ import annotations

import copy

from orchestrator.loading import load_manifest
from orchestrator.taskload import collect_tasks

from .conftest import GRADER, TASK


def task_problems(project) -> list[str]:
    _, problems = collect_tasks(load_manifest(project.manifest))
    return [f"{p.file.removeprefix(str(project.root) + '/')}: {p.field}: {p.message}" for p in problems]


def test_valid_task_loads(project):
    tasks, problems = collect_tasks(load_manifest(project.manifest))
    assert problems == []
    assert [t.id for t in tasks] == ["t1"]
    assert tasks[0].grader.fail_to_pass == ["tests/test_a.py::test_new"]
    assert tasks[0].cluster == "dir:t1"


def test_sample_tasks_cover_three_difficulties_on_two_repositories(repo_root):
    tasks, problems = collect_tasks(load_manifest(repo_root / "examples" / "smoke.yaml"))
    assert problems == []
    assert len(tasks) >= 6
    assert {t.config.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert {t.cluster for t in tasks} == {"textkit", "ledger"}
    assert {t.config.repo.git is not None for t in tasks} == {True, False}
    assert any(t.config.abstain_expected for t in tasks)


def test_task_mistakes_each_named(project):
    bad = copy.deepcopy(TASK)
    bad.update(id="other", difficulty="trivial", image="rust", instruction="missing.md")
    bad["constraints"] = {"forbidden_commands": ["(unclosed"], "order": [["bash"]]}
    bad["scope"] = {"allowed": ["src/**"], "denied": ["x"]}
    project.write("tasks/t1/task.yaml", bad)
    out = task_problems(project)
    assert any(o.startswith("tasks/t1/task.yaml: difficulty: ") for o in out)
    assert "tasks/t1/task.yaml: scope.denied: unknown field" in out
    assert len(out) == 2  # type errors stop the folder's deeper checks


def test_task_semantic_mistakes_each_named(project):
    bad = copy.deepcopy(TASK)
    bad.update(id="other", image="rust", instruction="missing.md")
    bad["constraints"] = {"forbidden_commands": ["(unclosed"], "order": [["bash"]]}
    project.write("tasks/t1/task.yaml", bad)
    out = task_problems(project)
    assert "tasks/t1/task.yaml: id: expected the folder name 't1', got 'other'" in out
    assert any(o.startswith("tasks/t1/task.yaml: instruction: file not found") for o in out)
    assert any(o.startswith("tasks/t1/task.yaml: image: expected an image defined under") for o in out)
    assert any(o.startswith("tasks/t1/task.yaml: constraints.forbidden_commands[0]: not a valid regular expression") for o in out)
    assert "tasks/t1/task.yaml: constraints.order[0]: expected a pair [a, b], got ['bash']" in out
    assert len(out) == 5


def test_repo_source_mistakes(project):
    bad = copy.deepcopy(TASK)
    bad["repo"] = {"dir": "repo", "git": "x.git", "commit": "a" * 40}
    project.write("tasks/t1/task.yaml", bad)
    assert task_problems(project) == [
        "tasks/t1/task.yaml: repo: Value error, expected exactly one of 'dir' or 'git' (with 'commit')"]
    bad["repo"] = {"git": "x.git", "commit": "main"}
    project.write("tasks/t1/task.yaml", bad)
    assert task_problems(project) == ["tasks/t1/task.yaml: repo: Value error, 'git' needs 'commit': a full 40-hex commit id"]
    bad["repo"] = {"git": "x.git", "commit": "a" * 40}
    project.write("tasks/t1/task.yaml", bad)
    assert any("repo.git: repository not found" in o for o in task_problems(project))


def test_grader_mistakes_each_named(project):
    bad = copy.deepcopy(GRADER)
    bad.update(tests="nowhere/", solution="none.patch", rubric="rubric.md", fail_to_pass=[], timeout=3)
    project.write("graders/t1/grader.yaml", bad)
    assert task_problems(project) == ["graders/t1/grader.yaml: timeout: unknown field"]
    del bad["timeout"]
    project.write("graders/t1/grader.yaml", bad)
    out = task_problems(project)
    assert any(o.startswith("graders/t1/grader.yaml: fail_to_pass: expected at least one test id") for o in out)
    assert any(o.startswith("graders/t1/grader.yaml: tests: not found") for o in out)
    assert any(o.startswith("graders/t1/grader.yaml: solution: not found") for o in out)
    assert any(o.startswith("graders/t1/grader.yaml: rubric: not found") for o in out)
    assert len(out) == 4


def test_missing_grader_folder_and_required_placeholder(project):
    bad = copy.deepcopy(TASK)
    bad["difficulty"] = "REQUIRED"
    project.write("tasks/t1/task.yaml", bad)
    (project.root / "graders/t1/grader.yaml").unlink()
    out = task_problems(project)
    assert "tasks/t1/task.yaml: difficulty: the placeholder REQUIRED must be replaced by a value" in out
    assert "graders/t1/grader.yaml: : no grader folder for task 't1'" in out
    assert len(out) == 2


def test_selection_and_split(project):
    data = project.manifest.read_text().replace("graders: graders", "graders: graders\n  select: [nothing*]")
    project.write("m.yaml", data)
    assert task_problems(project) == ["m.yaml: tasks.select: selects no task folder under " + str(project.root / "tasks")]
