"""Harbor task folders: reading task.toml (both schemas), refusals by reason, pinning base images, the script
grader's reward and witness parsing, task requirements against the manifest."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import Problem
from orchestrator.grading.script import changed_paths, parse_reward, witness_summary
from orchestrator.grading.tree import Tree, leaves_workspace
from orchestrator.harbor import _pin_from, import_task, task_folders
from orchestrator.harbortoml import read_task_toml, size_mb
from orchestrator.loading import parse_model
from orchestrator.tasks import GraderConfig, TaskConfig

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "harbor-tasks"
REFUSED = ROOT / "tests" / "data" / "harbor-refused"


def test_the_current_schema_maps_timeouts_resources_and_network():
    h = read_task_toml(SAMPLES / "fix-median")
    assert h.refusals == []
    assert (h.schema_version, h.agent_timeout_s, h.verifier_timeout_s) == ("1.1", 600.0, 120.0)
    assert (h.cpus, h.memory_mb, h.storage_mb, h.network) == (1.0, 1024, 512, "none")
    assert h.metadata["task.name"] == "trialbox-samples/fix-median" and h.metadata["difficulty"] == "easy"
    assert any(n.startswith("environment.build_timeout_sec: not applied") for n in h.notes)


def test_the_older_schema_reads_sizes_and_allow_internet():
    h = read_task_toml(SAMPLES / "word-report")
    assert h.refusals == []
    assert (h.schema_version, h.memory_mb, h.storage_mb, h.network) == ("1.0", 1024, 1024, "none")
    assert h.metadata["author_name"] == "trialbox authors" and h.metadata["tags"] == ["shell", "text"]


@pytest.mark.parametrize("value,mb", [("2G", 2048), ("512M", 512), ("10GB", 10240), ("1.5G", 1536), (4096, 4096),
                                      ("lots", None), (True, None), (0, None)])
def test_sizes(value, mb):
    assert size_mb(value) == mb


@pytest.mark.parametrize("case,field,words", [
    ("allowlist", "environment.network_mode", "no allowlist network policy"),
    ("gpus", "environment.gpus", "no GPU"),
    ("multi-step", "steps", "multi-step task"),
    ("unknown-field", "environment.fancy_sidecar", "not a field trialbox knows"),
    ("run-as-user", "agent.user", "unprivileged sandbox user"),
    ("separate-verifier-image", "verifier.environment.cpus", "only docker_image"),
    ("windows", "environment.os", "Linux containers"),
])
def test_what_cannot_be_honoured_is_refused_once_with_its_reason(case, field, words):
    h = read_task_toml(REFUSED / case)
    assert [(r.field, words in r.reason) for r in h.refusals] == [(field, True)], h.refusals


def test_a_public_network_or_a_separate_verifier_mode_is_a_note_not_a_refusal(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.3"\n[environment]\nnetwork_mode = "public"\n'
                                              '[verifier]\nenvironment_mode = "separate"\n')
    h = read_task_toml(tmp_path / "t")
    assert h.refusals == [] and h.network == "any" and h.verifier_separate and h.verifier_image is None
    assert any("stricter than the task allows" in n for n in h.notes)
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.3"\n[verifier]\nenvironment_mode = "shared"\n')
    h = read_task_toml(tmp_path / "t")
    assert not h.verifier_separate and any("always grades in a separate container" in n for n in h.notes)
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.3"\n[verifier.environment]\n'
                                              'docker_image = "checker:1"\n')
    h = read_task_toml(tmp_path / "t")
    assert h.refusals == [] and h.verifier_separate and h.verifier_image == "checker:1"
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.3"\n[verifier]\nenvironment_mode = "shared"\n'
                                              '[verifier.environment]\ndocker_image = "checker:1"\n')
    assert [r.field for r in read_task_toml(tmp_path / "t").refusals] == ["verifier.environment"]


def test_a_verifier_that_needs_the_network_is_refused(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text('[verifier]\nnetwork_mode = "public"\n')
    assert [r.field for r in read_task_toml(tmp_path / "t").refusals] == ["verifier.network_mode"]


def test_a_compose_environment_is_refused_before_any_engine_is_asked(tmp_path):
    r = import_task(REFUSED / "compose", tmp_path / "tasks", tmp_path / "graders", ROOT / "images", None,
                    None, {})  # type: ignore[arg-type]
    assert [(x.field, "multi-service compose" in x.reason) for x in r.refusals] == \
        [("environment/docker-compose.yaml", True)]
    assert not (tmp_path / "tasks").exists()


def test_a_dataset_folder_lists_its_tasks():
    assert [p.name for p in task_folders([SAMPLES])] == ["fix-median", "word-report"]
    assert task_folders([SAMPLES / "fix-median"]) == [SAMPLES / "fix-median"]


def _pin(dockerfile, base_images, engine):
    refusals = []
    text, parent = _pin_from(dockerfile, base_images, engine.get, lambda r: f"sha256:{r}-id",
                             lambda f, why: refusals.append(why))
    return text, parent, refusals


def test_from_lines_are_mapped_pinned_or_refused():
    text, parent, refusals = _pin("FROM python:3.11-slim AS build\nRUN make\nFROM build\nFROM python:3.11-slim\n"
                                  "FROM alpine:3 AS x\n", {"python:3.11-slim": "python"}, {"alpine:3": "sha256:aaa"})
    assert parent == "python" and refusals == []
    assert text.splitlines() == ["ARG BASE", "FROM ${BASE} AS build", "RUN make", "FROM build", "FROM ${BASE}",
                                 "FROM sha256:aaa AS x"]
    _, parent, refusals = _pin("FROM registry.invalid/x:1\n", {}, {})
    assert parent is None and "never pulls" in refusals[0] and "--base-image registry.invalid/x:1=RECIPE" in refusals[0]
    _, _, refusals = _pin("ARG V=3\nFROM python:${V}\n", {}, {})
    assert "build argument" in refusals[0]


def test_rewards_are_read_as_harbor_writes_them():
    assert parse_reward("reward.txt", b"1\n") == {"reward": 1.0}
    assert parse_reward("reward.txt", b" 0.25 ") == {"reward": 0.25}
    assert parse_reward("reward.json", b'{"reward": 1, "accuracy": 0.5}') == {"reward": 1.0, "accuracy": 0.5}
    for name, data in (("reward.txt", b"nan"), ("reward.txt", b"inf"), ("reward.txt", b"yes"),
                       ("reward.json", b'{"reward": true}'), ("reward.json", b'{"reward": [1]}'),
                       ("reward.json", b"[1]"), ("reward.json", b"{}"), ("reward.json", b'{"reward": NaN}')):
        with pytest.raises(ValueError):
            parse_reward(name, data)
    assert not math.isnan(parse_reward("reward.json", b'{"a": 1e308}')["a"])


def _record(*lines: dict, stopped: bool = True) -> str:
    """A witness server's record: ``lines``, then its last line when it was stopped by trialbox."""
    return "".join(json.dumps(x) + "\n" for x in [*lines, *([{"event": "stopped"}] if stopped else [])])


