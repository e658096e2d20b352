"""The script grader: a task's own test script, run in a fresh grader container, deciding by the reward it writes.

This is the verifier contract of Harbor tasks (``tests/test.sh`` writing ``reward.txt`` or ``reward.json``),
run under trialbox's rules. Into a new sandbox from the task's environment image (no network, the grader's
limits, the task's environment variables) go the final workspace at the task's ``workdir``, without the
bytecode and test caches any run leaves (``diff.is_artifact``: a planted ``.pyc`` would otherwise run in place
of its source), and, at grading time only, the grader folder's ``tests``, mounted read-only at ``tests_mount``
(outside the workspace: nothing that runs in the grader can change them); the reward folder is a scratch folder
created empty. The script runs with bash as the sandbox's unprivileged user, in the workspace, with the
grader's ``env``, within the grader's time limit. When it exits, **every process left in the container is
killed** before anything is read, so nothing the script started can write the reward late or swap it between
its check and its read. The reward is read by trialbox: ``reward.txt`` (one number, the metric ``reward``) or
else ``reward.json`` (an object of named numbers), each a regular file (never a symbolic link), small, and
parsing as the contract says; accepted exactly when the grader's ``acceptance`` holds.

Cross-checks (each failure an integrity problem of the trial, a rejection):

* the reward folder is empty when the script starts (it is new: nothing the agent wrote can be there);
* the script was not killed by a signal after a passing reward was written (code under test that writes the
  reward and then kills the script before the script's own verdict);
* nothing the agent added or changed replaces what the script runs: an importable module at the workspace's
  top level (``name.py``, ``name/__init__.py``, ``name*.so``) named like a module the environment's Python
  loads to run pytest (``pytest``, ``_pytest``, ``unittest``, the standard modules loaded at start-up:
  ``python -m pytest`` in the workspace would import the agent's), or an executable in a folder of the
  script's ``PATH`` that lies inside the workspace;
* the pytest sessions the script ran (``grader_tools/witness``, a plugin made discoverable on the script's
  Python path, appends each session's start and end to a record outside the workspace that trialbox opens
  with a random header): with a passing reward, the record must still carry its header, every session that
  started must have finished, and at least one must have finished with every test passing. A script that runs
  pytest another way loads no witness, and then nothing of this is checked.

What cannot be checked, and the pytest grader can: the script's test runner runs the code under test in its
own process, as the same user, so that code can write the reward itself and forge the witness's record
consistently (it can read this code); there is no tripwire and no second result channel that code cannot
reach. The scope criterion still rejects the planted files that usually carry such tampering (``conftest.py``,
``sitecustomize.py``, ``.pth`` files, pytest configuration, a ``pytest11`` entry point in a ``.dist-info``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
import re
import secrets
import time
import uuid

from ..engine import ROLE_LABEL
from ..errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError
from ..sandbox.base import READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec, home_for, remove_and_meter
from ..sandbox.dockerexec import SYSTEM_PATH
from ..sandbox.meter import Usage
from ..stageclock import lap
from ..tasks import Task
from ..textsafe import path_bytes
from .diff import is_artifact
from .runner import TOOLS, TOOLS_MOUNT, GraderLimits, TestRun
from .tree import Tree

MAX_REWARD_BYTES = 64 << 10
MAX_WITNESS_BYTES = 1 << 20
WITNESS = "/tmp/.trialbox-witness.jsonl"
RUN_SCRIPT = 'PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$1" exec bash "$2"'
"""The test script, with the witness's folder appended (last) to whatever Python path the environment has."""
READ_REGULAR = ('[ -L "$1" ] && { echo link; exit 0; }; [ -e "$1" ] || { echo absent; exit 0; }; '
                '[ -f "$1" ] || { echo other; exit 0; }; n=$(wc -c < "$1") || exit 3; echo "file $n"; '
                'exec cat -- "$1"')
IMPORTABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.py|/__init__\.py|(?:\.[^/]*)?\.so)$")
PROBE = """
import json, sys
root = sys.argv[1]
sys.path = [p for p in sys.path if p and p != root and not p.startswith(root + "/")]
try:
    import pytest  # noqa: F401  (what running the tests loads)
except Exception:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} | {"pytest", "_pytest", "unittest"})))
"""


