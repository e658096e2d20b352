"""Running the held-out tests in a fresh grader container.

Into a new sandbox from the *same pinned image* as the agent's (no network,
its own limits, the task's environment variables) go, in order: when the task
declares an install step, the trusted initial commit, the install step run on
it, and its outputs set aside; then the final workspace, the held-out files of
``graders/<id>/`` over it (or the post-patch files of its test patch, computed
on the host; files the patch deletes removed), every test file the grader
names and every folder holding one restored from its trusted copy, every
``conftest.py`` restored to its original (or removed when the agent added
it), the trusted copy of the repository's pytest configuration, one tripwire
test per test file, and the install outputs put back over whatever the agent
left at their paths. New files the agent added elsewhere stay. Nothing else of
the agent's environment goes in: not its container, not its processes, not its
``.git``. Every trusted file is checked byte for byte before any test runs.

Tests run through ``grader_tools/run_tests.py`` (see there for the
safeguards: one process per test file, the configuration copy guarded between
them); results come back from ``/tmp/grader-out`` (outside the workspace)
through two channels, JUnit XML and trialbox's plugin, and both are
cross-checked with the exit code the engine reports for the process. What they
disagree on is reported as an integrity problem.

Limits of what can be known: the code under test runs in its group's test
process, so it can, in principle, rewrite that group's result channels
consistently. The grader detects inconsistent tampering (channels that
disagree, a requested test with no outcome, an exit code that contradicts the
outcomes, a tripwire that did not fail with its nonce, a configuration copy
that changed) and the scope criterion rejects the planted files that usually
carry it (conftest.py, sitecustomize.py, .pth files, pytest configuration). A
forger that finds the tripwire by reading the test sources is not detected.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import posixpath
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


from ..engine import ROLE_LABEL
from ..errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError
from ..sandbox.base import READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec, remove_and_meter
from ..sandbox.dockerexec import SYSTEM_PATH
from ..sandbox.meter import Usage
from ..stageclock import lap
from ..tasks import Task
from ..install import InstallResult, restore_outputs, run_install, stash_outputs_and_clear
from .compose import Composition, test_files

TOOLS = Path(__file__).with_name("grader_tools")
TOOLS_MOUNT = "/opt/trialbox-grader"
OUT = "/tmp/grader-out"
CONFIG = "/tmp/trialbox-grader.json"


@dataclass(frozen=True)
class GraderLimits:
    """The grader container's limits. Its reservations are the trial's own (``for_environment``):
    the grader runs in its trial's admission slot, after the agent, so the slot covers it."""

    cpu_limit: float = 1.0
    cpu_reservation: float = 0.5
    memory_reservation_mb: int = 512
    memory_limit_mb: int = 2048
    pids_limit: int = 512
    disk_limit_mb: int = 1024
    timeout_s: float = 600.0
    test_timeout_s: float = 60.0

    @classmethod
    def for_environment(cls, env) -> "GraderLimits":
        return cls(cpu_reservation=min(env.cpu_reservation, cls.cpu_limit),
                   memory_reservation_mb=min(env.memory_reservation_mb, cls.memory_limit_mb))


@dataclass
class TestRun:
    __test__ = False
    outcomes: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    timed_out: bool = False
    oom: bool = False
    integrity: list[str] = field(default_factory=list)
    collect_errors: list[dict] = field(default_factory=list)
    log_tail: str = ""
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    results_found: bool = False
    exit_codes: list[int] = field(default_factory=list)
    """pytest's exit code per test-file group (2–4: the run never executed its tests: usage or internal error)."""
    setup_failed: bool = False
    """The install step failed: no test ran."""
    configuration: str | None = None
    """The repository's pytest configuration file the run used (from the trusted commit); None: it has none."""
    reward: dict[str, float] | None = None
    """A script grader's metrics, as its reward file gave them (None: no valid reward)."""
    reward_source: str | None = None
    """The reward file they came from (``reward.txt`` or ``reward.json``)."""
    reward_note: str | None = None
    """Why there is no reward, when the script wrote none."""
    witness: dict | None = None
    """A script grader's pytest sessions as the witness plugin recorded them (``script.witness_summary``)."""


def one_per_file(errors: list[dict]) -> list[dict]:
    """The first collection error of each test file, every file kept.

    A module that cannot import gives pytest one collection error per node id it was asked for (97 node ids
    of one file: 97 copies of the same error). Keeping a fixed number of them dropped the files after the
    first, whose pytest exit code 4 then read as "pytest did not execute the tests"; one per file is both
    bounded (by the grader's own test files) and complete."""
    seen: dict[str, dict] = {}
    for e in errors:
        seen.setdefault(str(e.get("node", "")).split("::", 1)[0], e)
    return list(seen.values())