def _open(conn: int, pid: int, chain: list | None = None) -> dict:
    return {"event": "open", "conn": conn, "pid": pid, "uid": 1000, "chain": chain or [pid, 20]}


def _msg(conn: int, pid: int | None, **body) -> dict:
    return {"event": "msg", "conn": conn, "pid": pid, "text": json.dumps(body)}


FINISH_OK = {"event": "finish", "depth": 0, "exitstatus": 0, "counts": {"passed": 3}}


def test_the_witness_tells_sessions_that_never_finished():
    text = _record(_open(1, 7), _msg(1, 7, event="start", depth=0), {"event": "close", "conn": 1},
                   _open(2, 9), _msg(2, 9, event="start", depth=0), _msg(2, 9, **FINISH_OK),
                   {"event": "close", "conn": 2}) + "not json\n"
    assert witness_summary(text) == {"loaded": True, "sessions": 2, "intact": True, "malformed_lines": 1,
                                     "finished": [{"exitstatus": 0, "counts": {"passed": 3}}], "unfinished": [7]}
    assert witness_summary(_record())["unfinished"] == [] and not witness_summary(_record())["loaded"]


def test_the_witness_counts_only_the_sessions_the_script_started_and_their_own_messages():
    from orchestrator.grading.script import witness_problems

    real = [_open(1, 40, [40, 32]), _msg(1, 40, event="start", depth=0)]
    failed = _msg(1, 40, event="finish", depth=0, exitstatus=1, counts={"passed": 1, "failed": 2})
    # a detached process (adopted by init) and a pytest run nested under the session claim clean sessions
    detached = [_open(2, 77, [77, 1]), _msg(2, 77, event="start", depth=0), _msg(2, 77, **FINISH_OK)]
    nested = [_open(3, 50, [50, 40, 32]), _msg(3, 50, event="start", depth=0), _msg(3, 50, **FINISH_OK)]
    w = witness_summary(_record(*real, *detached, *nested, failed))
    assert w["not_the_scripts"] == 2 and w["sessions"] == 1 and w["finished"][0]["exitstatus"] == 1
    assert "no pytest session of the test script passed" in witness_problems(w)[0]
    # a forked child speaking on the session's channel: the kernel names it
    w = witness_summary(_record(*real, _msg(1, 41, **FINISH_OK)))
    assert w["foreign_messages"] == [{"session_pid": 40, "sender": 41}] and w["unfinished"] == [40]
    assert any("another process (pid 41)" in p for p in witness_problems(w))
    # the same process replaced by exec: a new connection, the first one's session never finished
    w = witness_summary(_record(*real, {"event": "close", "conn": 1}, _open(2, 40, [40, 32]),
                                _msg(2, 40, event="start", depth=0), _msg(2, 40, **FINISH_OK)))
    assert w["unfinished"] == [40] and any("never finished" in p for p in witness_problems(w))
    # pytester's inline sessions nest inside the session: their outcomes are not the outer one's
    w = witness_summary(_record(*real, _msg(1, 40, event="start", depth=1),
                                _msg(1, 40, event="finish", depth=1, exitstatus=1, counts={"failed": 1}),
                                _msg(1, 40, **FINISH_OK)))
    assert w["finished"] == [{"exitstatus": 0, "counts": {"passed": 3}}] and witness_problems(w) == []
    # a finish with no start, text that is not the witness's, a parent that could not be read
    w = witness_summary(_record(_open(1, 40, [40, 32]), _msg(1, 40, **FINISH_OK),
                                {"event": "msg", "conn": 1, "pid": 40, "text": "x"}))
    assert w["malformed_messages"] == 2 and not w["loaded"]
    assert not witness_summary(_record(_open(1, 40, [40, None]), _msg(1, 40, event="start", depth=0)))["loaded"]


