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
  test that writes the reward and then kills the script before the script's own verdict).

What cannot be checked, and the pytest grader can: the script's test runner runs the code under test in its
own process, so that code can write the reward itself and exit cleanly; there is no tripwire and no second
result channel unless the script provides them. The scope criterion still rejects the planted files that
usually carry such tampering (``conftest.py``, ``sitecustomize.py``, ``.pth`` files).
"""

from __future__ import annotations

import json
import math
import time
import uuid

from ..engine import ROLE_LABEL
from ..errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError
from ..sandbox.base import READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec
from ..sandbox.meter import Usage
from ..tasks import Task
from .runner import GraderLimits, TestRun
from .tree import Tree

MAX_REWARD_BYTES = 64 << 10
SETTLE_S = 0.5
"""How long after the script exits the reward must stay unchanged."""
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


def run_script(sandboxes: SandboxFactory, image_id: str, tree: Tree, task: Task, limits: GraderLimits, name: str,
               labels: dict[str, str] | None = None, usage: list[Usage] | None = None) -> TestRun:
    """Run the task's test script against ``tree`` in a fresh grader container (see the module docstring);
    ``GraderInfraError`` when the container cannot be set up. What it used is appended to ``usage``."""
    g, workdir = task.grader, task.config.workdir
    timeout = g.timeout_seconds or limits.timeout_s
    spec = SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", workdir=workdir,
                       # the held-out tests read-only (nothing in the grader can change them); the reward folder new
                       mounts=((str(task.grader_path(g.tests).resolve()), g.tests_mount),),  # type: ignore[arg-type]
                       scratch_dirs=(g.reward_dir,), env=task.runtime.sandbox_env(),
                       labels={**(labels or {}), ROLE_LABEL: "grader"})
    sandbox = sandboxes(spec)
    try:
        try:
            sandbox.start()
            sandbox.copy_in(tree.to_tar(), workdir)
            before = _listing(sandbox, g.reward_dir)
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        return _run(sandbox, task, timeout, before)
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
        res = sandbox.exec(["bash", script], timeout=timeout, env=dict(g.env))
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
    return run


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