def parse_reward(name: str, data: bytes) -> dict[str, float]:
    """The metrics of a reward file; ``ValueError`` naming what is wrong."""
    try:
        text = data.decode("utf-8", errors="strict").strip()
        if name == "reward.txt":
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(f"reward.txt holds {text[:40]!r}, not a finite number")
            return {"reward": value}
        doc = json.loads(text)
        if not isinstance(doc, dict) or not doc:
            raise ValueError("reward.json is not a non-empty JSON object of named numbers")
        out = {}
        for key, value in doc.items():
            if type(value) not in (int, float) or not math.isfinite(value):
                raise ValueError(f"reward.json: {str(key)[:40]!r} is {str(value)[:40]!r}, not a finite number")
            out[str(key)] = float(value)
        return out
    except (UnicodeDecodeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"{name} cannot be read as numbers: {type(exc).__name__}") from exc


def changed_paths(tree: Tree, original: Tree | None) -> list[str]:
    """Paths of ``tree`` that the original does not have with the same content (added or changed)."""
    if original is None:
        return []
    out = [p for p, b in tree.files.items() if original.files.get(p) != b or p in original.symlinks]
    out += [p for p, t in tree.symlinks.items() if original.symlinks.get(p) != t]
    return sorted(out)


def without_artifacts(tree: Tree) -> Tree:
    """``tree`` without bytecode and test caches (never graded; a planted ``.pyc`` would run in place of its source)."""
    return dataclasses.replace(tree, files={p: b for p, b in tree.files.items() if not is_artifact(p)},
                               symlinks={p: t for p, t in tree.symlinks.items() if not is_artifact(p)},
                               executable={p for p in tree.executable if not is_artifact(p)})


def for_grading(tree: Tree) -> tuple[Tree, list[str]]:
    """What of ``tree`` goes into the script grader's workspace: no bytecode or test caches, and no path longer
    than the engine can create there (``compose.MAX_GRADER_PATH``, as for the pytest grader); and what was left
    out (the ``evaluator_tampering_attempts`` evidence names it: never used by a test)."""
    from .compose import MAX_GRADER_PATH

    long = {p for p in [*tree.files, *tree.symlinks, *tree.dirs] if len(path_bytes(p)) > MAX_GRADER_PATH}
    kept = without_artifacts(tree)
    ignored = sorted(long | (set(tree.files) - set(kept.files)) | (set(tree.symlinks) - set(kept.symlinks)))
    if not long:
        return kept, ignored
    return dataclasses.replace(kept, files={p: b for p, b in kept.files.items() if p not in long},
                               symlinks={p: t for p, t in kept.symlinks.items() if p not in long},
                               executable=kept.executable - long,
                               dirs={d for d in kept.dirs if len(path_bytes(d)) <= MAX_GRADER_PATH}), ignored


def replaced_runners(tree: Tree, workdir: str, changed: list[str], path_env: str, loaded: set[str]) -> list[str]:
    """What of the agent's changes would run in place of the script's own tools (see the module docstring)."""
    out = []
    root = workdir.rstrip("/")
    for d in dict.fromkeys(x.rstrip("/") or "/" for x in path_env.split(":")):
        if d != root and not d.startswith(root + "/"):
            continue
        rel = d[len(root) + 1:]
        hits = [p for p in changed if posixpath.dirname(p) == rel and (p in tree.executable or p in tree.symlinks)]
        out += [f"{p}: an executable added or changed in {d}, a folder of the test script's PATH (it would run in "
                f"place of a command)" for p in hits]
    names = {m.group(1) for p in changed if (m := IMPORTABLE.match(p))}
    out += [f"{t}: the agent added or changed an importable module at the workspace's top level with the name of a "
            f"module the environment's Python loads to run the tests (it would be imported in its place)"
            for t in sorted(names & loaded)]
    return out


def _probe(sandbox: Sandbox, workdir: str) -> tuple[str, set[str]]:
    """The script's PATH and the modules its Python loads to run pytest (none when it has no python3)."""
    res = sandbox.exec(["sh", "-c", 'printf "%s\\n" "$PATH"; command -v python3 >/dev/null 2>&1 || exit 0; '
                                    'cd / && exec python3 -I -c "$1" "$2"', "sh", PROBE, workdir], timeout=60)
    lines = res.text().splitlines()
    try:
        loaded = set(json.loads(lines[1])) if len(lines) > 1 else set()
    except ValueError:
        loaded = set()
    return (lines[0] if lines else ""), loaded


