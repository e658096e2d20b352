"""Repositories with the shapes of real ones, imported from SWE-bench-format data (examples/realistic).

Three repositories written for this project: a `src/` layout whose pytest configuration lives in
pyproject.toml, with test patches that modify, add and delete test files and a conftest.py fixture; a
flat package with a PyPI dependency installed in its own environment recipe, a declared pytest plugin
and a required environment variable; a package that must be installed to import, with unittest-style
tests and no pytest configuration. For each: `tasks check` passes, the oracle is accepted, nop is not,
the agent's sandbox sees what the grader sees, and what a cheating agent tries is rejected. Broken tasks
are task-set errors with their root cause, never agent outcomes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.tracked import copy_tracked

MANIFEST = {
    "experiment": {"name": "realistic"},
    "candidates": [{"name": "nop", "agent": "nop"}, {"name": "oracle", "agent": "oracle"}],
    "environment": {"cpu_limit": 1.0, "cpu_reservation": 0.5, "memory_limit_mb": 1024, "memory_reservation_mb": 384,
                    "disk_limit_mb": 256},
    "execution": {"trials_per_task": 2, "deadline_seconds": 300},
    "tasks": {"path": "tasks", "graders": "graders", "images": "images"},
    "analysis": {"k": [1, 2]},
}


def cli(*args: str, cwd: Path, check: int | None = 0) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=1200)
    if check is not None:
        assert res.returncode == check, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return res


def write_manifest(root: Path, name: str = "check.yaml", **changes) -> Path:
    m = json.loads(json.dumps(MANIFEST))
    m.update(changes)
    (root / name).write_text(yaml.safe_dump(m))
    return root / name


@pytest.fixture(scope="module")
def realistic(tmp_path_factory, repo_root, images):
    """The realistic samples imported as a user would (the import's output is not edited)."""
    root = tmp_path_factory.mktemp("realistic")
    for item in ("images", "repos", "instances.jsonl", "instances.json", "specs.yaml"):
        copy_tracked(repo_root, f"examples/realistic/{item}", root / item)
    res = cli("tasks", "import-swebench", "instances.jsonl", "--repos", "repos", "--specs", "specs.yaml",
              "--out", "tasks", cwd=root)
    assert "imported 5 instance(s)" in res.stdout
    assert "samples__inventory-1: not mapped (no trialbox meaning): created_at, environment_setup_commit, hints_text" \
        in res.stdout
    write_manifest(root)
    built = cli("images", "build", "--manifest", "check.yaml", cwd=root)  # the PyPI dependency, through the proxy
    assert "tabular-env" in built.stdout
    return root


def outcomes(run: Path) -> dict[str, tuple[str, list[str]]]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return {r[0]: (r[1], json.loads(r[2])) for r in db.execute("SELECT id, outcome, reasons FROM trials")}
    finally:
        db.close()


def test_imported_tasks_are_relative_and_share_environments(realistic):
    task = yaml.safe_load((realistic / "tasks/samples__versioned-1/task.yaml").read_text())
    assert task["repo"]["git"] == "../../repos/samples/versioned.bundle"
    assert task["install"].startswith("pip install --user") and task["difficulty"] == "medium"
    moved = realistic.parent / f"moved-{uuid.uuid4().hex[:6]}"
    shutil.copytree(realistic, moved)  # a task set can be moved as a whole
    res = cli("validate", "check.yaml", cwd=moved)
    assert "ok (2 candidate(s), 5 task(s)" in res.stdout
    shutil.rmtree(moved)


@pytest.fixture(scope="module")
def checked(realistic) -> str:
    return cli("tasks", "check", "check.yaml", cwd=realistic).stdout


def test_tasks_check_passes_on_every_shape(checked):
    out = checked
    assert "task set ok: 5 of 5 task(s) ok" in out, out
    assert "(tabular-env): 2 task(s): samples__tabular-1, samples__tabular-2" in out
    assert "(python): 3 task(s)" in out  # one built environment per recipe, shared by the tasks that name it


def test_oracle_accepted_and_nop_rejected_on_every_trial(realistic, checked):
    cli("run", "check.yaml", "--out", "runs/r1", cwd=realistic)
    got = outcomes(realistic / "runs/r1")
    assert len(got) == 20
    for trial, (outcome, reasons) in got.items():
        if "/oracle/" in trial:
            assert outcome == "accepted", (trial, reasons)
        else:
            assert outcome == "rejected" and "fail_to_pass" in reasons and "grader_integrity" not in reasons, (trial, reasons)


def run_script(root: Path, task: str, steps: list[dict], name: str) -> tuple[dict, list[dict]]:
    (root / f"{name}.yaml").write_text(yaml.safe_dump({"steps": steps}))
    write_manifest(root, f"{name}-m.yaml", candidates=[{"name": name, "agent": "script", "script": f"{name}.yaml"}],
                   execution={"trials_per_task": 1, "deadline_seconds": 300}, analysis={"k": [1]},
                   tasks={**MANIFEST["tasks"], "select": [task]})
    cli("run", f"{name}-m.yaml", "--unchecked", "--out", f"runs/{name}", cwd=root)
    folder = next((root / "runs" / name / "trials").rglob("verdict.json")).parent
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    return json.loads((folder / "verdict.json").read_text()), [e for e in events if e.get("kind") == "tool"]


def test_the_agent_sees_what_the_grader_sees(realistic):
    """Variables, the install step and the plugins are in the agent's sandbox too, so its test run matches."""
    steps = [{"bash": {"command": "echo style=$TABULAR_STYLE; python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -3"}},
             {"submit": {"summary": "looked"}}]
    verdict, tools = run_script(realistic, "samples__tabular-1", steps, "look-tabular")
    out = tools[0]["output"]
    # the untouched repository (the held-out tests never enter the sandbox): every test passes only because the
    # variable is set and the declared plugin's `mocker` fixture is there, as in the grader
    assert "style=github" in out and "13 passed" in out and "error" not in out and "failed" not in out, out
    steps = [{"bash": {"command": "cd /tmp && python3 -c 'import versioned; print(versioned.__version__)'"}},
             {"submit": {"summary": "looked"}}]
    verdict, tools = run_script(realistic, "samples__versioned-1", steps, "look-versioned")
    assert "1.4.0" in tools[0]["output"], tools[0]["output"]
    scope = next(c for c in verdict["verdict"]["criteria"] if c["name"] == "scope")
    assert scope["passed"] and not any("egg-info" in p for p in scope["evidence"]["changed"])  # install outputs are not the agent's


def test_configuration_edits_and_planted_plugins_are_never_read(realistic):
    """The agent deselects the failing tests in its copy of pyproject.toml and plants a module named like the
    declared plugin that would pass every test: the grader runs the trusted configuration and the real plugin."""
    steps = [{"bash": {"command": "python3 - <<'EOF'\nimport re\np='pyproject.toml'\ns=open(p).read()\n"
                                  "s=s.replace('addopts = \"--strict-markers\"', 'addopts = \"--strict-markers -k not_a_test\"')\n"
                                  "open(p,'w').write(s)\nEOF"}},
             {"write_file": {"path": "src/inventory/conftest_hook.py", "content": "x = 1\n"}},
             {"submit": {"summary": "configured"}}]
    verdict, _ = run_script(realistic, "samples__inventory-1", steps, "cheat-config")
    v = verdict["verdict"]
    assert v["outcome"] == "rejected" and "fail_to_pass" in v["reasons"], v
    f2p = next(c for c in v["criteria"] if c["name"] == "fail_to_pass")["evidence"]["outcomes"]
    assert set(f2p.values()) == {"failed"}, f2p  # they ran (and failed): the edited addopts were not read
    integrity = next(c for c in v["criteria"] if c["name"] == "grader_integrity")["evidence"]
    assert integrity["configuration_from_trusted_commit"] == "pyproject.toml"
    forged = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = 'passed'\n")
    steps = [{"write_file": {"path": "pytest_mock.py", "content": forged}},
             {"write_file": {"path": "trialbox_grader_plugin.py", "content": forged}},
             {"submit": {"summary": "planted"}}]
    verdict, _ = run_script(realistic, "samples__tabular-1", steps, "cheat-plugin")
    v = verdict["verdict"]
    assert v["outcome"] == "rejected" and "fail_to_pass" in v["reasons"] and "grader_integrity" not in v["reasons"], v


def break_task(root: Path, source: str, new: str, task_change=None, grader_change=None, files=None) -> None:
    shutil.copytree(root / "tasks" / source, root / "tasks" / new)
    shutil.copytree(root / "graders" / source, root / "graders" / new)
    task = yaml.safe_load((root / "tasks" / new / "task.yaml").read_text())
    task["id"] = new
    (task_change or (lambda t: None))(task)
    (root / "tasks" / new / "task.yaml").write_text(yaml.safe_dump(task))
    grader = yaml.safe_load((root / "graders" / new / "grader.yaml").read_text())
    (grader_change or (lambda g: None))(grader)
    (root / "graders" / new / "grader.yaml").write_text(yaml.safe_dump(grader))
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_broken_tasks_are_task_set_errors_with_their_root_cause(realistic, tmp_path, repo_root):
    root = tmp_path / "broken"
    shutil.copytree(realistic, root, ignore=shutil.ignore_patterns("runs", "*.lock.json"))
    for d in ("tasks", "graders"):
        shutil.rmtree(root / d)
        (root / d).mkdir()
        for name in ("samples__inventory-1", "samples__versioned-1"):
            shutil.copytree(realistic / d / name, root / d / name)
    inv, ver = "samples__inventory-1", "samples__versioned-1"
    break_task(root, inv, "bad-patch", files={"graders/bad-patch/test.patch":
               "--- a/tests/test_stock.py\n+++ b/tests/test_stock.py\n@@ -1,2 +1,2 @@\n-no such line\n+x\n"})
    break_task(root, inv, "bad-id", grader_change=lambda g: g["fail_to_pass"].append("tests/test_stock.py::test_nope"))
    break_task(root, inv, "already-passes", grader_change=lambda g: g["fail_to_pass"].append(g["pass_to_pass"][0]))
    break_task(root, ver, "bad-install", task_change=lambda t: t.update(install="pip install --user --break-system-packages --no-index nosuchpkg"))
    break_task(root, inv, "bad-plugin", task_change=lambda t: t.update(pytest_plugins=["no_such_plugin"]))
    break_task(root, inv, "bad-build", task_change=lambda t: t.update(image="./environment"),
               files={"tasks/bad-build/environment/Dockerfile": "ARG BASE\nFROM ${BASE}\nRUN echo building && exit 3\n",
                      "tasks/bad-build/environment/environment.yaml": "from: python\n"})
    fixed = (repo_root / "examples/realistic/src-repos/inventory/1/fix/src/inventory/stock.py").read_text()
    break_task(root, inv, "leaky", task_change=lambda t: t.update(image="./environment"),  # the fix, installed
               files={"tasks/leaky/environment/Dockerfile":
                      "ARG BASE\nFROM ${BASE}\nCOPY stock.py /usr/local/lib/python3.11/dist-packages/leaked/stock.py\n",
                      "tasks/leaky/environment/environment.yaml": "from: python\n",
                      "tasks/leaky/environment/stock.py": fixed})
    write_manifest(root)
    res = cli("tasks", "check", "check.yaml", cwd=root, check=1)
    lines = {line.split()[0]: line for line in res.stdout.splitlines() if line and not line.startswith(" ")}
    assert "test patch does not apply" in lines["bad-patch"]
    assert "not found: /workspace/tests/test_stock.py::test_nope" in lines["bad-id"], lines["bad-id"]
    assert "already passes on the untouched repository" in res.stdout.split("already-passes", 1)[1]
    assert "the install step failed" in lines["bad-install"] and "nosuchpkg" in lines["bad-install"], lines["bad-install"]
    assert "no_such_plugin" in lines["bad-plugin"], lines["bad-plugin"]
    assert "does not build" in lines["bad-build"] and "Step 3/5 : RUN echo building" in lines["bad-build"]
    assert "returned a non-zero code: 3" in res.stdout
    assert lines[inv].split()[1] == "ok" and lines[ver].split()[1] == "ok"
    assert "the environment already holds the answer: /usr/local/lib/python3.11/dist-packages/leaked/stock.py" \
        in lines["leaky"], lines["leaky"]
    assert "task set has problems: 2 of 9 task(s) ok" in res.stdout
    refused = cli("run", "check.yaml", "--unchecked", "--out", "runs/refused", cwd=root, check=1)
    assert "bad-build:./environment" in refused.stderr and "trialbox images build --manifest" in refused.stderr
    write_manifest(root, "built.yaml", tasks={**MANIFEST["tasks"], "select": ["bad-[ip]*", inv]})
    refused = cli("run", "built.yaml", "--unchecked", "--out", "runs/refused", cwd=root, check=1)
    assert "4 task(s) failed their last `trialbox tasks check`" in refused.stderr, refused.stderr
    assert "bad-patch: the test patch does not apply" in refused.stderr
    assert not (root / "runs/refused").exists()


def test_a_command_trialbox_cannot_honour_is_refused(realistic, tmp_path):
    root = tmp_path / "cmd"
    shutil.copytree(realistic, root, ignore=shutil.ignore_patterns("runs", "*.lock.json"))
    grader = root / "graders/samples__inventory-1/grader.yaml"
    data = yaml.safe_load(grader.read_text())
    for command, expected in (("tox -e py311", "got 'tox'"), ("python3 -m pytest -x", "option -x cannot be honoured"),
                              ("python3 -m pytest tests/", "test paths ('tests/') do not belong")):
        grader.write_text(yaml.safe_dump({**data, "command": command}))
        res = cli("validate", "check.yaml", cwd=root, check=1)
        assert f"{grader}: command: " in res.stderr and expected in res.stderr, res.stderr
