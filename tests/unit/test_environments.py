"""Environments: the test command honoured or refused, settings merged, trusted configuration found, test
patches applied on the host, the importer on data as it is published, root causes of task-set errors."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from orchestrator.environments import EnvironmentSettings, TestCommand, parse_test_command, resolve_runtime
from orchestrator.errors import ValidationFailed
from orchestrator.grading.tree import Tree
from orchestrator.grading.runner import TestRun
from orchestrator.grading.trusted import config_copy, find_config
from orchestrator.importers import import_swebench
from orchestrator.taskcheck import distinctive_lines
from orchestrator.diagnosis import root_cause, untouched_problems


@pytest.mark.parametrize("command, interpreter, module, args, env", [
    ("python3 -m pytest", "python3", True, (), ()),
    ("pytest -W error --import-mode=importlib", "python3", False, ("-W", "error", "--import-mode=importlib"), ()),
    ("PYTHONPATH=src:. MODE=1 python3.12 -m pytest -q", "python3.12", True, ("-q",),
     (("PYTHONPATH", "src:."), ("MODE", "1"))),
    ("/opt/venv/bin/python -m pytest -o xfail_strict=true", "/opt/venv/bin/python", True,
     ("-o", "xfail_strict=true"), ()),
    ("python3 -m pytest -p no:cacheprovider -pno:randomly", "python3", True,
     ("-p", "no:cacheprovider", "-pno:randomly"), ()),
])
def test_commands_trialbox_honours(command, interpreter, module, args, env):
    parsed, why = parse_test_command(command)
    assert why is None and parsed == TestCommand(interpreter, module, args, env)


@pytest.mark.parametrize("command, expected", [
    ("tox -e py311", "got 'tox'"),
    ("make test", "got 'make'"),
    ("python3 -m unittest", "got 'python3'"),
    ("python3 -m pytest tests/test_a.py::test_x", "test paths"),
    ("pytest tests", "test paths"),
    ("python3 -m pytest -x", "option -x"),
    ("python3 -m pytest -pno:randomly tests", "test paths"),
    ("python3 -m pytest -p no:randomly tests", "test paths"),
    ("python3 -m pytest -p xdist", "declare plugins in pytest_plugins"),
    ("python3 -m pytest -pxdist", "declare plugins in pytest_plugins"),
    ("python3 -m pytest -c other.ini", "configuration file from the trusted initial commit"),
    ("python3 -m pytest --junitxml=x.xml", "result files"),
    ("python3 -m pytest -k fast", "no deselection"),
    ("/workspace/.venv/bin/python -m pytest", "not from the workspace"),
    ("TRIALBOX_TEST_TIMEOUT=1 python3 -m pytest", "set by trialbox"),
    ("python3 -m pytest 'unclosed", "cannot be parsed"),
])
def test_commands_trialbox_refuses_by_name(command, expected):
    parsed, why = parse_test_command(command)
    assert parsed is None and expected in why


def test_settings_merge_parent_first_then_task_then_command():
    parent = EnvironmentSettings(env={"A": "1", "B": "1"}, python_path=["lib"], pytest_plugins=["p1"],
                                 install="pip install -e .")
    task = EnvironmentSettings(env={"B": "2"}, python_path=["src"], pytest_plugins=["p1", "p2"])
    command, _ = parse_test_command("PYTHONPATH=src:extra C=3 python3 -m pytest")
    rt = resolve_runtime([parent, task], command)
    assert dict(rt.env) == {"A": "1", "B": "2", "C": "3"}
    assert rt.python_path == ("/workspace/lib", "/workspace/src", "/workspace/extra")
    assert rt.pytest_plugins == ("p1", "p2") and rt.install == "pip install -e ."
    assert rt.sandbox_env()["PYTHONPATH"] == "/workspace/lib:/workspace/src:/workspace/extra"
    cfg = rt.grader_config()
    assert cfg["python_path"][0] == "/workspace" and cfg["user_site"] is True  # python -m pytest: the workspace first


def tree(files: dict[str, str]) -> Tree:
    return Tree(files={k: v.encode() for k, v in files.items()})


def test_the_configuration_is_the_one_pytest_would_pick_from_the_trusted_tree():
    t = tree({"pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['src']\n", "setup.cfg": "[tool:pytest]\n",
              "tox.ini": "[tox]\n", "tests/test_a.py": ""})
    assert find_config(t, ["tests/test_a.py"]) == "pyproject.toml"
    assert find_config(tree({"pyproject.toml": "[project]\nname='x'\n", "tox.ini": "[pytest]\naddopts=-q\n"}),
                       ["tests/test_a.py"]) == "tox.ini"  # a pyproject without a pytest table does not count
    assert find_config(tree({"pytest.ini": "", "pyproject.toml": "[tool.pytest.ini_options]\n"}), ["t/test_a.py"]) \
        == "pytest.ini"
    assert find_config(tree({"tests/pytest.ini": "[pytest]\n", "pytest.ini": "[pytest]\n"}), ["tests/test_a.py"]) \
        == "tests/pytest.ini"  # the nearest folder above the tests wins, as in pytest
    path, body, source = config_copy(tree({"pytest.ini": ""}), ["tests/test_a.py"], "abcdef0123456789")
    assert path == ".trialbox-pytest-abcdef012345.ini" and body == b"[pytest]\n" and source == "pytest.ini"
    path, body, source = config_copy(t, ["tests/test_a.py"], "abcdef0123456789")
    assert path.endswith(".toml") and b"pythonpath" in body
    path, body, source = config_copy(tree({"a.py": ""}), ["tests/test_a.py"], "abcdef0123456789")
    assert source is None and body == b"[pytest]\n" and "/" not in path  # none: an empty one at the root


def test_a_fail_to_pass_module_that_cannot_import_counts_as_failing_but_a_usage_error_does_not(tmp_path):
    class G:
        fail_to_pass = ["tests/test_new.py::test_a"]
        pass_to_pass = ["tests/test_old.py::test_b"]

    class T:
        grader = G()

    importing = TestRun(outcomes={"tests/test_old.py::test_b": "passed"}, results_found=True, exit_codes=[4, 1],
                        collect_errors=[{"node": "tests/test_new.py", "error": "E   ImportError: cannot import name 'a'"}])
    assert untouched_problems(T(), [importing, importing]) == []
    usage = TestRun(results_found=True, exit_codes=[4, 4],
                    log_tail="ERROR: usage: __main__.py [options]\n__main__.py: error: unrecognized arguments: --cov\n")
    problems = untouched_problems(T(), [usage, usage])
    assert len(problems) == 1 and "pytest did not execute the tests" in problems[0]
    assert "unrecognized arguments: --cov" in problems[0] or "ERROR: usage" in problems[0]
    missing = TestRun(collect_errors=[{"node": "tests/test_old.py",
                                       "error": "tests/test_old.py:1: in <module>\nE   ModuleNotFoundError: No module named 'pkg'\n"}])
    assert root_cause(missing) == "tests/test_old.py: ModuleNotFoundError: No module named 'pkg'"


def test_distinctive_lines_of_a_solution_skip_boilerplate():
    patch = ("+++ b/x.py\n+    return None\n+import os\n+    if cents < 0 and not allow_negative_balance(account):\n"
             "+        raise InsufficientFunds(account.name, cents - account.balance)\n")
    lines = distinctive_lines(patch)
    assert lines[0].startswith("raise InsufficientFunds") and "return None" not in lines and "import os" not in lines


def make_repo(root):
    repo = root / "owner" / "lib"
    repo.mkdir(parents=True)
    (repo / "a.py").write_text("x = 1\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(root), "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def instance(commit: str, **over) -> dict:
    return {"instance_id": "owner__lib-1", "repo": "owner/lib", "base_commit": commit, "problem_statement": "Fix it.",
            "patch": "diff --git a/a.py b/a.py\n", "test_patch": "diff --git a/t.py b/t.py\n",
            "FAIL_TO_PASS": ["t.py::test_a"], "PASS_TO_PASS": json.dumps(["t.py::test_b"]), "version": 1.2,
            "hints_text": "", **over}


def test_import_reads_json_arrays_and_versions_and_names_what_it_did_not_map(tmp_path):
    commit = make_repo(tmp_path / "repos")
    data = tmp_path / "instances.json"
    data.write_text(json.dumps([instance(commit, patch="--- a/src/a.py\n+++ b/src/a.py\n--- a/docs/x.rst\n+++ b/docs/x.rst\n")],
                               indent=2))
    specs = tmp_path / "specs.yaml"
    specs.write_text(yaml.safe_dump({"owner/lib": {"image": "lib-env", "python_path": ["src"], "env": {"M": "1"},
                                                   "scope": ["src/**"],
                                                   "test_command": "pytest", "versions": {"1.2": {"image": "lib-env-12",
                                                                                                  "difficulty": "hard"}}}}))
    result = import_swebench(data, tmp_path / "repos", specs, tmp_path / "set/tasks", tmp_path / "set/graders")
    assert result.written == ["owner__lib-1"] and result.unmapped == {"owner__lib-1": ["hints_text"]}
    assert result.outside_scope == {"owner__lib-1": ["docs/x.rst"]}  # said at import, not after a whole check
    task = yaml.safe_load((tmp_path / "set/tasks/owner__lib-1/task.yaml").read_text())
    assert task["image"] == "lib-env-12" and task["difficulty"] == "hard" and task["repo"]["git"] == "../../../repos/owner/lib"
    assert task["python_path"] == ["src"] and task["env"] == {"M": "1"}
    grader = yaml.safe_load((tmp_path / "set/graders/owner__lib-1/grader.yaml").read_text())
    assert grader["fail_to_pass"] == ["t.py::test_a"] and grader["pass_to_pass"] == ["t.py::test_b"]
    assert grader["command"] == "pytest"


def test_bad_specs_each_named_and_nothing_written(tmp_path):
    commit = make_repo(tmp_path / "repos")
    data = tmp_path / "instances.jsonl"
    data.write_text(json.dumps(instance(commit)) + "\n" + json.dumps(instance(commit, FAIL_TO_PASS="[not json")) + "\n")
    specs = tmp_path / "specs.yaml"
    specs.write_text(yaml.safe_dump({"owner/lib": {"image": "x", "test_comand": "pytest", "test_command": "tox",
                                                   "env": {"PYTHONPATH": "src"}, "versions": {"1": {"scope": "src"}}}}))
    with pytest.raises(ValidationFailed) as info:
        import_swebench(data, tmp_path / "repos", specs, tmp_path / "t", tmp_path / "g")
    messages = [str(p) for p in info.value.problems]
    assert any("owner/lib.test_comand" in m for m in messages), messages
    assert any("owner/lib.versions.1.scope" in m for m in messages), messages
    assert not (tmp_path / "t").exists()
    specs.write_text(yaml.safe_dump({"owner/lib": {"image": "x", "test_command": "tox", "env": {"PYTHONPATH": "src"}}}))
    with pytest.raises(ValidationFailed) as info:
        import_swebench(data, tmp_path / "repos", specs, tmp_path / "t", tmp_path / "g")
    messages = [str(p) for p in info.value.problems]
    assert any(m.endswith("owner/lib.test_command: got 'tox': expected `[VAR=value …] python3 -m pytest [options]` "
                          "or `pytest [options]` (trialbox runs pytest itself, with its safeguards)") for m in messages)
    assert any("owner/lib.env.PYTHONPATH: set by trialbox (use python_path" in m for m in messages), messages
    assert any("line 2.FAIL_TO_PASS: expected a list of test ids" in m for m in messages), messages
    assert not (tmp_path / "t").exists()


def test_recipe_chains_and_their_mistakes_are_named(tmp_path):
    from orchestrator.errors import ConfigError
    from orchestrator.images import load_recipe, recipe_chain

    images = tmp_path / "images"
    for name, files in {"base": {"recipe.yaml": "suite: bookworm\n"},
                        "python": {"Dockerfile": "ARG BASE\nFROM ${BASE}\n"},
                        "lib": {"Dockerfile": "ARG BASE\nFROM ${BASE}\n", "environment.yaml": "from: python\n"},
                        "loop-a": {"Dockerfile": "x", "environment.yaml": "from: loop-b\n"},
                        "loop-b": {"Dockerfile": "x", "environment.yaml": "from: loop-a\n"},
                        "typo": {"Dockerfile": "x", "environment.yaml": "form: python\n"},
                        "orphan": {"Dockerfile": "x", "environment.yaml": "from: nowhere\n"}}.items():
        (images / name).mkdir(parents=True)
        for f, text in files.items():
            (images / name / f).write_text(text)
    chain = recipe_chain(images, load_recipe("lib", images / "lib"))
    assert [r.key for r in chain] == ["base", "python", "lib"]
    with pytest.raises(ConfigError, match="makes a cycle"):
        recipe_chain(images, load_recipe("loop-a", images / "loop-a"))
    with pytest.raises(ConfigError, match="expected a recipe under .* got 'nowhere'"):
        recipe_chain(images, load_recipe("orphan", images / "orphan"))
    with pytest.raises(ValidationFailed) as info:
        load_recipe("typo", images / "typo")
    assert any(p.field == "form" and "environment.yaml" in p.file for p in info.value.problems)


def test_every_file_that_cannot_import_is_kept_however_many_node_ids_it_was_asked_for():
    """A real fix (pallets/itsdangerous 7f4dcf8) whose test patch imports a name the fix adds: three files fail
    to import, the first listing 97 node ids; each yields one collection error per node id."""
    from orchestrator.grading.runner import one_per_file

    class G:
        fail_to_pass = ([f"tests/test_serializer.py::test_{i}" for i in range(97)]
                        + [f"tests/test_timed.py::test_{i}" for i in range(40)]
                        + [f"tests/test_url_safe.py::test_{i}" for i in range(30)])
        pass_to_pass = ["tests/test_encoding.py::test_ok"]

    class T:
        grader = G()

    raw = [{"node": n, "error": f"ImportError: cannot import name '_lazy_sha1' ({n.split('::')[0]})"}
           for n in G.fail_to_pass]
    errors = one_per_file(raw)
    assert [e["node"].split("::")[0] for e in errors] == ["tests/test_serializer.py", "tests/test_timed.py",
                                                         "tests/test_url_safe.py"]
    run = TestRun(outcomes={"tests/test_encoding.py::test_ok": "passed"}, results_found=True,
                  exit_codes=[1, 4, 4, 4], collect_errors=errors)  # groups in file order: encoding, serializer, ...
    assert untouched_problems(T(), [run, run]) == []


def test_the_oracles_cause_is_the_collection_error_the_verdict_kept_not_the_logs_tail(tmp_path):
    from orchestrator.diagnosis import log_cause

    log = tmp_path / "grader.log"
    log.write_text("".join(f"ERROR: not found: /workspace/tests/test_timed.py::test_{i}\n" for i in range(50)))
    failing = [{"name": "fail_to_pass", "critical": True, "passed": False,
                "evidence": {"collect_errors": [{"node": "tests/test_timed.py",
                                                 "error": "tests/test_timed.py:7: in <module>\n    import freezegun\n"
                                                          "E   ModuleNotFoundError: No module named 'freezegun'"}]}}]
    assert log_cause(log, failing) == "tests/test_timed.py: ModuleNotFoundError: No module named 'freezegun'"
    assert log_cause(log).startswith("ERROR: not found")  # the tail alone says only what followed from it