def read_regular(sandbox: Sandbox, path: str, max_bytes: int) -> tuple[str, bytes]:
    """(kind, content) of ``path``: ``file`` with its bytes, else ``link``, ``absent`` or ``other``. The type is
    checked in the command that reads it; the engine losing output is retried, ``ValueError`` when too large."""
    for attempt in range(READ_ATTEMPTS):
        try:
            res = sandbox.exec(["sh", "-c", READ_REGULAR, "sh", path], timeout=60, env={"PATH": SYSTEM_PATH})
        except OutputLost:
            continue
        head, newline, body = res.stdout.partition(b"\n")
        words = head.decode(errors="replace").split()
        if res.exit_code == 0 and newline and words and words[0] in ("link", "absent", "other"):
            return words[0], b""
        if res.exit_code == 0 and newline and len(words) == 2 and words[0] == "file" and words[1].isdigit():
            if int(words[1]) > max_bytes:
                raise ValueError(f"{path} is larger than {max_bytes} bytes")
            if len(body) == int(words[1]):
                return "file", body
        time.sleep(0.05 * (attempt + 1))
    raise GraderInfraError("grader_output", f"the engine kept losing the output of reading {path}")


def script_grader_spec(image_id: str, task: Task, limits: GraderLimits, name: str,
                       labels: dict[str, str] | None = None) -> SandboxSpec:
    """The script grader's container: the workspace at the task's workdir, the held-out tests read-only (nothing
    in the grader can change them), the reward folder new."""
    g, workdir = task.grader, task.config.workdir
    return SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", workdir=workdir, home=home_for(workdir),
                       mounts=((str(task.grader_path(g.tests).resolve()), g.tests_mount),  # type: ignore[arg-type]
                               (str(TOOLS), TOOLS_MOUNT)),
                       scratch_dirs=(g.reward_dir,), env=task.runtime.sandbox_env(),
                       labels={**(labels or {}), ROLE_LABEL: "grader"})


def run_script(sandboxes: SandboxFactory, image_id: str, tree: Tree, task: Task, limits: GraderLimits, name: str,
               labels: dict[str, str] | None = None, usage: list[Usage] | None = None,
               original: Tree | None = None, prepared: Sandbox | None = None) -> TestRun:
    """Run the task's test script against ``tree`` in a fresh grader container (see the module docstring);
    ``GraderInfraError`` when the container cannot be set up. What it used is appended to ``usage``. With
    ``original``, the agent's changes (``tree`` against it) are checked for replacing the script's tools."""
    g, workdir = task.grader, task.config.workdir
    timeout = g.timeout_seconds or limits.timeout_s
    sandbox = prepared if prepared is not None else sandboxes(script_grader_spec(image_id, task, limits, name, labels))
    try:
        tree, ignored = for_grading(tree)
    except BaseException:
        sandbox.remove()  # a prepared one is this call's to remove
        raise
    header = json.dumps({"event": "header", "nonce": secrets.token_hex(16)})
    try:
        try:
            sandbox.start()
            sandbox.copy_in(tree.to_tar(), workdir)
            # one exec: what the reward folder holds before the script (nothing), and the witness's record opened
            found = sandbox.exec(["sh", "-c", 'n=$(ls -A -- "$1" | wc -l) && printf "%s\\n" "$2" > "$3" && echo "$n"',
                                  "sh", g.reward_dir, header, WITNESS], timeout=30,
                                 env={"PATH": SYSTEM_PATH}).text().strip()
            if not found.isdigit():
                raise GraderInfraError("grader_setup", f"the reward folder {g.reward_dir} could not be checked, or the "
                                                       f"witness's record opened ({found[-200:]!r})")
            changed = changed_paths(tree, original)
            replaced = replaced_runners(tree, workdir, changed, *_probe(sandbox, workdir)) if changed else []
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        lap("grader_start")
        run = _run(sandbox, task, timeout, header)
        run.ignored = ignored
        lap("grading")
        if found != "0":
            run.integrity.append(f"the reward folder {g.reward_dir} was not empty before the script ran ({found})")
        run.integrity[:0] = replaced
        return run
    finally:
        remove_and_meter(sandbox, usage, "grader_cleanup")