def test_a_witness_record_that_is_not_whole_contradicts_a_passing_reward():
    from orchestrator.grading.script import witness_problems

    ok = [_open(1, 5), _msg(1, 5, event="start", depth=0), _msg(1, 5, **FINISH_OK)]
    assert witness_problems(witness_summary(_record(*ok))) == []
    assert witness_problems(witness_summary(_record())) == []  # pytest never ran: nothing to say
    for text, words in ((_record(*ok, stopped=False), "ended before trialbox stopped it"), ("", "no record"),
                        (_record(*ok, {"event": "overflow"}), "reached its bound"),
                        (_record({"event": "refused"}, *ok), "reached its bound")):
        problems = witness_problems(witness_summary(text))
        assert problems and "not whole" in problems[0] and words in problems[0], text
    # nothing after the last line counts
    late = _record(_open(1, 5), _msg(1, 5, event="start", depth=0)) + json.dumps(_msg(1, 5, **FINISH_OK)) + "\n"
    assert witness_summary(late)["unfinished"] == [5]


def test_changed_paths_are_what_the_agent_added_or_changed():
    original = Tree(files={"a.py": b"1", "b.py": b"2"}, symlinks={"l": "a.py"})
    final = Tree(files={"a.py": b"1", "b.py": b"3", "pytest.py": b"x"}, symlinks={"l": "b.py"})
    assert changed_paths(final, original) == ["b.py", "l", "pytest.py"]
    assert changed_paths(final, None) == []


def test_symlinks_are_judged_against_the_tasks_workdir():
    tree = Tree(symlinks={"inside": "/app/x", "out": "/logs/verifier/reward.txt", "up": "../tests/test.sh"})
    assert not leaves_workspace(tree, "inside", "/app")
    assert leaves_workspace(tree, "inside", "/workspace")
    assert leaves_workspace(tree, "out", "/app") and leaves_workspace(tree, "up", "/app")


def _configs(tmp_path, task: dict, grader: dict) -> tuple[list[Problem], list[Problem]]:
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(task))
    (tmp_path / "grader.yaml").write_text(yaml.safe_dump(grader))
    return parse_model(tmp_path / "task.yaml", TaskConfig)[2], parse_model(tmp_path / "grader.yaml", GraderConfig)[2]


def test_a_script_grader_takes_no_test_ids_and_no_command(tmp_path):
    base = {"id": "t", "repo": {"dir": "repo"}, "image": "python", "difficulty": "easy"}
    _, problems = _configs(tmp_path, base, {"kind": "script", "tests": "tests", "fail_to_pass": ["x"]})
    assert "fail_to_pass and pass_to_pass are for kind: pytest" in problems[0].message
    _, problems = _configs(tmp_path, base, {"kind": "script", "tests": "tests", "command": "pytest -x"})
    assert "'command' is for kind: pytest" in problems[0].message
    _, problems = _configs(tmp_path, base, {"kind": "script", "test_patch": "t.patch"})
    assert "needs 'tests'" in problems[0].message
    task_problems, _ = _configs(tmp_path, {**base, "workdir": "app"}, {"tests": "t"})
    assert task_problems and task_problems[0].field == "workdir"


