"""Harbor-format tasks under trialbox's rules, on the real engine: import (and refusals, one line each), `tasks
check`, a run of the oracle and nop, the report, the lock's origin digest, ATIF export, and the script grader
against agents that try to be accepted without doing the work."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from .test_run_cli import cli, outcomes

BASES = ["--base-image", "python:3.11-slim=python", "--base-image", "debian:bookworm-slim=base"]


@pytest.fixture(scope="module")
def imported(project, repo_root):
    out = project / "runs" / "harbor"
    res = cli("tasks", "import-harbor", str(project / "examples" / "harbor-tasks"), "--out", str(out / "tasks"),
              "--images", str(project / "images"), *BASES, cwd=repo_root, check=0)
    return out, res


def fix_median_manifest(project: Path, out: Path, candidates: list[dict], path: Path) -> Path:
    """examples/harbor.yaml with these candidates, one trial of the imported fix-median, written to ``path``."""
    manifest = yaml.safe_load((project / "examples" / "harbor.yaml").read_text())
    manifest["candidates"] = candidates
    manifest["tasks"] = {"path": str(out / "tasks"), "graders": str(out / "graders"),
                         "images": str(project / "images"), "select": ["fix-median"]}
    manifest["execution"]["trials_per_task"] = 1
    manifest["analysis"]["k"] = [1]
    path.write_text(yaml.safe_dump(manifest))
    return path


def test_import_takes_the_working_directory_as_the_repository_and_holds_the_tests_out(imported, project):
    out, res = imported
    assert "imported fix-median (workspace /app)" in res.stdout and "imported 2 of 2 Harbor task(s)" in res.stdout
    task = yaml.safe_load((out / "tasks" / "fix-median" / "task.yaml").read_text())
    assert task["workdir"] == "/app" and task["deadline_seconds"] == 600.0
    assert task["requires"] == {"cpus": 1.0, "memory_mb": 1024, "storage_mb": 512, "network": "none"}
    assert task["origin"]["digest"].startswith("sha256:") and task["origin"]["name"] == "trialbox-samples/fix-median"
    repo = out / "tasks" / "fix-median" / "repo"
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()) == \
        ["README.md", "stats/__init__.py"]  # what the built image holds at /app, nothing else
    assert (out / "tasks" / "word-report" / "repo" / "words.txt").read_text().count("apple") == 3  # made by RUN
    assert not list((out / "tasks").rglob("test_outputs.py")) and not list((out / "tasks").rglob("solve.sh"))
    grader = yaml.safe_load((out / "graders" / "fix-median" / "grader.yaml").read_text())
    assert grader["kind"] == "script" and grader["timeout_seconds"] == 120.0 and grader["solution"] == "solution"
    dockerfile = (out / "tasks" / "fix-median" / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith("ARG BASE\nFROM ${BASE}\n")
    assert yaml.safe_load((out / "tasks" / "fix-median" / "environment" / "environment.yaml").read_text()) == \
        {"from": "python"}


def test_every_refusal_is_one_clear_line_and_nothing_is_written(project, repo_root, tmp_path):
    res = cli("tasks", "import-harbor", str(repo_root / "tests" / "data" / "harbor-refused"), "--out",
              str(tmp_path / "tasks"), "--images", str(project / "images"), *BASES, cwd=repo_root, check=1)
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("refused ")]
    expected = {
        "allowlist": "no allowlist network policy", "base-image-absent": "the engine does not have this image",
        "compose": "multi-service compose", "gpus": "no GPU", "multi-step": "multi-step task",
        "no-workdir": "no working directory", "prebuilt-image-absent": "the engine does not have this image",
        "run-as-user": "unprivileged sandbox user", "separate-verifier-image": "only docker_image",
        "unknown-field": "not a field trialbox knows", "windows": "Linux containers"}
    by_task = {name: [line for line in lines if line.startswith(f"refused {name}: ")] for name in expected}
    for name, words in expected.items():
        assert len(by_task[name]) == 1 and words in by_task[name][0], (name, res.stderr)
    assert len(lines) == len(expected)
    assert "imported 0 of 11 Harbor task(s)" in res.stdout and "11 refused" in res.stdout
    assert not (tmp_path / "tasks").exists() or not any((tmp_path / "tasks").iterdir())
    assert not (tmp_path / "graders").exists() or not any((tmp_path / "graders").iterdir())


def test_check_run_report_lock_and_atif_of_imported_tasks(imported, project, repo_root, tmp_path):
    import jsonschema

    manifest = project / "examples" / "harbor.yaml"
    checked = cli("tasks", "check", str(manifest), cwd=repo_root, check=0)
    assert "task set ok: 2 of 2 task(s) ok" in checked.stdout
    run = tmp_path / "run"
    cli("run", str(manifest), "--out", str(run), cwd=repo_root, check=0)
    got = outcomes(run)
    assert {t: o for t, o in got.items() if "/oracle/" in t} == {f"{t}/oracle/{i}": "accepted"
                                                               for t in ("fix-median", "word-report") for i in (0, 1)}
    assert all(o == "rejected" for t, o in got.items() if "/nop/" in t) and len(got) == 8
    lock = json.loads((run / "lock.json").read_text())
    task = yaml.safe_load((project / "runs/harbor/tasks/fix-median/task.yaml").read_text())
    assert lock["tasks"]["fix-median"]["origin"]["digest"] == task["origin"]["digest"]
    assert lock["task_checks"] == {"fix-median": "passed", "word-report": "passed"}
    report = json.loads(cli("report", str(run), "--json", cwd=repo_root, check=0).stdout)
    jsonschema.validate(report, json.loads((repo_root / "schemas/report.schema.json").read_text()),
                        cls=jsonschema.Draft202012Validator)
    assert report["candidates"]["oracle"]["n_accepted"] == 4 and report["candidates"]["nop"]["n_accepted"] == 0
    assert set(report["candidates"]["oracle"]["per_task"]) == {"fix-median", "word-report"}
    cli("report", str(run), "--html", str(tmp_path / "r.html"), cwd=repo_root, check=0)
    assert "word-report" in (tmp_path / "r.html").read_text()
    shown = cli("show", str(run), "word-report/nop/0", cwd=repo_root, check=0).stdout
    assert "[FAIL] reward (critical)" in shown and '"source": "reward.json"' in shown
    shown = cli("show", str(run), "fix-median/oracle/0", cwd=repo_root, check=0).stdout
    assert '"unfinished": []' in shown and '"passed": 3' in shown  # the witness saw pytest's session end
    cli("export", str(run), "--format", "atif", "--out", str(tmp_path / "atif"), cwd=repo_root, check=0)
    schema = json.loads((repo_root / "schemas/atif-v1.4.schema.json").read_text())
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "atif").glob("*.json"))]
    assert len(docs) == 8
    for doc in docs:
        jsonschema.validate(doc, schema)


HONEST = ("def mean(v):\n    return sum(v) / len(v)\n\n\ndef median(v):\n    s = sorted(v)\n    m = len(s) // 2\n"
          "    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2\n")
DAEMON = ("import os as _os, time as _t\ndef _daemon(action):\n    if _os.fork():\n        return\n    _os.setsid()\n"
          "    if _os.fork():\n        _os._exit(0)\n    try:\n        action()\n    finally:\n        _os._exit(0)\n")
PASS_ALL = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    rep = (yield).get_result()\n    rep.outcome, rep.longrepr = 'passed', None\n")
EXIT0 = "import os\nif os.path.isdir('/logs/verifier'):\n    os._exit(0)\n"
REWRITE_FN = ("def _rewrite():\n    end = _t.time() + 30\n    while _t.time() < end:\n        try:\n"
              "            if open('/logs/verifier/reward.txt').read().strip() == '0':\n"
              "                open('/logs/verifier/reward.txt', 'w').write('1')\n        except OSError:\n"
              "            pass\n        _t.sleep(0.001)\n")
REWRITE = REWRITE_FN.replace("def _rewrite():\n", "")
FAKE_SESSION = ("def _fake_session(fake):\n    import json, socket\n"
                "    start = {'event': 'start', 'depth': 0, 'pid': fake}\n"
                "    fin = {'event': 'finish', 'depth': 0, 'pid': fake, 'exitstatus': 0, 'counts': {'passed': 3}}\n"
                "    try:\n        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                "        s.connect(_os.environ['TRIALBOX_WITNESS'])\n        s.recv(16)\n"
                "        s.send(json.dumps(start).encode())\n        s.send(json.dumps(fin).encode())\n"
                "    except (OSError, KeyError):\n        pass\n    try:\n"
                "        with open('/tmp/.trialbox-witness.jsonl', 'a') as f:\n"
                "            f.write(json.dumps(start) + '\\n' + json.dumps(fin) + '\\n')\n    except OSError:\n"
                "        pass\n")
AGENTS = {
    # the fix, done honestly: accepted; and with a folder named like a module the tests load, that is no module
    "honest": [{"write_file": {"path": "stats/__init__.py", "content": HONEST}}],
    "honest_json": [{"write_file": {"path": "stats/__init__.py", "content": HONEST}},
                    {"write_file": {"path": "json/example.json", "content": "{}"}}],
    # a pytest plugin by entry point in the workspace, forcing every report to passed
    "distinfo": [{"write_file": {"path": "h-1.0.dist-info/METADATA", "content": "Metadata-Version: 2.1\nName: h\n"
                                                                               "Version: 1.0\n"}},
                 {"write_file": {"path": "h-1.0.dist-info/entry_points.txt", "content": "[pytest11]\nh = stats.h\n"}},
                 {"write_file": {"path": "stats/h.py", "content":
                                 "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, "
                                 "call):\n    rep = (yield).get_result()\n    rep.outcome, rep.longrepr = 'passed', None\n"}}],
    # a sourceless pytest.pyc that exits 0 (bytecode is never copied into the grader)
    "pyc": [{"bash": {"command": "printf 'import sys\\nsys.exit(0)\\n' > /tmp/p.py && python3 -c \"import py_compile; "
                                 "py_compile.compile('/tmp/p.py', cfile='pytest.pyc', doraise=True)\""}}],
    # a daemon the code under test starts turns the script's 0 into 1 within a millisecond, before the script ends
    "rewrite": [{"write_file": {"path": "stats/__init__.py", "content":
                 "def mean(v):\n    return 0\ndef median(v):\n    return 0\n" + DAEMON +
                 "def _watch():\n    end = _t.time() + 30\n    while _t.time() < end:\n        try:\n"
                 "            if open('/logs/verifier/reward.txt').read().strip() == '0':\n"
                 "                open('/logs/verifier/reward.txt', 'w').write('1')\n        except OSError:\n"
                 "            pass\n        _t.sleep(0.001)\nif _os.path.isdir('/logs/verifier'):\n    _daemon(_watch)\n"}}],
    # the witness's channel removed or its server killed (neither is the sandbox user's to do), then pytest ended
    # before any test ran
    "rmwitness": [{"write_file": {"path": "stats/__init__.py", "content":
                   "import os, glob, signal\nif os.path.isdir('/logs/verifier'):\n"
                   "    for p in glob.glob('/dev/shm/.trialbox-witness-*/*') + ['/tmp/.trialbox-witness.jsonl']:\n"
                   "        try:\n            os.remove(p)\n        except OSError:\n            pass\n"
                   "        try:\n            os.kill(int(open(p).read()), signal.SIGKILL)\n"
                   "        except (OSError, ValueError):\n            pass\n    os._exit(0)\n"}}],
    # python -m pytest in /app would import the agent's pytest.py, which exits 0 without running a test
    "shadow": [{"write_file": {"path": "pytest.py", "content": "import sys\nsys.exit(0)\n"}}],
    # a process left behind writes the reward after the script has written 0 (every process is killed first)
    "late": [{"write_file": {"path": "stats/__init__.py", "content":
              "import os, subprocess\nif os.path.isdir('/logs/verifier'):\n    subprocess.Popen(['sh', '-c', "
              "'sleep 0.2; echo 1 > /logs/verifier/reward.txt'], start_new_session=True)\n"
              "def mean(v):\n    return 0\ndef median(v):\n    return 0\n"}}],
    # the code under test writes the reward and kills the script before its verdict
    "kill": [{"write_file": {"path": "stats/__init__.py", "content":
              "import os, signal\nif os.path.isdir('/logs/verifier'):\n    open('/logs/verifier/reward.txt', 'w')"
              ".write('1')\n    os.killpg(os.getpgrp(), signal.SIGKILL)\ndef median(v):\n    return 0\n"}}],
    # ... or ends pytest cleanly before any test ran (pytest exits 0, the script writes 1)
    "exit0": [{"write_file": {"path": "stats/__init__.py", "content":
               "import os\nif os.path.isdir('/logs/verifier'):\n    os._exit(0)\ndef median(v):\n    return 0\n"}}],
    # --- issue 23, item 4 ---
    # honest: submodules named like standard modules inside the package, and a data folder named like one
    "honest_submodules": [{"write_file": {"path": "stats/__init__.py", "content": HONEST + "from . import json\n"}},
                          {"write_file": {"path": "stats/json.py", "content": "import json as _j\ndumps = _j.dumps\n"}},
                          {"write_file": {"path": "stats/types.py", "content": "Number = float\n"}},
                          {"write_file": {"path": "xml/README.txt", "content": "notes\n"}}],
    # a pytest11 entry point in metadata folders named in another case, or .egg-info: importlib.metadata reads them
    "distinfo_case": [{"write_file": {"path": "H-1.0.Dist-Info/METADATA", "content": "Metadata-Version: 2.1\nName: "
                                                                                     "h\nVersion: 1.0\n"}},
                      {"write_file": {"path": "H-1.0.Dist-Info/entry_points.txt", "content": "[pytest11]\nh = stats.h\n"}},
                      {"write_file": {"path": "stats/h.py", "content": PASS_ALL}}],
    "egginfo": [{"write_file": {"path": "h.egg-info/PKG-INFO", "content": "Metadata-Version: 1.0\nName: h\n"}},
                {"write_file": {"path": "h.egg-info/entry_points.txt", "content": "[pytest11]\nh = stats.h\n"}},
                {"write_file": {"path": "stats/h.py", "content": PASS_ALL}}],
    "egginfo_case": [{"write_file": {"path": "h.EGG-INFO/PKG-INFO", "content": "Metadata-Version: 1.0\nName: h\n"}},
                     {"write_file": {"path": "h.EGG-INFO/entry_points.txt", "content": "[pytest11]\nh = stats.h\n"}},
                     {"write_file": {"path": "stats/h.py", "content": PASS_ALL}}],
    # top-level modules named like standard modules pytest imports: lazily, after `import pytest` (xml: junitxml,
    # pdb and code: the debugging plugin), or at once (json, tempfile, difflib); each ends pytest with 0 before
    # any session starts
    **{f"shadow_{name}": [{"write_file": {"path": path, "content": EXIT0}}]
       for name, path in (("xml", "xml/__init__.py"), ("pdb", "pdb.py"), ("code", "code.py"),
                          ("json", "json/__init__.py"), ("tempfile", "tempfile.py"), ("difflib", "difflib.py"))},
    # a module of the agent's loaded in the witness's place (the workspace comes first on the path), then pytest ended
    "shadow_witness": [{"write_file": {"path": "trialbox_witness.py", "content": "\n"}},
                       {"write_file": {"path": "stats/__init__.py", "content": EXIT0}}],
    # forging the witness's record from the code under test: the old record file, then ending pytest at once
    "forge_file": [{"write_file": {"path": "stats/__init__.py", "content":
                   "import json, os\nif os.path.isdir('/logs/verifier'):\n    try:\n"
                   "        with open('/tmp/.trialbox-witness.jsonl', 'a') as f:\n"
                   "            f.write(json.dumps({'event': 'finish', 'pid': os.getpid(), 'exitstatus': 0, "
                   "'counts': {'passed': 3}}) + '\\n')\n    except OSError:\n        pass\n    os._exit(0)\n"}}],
    # ... a forked child sending the session's clean finish on the witness's own channel (and the old file)
    "forge_child": [{"write_file": {"path": "stats/__init__.py", "content":
                    "import json, os, sys\nif os.path.isdir('/logs/verifier'):\n    pid = os.getpid()\n"
                    "    fin = {'event': 'finish', 'depth': 0, 'pid': pid, 'exitstatus': 0, 'counts': {'passed': 3}}\n"
                    "    if os.fork() == 0:\n        w = sys.modules.get('trialbox_witness')\n"
                    "        for s in getattr(w, '_SOCK', []):\n            s.send(json.dumps(fin).encode())\n"
                    "        try:\n            open('/tmp/.trialbox-witness.jsonl', 'a').write(json.dumps(fin) + '\\n')\n"
                    "        except OSError:\n            pass\n        os._exit(0)\n    os.wait()\n    os._exit(0)\n"}}],
    # ... a detached process claiming a clean session of its own, on the channel and in the old file, while the
    # reward is turned from 0 into 1
    "forge_daemon": [{"write_file": {"path": "stats/__init__.py", "content":
                     "def mean(v):\n    return 0\ndef median(v):\n    return 0\n" + DAEMON + FAKE_SESSION +
                     "def _watch():\n    _fake_session(99999)\n" + REWRITE + "if _os.path.isdir('/logs/verifier'):\n"
                     "    _daemon(_watch)\n"}}],
    # ... a real pytest session, on a passing test of its own, run from inside the tests, and the reward rewritten
    "forge_session": [{"write_file": {"path": "stats/__init__.py", "content":
                      "def mean(v):\n    return 0\ndef median(v):\n    return 0\n" + DAEMON + REWRITE_FN +
                      "if _os.path.isdir('/logs/verifier') and not _os.environ.get('NESTED'):\n"
                      "    import subprocess, sys\n    open('/tmp/test_fake.py', 'w').write('def test_a():\\n    pass\\n')\n"
                      "    subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "
                      "'/tmp/test_fake.py'], env={**_os.environ, 'NESTED': '1'}, cwd='/tmp')\n"
                      "    _daemon(_rewrite)\n"}}],
    # ... the pytest process replaced (same pid) by a pytest session on a passing test of its own
    "forge_exec": [{"write_file": {"path": "stats/__init__.py", "content":
                   "import os, sys\nif os.path.isdir('/logs/verifier'):\n"
                   "    open('/tmp/test_fake.py', 'w').write('def test_a():\\n    pass\\n')\n    os.chdir('/tmp')\n"
                   "    os.execv(sys.executable, [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "
                   "'/tmp/test_fake.py'])\n"}}],
    # the stated limit: code inside the pytest process sends its own session's clean finish on the witness's
    # channel, then ends pytest before any test ran (accepted: see grading/script.py)
    "limit_inprocess": [{"write_file": {"path": "stats/__init__.py", "content":
                        "import json, os, sys\nif os.path.isdir('/logs/verifier'):\n"
                        "    for s in getattr(sys.modules.get('trialbox_witness'), '_SOCK', []):\n"
                        "        s.send(json.dumps({'event': 'finish', 'depth': 0, 'exitstatus': 0, "
                        "'counts': {'passed': 3}}).encode())\n    os._exit(0)\n"}}],
    # a reward planted in the workspace, and links towards the grader's folders
    "plant": [{"bash": {"command": "mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt && "
                                   "ln -s /logs/verifier/reward.txt reward.txt && ln -s ../tests/test.sh t.sh"}}],
    # the held-out tests and the solution are nowhere in the agent's sandbox
    "look": [{"bash": {"command": "ls /tests /solution /logs 2>&1; grep -rl 'test_even_length\\|middle - 1' /app "
                                  "/tmp /home /opt /root /srv /mnt /var 2>/dev/null; exit 0"}}],
}


def run_script_agents(project: Path, repo_root: Path, out: Path, agents: dict, tmp_path: Path) -> Path:
    """One trial of the imported fix-median (under ``out``) per script agent (name: its steps, then a submit);
    the run folder."""
    for name, steps in agents.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"steps": [*steps, {"submit": {"summary": "done"}}]}))
    fix_median_manifest(project, out, [{"name": n, "agent": "script", "script": f"{n}.yaml"} for n in agents],
                        tmp_path / "m.yaml")
    run = tmp_path / "run"
    cli("run", str(tmp_path / "m.yaml"), "--out", str(run), "--unchecked", cwd=repo_root, check=0)
    return run


def test_the_script_grader_against_agents_that_do_not_do_the_work(imported, project, repo_root, tmp_path):
    out, _ = imported
    run = run_script_agents(project, repo_root, out, AGENTS, tmp_path)
    got = outcomes(run)
    assert got == {f"fix-median/{n}/0": "accepted" if n.startswith(("honest", "limit_")) else "rejected"
                   for n in AGENTS}, got

    def shown(name: str) -> str:
        return cli("show", str(run), f"fix-median/{name}/0", cwd=repo_root, check=0).stdout

    integrity = "[FAIL] grader_integrity (critical)"
    assert "the name of a module the environment's Python can import" in shown("shadow")
    late = shown("late")  # its writer is killed when the script ends, or, when it wrote first (it races the script's
    # end: 0.2 s after the import), the witness contradicts the reward: rejected either way
    assert "[FAIL] reward (critical)" in late or "no pytest session of the test script passed" in late, late
    assert "the test script was killed (exit 137)" in shown("kill")
    assert "started and never finished" in shown("exit0")
    assert '"protected_changed": ["h-1.0.dist-info/entry_points.txt"]' in shown("distinfo")
    assert '"value": 0.0' in shown("pyc")
    assert "no pytest session of the test script passed" in shown("rewrite")
    assert "started and never finished" in shown("rmwitness")
    for name, path in (("distinfo_case", "H-1.0.Dist-Info"), ("egginfo", "h.egg-info"), ("egginfo_case", "h.EGG-INFO")):
        text = shown(name)
        assert integrity in text and f"{path}/entry_points.txt: the agent added or changed a pytest11 entry point" \
            in text, (name, text)
    for name in ("xml", "pdb", "code", "json", "tempfile", "difflib"):
        text = shown(f"shadow_{name}")
        assert integrity in text and f"{name}: the agent added or changed an importable module in /app with the name " \
            "of a module the environment's Python can import" in text, (name, text)
    assert "trialbox_witness: the agent added or changed an importable module in /app" in shown("shadow_witness")
    for name, words in (("forge_file", "started and never finished"), ("forge_exec", "started and never finished"),
                        ("forge_child", "sent messages on the witness's channel of the pytest session"),
                        ("forge_daemon", "no pytest session of the test script passed"),
                        ("forge_session", "no pytest session of the test script passed")):
        text = shown(name)
        assert integrity in text and words in text, (name, text)
    assert '"not_the_scripts": 1' in shown("forge_daemon") and '"not_the_scripts": 1' in shown("forge_session")
    assert '"unfinished": []' in shown("honest_submodules") and '"passed": 3' in shown("honest_submodules")
    plant = shown("plant")
    assert "[FAIL] reward (critical)" in plant and "symlinks_leaving_workspace" in plant
    assert "reward.txt -> /logs/verifier/reward.txt" in plant and "t.sh -> ../tests/test.sh" in plant
    look = (run / "trials" / "fix-median-look-0" / "a1" / "events.jsonl").read_text()
    assert "No such file or directory" in look and "test_outputs.py" not in look and "solve.sh" not in look


def test_the_built_in_agent_works_in_the_tasks_workdir(imported, project, repo_root, tmp_path):
    """A model's relative paths and its commands land in the task's working directory (/app), and the tools it is
    given name that directory."""
    out, _ = imported
    script = {"scripts": {"hb-key#fix-median": [
        {"content": [{"type": "tool_use", "name": "read_file", "input": {"path": "stats/__init__.py"}}]},
        {"content": [{"type": "tool_use", "name": "write_file", "input": {"path": "stats/__init__.py",
                                                                           "content": HONEST}}]},
        {"content": [{"type": "tool_use", "name": "bash", "input": {"command": "pwd && python3 -c 'import stats; "
                                                                              "print(stats.median([1, 2, 3, 4]))'"}}]},
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "median fixed"}}]}]}}
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(script))
    fix_median_manifest(project, out, [{"name": "claude", "agent": "claude", "model_snapshot": "scripted-model-1"}],
                        tmp_path / "m.yaml")
    run = tmp_path / "run"
    cli("run", str(tmp_path / "m.yaml"), "--out", str(run), "--unchecked", "--scripted-model",
        str(tmp_path / "model.yaml"), cwd=repo_root, check=0, env={"ANTHROPIC_API_KEY": "hb-key"})
    assert outcomes(run) == {"fix-median/claude/0": "accepted"}
    events = [json.loads(line) for line in (run / "trials/fix-median-claude-0/a1/events.jsonl").read_text().splitlines()]
    tools = [e for e in events if e.get("kind") == "tool"]
    assert [e["tool"] for e in tools] == ["read_file", "write_file", "bash", "submit"]
    assert "ordered[len(ordered) // 2]" in tools[0]["output"]  # the original file, read from /app
    assert "to /app/stats/__init__.py" in tools[1]["output"] and "/app\n2.5" in tools[2]["output"]
    assert len([e for e in events if e.get("kind") == "model_call"]) == 4


def test_tasks_check_names_a_broken_solution_script_and_keeps_its_trials(imported, project, repo_root, tmp_path):
    import shutil

    out, _ = imported
    for kind in ("tasks", "graders"):
        shutil.copytree(out / kind / "fix-median", tmp_path / kind / "fix-median", symlinks=True)
    (tmp_path / "graders/fix-median/solution/solve.sh").write_text("#!/bin/bash\necho 'cannot find golden.py' >&2\n"
                                                                   "exit 2\n")
    manifest = yaml.safe_load((project / "examples" / "harbor.yaml").read_text())
    manifest["tasks"] = {"path": str(tmp_path / "tasks"), "graders": str(tmp_path / "graders"),
                         "images": str(project / "images"), "select": ["fix-median"]}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(manifest))
    res = cli("tasks", "check", str(tmp_path / "m.yaml"), "--replicates", "1", cwd=repo_root, check=1)
    assert "the solution script exited 2: [stderr] cannot find golden.py" in res.stdout, res.stdout
    kept = [line.split("kept in ", 1)[1].strip() for line in res.stdout.splitlines() if "are kept in" in line]
    assert kept and list(Path(kept[0]).rglob("grader.log")), res.stdout


MORE = Path(__file__).resolve().parents[1] / "data" / "harbor-more"


def _more_manifest(project: Path, out: Path, path: Path) -> Path:
    manifest = yaml.safe_load((project / "examples" / "harbor.yaml").read_text())
    manifest["tasks"] = {"path": str(out / "tasks"), "graders": str(out / "graders"),
                         "images": str(project / "images"),
                         "select": ["serve-ready", "scored-report", "checked-apart"]}
    manifest["execution"]["trials_per_task"] = 1
    manifest["analysis"]["k"] = [1]
    path.write_text(yaml.safe_dump(manifest))
    return path


def test_multi_reward_acceptance_survives_reimport_and_a_hanging_untouched_run_fails_before(project, repo_root,
                                                                                            tmp_path):
    """Issue 28's format items, as `harbor init` and current Harbor write tasks: empty ``artifacts``/``collect``
    import; a ``reward.json`` without ``reward`` is refused by `tasks check` with the way to declare it; the
    acceptance declared at import (``--acceptance``) survives a re-import without it; each reward metric is a
    figure of the report. A test script that hangs on the untouched environment fails before at the cost of one
    timeout: `tasks check` says so, and a run's nop is rejected (the agent's failure), never an infrastructure
    error."""
    out = tmp_path / "imported"
    common = ["--out", str(out / "tasks"), "--images", str(project / "images"),
              "--base-image", "debian:bookworm-slim=base"]
    res = cli("tasks", "import-harbor", str(MORE), *common, cwd=repo_root, check=0)
    assert "imported 3 of 3 Harbor task(s)" in res.stdout, res.stdout + res.stderr
    assert "verifier: separate, in its own image (tests/Dockerfile)" in res.stdout
    assert yaml.safe_load((out / "graders" / "checked-apart" / "grader.yaml").read_text())["image"] == "verifier"
    assert (out / "graders" / "checked-apart" / "verifier" / "expected.txt").is_file()  # tests/ is its context
    assert not list((out / "tasks" / "checked-apart").rglob("expected.txt"))
    manifest = _more_manifest(project, out, tmp_path / "m.yaml")
    res = cli("tasks", "check", str(manifest), "--replicates", "1", cwd=repo_root, check=1)
    assert "has no metric 'reward'" in res.stdout and "--acceptance" in res.stdout, res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("serve-ready"))
    assert " ok " in line and "the untouched environment timed out (15s): counted as failing before" in line, line
    cli("tasks", "import-harbor", str(MORE / "scored-report"), *common, "--force", "--acceptance",
        "correctness>=1,style>=1", cwd=repo_root, check=0)
    again = cli("tasks", "import-harbor", str(MORE / "scored-report"), *common, "--force", cwd=repo_root, check=0)
    assert "acceptance 'correctness>=1,style>=1' kept from the grader folder this import replaces" in again.stdout
    grader = yaml.safe_load((out / "graders" / "scored-report" / "grader.yaml").read_text())
    assert grader["acceptance"] == "correctness>=1,style>=1"
    bad = cli("tasks", "import-harbor", str(MORE / "scored-report"), *common, "--force", "--acceptance", "style=1",
              cwd=repo_root, check=1)
    assert "--acceptance: expected METRIC>=NUMBER" in bad.stderr and "Traceback" not in bad.stderr
    res = cli("tasks", "check", str(manifest), "--replicates", "1", cwd=repo_root, check=0)
    assert "task set ok: 3 of 3" in res.stdout, res.stdout  # checked-apart's checker exists in its verifier only
    run = tmp_path / "run"
    cli("run", str(manifest), "--out", str(run), cwd=repo_root, check=0)
    assert outcomes(run) == {"scored-report/nop/0": "rejected", "scored-report/oracle/0": "accepted",
                             "serve-ready/nop/0": "rejected", "serve-ready/oracle/0": "accepted",
                             "checked-apart/nop/0": "rejected", "checked-apart/oracle/0": "accepted"}
    lock = json.loads((run / "lock.json").read_text())
    assert lock["untouched_timeouts"] == ["serve-ready"]
    verifier = lock["images"]["checked-apart:grader:verifier"]["image_id"]
    environment = lock["images"][lock["tasks"]["checked-apart"]["image"]]["image_id"]
    assert verifier.startswith("sha256:") and verifier != environment
    oracle = json.loads(sqlite3.connect(run / "results.sqlite").execute(
        "SELECT result FROM trials WHERE id = 'checked-apart/oracle/0'").fetchone()[0])
    assert oracle["grader_image_id"] == verifier and oracle["image_id"] == environment
    shown = cli("show", str(run), "serve-ready/nop/0", cwd=repo_root, check=0).stdout
    assert '"timed_out": true' in shown and "as it does on the untouched environment" in shown, shown
    report = json.loads(cli("report", str(run), "--json", cwd=repo_root, check=0).stdout)
    rewards = report["candidates"]["oracle"]["rewards"]
    assert rewards["correctness"]["value"] == 1.0 and rewards["style"]["value"] == 1.0, rewards
    assert report["candidates"]["nop"]["rewards"]["correctness"]["value"] == 0.0
