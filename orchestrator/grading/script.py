"""The script grader: a task's own test script, run in a fresh grader container, deciding by the reward it writes.

This is the verifier contract of Harbor tasks (``tests/test.sh`` writing ``reward.txt`` or ``reward.json``),
run under trialbox's rules. Into a new sandbox from the task's environment image (no network, the grader's
limits, the task's environment variables) go the final workspace, at the task's ``workdir``, and, at grading
time only, the grader folder's ``tests``, mounted read-only at ``tests_mount`` (outside the workspace: nothing
that runs in the grader can change them); the reward folder is a scratch folder created empty. The script runs with bash as the sandbox's unprivileged
user, in the workspace, with the grader's ``env``, within the grader's time limit. The reward is read by
trialbox from the reward folder: ``reward.txt`` (one number, the metric ``reward``) or else ``reward.json``
(an object of named numbers); accepted exactly when the grader's ``acceptance`` holds.

What is checked, beyond the number (each failure an integrity problem of the trial, a rejection):

* the reward folder is empty when the script starts (it is new: nothing the agent wrote can be there);
* the reward file is a regular file, small, and parses as the contract says (never a symbolic link);
* the reward does not change after the script has exited (a process left behind, for example one the code
  under test started, writing it late);
* the script was not killed by a signal after a reward at or above the acceptance was written (code under
  test that writes the reward and then kills the script before the script's own verdict);
* nothing the agent added or changed replaces what the script runs: a file or folder at the workspace's top
  level named like a module the environment's Python loads to run pytest (``pytest.py``, ``_pytest/``,
  ``unittest``, the standard modules loaded at start-up: ``python -m pytest`` in the workspace would run the
  agent's), or a file in a folder of the script's ``PATH`` that lies inside the workspace;
* every pytest session the script ran finished (``grader_tools/witness``: a plugin made discoverable on the
  script's Python path records each session's start and end outside the workspace): a session that started
  and never finished, while the reward says accepted, is code under test that wrote the reward and ended the
  runner (``os._exit``) before any test could fail. A script that runs pytest another way loads no witness,
  and nothing is checked.

What cannot be checked, and the pytest grader can: the script's test runner runs the code under test in its
own process, so that code can write the reward itself, forge the witness's record (it can read this code) and
exit cleanly; there is no tripwire and no second result channel of the script's own. The scope criterion still rejects the planted files that
usually carry such tampering (``conftest.py``, ``sitecustomize.py``, ``.pth`` files).
"""

from __future__ import annotations

import json
import math
import posixpath
import time
import uuid

from ..engine import ROLE_LABEL
from ..errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError
from ..sandbox.base import READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec
from ..sandbox.meter import Usage
from ..tasks import Task
from .runner import TOOLS, TOOLS_MOUNT, GraderLimits, TestRun
from .tree import Tree

MAX_REWARD_BYTES = 64 << 10
WITNESS = "/tmp/.trialbox-witness.jsonl"
RUN_SCRIPT = 'PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$1" exec bash "$2"'
"""The test script, with the witness's folder appended (last) to whatever Python path the environment has."""
SETTLE_S = 0.5
"""How long after the script exits the reward must stay unchanged."""
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
LIST_REWARDS = ('cd "$1" || exit 3; for f in * .[!.]*; do [ -e "$f" ] || [ -L "$f" ] || continue; '
                'if [ -L "$f" ]; then t=link; elif [ -f "$f" ]; then t=file; elif [ -d "$f" ]; then t=dir; '
                'else t=other; fi; printf "%s %s %s\\n" "$t" "$(cksum < "$f" 2>/dev/null | tr " " :)" "$f"; done; '
                'echo end')


def _listing(sandbox: Sandbox, folder: str) -> dict[str, tuple[str, str]]:
    """name → (type, checksum) of what the reward folder holds; the engine losing the output is retried."""
    for attempt in range(READ_ATTEMPTS):
        res = sandbox.exec(["sh", "-c", LIST_REWARDS, "sh", folder], timeout=30)
        lines = res.text().splitlines()
        if res.exit_code == 0 and lines and lines[-1] == "end":
            out = {}
            for line in lines[:-1]:
                kind, _, rest = line.partition(" ")
                checksum, _, name = rest.partition(" ")
                out[name] = (kind, checksum)
            return out
        time.sleep(0.05 * (attempt + 1))
    raise GraderInfraError("grader_output", f"the reward folder {folder} could not be listed")