def _run(sandbox: Sandbox, task: Task, timeout: float, header: str) -> TestRun:
    g = task.grader
    run = TestRun()
    script = f"{g.tests_mount.rstrip('/')}/{g.script}"
    try:
        res = sandbox.exec(["sh", "-c", RUN_SCRIPT, "sh", f"{TOOLS_MOUNT}/witness", script], timeout=timeout,
                           env={**g.env, "TRIALBOX_WITNESS": WITNESS})
        run.exit_code, run.timed_out, run.oom = res.exit_code, res.timed_out, res.oom_killed
        run.log_tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-6000:]
        if run.timed_out:  # a run that did not finish proves nothing
            return run
        killed = sandbox.kill_leftovers()  # nothing the script left can write any more
        _read_reward(sandbox, run, task)
        accepted = run.reward is not None and run.reward.get(g.acceptance.metric, -math.inf) >= g.acceptance.at_least
        if accepted and not killed and sandbox.own_pid_namespace:
            run.integrity.append("the processes the test script left could not all be killed before the reward was "
                                 "read: a passing reward cannot be trusted")
        if accepted and (run.exit_code is None or run.exit_code >= 128):
            run.integrity.append(f"the test script was killed (exit {run.exit_code}) after a passing reward was "
                                 "written: the reward did not come from the script's own verdict")
        run.witness = _witness(sandbox, header)
        if accepted:
            run.integrity += witness_problems(run.witness)
    except SandboxBroken as exc:  # the agent's code broke the grader's container: no result, the baseline decides
        run.oom = run.oom or exc.reason == "oom"
        run.reward, run.results_found = None, False
        run.log_tail += f"\ngrader sandbox broke: {exc.message}"
    return run


def witness_summary(text: str, header: str | None = None) -> dict:
    """The witness's records, summarised: sessions started, finished (exit status, outcome counts), unfinished,
    and whether the record still starts with trialbox's ``header``."""
    lines = text.splitlines()
    started: list[int] = []
    finished: dict[int, dict] = {}
    malformed = 0
    for line in lines[1:] if header is not None else lines:
        try:
            rec = json.loads(line)
            pid, event = int(rec["pid"]), rec["event"]
        except (ValueError, KeyError, TypeError, RecursionError):
            malformed += 1
            continue
        if event == "start":
            started.append(pid)
        elif event == "finish":
            finished[pid] = {"exitstatus": rec.get("exitstatus"), "counts": rec.get("counts")}
    out: dict = {"loaded": bool(started), "sessions": len(started),
                 "finished": [finished[p] for p in started if p in finished],
                 "unfinished": [p for p in started if p not in finished]}
    if header is not None:
        out["intact"] = bool(lines) and lines[0] == header
    if malformed:
        out["malformed_lines"] = malformed
    return out


def witness_problems(w: dict) -> list[str]:
    """With a passing reward: what the witness's record contradicts (see the module docstring)."""
    if not w.get("intact", True):
        return ["the pytest witness's record was removed or rewritten during the test run"]
    if not w.get("loaded"):
        return []
    out = []
    if w["unfinished"]:
        out.append(f"{len(w['unfinished'])} pytest session(s) started and never finished (process "
                   f"{w['unfinished'][0]}) although the reward says accepted: the runner was ended from inside the "
                   "tests")
    clean = [f for f in w["finished"] if f.get("exitstatus") == 0 and isinstance(f.get("counts"), dict)
             and f["counts"].get("passed") and not any(f["counts"].get(k) for k in ("failed", "error"))]
    if w["finished"] and not clean:
        out.append(f"no pytest session of the test script passed (exit statuses "
                   f"{[f.get('exitstatus') for f in w['finished']]}) although the reward says accepted")
    return out


def _witness(sandbox: Sandbox, header: str) -> dict:
    try:
        kind, data = read_regular(sandbox, WITNESS, MAX_WITNESS_BYTES)
    except ValueError:
        return {"loaded": True, "intact": False, "note": f"larger than {MAX_WITNESS_BYTES} bytes"}
    if kind != "file":
        return {"loaded": False, "intact": False, "note": f"the record is {kind}"}
    return witness_summary(data.decode("utf-8", errors="replace"), header)


def _read_reward(sandbox: Sandbox, run: TestRun, task: Task) -> None:
    g = task.grader
    for name in ("reward.txt", "reward.json"):  # reward.txt first, as Harbor reads them
        path = f"{g.reward_dir}/{name}"
        try:
            kind, data = read_regular(sandbox, path, MAX_REWARD_BYTES)
        except ValueError as exc:
            run.integrity.append(str(exc))
            run.results_found = True
            return
        if kind == "absent":
            continue
        run.results_found = True
        if kind != "file":
            run.integrity.append(f"{path} is a {kind}, not a regular file")
            return
        run.reward_source = name
        try:
            run.reward = parse_reward(name, data)
        except ValueError as exc:
            run.integrity.append(f"{path} is malformed: {exc}")
            return
        if g.acceptance.metric not in run.reward:
            run.integrity.append(f"{path} has no metric {g.acceptance.metric!r} (it has {sorted(run.reward)[:10]})")
        return
    run.reward_note = f"no reward.txt or reward.json in {g.reward_dir}"