def _parse_junit(data: bytes, messages: dict[str, str] | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    root = ET.fromstring(data)
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        tags = {child.tag for child in case}
        outcome = "failed" if "failure" in tags else "error" if "error" in tags else "skipped" if "skipped" in tags else "passed"
        out[f"{classname}::{name}"] = outcome
        if messages is not None:
            messages[f"{classname}::{name}"] = " ".join((c.get("message") or "") + (c.text or "") for c in case)
    return out


def _junit_key(node: str) -> str:
    path, _, rest = node.partition("::")
    module = path[:-3].replace("/", ".") if path.endswith(".py") else path
    parts = rest.split("::")
    return f"{'.'.join([module, *parts[:-1]])}::{parts[-1]}"


def select(outcomes: dict[str, str], nodes: list[str], key=lambda n: n) -> dict[str, str]:
    """The outcome of each requested node id; a node that selected parametrized tests
    passed only when every one of them passed."""
    out = {}
    for node in nodes:
        k = key(node)
        found = [v for name, v in outcomes.items() if name == k or name.startswith(k + "[")]
        if found:
            out[node] = "passed" if all(v == "passed" for v in found) else next(v for v in found if v != "passed")
    return out


def _cross_check(run: TestRun, nodes: list[str], junit: dict[str, str], exit_code: int | None) -> None:
    """The plugin's outcomes, JUnit's and the process's exit code must tell the same story.

    The tripwire test fails in every honest run, so the runner's exit code is never 0."""
    for node in nodes:
        mine = run.outcomes.get(node)
        theirs = junit.get(node)
        if mine is None and theirs is None:
            continue
        if (mine == "passed") != (theirs == "passed"):
            run.integrity.append(f"{node}: plugin says {mine}, JUnit says {theirs}")
    if exit_code == 0:
        run.integrity.append("the runner exited with 0 although its tripwire test must fail")


def grader_spec(image_id: str, task: Task, limits: GraderLimits, name: str,
                labels: dict[str, str] | None = None) -> SandboxSpec:
    """The grader container of ``task`` (the pytest grader's; ``script.script_grader_spec`` the script grader's)."""
    if task.grader.kind == "script":
        from .script import script_grader_spec
        return script_grader_spec(image_id, task, limits, name, labels)
    return SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", mounts=((str(TOOLS), TOOLS_MOUNT),),
                       env=task.runtime.sandbox_env(), labels={**(labels or {}), ROLE_LABEL: "grader"})


def run_tests(sandboxes: SandboxFactory, image_id: str, comp: Composition, task: Task, nodes: list[str],
              limits: GraderLimits, name: str, labels: dict[str, str] | None = None,
              usage: list[Usage] | None = None, prepared: Sandbox | None = None) -> TestRun:
    """Run ``nodes`` (and the tripwire) against the composed workspace in a fresh grader container (``prepared``:
    one created ahead from ``grader_spec``, not started yet); ``GraderInfraError`` when it cannot be set up. What
    the container used is appended to ``usage`` (whether or not it could be set up: a grader that failed still
    ran)."""
    sandbox = prepared if prepared is not None else sandboxes(grader_spec(image_id, task, limits, name, labels))
    try:
        try:
            sandbox.start()
            # one command: the results folder (outside the workspace) and the run's configuration
            sandbox.write_files({CONFIG: json.dumps({**task.runtime.grader_config(), "tripwires": comp.tripwires,
                                                     "config": f"/workspace/{comp.config}"}).encode(),
                                 f"{OUT}/.started": b""})
            install = _install(sandbox, comp, task)
            sandbox.copy_in(comp.tree.to_tar(), "/workspace")
            if install is not None and install.ok and not restore_outputs(sandbox):
                raise GraderInfraError("grader_setup", "the install step's outputs could not be put back")
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        lap("grader_start")
        if install is not None and not install.ok:
            run = TestRun(log_tail=f"the install step failed (exit {install.exit_code}"
                                   f"{', timed out' if install.timed_out else ''}):\n{install.log_tail}")
            run.setup_failed = True
            return run
        problems = _verify_trusted(sandbox, comp)
        run = _run_test_groups(sandbox, nodes, comp, limits, task)
        run.integrity[:0] = problems
        lap("grading")
        return run
    finally:
        remove_and_meter(sandbox, usage, "grader_cleanup")