def parse_reward(name: str, data: bytes) -> dict[str, float]:
    """The metrics of a reward file; ``ValueError`` naming what is wrong."""
    text = data.decode("utf-8", errors="strict").strip()
    if name == "reward.txt":
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"reward.txt holds {text!r}, not a finite number")
        return {"reward": value}
    doc = json.loads(text)
    if not isinstance(doc, dict) or not doc:
        raise ValueError("reward.json is not a non-empty JSON object of named numbers")
    out = {}
    for key, value in doc.items():
        if type(value) not in (int, float) or not math.isfinite(value):
            raise ValueError(f"reward.json: {key!r} is {value!r}, not a finite number")
        out[str(key)] = float(value)
    return out


def changed_paths(tree: Tree, original: Tree | None) -> list[str]:
    """Paths of ``tree`` that the original does not have with the same content (added or changed)."""
    if original is None:
        return []
    out = [p for p, b in tree.files.items() if original.files.get(p) != b or p in original.symlinks]
    out += [p for p, t in tree.symlinks.items() if original.symlinks.get(p) != t]
    return sorted(out)


def _replaced_runners(sandbox: Sandbox, workdir: str, changed: list[str]) -> list[str]:
    """What of the agent's changes would run in place of the script's own tools (see the module docstring)."""
    if not changed:
        return []
    tops = {p.split("/", 1)[0].removesuffix(".py") for p in changed if "/" in p or p.endswith(".py")}
    tops = {t for t in tops if t.isidentifier()}
    res = sandbox.exec(["sh", "-c", 'printf "%s\\n" "$PATH"; command -v python3 >/dev/null 2>&1 || exit 0; '
                                    'cd / && exec python3 -I -c "$1" "$2"', "sh", PROBE, workdir], timeout=60)
    lines = res.text().splitlines()
    out = []
    path_dirs = [d.rstrip("/") for d in (lines[0].split(":") if lines else []) if d.startswith(workdir.rstrip("/") + "/")
                 or d == workdir]
    for d in path_dirs:
        rel = d[len(workdir.rstrip("/")) + 1:]
        hits = [p for p in changed if (posixpath.dirname(p) == rel) or (not rel and "/" not in p)]
        out += [f"{p}: added or changed in {d}, a folder of the test script's PATH (it would run in place of a "
                f"command)" for p in hits]
    if len(lines) > 1:
        try:
            loaded = set(json.loads(lines[1]))
        except ValueError:
            loaded = set()
        out += [f"{t}: the agent's file or folder at the workspace's top level has the name of a module the "
                f"environment's Python loads to run the tests (it would be imported in its place)"
                for t in sorted(tops & loaded)]
    return out


def run_script(sandboxes: SandboxFactory, image_id: str, tree: Tree, task: Task, limits: GraderLimits, name: str,
               labels: dict[str, str] | None = None, usage: list[Usage] | None = None,
               original: Tree | None = None) -> TestRun:
    """Run the task's test script against ``tree`` in a fresh grader container (see the module docstring);
    ``GraderInfraError`` when the container cannot be set up. What it used is appended to ``usage``. With
    ``original``, the agent's changes (``tree`` against it) are checked for replacing the script's tools."""
    g, workdir = task.grader, task.config.workdir
    timeout = g.timeout_seconds or limits.timeout_s
    spec = SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", workdir=workdir,
                       # the held-out tests read-only (nothing in the grader can change them); the reward folder new
                       mounts=((str(task.grader_path(g.tests).resolve()), g.tests_mount),  # type: ignore[arg-type]
                               (str(TOOLS), TOOLS_MOUNT)),
                       scratch_dirs=(g.reward_dir,), env=task.runtime.sandbox_env(),
                       labels={**(labels or {}), ROLE_LABEL: "grader"})
    sandbox = sandboxes(spec)
    try:
        try:
            sandbox.start()
            sandbox.copy_in(tree.to_tar(), workdir)
            before = _listing(sandbox, g.reward_dir)
            replaced = _replaced_runners(sandbox, workdir, changed_paths(tree, original))
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        run = _run(sandbox, task, timeout, before)
        run.integrity[:0] = replaced
        return run
    finally:
        try:
            sandbox.remove()
        finally:
            if usage is not None:
                usage.append(sandbox.resources_used())


