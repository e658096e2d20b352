"""Running the held-out tests in a fresh grader container.

Into a new sandbox from the *same pinned image* as the agent's (no network,
its own limits) go: the final workspace, the held-out files of
``graders/<id>/`` over it, every test file the grader names restored from its
trusted copy (the held-out folder, else the initial commit), and every
``conftest.py`` restored to its original (or removed when the agent added it).
New files the agent added stay. Nothing else of the agent's environment goes
in: not its container, not its processes, not its ``.git``.

Tests run through ``grader_tools/run_tests.py`` (see there for the
safeguards); results come back from ``/tmp/grader-out`` (outside the
workspace) through two channels, JUnit XML and trialbox's plugin, and both are
cross-checked with the exit code the engine reports for the process. What
they disagree on is reported as an integrity problem.

Limits of what can be known: the code under test runs in the test runner's
process, so it can, in principle, rewrite every result channel consistently
(and exit 0). The grader detects inconsistent tampering (channels that
disagree, a requested test with no outcome, an exit code that contradicts the
outcomes, tests faster than the clock allows are not judged) and the scope
criterion rejects the planted files that usually carry it (conftest.py,
sitecustomize.py, .pth files, pytest configuration).
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import docker

from ..errors import SandboxBroken, SandboxError
from ..sandbox.base import SandboxSpec
from ..sandbox.docker import DockerSandbox
from ..tasks import Task
from .diff import is_artifact
from .export import Tree

TOOLS = Path(__file__).with_name("grader_tools")
TOOLS_MOUNT = "/opt/trialbox-grader"
OUT = "/tmp/grader-out"


@dataclass(frozen=True)
class GraderLimits:
    cpu_limit: float = 1.0
    memory_limit_mb: int = 2048
    pids_limit: int = 512
    disk_limit_mb: int = 1024
    timeout_s: float = 600.0
    test_timeout_s: float = 60.0


class GraderInfraError(Exception):
    """The grader itself could not run (never the agent's failure)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


@dataclass
class TestRun:
    outcomes: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    timed_out: bool = False
    oom: bool = False
    integrity: list[str] = field(default_factory=list)
    collect_errors: list[dict] = field(default_factory=list)
    log_tail: str = ""
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    results_found: bool = False


def test_files(node_ids: list[str]) -> list[str]:
    return sorted({posixpath.normpath(n.split("::", 1)[0]) for n in node_ids})


def compose(final: Tree, original: Tree, task: Task) -> tuple[Tree, list[str], list[str]]:
    """The grader's workspace: final files, held-out files over them, restored test files and conftests."""
    tree = dataclasses.replace(final, files=dict(final.files), executable=set(final.executable),
                               symlinks=dict(final.symlinks), dirs=set(final.dirs), skipped=[])
    restored, removed = [], []
    for path in [p for p in [*tree.files, *tree.symlinks] if is_artifact(p)]:  # stale or planted bytecode never runs
        tree.files.pop(path, None)
        tree.symlinks.pop(path, None)
        tree.executable.discard(path)
    tree.dirs = {d for d in tree.dirs if not is_artifact(d)}
    held: dict[str, bytes] = {}
    g = task.grader
    if g.tests is not None:
        base = task.grader_path(g.tests)
        for p in sorted(base.rglob("*")) if base.is_dir() else []:
            if p.is_file() and "__pycache__" not in p.parts:
                held[posixpath.join(str(g.tests).rstrip("/"), p.relative_to(base).as_posix())] = p.read_bytes()
    names = test_files(g.fail_to_pass + g.pass_to_pass)
    if g.test_patch is not None:  # what the test patch touches starts from the trusted original
        text = task.grader_path(g.test_patch).read_text(errors="replace")
        names = sorted(set(names) | {p for p in re.findall(r"^(?:\+\+\+ b/|--- a/)(\S+)", text, re.M)})
    for path in sorted(set(held) | set(names)):
        trusted = held.get(path, original.files.get(path))
        if trusted is None:
            if path in tree.files or path in tree.symlinks:  # the agent's file would shadow a held-out one
                tree.files.pop(path, None)
                tree.symlinks.pop(path, None)
                removed.append(path)
            continue
        if tree.files.get(path) != trusted or path in tree.symlinks:
            restored.append(path)
        tree.symlinks.pop(path, None)
        tree.files[path] = trusted
        tree.executable.discard(path)
    for path in [p for p in list(tree.files) + list(tree.symlinks) if posixpath.basename(p) == "conftest.py"]:
        if path in original.files:
            if tree.files.get(path) != original.files[path]:
                restored.append(path)
            tree.symlinks.pop(path, None)
            tree.files[path] = original.files[path]
        else:
            removed.append(path)
            tree.files.pop(path, None)
            tree.symlinks.pop(path, None)
    for path, target in list(tree.symlinks.items()):  # links leaving the workspace never reach the grader
        if target.startswith("/") or posixpath.normpath(posixpath.join(posixpath.dirname(path), target)).startswith(".."):
            del tree.symlinks[path]
            removed.append(path)
    for path in list(tree.files):  # every parent folder exists
        parent = posixpath.dirname(path)
        while parent and parent not in tree.dirs:
            tree.dirs.add(parent)
            parent = posixpath.dirname(parent)
    return tree, restored, removed


def _parse_junit(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    root = ET.fromstring(data)
    for case in root.iter("testcase"):
        file = (case.get("file") or "").strip()
        classname, name = case.get("classname", ""), case.get("name", "")
        tags = {child.tag for child in case}
        outcome = "failed" if "failure" in tags else "error" if "error" in tags else "skipped" if "skipped" in tags else "passed"
        out[f"{classname}::{name}"] = outcome
        if file:
            out[f"{file}::{name}"] = outcome
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
    for node in nodes:
        mine = run.outcomes.get(node)
        theirs = junit.get(node)
        if mine is None and theirs is None:
            continue
        if (mine == "passed") != (theirs == "passed"):
            run.integrity.append(f"{node}: plugin says {mine}, JUnit says {theirs}")
    all_passed = bool(nodes) and all(run.outcomes.get(n) == "passed" for n in nodes)
    any_failed = any(run.outcomes.get(n) in ("failed", "error") for n in nodes)
    if exit_code == 0 and not all_passed:
        run.integrity.append(f"exit code 0 although not every requested test passed ({run.outcomes})")
    if all_passed and exit_code not in (0, None):
        run.integrity.append(f"every requested test passed but the runner exited with {exit_code}")
    if any_failed and exit_code == 0:
        run.integrity.append("a test failed but the runner exited with 0")


def run_tests(client: docker.DockerClient, image_id: str, tree: Tree, task: Task, nodes: list[str],
              limits: GraderLimits, name: str) -> TestRun:
    """Run ``nodes`` against ``tree`` in a fresh grader container; ``GraderInfraError`` if it cannot start."""
    spec = SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_limit, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=min(512, limits.memory_limit_mb), pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", mounts=((str(TOOLS), TOOLS_MOUNT),),
                       labels={"org.trialbox.role": "grader"})
    sandbox = DockerSandbox(spec, client)
    try:
        try:
            sandbox.start()
            sandbox.copy_in(tree.to_tar(), "/workspace")
            setup = sandbox.exec(["mkdir", "-p", OUT], timeout=30)
            if setup.exit_code != 0:
                raise GraderInfraError("grader_setup", setup.stderr.decode(errors="replace"))
            if task.grader.test_patch is not None:
                sandbox.write_file("/tmp/trialbox-test.patch", task.grader_path(task.grader.test_patch).read_bytes())
                applied = sandbox.exec(["patch", "-p1", "--batch", "--forward", "-d", "/workspace", "-i",
                                        "/tmp/trialbox-test.patch"], timeout=60)
                if applied.exit_code != 0:
                    raise GraderInfraError("test_patch", applied.text()[-2000:])
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        return _execute(sandbox, nodes, limits)
    finally:
        sandbox.remove()


def _execute(sandbox: DockerSandbox, nodes: list[str], limits: GraderLimits) -> TestRun:
    run = TestRun()
    env = {"TRIALBOX_TEST_TIMEOUT": str(int(limits.test_timeout_s)), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    try:
        res = sandbox.exec(["python3", "-s", "-E", "-B", f"{TOOLS_MOUNT}/run_tests.py", OUT, *nodes],
                           timeout=limits.timeout_s, env=env)
    except SandboxBroken as exc:
        run.oom = exc.reason == "oom"
        run.log_tail = f"grader sandbox broke: {exc.message}"
        return run
    run.exit_code, run.timed_out, run.oom = res.exit_code, res.timed_out, res.oom_killed
    run.log_tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-6000:]
    try:
        results = json.loads(sandbox.read_file(f"{OUT}/results.json", max_bytes=8 << 20))
        run.outcomes = select(results.get("outcomes", {}), nodes)
        run.collect_errors = results.get("collect_errors", [])[:20]
        run.results_found = True
    except (SandboxError, ValueError, AttributeError) as exc:
        run.integrity.append(f"no plugin results: {exc}")
    junit: dict[str, str] = {}
    for i in range(len(test_files(nodes))):
        try:
            junit.update(_parse_junit(sandbox.read_file(f"{OUT}/junit-{i}.xml", max_bytes=8 << 20)))
        except (SandboxError, ValueError, ET.ParseError) as exc:
            if run.outcomes:
                run.integrity.append(f"no JUnit results for group {i}: {exc}")
    junit = select(junit, nodes, _junit_key)
    if not run.timed_out:
        _cross_check(run, nodes, junit, run.exit_code)
    return run