def _install(sandbox: Sandbox, comp: Composition, task: Task) -> InstallResult | None:
    """Run the install step on the trusted initial commit, keep its outputs aside and empty the workspace."""
    if task.runtime.install is None or comp.original is None:
        return None
    sandbox.copy_in(comp.original.to_tar(), "/workspace")
    result = run_install(sandbox, task.runtime.install, sorted([*comp.original.files, *comp.original.symlinks]))
    if result.ok and not stash_outputs_and_clear(sandbox):
        raise GraderInfraError("grader_setup", "the install step's outputs could not be set aside")
    return result


def _verify_trusted(sandbox: Sandbox, comp: Composition) -> list[str]:
    """Every trusted file is in place, byte for byte, before any test runs."""
    paths = sorted(comp.trusted)
    script = 'cd /workspace && for f in "$@"; do sha256sum -- "$f" 2>/dev/null || echo "missing $f"; done; echo "end $#"'
    for attempt in range(READ_ATTEMPTS):  # the engine can lose a fast exec's output: never guess
        lines = sandbox.exec(["sh", "-c", script, "sh", *paths], timeout=120).text().splitlines()
        if lines and lines[-1] == f"end {len(paths)}" and len(lines) == len(paths) + 1:
            break
        time.sleep(0.05 * (attempt + 1))
    else:
        raise GraderInfraError("grader_output", "the engine kept losing the output of the trusted-file check")
    seen = {}
    for line in lines[:-1]:
        digest, _, path = line.partition("  ")
        seen[path] = digest
    return [f"trusted file {p} is not in place in the grader" for p in paths
            if seen.get(p) != hashlib.sha256(comp.trusted[p]).hexdigest()]


def _check_tripwires(run: TestRun, comp: Composition, outcomes: dict[str, str], junit: dict[str, str],
                     messages: dict[str, str], nodes: list[str], junit_nodes: dict[str, str]) -> None:
    """Each group's tripwire must have failed with the nonce, unless no test of its group ran at all (its module
    could not be collected: pytest then runs nothing of the session, and there is no result to vouch for)."""
    files = test_files(nodes)
    for i, node in enumerate(comp.tripwires):
        group = [n for n in nodes if i < len(files) and posixpath.normpath(n.split("::", 1)[0]) == files[i]]
        if outcomes.get(node) is None and junit.get(node) is None and group and \
                not any(n in run.outcomes or n in junit_nodes for n in group):
            continue
        if outcomes.get(node) != "failed" or junit.get(node) != "failed":
            run.integrity.append(f"the tripwire test {node} must fail and was reported {outcomes.get(node)}/{junit.get(node)}: "
                                 "results were forged from inside the test process")
        elif comp.phrase not in messages.get(_junit_key(node), ""):
            run.integrity.append(f"the tripwire test {node} failed without its phrase: the failure report was forged")


def _valid_results(data) -> dict:
    """The runner's results document, its types checked (code under test can write that file: anything malformed
    is ``ValueError``, an integrity problem of the trial, never a crash of the grader)."""
    if not isinstance(data, dict):
        raise ValueError("the results file is not a JSON object")
    out = {"outcomes": data.get("outcomes", {}), "collect_errors": data.get("collect_errors", []),
           "exit_codes": data.get("exit_codes", []), "tampering": data.get("tampering", [])}
    if not (isinstance(out["outcomes"], dict) and all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in out["outcomes"].items())):
        raise ValueError("malformed outcomes in the results file")
    if not (isinstance(out["collect_errors"], list) and all(isinstance(e, dict) for e in out["collect_errors"])):
        raise ValueError("malformed collection errors in the results file")
    if not (isinstance(out["exit_codes"], list) and all(type(c) is int for c in out["exit_codes"])):
        raise ValueError("malformed exit codes in the results file")
    if not (isinstance(out["tampering"], list) and all(isinstance(t, str) for t in out["tampering"])):
        raise ValueError("malformed tampering notes in the results file")
    out["collect_errors"] = [{"node": str(e.get("node", "")), "error": str(e.get("error", ""))}
                             for e in out["collect_errors"]]
    return out


def _read_result(sandbox: Sandbox, path: str) -> bytes:
    """A result file of the test run; the engine losing its bytes is ours to retry, never the agent's."""
    try:
        return sandbox.read_file(path, max_bytes=8 << 20)
    except OutputLost as exc:
        raise GraderInfraError("grader_output", exc.message) from exc