def _run(sandbox: Sandbox, task: Task, timeout: float, before: dict[str, tuple[str, str]]) -> TestRun:
    g = task.grader
    run = TestRun()
    if before:
        run.integrity.append(f"the reward folder {g.reward_dir} was not empty before the script ran: {sorted(before)}")
    script = f"{g.tests_mount.rstrip('/')}/{g.script}"
    try:
        res = sandbox.exec(["sh", "-c", RUN_SCRIPT, "sh", f"{TOOLS_MOUNT}/witness", script], timeout=timeout,
                           env={**g.env, "TRIALBOX_WITNESS": WITNESS})
    except SandboxBroken as exc:
        run.oom = exc.reason == "oom"
        run.log_tail = f"grader sandbox broke: {exc.message}"
        return run
    run.exit_code, run.timed_out, run.oom = res.exit_code, res.timed_out, res.oom_killed
    run.log_tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-6000:]
    if run.timed_out:  # a run that did not finish proves nothing
        return run
    after = _listing(sandbox, g.reward_dir)
    time.sleep(SETTLE_S)
    settled = _listing(sandbox, g.reward_dir)
    if settled != after:
        run.integrity.append("the reward changed after the test script had exited: a process it left behind "
                             "wrote it")
    _read_reward(sandbox, run, task, settled)
    accepted = run.reward is not None and run.reward.get(g.acceptance.metric, -math.inf) >= g.acceptance.at_least
    if accepted and (run.exit_code is None or run.exit_code >= 128):
        run.integrity.append(f"the test script was killed (exit {run.exit_code}) after a passing reward was "
                             "written: the reward did not come from the script's own verdict")
    run.witness = _witness(sandbox)
    unfinished = run.witness.get("unfinished") or []
    if accepted and unfinished:
        run.integrity.append(f"{len(unfinished)} pytest session(s) started and never finished (process "
                             f"{unfinished[0]}) although the reward says accepted: the runner was ended from inside "
                             "the tests")
    return run


def witness_summary(text: str) -> dict:
    """The witness's records, summarised: sessions started, finished (exit status, outcome counts), unfinished."""
    started: list[int] = []
    finished: dict[int, dict] = {}
    malformed = 0
    for line in text.splitlines()[:10_000]:
        try:
            rec = json.loads(line)
            pid, event = int(rec["pid"]), rec["event"]
        except (ValueError, KeyError, TypeError):
            malformed += 1
            continue
        if event == "start":
            started.append(pid)
        elif event == "finish":
            finished[pid] = {"exitstatus": rec.get("exitstatus"), "counts": rec.get("counts")}
    out: dict = {"loaded": True, "sessions": len(started), "finished": [finished[p] for p in started if p in finished],
                 "unfinished": [p for p in started if p not in finished]}
    if malformed:
        out["malformed_lines"] = malformed
    return out


def _witness(sandbox: Sandbox) -> dict:
    try:
        data = sandbox.read_file(WITNESS, max_bytes=1 << 20)
    except OutputLost as exc:
        raise GraderInfraError("grader_output", exc.message) from exc
    except (SandboxError, ValueError):
        return {"loaded": False}
    return witness_summary(data.decode("utf-8", errors="replace"))


def _read_reward(sandbox: Sandbox, run: TestRun, task: Task, listing: dict[str, tuple[str, str]]) -> None:
    g = task.grader
    names = [n for n in ("reward.txt", "reward.json") if n in listing]
    if not names:
        run.reward_note = f"no reward.txt or reward.json in {g.reward_dir}"
        return
    name = names[0]  # reward.txt first, as Harbor reads them
    kind = listing[name][0]
    if kind != "file":
        run.integrity.append(f"{g.reward_dir}/{name} is a {kind}, not a regular file")
        run.results_found = True
        return
    try:
        data = sandbox.read_file(f"{g.reward_dir}/{name}", max_bytes=MAX_REWARD_BYTES)
    except OutputLost as exc:
        raise GraderInfraError("grader_output", exc.message) from exc
    except (SandboxError, ValueError) as exc:
        run.integrity.append(f"{g.reward_dir}/{name} could not be read: {exc}")
        run.results_found = True
        return
    run.results_found = True
    run.reward_source = name
    try:
        run.reward = parse_reward(name, data)
    except (ValueError, UnicodeDecodeError) as exc:
        run.integrity.append(f"{g.reward_dir}/{name} is malformed: {exc}")
        return
    if g.acceptance.metric not in run.reward:
        run.integrity.append(f"{g.reward_dir}/{name} has no metric {g.acceptance.metric!r} "
                             f"(it has {sorted(run.reward)})")