def _task_folder(tmp_path: Path, task: dict, grader: dict, name: str = "t") -> tuple[Path, Path]:
    folder, gfolder = tmp_path / "tasks" / name, tmp_path / "graders" / name
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "a.txt").write_text("a\n")
    (folder / "instruction.md").write_text("do it\n")
    (gfolder / "tests").mkdir(parents=True)
    (gfolder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (folder / "task.yaml").write_text(yaml.safe_dump({"id": name, "repo": {"dir": "repo"}, "image": "python",
                                                      "difficulty": "easy", **task}))
    (gfolder / "grader.yaml").write_text(yaml.safe_dump(grader))
    return folder, gfolder


def test_where_the_workspace_and_the_grader_folders_may_be(tmp_path):
    from orchestrator.taskload import load_task

    cases = [({"workdir": "/app"}, {"tests": "tests", "fail_to_pass": ["x::y"]}, "needs a script grader"),
             ({"workdir": "/usr/src/app"}, {"kind": "script", "tests": "tests"}, "system or trialbox folder"),
             ({"workdir": "/app/../etc"}, {"kind": "script", "tests": "tests"}, "normalised absolute folder"),
             ({"workdir": "/tests/app"}, {"kind": "script", "tests": "tests"}, "overlaps workdir"),
             ({"workdir": "/app", "install": "pip install -e ."}, {"kind": "script", "tests": "tests"},
              "put it in the environment's Dockerfile"),
             ({"workdir": "/app"}, {"kind": "script", "tests": "tests", "script": "run.sh"}, "not found")]
    for i, (task, grader, words) in enumerate(cases):
        folder, _ = _task_folder(tmp_path / str(i), task, grader)
        loaded, problems = load_task(folder, tmp_path / str(i) / "graders", ROOT / "images")
        assert loaded is None and any(words in p.message for p in problems), (task, grader, problems)
    folder, _ = _task_folder(tmp_path / "ok", {"workdir": "/app"}, {"kind": "script", "tests": "tests",
                                                                   "solution": None})
    loaded, problems = load_task(folder, tmp_path / "ok" / "graders", ROOT / "images")
    assert problems == [] and loaded is not None and loaded.config.workdir == "/app"


def test_a_manifest_that_gives_less_than_a_task_requires_is_refused_by_name(tmp_path):
    from orchestrator.job import task_limits
    from orchestrator.agents import BudgetLimits
    from orchestrator.manifest import EnvironmentConfig
    from orchestrator.taskload import load_task, requirement_problems

    folder, _ = _task_folder(tmp_path, {"workdir": "/app", "deadline_seconds": 120,
                                        "requires": {"cpus": 2, "memory_mb": 4096, "storage_mb": 100,
                                                     "network": "none"}},
                             {"kind": "script", "tests": "tests", "solution": None})
    task, problems = load_task(folder, tmp_path / "graders", ROOT / "images")
    assert problems == [] and task is not None
    small = EnvironmentConfig(cpu_limit=1.0, cpu_reservation=1.0, memory_limit_mb=2048, memory_reservation_mb=1024,
                              disk_limit_mb=2048)
    found = {p.field: p.message for p in requirement_problems(task, small)}
    assert set(found) == {"requires.cpus", "requires.memory_mb"}
    assert "requires 2; the manifest's environment.cpu_limit gives 1" in found["requires.cpus"]
    assert requirement_problems(task, EnvironmentConfig(cpu_limit=2.0, cpu_reservation=1.0, memory_limit_mb=4096,
                                                        memory_reservation_mb=1024,
                                                        network_policy="model-api-only")) == []
    assert task_limits(BudgetLimits(deadline_seconds=1800), task).deadline_seconds == 120
    assert task_limits(BudgetLimits(deadline_seconds=60), task).deadline_seconds == 60


def test_the_workdir_key_and_empty_requests_are_honoured(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text(
        'version = "2.0"\n[environment]\nworkdir = "/app"\ngpus = 0\nmcp_servers = []\nallow_internet = true\n'
        '[verifier.env]\n[solution.env]\n')
    h = read_task_toml(tmp_path / "t")
    assert h.refusals == [] and h.workdir == "/app" and h.network == "any"


def test_empty_artifacts_and_collect_as_harbor_init_writes_them_are_honoured(tmp_path):
    """``artifacts = []`` and ``[verifier] collect = []`` ask for nothing; a list that names files is refused by
    name (collecting them is not built)."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.1"\nartifacts = []\n[verifier]\ncollect = []\n')
    assert read_task_toml(tmp_path / "t").refusals == []
    (tmp_path / "t" / "task.toml").write_text('schema_version = "1.1"\nartifacts = ["/app/out.log"]\n'
                                              '[verifier]\ncollect = ["/logs/verifier/ctrf.json"]\n')
    assert [r.field for r in read_task_toml(tmp_path / "t").refusals] == ["artifacts", "verifier.collect"]


def test_home_moves_out_of_a_workspace_at_home_agent():
    from orchestrator.sandbox.base import home_for

    assert home_for("/app") == "/home/agent" and home_for("/workspace") == "/home/agent"
    assert home_for("/home/agent") == "/trialbox-home" and home_for("/home") == "/trialbox-home"
    assert home_for("/home/agent/project") == "/trialbox-home" and home_for("/home/user") == "/home/agent"


def test_a_reward_too_big_for_a_float_is_malformed_not_a_crash():
    with pytest.raises(ValueError, match="cannot be read as numbers"):
        parse_reward("reward.json", b'{"reward": 1' + b"0" * 400 + b"}")
    with pytest.raises(ValueError):
        parse_reward("reward.txt", b"\xff\xfe")


def test_only_importable_modules_and_executables_on_path_count_as_replacing_the_scripts_tools():
    from orchestrator.grading.script import replaced_runners, without_artifacts

    tree = Tree(files={"pytest.py": b"", "json/example.json": b"{}", "types/NOTES.md": b"", "unittest/__init__.py": b"",
                       "_pytest.cpython-311-x86_64-linux-gnu.so": b"", "bin/pytest": b"", "bin/notes.txt": b""},
                executable={"bin/pytest"})
    probed = {"names": ["pytest", "_pytest", "unittest", "json", "types"]}
    found = replaced_runners(tree, "/app", sorted(tree.files), "/usr/bin:/app/bin", probed)
    assert [f.split(":")[0] for f in found] == ["bin/pytest", "_pytest", "pytest", "unittest"]
    assert replaced_runners(Tree(files={"stats/__init__.py": b""}), "/app", ["stats/__init__.py"], "/usr/bin",
                            {"names": ["x"]}) == []
    stripped = without_artifacts(Tree(files={"a.py": b"", "pytest.pyc": b"", "stats/__pycache__/x.pyc": b""}))
    assert sorted(stripped.files) == ["a.py"]


@pytest.mark.parametrize("path", ["H-1.0.Dist-Info/entry_points.txt", "h.egg-info/entry_points.txt",
                                  "h.EGG-INFO/entry_points.txt", "src/h-1.0.DIST-INFO/ENTRY_POINTS.TXT",
                                  "h-1.0.egg/EGG-INFO/entry_points.txt"])
def test_a_pytest_entry_point_is_found_as_importlib_metadata_reads_it(path):
    from orchestrator.grading.script import replaced_runners

    tree = Tree(files={path: b"[pytest11]\nh = stats.h\n"})
    assert [f.split(":")[0] for f in replaced_runners(tree, "/app", [path], "", {"names": []})] == [path]
    honest = Tree(files={path: b"[console_scripts]\nh = h:main\n"})  # what an honest `pip install -e .` writes
    assert replaced_runners(honest, "/app", [path], "", {"names": []}) == []
    # an original entry point turned into another: what it pointed to was a pytest plugin
    assert replaced_runners(honest, "/app", [path], "", {"names": []}, original=tree)


def test_shadowing_is_judged_against_every_module_the_runner_can_import_where_it_can_be_imported():
    from orchestrator.grading.script import FALLBACK_NAMES, import_folders, replaced_runners

    names = {"names": ["json", "xml", "pdb", "tempfile", "code", "inspect", "difflib", "stats", "pluggy"]}
    original = Tree(files={"stats/__init__.py": b"", "tests/conftest.py": b"", "tests/test_a.py": b"",
                           "pkg/__init__.py": b"", "pkg/tests/__init__.py": b"", "pkg/tests/test_b.py": b""})
    shadows = {"xml/__init__.py": b"", "pdb.py": b"", "code.cpython-311-x86_64-linux-gnu.so": b"",
               "tests/tempfile.py": b"", "inspect/__init__.abi3.so": b"", "inspect/sub/x.py": b"",
               "pluggy/__init__.py": b""}
    honest = {"stats/__init__.py": b"1", "stats/json.py": b"", "pkg/difflib.py": b"", "pkg/tests/json.py": b"",
              "xml/README.txt": b"", "docs/code.py": b"", "difflib/helpers/x.py": b""}
    tree = Tree(files={**original.files, **shadows, **honest})
    changed = sorted([*shadows, *honest])
    found = [f.split(":")[0] for f in replaced_runners(tree, "/app", changed, "", names, original=original)]
    # stats is the task's own (the original has it there); docs/ is on no path; pkg/ is a package; difflib/ is
    # no package (a namespace portion never wins over the standard module)
    assert sorted(found) == ["code", "inspect", "pdb", "pluggy", "tests/tempfile", "xml"], found
    assert import_folders(tree, {})[0] == ["", "tests"]  # where pytest puts test files' folders first
    # folders the environment's path (or the script's PYTHONPATH) has in the workspace; a site folder there: every
    # change in it is the runner's own code changed
    site = ".venv/lib/python3.11/site-packages"
    venv = Tree(files={f"{site}/_pytest/main.py": b"x", "src/json.py": b""})
    found = replaced_runners(venv, "/app", [f"{site}/_pytest/main.py", "src/json.py"], "",
                             {"names": ["json"], "workspace": [site], "pythonpath": ["src"]})
    assert [f.split(":")[0] for f in found] == [f"{site}/_pytest/main.py", "src/json"], found
    # a folder with no __init__ is a namespace portion: it shadows only a namespace package found elsewhere
    ns = {"names": ["tests", "google", "xml"], "namespaces": ["google"]}
    portions = Tree(files={"tests/test_new.py": b"", "google/protobuf/__init__.py": b"", "xml/dom/x.py": b"",
                           "xml/__init__.py": b""})
    found = replaced_runners(portions, "/app", sorted(portions.files), "", ns)
    assert [f.split(":")[0] for f in found] == ["google", "xml"], found
    # the environment's Python could not be asked: its standard library and pytest's, judged from this one's
    assert {"json", "xml", "pytest", "_pytest", "pluggy"} <= FALLBACK_NAMES
    assert replaced_runners(Tree(files={"xml/__init__.py": b""}), "/app", ["xml/__init__.py"], "", {})
    # the witness's own module, which the workspace would shadow (it comes first on the path)
    assert replaced_runners(Tree(files={"trialbox_witness.py": b""}), "/app", ["trialbox_witness.py"], "",
                            {"names": ["json"]})


def test_paths_too_long_for_the_grader_and_bytecode_stay_out_of_the_script_graders_workspace():
    from orchestrator.grading.compose import MAX_GRADER_PATH
    from orchestrator.grading.script import for_grading

    deep = "/".join(["d" * 200] * (MAX_GRADER_PATH // 201 + 1))
    tree = Tree(files={"answer.json": b"{}", f"{deep}/leaf": b"x", "m/__pycache__/m.pyc": b""},
                symlinks={f"{deep}/link": "../x"}, dirs={"m", deep.rsplit("/", 1)[0], deep},
                executable={f"{deep}/leaf"})
    kept, ignored = for_grading(tree)
    assert sorted(kept.files) == ["answer.json"] and not kept.symlinks and not kept.executable
    assert all(len(d.encode()) <= MAX_GRADER_PATH for d in kept.dirs) and "m" in kept.dirs
    assert ignored == sorted([f"{deep}/leaf", f"{deep}/link", deep, "m/__pycache__/m.pyc"])


def test_a_pytest_entry_point_in_the_workspace_is_protected():
    from orchestrator.grading.criteria import _protected

    plugin = Tree(files={"x-1.0.dist-info/entry_points.txt": b"[pytest11]\nx = stats.helpers\n"})
    scripts = Tree(files={"mylib.egg-info/entry_points.txt": b"[console_scripts]\nmylib = mylib:main\n"})
    assert _protected("x-1.0.dist-info/entry_points.txt", Tree(), plugin)
    for folder in ("X-1.0.Dist-Info", "x.EGG-INFO", "x.egg/EGG-INFO"):  # as importlib.metadata finds them
        planted = Tree(files={f"{folder}/Entry_Points.txt": b"[pytest11]\nx = stats.helpers\n"})
        assert _protected(f"{folder}/Entry_Points.txt", Tree(), planted), folder
    assert not _protected("mylib.egg-info/entry_points.txt", Tree(), scripts)
    assert _protected(".pytest.ini", Tree(), Tree()) and _protected("pytest.toml", Tree(), Tree())


def test_host_variables_and_paths_out_of_the_task_are_refused(tmp_path):
    import os
    from orchestrator.harbor import _links_out

    (tmp_path / "t" / "tests").mkdir(parents=True)
    (tmp_path / "t" / "task.toml").write_text('[verifier.env]\nOPENAI_API_KEY = "${OPENAI_API_KEY}"\n'
                                              '[environment]\nworkdir = "/app/../etc"\n')
    h = read_task_toml(tmp_path / "t")
    assert sorted(r.field for r in h.refusals) == ["environment.workdir", "verifier.env.OPENAI_API_KEY"]
    (tmp_path / "secret.txt").write_text("host secret\n")
    os.symlink(tmp_path / "secret.txt", tmp_path / "t" / "instruction.md")
    os.symlink("../../secret.txt", tmp_path / "t" / "tests" / "data.txt")
    os.symlink("test.sh", tmp_path / "t" / "tests" / "run.sh")
    assert [f for f, _ in _links_out(tmp_path / "t")] == ["instruction.md", "tests/data.txt"]


def test_paths_the_tests_expect_outside_the_workspace_are_named(tmp_path):
    from orchestrator.harbor import paths_outside

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_outputs.py").write_text(
        "A = '/home/agent/analysis.json'\nB = \"/workspace/out.json\"\nC = '/tmp/x.txt'\nD = '/logs/verifier/r'\n"
        "E = '/usr/bin/python3'\n")
    assert paths_outside(tmp_path / "tests", "/workspace") == ["/home/agent/analysis.json", "/tmp/x.txt"]
    assert paths_outside(tmp_path / "tests", "/home/agent") == ["/tmp/x.txt"]


def test_the_tools_a_model_is_given_name_the_tasks_workdir():
    from orchestrator.agents.toolbox import TOOL_SPECS, tool_specs

    assert tool_specs() == TOOL_SPECS  # the text of every existing task is unchanged
    at_app = {t["name"]: t["description"] for t in tool_specs("/app")}
    assert "working directory /app" in at_app["bash"] and "relative to /app" in at_app["read_file"]
    assert all("/workspace" not in d for d in at_app.values())


def test_a_path_list_is_split_and_templates_are_skipped(tmp_path):
    from orchestrator.harbor import paths_outside

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.sh").write_text('export PATH="/opt/verifier-venv/bin:/usr/local/bin:${PATH}"\n'
                                                "F='/opt/verifier-fixtures/known-hosts'\n")
    assert paths_outside(tmp_path / "tests", "/app") == ["/opt/verifier-venv/bin", "/opt/verifier-fixtures/known-hosts"]


def test_a_failing_solution_script_is_named_with_its_output(tmp_path):
    import json as _json
    from orchestrator.taskcheck import solution_script_failure

    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(_json.dumps(e) for e in (
        {"kind": "tool", "tool": "bash", "exit_code": 2, "output": "sed: can't read /solution/golden.sh\n[exit code: 2]"},
        {"kind": "tool", "tool": "submit"})) + "\n")
    assert solution_script_failure(events) == ["the solution script exited 2: sed: can't read /solution/golden.sh "
                                               "[exit code: 2]"]
    assert solution_script_failure(tmp_path / "missing.jsonl") == []


def test_the_probe_reports_every_importable_name_and_the_workspaces_folders_on_the_path(tmp_path):
    import subprocess
    import sys

    from orchestrator.grading.script import PROBE

    root = tmp_path / "app"
    (root / "src").mkdir(parents=True)
    outside = tmp_path / "lib"
    (outside / "plugin_x").mkdir(parents=True)
    (outside / "plugin_x" / "__init__.py").write_text("")
    (outside / "nspkg").mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{root}/src:{outside}"}
    res = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE, str(root)], capture_output=True, text=True,
                         env=env, cwd="/", timeout=60, check=True)
    probed = json.loads(res.stdout)
    assert {"json", "xml", "pdb", "sys", "plugin_x"} <= set(probed["names"]) and "nspkg" in probed["namespaces"]
    assert probed["pythonpath"] == ["src"] and probed["workspace"] == []


class _ProbeSandbox:
    """Answers the probe's commands from a script: the first exec's output, then the second's."""

    def __init__(self, *outputs: str) -> None:
        self.outputs, self.calls = list(outputs), []

    def exec(self, cmd, timeout=None, env=None, **_):
        self.calls.append(cmd)
        out = self.outputs.pop(0)
        return type("R", (), {"text": lambda self: out})()


def test_a_python3_in_the_workspace_is_asked_only_when_nothing_of_the_agents_stands_in_for_it():
    from orchestrator.grading.script import _probe

    path = "/app/.venv/bin:/usr/bin"
    # the venv's python3 links out and nothing changed in its folder: asked by its link (its own environment)
    box = _ProbeSandbox(f"{path}\n\ninside /usr/bin/python3.11 /app/.venv/bin/python3\n", '{"names": ["json"]}\n')
    assert _probe(box, "/app", {}, ["stats/__init__.py"]) == (path, {"names": ["json"]})
    assert box.calls[1][-3] == "/app/.venv/bin/python3" and "-S" in box.calls[1][2]
    # something the agent changed in that folder, or a python3 that resolves inside the workspace: not run
    for changed, real in ((["stats/x.py", ".venv/bin/python"], "/usr/bin/python3.11"), ([], "/app/evil")):
        box = _ProbeSandbox(f"{path}\n\ninside {real} /app/.venv/bin/python3\n")
        env_path, probed = _probe(box, "/app", {}, changed)
        assert env_path == path and "not asked" in probed["note"] and len(box.calls) == 1


def test_acceptance_reads_one_condition_a_list_or_the_import_text():
    """Every form a grader.yaml may hold means the same conditions; a reward is accepted when all hold."""
    from orchestrator.tasks import Acceptance

    forms = [{"metric": "correctness", "at_least": 1}, [{"metric": "correctness"}], "correctness>=1"]
    assert {Acceptance.model_validate(f).text() for f in forms} == {"correctness>=1"}
    two = GraderConfig.model_validate({"kind": "script", "tests": "tests",
                                       "acceptance": "correctness>=1, performance>=0.5"}).acceptance
    assert str(two) == "correctness ≥ 1 and performance ≥ 0.5" and two.metrics == ["correctness", "performance"]
    assert two.holds({"correctness": 1.0, "performance": 0.5, "style": 0.0})
    assert not two.holds({"correctness": 1.0, "performance": 0.4}) and not two.holds(None)
    assert not two.holds({"correctness": 1.0}) and two.missing({"correctness": 1.0}) == ["performance"]
    assert GraderConfig.model_validate({"kind": "script", "tests": "tests"}).acceptance.text() == "reward>=1"
    for bad, words in (("correctness=1", "expected METRIC>=NUMBER"), ("a>=1,a>=2", "named twice"),
                       ([{"metric": "a"}, {"metric": "a"}], "named twice"), ([], "at least 1"),
                       ("a>=x", "expected METRIC>=NUMBER")):
        with pytest.raises(ValueError, match=words):
            Acceptance.model_validate(bad)


class _RewardFiles:
    """``script.read_regular`` on a dict of the reward folder's files (the logic of the read, no engine)."""

    def __init__(self, files: dict[str, bytes | str]):
        self.files = files

    def __call__(self, sandbox, path: str, max_bytes: int):
        name = path.rsplit("/", 1)[1]
        got = self.files.get(name)
        return ("absent", b"") if got is None else ("link", b"") if got == "link" else ("file", got)


@pytest.mark.parametrize("files,acceptance,source,reward,problem", [
    ({"reward.txt": b"1"}, None, "reward.txt", {"reward": 1.0}, None),
    ({"reward.json": b'{"reward": 0}', "reward.txt": b"0"}, None, "reward.json", {"reward": 0.0}, None),
    ({"reward.json": b'{"reward": 0, "x": 1}', "reward.txt": b"1"}, None, "reward.json", {"reward": 0.0, "x": 1.0},
     "the script's two reward files disagree"),
    ({"reward.json": b'{"correctness": 1, "performance": 0.7}', "reward.txt": b"0"},
     "correctness>=1,performance>=0.5", "reward.json", {"correctness": 1.0, "performance": 0.7}, None),
    ({"reward.json": b'{"correctness": 1, "performance": 0.7}'}, None, "reward.json",
     {"correctness": 1.0, "performance": 0.7}, "no metric 'reward'"),
    ({"reward.json": "link", "reward.txt": b"1"}, None, None, None, "not a regular file"),
])
def test_reward_json_is_read_first_and_both_files_must_agree(monkeypatch, tmp_path, files, acceptance, source,
                                                             reward, problem):
    from orchestrator.grading import script
    from orchestrator.grading.runner import TestRun
    from orchestrator.taskload import load_task

    grader = {"kind": "script", "tests": "tests", "solution": None,
              **({"acceptance": acceptance} if acceptance else {})}
    folder, _ = _task_folder(tmp_path, {"workdir": "/app"}, grader)
    task, problems = load_task(folder, tmp_path / "graders", ROOT / "images")
    assert not problems, problems
    monkeypatch.setattr(script, "read_regular", _RewardFiles(files))
    run = TestRun()
    script._read_reward(None, run, task)
    assert (run.reward_source, run.reward) == (source, reward)
    assert run.results_found
    assert (problem is None and run.integrity == []) or (problem and any(problem in p for p in run.integrity)), \
        run.integrity