def _read_results(sandbox: Sandbox, names: list[str]):
    """The run's result files, read in one command (a tar of them: a cut stream does not parse, so what the engine
    loses is never half-read); ``read(name)`` gives one's bytes, or raises ``SandboxError`` when it was not there.
    Where the one command cannot be had, each file is read on its own."""
    got: dict[str, bytes] | None = None
    for _ in range(READ_ATTEMPTS):
        try:
            res = sandbox.exec(["sh", "-c", 'cd "$1" && shift && for f in "$@"; do [ -f "$f" ] && [ ! -L "$f" ] && '
                                            '[ -n "$(find "$f" -maxdepth 0 -size -8193k)" ] && printf "%s\\n" "$f"; '
                                            'done | tar -cf - -T - 2>/dev/null', "sh", OUT, *names],
                               timeout=120, env={"PATH": SYSTEM_PATH})
        except OutputLost:
            continue
        if res.stdout_size > len(res.stdout) or (res.exit_code != 0 and not res.stdout):
            break  # larger than the capture, or no tar here: one by one, each bounded
        try:
            with tarfile.open(fileobj=io.BytesIO(res.stdout), mode="r:") as tf:
                got = {m.name: tf.extractfile(m).read() for m in tf.getmembers()  # type: ignore[union-attr]
                       if m.isfile() and m.size <= 8 << 20}
                end = tf.offset
            if res.stdout[end:end + 1024] != bytes(1024):  # no end-of-archive marker: cut between two members
                got = None
                continue
            break
        except (tarfile.TarError, OSError):
            got = None
            continue  # cut or lost by the engine: read again

    def read(name: str) -> bytes:
        if got is None:
            return _read_result(sandbox, f"{OUT}/{name}")
        if name not in got:
            raise SandboxError(f"{OUT}/{name} was not written", container=sandbox.spec.name)
        return got[name]
    return read


def _run_test_groups(sandbox: Sandbox, nodes: list[str], comp: Composition, limits: GraderLimits, task: Task) -> TestRun:
    run = TestRun(configuration=comp.config_source)
    env = {"TRIALBOX_TEST_TIMEOUT": str(int(limits.test_timeout_s)), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "TRIALBOX_GRADER_CONFIG": CONFIG}
    try:
        res = sandbox.exec([task.runtime.command.interpreter, "-s", "-E", "-B", f"{TOOLS_MOUNT}/run_tests.py", OUT,
                            *nodes], timeout=limits.timeout_s, env=env)
    except SandboxBroken as exc:
        run.oom = exc.reason == "oom"
        run.log_tail = f"grader sandbox broke: {exc.message}"
        return run
    run.exit_code, run.timed_out, run.oom = res.exit_code, res.timed_out, res.oom_killed
    run.log_tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-6000:]
    raw_outcomes: dict[str, str] = {}
    names = ["results.json", *(f"junit-{i}.xml" for i in range(len(test_files(nodes))))]
    read = _read_results(sandbox, names)
    try:
        results = _valid_results(json.loads(read("results.json")))
        raw_outcomes = results["outcomes"]
        run.outcomes = select(raw_outcomes, nodes)
        run.collect_errors = one_per_file(results["collect_errors"])
        run.exit_codes = results["exit_codes"]
        run.integrity += [f"the trusted pytest configuration or a group's results were changed during the test run "
                          f"({t})" for t in results["tampering"]]
        run.results_found = True
    except (SandboxError, ValueError) as exc:
        run.integrity.append(f"no plugin results: {exc}")
    junit_all: dict[str, str] = {}
    messages: dict[str, str] = {}
    for i in range(len(test_files(nodes))):
        try:
            junit_all.update(_parse_junit(read(f"junit-{i}.xml"), messages))
        except (SandboxError, ValueError, ET.ParseError) as exc:
            if run.outcomes:
                run.integrity.append(f"no JUnit results for group {i}: {exc}")
    junit = select(junit_all, nodes, _junit_key)
    if run.timed_out:  # a run that did not finish proves nothing: its reports count as not run
        run.outcomes = {}
        return run
    if run.results_found:
        _check_tripwires(run, comp, select(raw_outcomes, comp.tripwires), select(junit_all, comp.tripwires, _junit_key),
                         messages, nodes, junit)
    _cross_check(run, nodes, junit, run.exit_code)
    return run
