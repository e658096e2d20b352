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
``.git``. Every trusted file is checked byte for byte before any test runs, between the groups and after the last.

The trusted files (held-out tests, ``conftest.py`` files, the configuration copy, the tripwires' files) go in
root's and read-only, in folders root's with the sticky bit; the workspace root and the container's init and command
are root's too (``pytest_grader_spec``). The tests run as the sandbox user, who can therefore neither change, replace, move
nor remove a trusted file, nor signal, trace or take over a process of trialbox's.

The host drives the run (``_run_test_groups``): one command per test file's group, ``grader_tools/run_tests.py``
(see there for the safeguards of the session itself), its configuration in that command's environment. Before each
group and after the last (``_between_groups``), every process of the sandbox user is killed, and a command as root
shows that none is left, every trusted file is in place and still root's, and nothing importable appeared in a
folder of trusted files or above one. A group's results come back on its command's output (one document: the
plugin's outcomes, pytest's exit code, the JUnit report), read as that command ends; ``_judge`` cross-checks them
with the exit code the engine saw, with pytest's summary line in the log and with the group's tripwire.

Limits of what can be known: the code under test runs in its group's test process, so it can rewrite that
group's reports consistently. What it cannot do is send the value a *sealed* assertion expects without computing it
(``seal``: the literal stays on the host, which compares the values the process sent; ``_apply_seals``), so a test
whose sealed assertion the code under test gets wrong is failed whatever the process reports. The rest rests on
detection: the grader detects a forger that cannot tell the tripwire from the real tests (``compose._tripwires``,
identity kept on the host); a forger that tells it apart (by its body, or by comparing the test sources with
published ones) is not detected.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import posixpath
import re
import secrets
import tarfile
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


from ..engine import ROLE_LABEL
from ..errors import EngineUnavailable, GraderInfraError, SandboxBroken, SandboxError
from ..sandbox.base import READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec, remove_and_meter, uid_gid
from ..sandbox.dockerexec import KILL_FUNCTION, SYSTEM_PATH
from ..sandbox.meter import Usage
from ..stageclock import lap
from ..tasks import Task
from ..install import InstallResult, restore_outputs, run_install, stash_outputs_and_clear
from ..log import get_logger
from .compose import Composition, Tripwire, test_files
from .seal import HASHED_PER_GROUP, MAX_ITEMS, Malformed, Seal, decode, shown

log = get_logger("grading")

TOOLS = Path(__file__).with_name("grader_tools")
TOOLS_MOUNT = "/opt/trialbox-grader"


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
    runtime: str = "runc"
    """The engine runtime of the grader: the trial's own (``for_environment``). Under ``runsc`` the code under test
    in the grader has gVisor's kernel, so it cannot move the host-wide figures a runc container reads (the
    thirteenth review: socket counts, locked pages, identifiers drawn from host-wide counters)."""

    @classmethod
    def for_environment(cls, env) -> "GraderLimits":
        return cls(cpu_reservation=min(env.cpu_reservation, cls.cpu_limit), runtime=getattr(env, "runtime", "runc"),
                   memory_reservation_mb=min(env.memory_reservation_mb, cls.memory_limit_mb),
                   # twice the agent's disk (blocks and, on ext4, inodes): its workspace alone cannot fill the
                   # grader's, whatever it left, beside the tests and the grader's own files
                   disk_limit_mb=max(cls.disk_limit_mb, 2 * int(env.disk_limit_mb)))


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
    set_aside: list[str] = field(default_factory=list)
    """What appeared in a folder of trusted files during the test run and was set aside before the next group."""
    witness: dict | None = None
    """A script grader's pytest sessions as the witness plugin recorded them (``script.witness_summary``)."""
    sealed: dict[str, dict] = field(default_factory=dict)
    """Per requested test with sealed assertions: how many it has (``sealed``), how many values met their literal
    over its cases (``held``), and each that did not (``mismatched``: the assertion, the literal, the value sent,
    the case) or sent nothing where the test passed (``missing``). A mismatch fails the test whatever pytest said."""


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
    base, bracket, params = node.partition("[")  # a parameter id may hold "::" (an IPv6 address, C++ names)
    path, _, rest = base.partition("::")
    module = path[:-3].replace("/", ".") if path.endswith(".py") else path
    parts = rest.split("::")
    return f"{'.'.join([module, *parts[:-1]])}::{parts[-1]}{bracket}{params}"


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


def pytest_grader_spec(image_id: str, task: Task, limits: GraderLimits, name: str,
                       labels: dict[str, str] | None = None) -> SandboxSpec:
    """The pytest grader's container for ``task`` (``specs.grader_spec`` chooses it or the script grader's)."""
    return SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", runtime=limits.runtime,
                       copied_mounts=((str(TOOLS), TOOLS_MOUNT),),
                       env=task.runtime.sandbox_env(), labels={**(labels or {}), ROLE_LABEL: "grader"},
                       workspace_owner="0:0", init_user="0:0")


def run_tests(sandboxes: SandboxFactory, image_id: str, comp: Composition, task: Task, nodes: list[str],
              limits: GraderLimits, name: str, labels: dict[str, str] | None = None,
              usage: list[Usage] | None = None, prepared: Sandbox | None = None) -> TestRun:
    """Run ``nodes`` (and the tripwire) against the composed workspace in a fresh grader container (``prepared``:
    one created ahead from ``specs.grader_spec``, not started yet); ``GraderInfraError`` when it cannot be set up. What
    the container used is appended to ``usage`` (whether or not it could be set up: a grader that failed still
    ran)."""
    sandbox = prepared if prepared is not None else sandboxes(pytest_grader_spec(image_id, task, limits, name, labels))
    try:
        try:
            sandbox.start()
            # the workspace's root is root's (``pytest_grader_spec``): open to all, but what is there is its owner's
            if not sandbox.exec(["chmod", "1777", "/workspace"], timeout=60, user="0:0",
                                env={"PATH": SYSTEM_PATH}).ok:
                raise GraderInfraError("grader_setup", "the grader's workspace could not be opened to the test user")
            install = _install(sandbox, comp, task)
            sandbox.copy_in(comp.tree.to_tar(None, *uid_gid(sandbox.spec.user), root_owned=frozenset([*comp.trusted, *comp.links]),
                                             root_dirs=guarded_folders(comp)),
                            "/workspace")
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
        run = _run_test_groups(sandbox, nodes, comp, limits, task, install.outputs if install is not None else ())
        lap("grading")
        return run
    finally:
        remove_and_meter(sandbox, usage, "grader_cleanup")


def _install(sandbox: Sandbox, comp: Composition, task: Task) -> InstallResult | None:
    """Run the install step on the trusted initial commit, keep its outputs aside and empty the workspace."""
    if task.runtime.install is None or comp.original is None:
        return None
    sandbox.copy_in(comp.original.to_tar(None, *uid_gid(sandbox.spec.user)), "/workspace")
    result = run_install(sandbox, task.runtime.install, sorted([*comp.original.files, *comp.original.symlinks]))
    if result.ok and not stash_outputs_and_clear(sandbox):
        raise GraderInfraError("grader_setup", "the install step's outputs could not be set aside")
    return result


KILL_SCRIPT = KILL_FUNCTION + "kill_leftovers\n"

# Run as root, who owns the container's init and command, every trusted file and every guarded folder: no process of
# the test user can signal, trace or write into it, so what it prints is trialbox's. Three parts: every live process
# of the test user (a zombie with no live thread runs nothing), every trusted file (owner:mode, then its digest, read
# on standard input: no name is ever escaped), every guarded folder (owner:mode) and its entries (a name holding a
# newline is never importable, and is left out so it cannot read as two names). The host decides what is new.
CHECK_SCRIPT = r"""
set -u
mapfile -d '' -t args < "$1" || exit 3  # NUL-separated, from a file of root's: no command-line limit
set -- "${args[@]}"
uid=$1; shift; n=$1; shift
me=$$
# owner:mode of a path, its link not followed. coreutils' stat asks with statx, which gVisor (runsc) as Debian 12
# ships refuses (EINVAL); find asks with fstatat
owner_mode() { stat -c %u:%a -- "$1" 2>/dev/null || find "./$1" -maxdepth 0 -printf '%U:%m' 2>/dev/null; }
for d in /proc/[0-9]*; do
  p=${d#/proc/}; [ "$p" = "$me" ] && continue
  st=""; ids=""; th=1
  while read -r k v rest; do
    case "$k" in State:) st=$v ;; Uid:) ids="$v $rest" ;; Threads:) th=$v ;; esac
  done < "$d/status" 2>/dev/null
  [ -n "$ids" ] || continue
  case " $ids " in *" $uid "*) ;; *) continue ;; esac
  if [ "$st" = Z ] && [ "$th" -le 1 ]; then continue; fi
  echo "alive $p"
done
cd /workspace || exit 3
i=0
while [ "$i" -lt "$n" ]; do
  f=$1; shift; i=$((i + 1))
  if [ -f "$f" ] && [ ! -L "$f" ] && sum=$(sha256sum < "$f"); then
    printf 'file %s %s %s\n' "$(owner_mode "$f")" "${sum%% *}" "$f"
  else
    printf 'missing %s\n' "$f"
  fi
done
for d in "$@"; do
  printf 'folder %s %s\n' "$(owner_mode "$d" || echo gone)" "$d"
  for e in "$d"/* "$d"/.[!.]* "$d"/..?*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    case "$e" in *$'\n'*) continue ;; esac
    e=${e#./}
    if [ -d "$e" ] && [ ! -L "$e" ]; then printf 'entry d %s\n' "$e"; else printf 'entry f %s\n' "$e"; fi
  done
done
echo "end $n"
"""

# Run as root on the new entries of guarded folders: a folder holding anything Python can load (or that root cannot
# read through) is reported ``loadable``; every entry named on the command line is then renamed in place to a name
# nothing imports (root owns the guarded folders: the sticky bit lets it rename what is in them).
ASIDE_SCRIPT = r"""
set -u
mapfile -d '' -t args < "$1" || exit 3  # NUL-separated, from a file of root's: no command-line limit
set -- "${args[@]}"
tag=$1; shift
cd /workspace || exit 3
for e in "$@"; do
  p="./$e"  # never an option of find or mv, whatever the name
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    if ! out=$(find "$p" \( -name '*.py' -o -name '*.pth' -o -name '*.so' -o -name '*.pyc' -o -name '*.pyd' \) -print -quit 2>&1) \
        || [ -n "$out" ]; then printf 'loadable %s\n' "$e"; fi
  fi
  if mv -T -- "$p" "$(dirname -- "$p")/.trialbox-aside-$tag-$RANDOM$RANDOM" 2>/dev/null; then
    printf 'moved %s\n' "$e"
  else
    printf 'stuck %s\n' "$e"
  fi
done
echo "end"
"""
LOADABLE = (".py", ".pth", ".so", ".pyc", ".pyd")
ASIDE = ".trialbox-aside-"
FAILING = ("failed", "error")
"""What a tripwire may be reported as (a copy of a real test whose fixture fails errors like its model)."""


def _with_ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def guarded_folders(comp: Composition) -> set[str]:
    """Every folder that holds a trusted file, every folder above one up to the workspace, and every folder below the
    folder of a test file (a folder the code under test could fill for the next group to load): each goes in root's,
    with the sticky bit."""
    folders = {"."}
    tops = set()
    for path in comp.trusted:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        if parts:
            tops.add("/".join(parts))
    folders.update(d for d in comp.tree.dirs if any(d.startswith(t + "/") for t in tops))
    return folders


CHECK_LIST = f"{ASIDE}check-{secrets.token_hex(4)}"
"""The root-only folder (in the workspace root, named like what is set aside: never judged) holding the check's
list of paths; a name of this process's, so no folder the code under test made beforehand can stand for it."""


def _root_file(folder: str, data: bytes) -> bytes:
    """A tar of ``folder/list`` holding ``data``, both root's and readable by root alone."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        d = tarfile.TarInfo(folder)
        d.type, d.mode, d.uid, d.gid = tarfile.DIRTYPE, 0o700, 0, 0
        tf.addfile(d)
        f = tarfile.TarInfo(f"{folder}/list")
        f.size, f.mode, f.uid, f.gid = len(data), 0o400, 0, 0
        tf.addfile(f, io.BytesIO(data))
    return buf.getvalue()


def _root_run(sandbox: Sandbox, script: str, args: list[str], what: str) -> list[str]:
    for attempt in range(READ_ATTEMPTS):  # the engine can lose a fast exec's output: never guess
        res = sandbox.exec(["bash", "-c", script, "bash", *args], timeout=120, user="0:0", env={"PATH": SYSTEM_PATH})
        # records are split on newlines only: str.splitlines also splits on \x0b, \x0c, \x1c-\x1e, \x85,
        # \u2028, \u2029 and \r, which a file name the code under test chose may hold (an eleventh review's
        # finding 3: such a name read as a root record of its own, in place of a trusted file's)
        lines = res.text().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if lines and lines[-1].startswith("end"):
            return lines
        time.sleep(0.05 * (attempt + 1))
    raise GraderInfraError("grader_output", f"the engine kept losing the output of the {what}")


FILLED = ("no space left on device", "disk quota exceeded", "enospc")
"""What the engine says when a write into the grader's container failed for want of space (blocks or inodes)."""


def _between_groups(sandbox: Sandbox, comp: Composition, when: str, outputs: tuple[str, ...] = (),
                    run: TestRun | None = None) -> list[str]:
    """``_check_between_groups``; where the check failed because the grader's disk is full (the engine's own error
    says so: the check's list could not be copied in), the failure is a ``GraderInfraError``, which grading compares
    with the untouched repository like any run without results (so it is the agent's failure unless the untouched
    repository fails the same way). That holds before the first group too: the agent's files
    alone can fill the disk's inodes (a review's finding: 65,536 empty files made it a sandbox error, retried for
    free); the grader's disk is twice the agent's (``GraderLimits.for_environment``), so an honest workspace cannot. Every other sandbox error stays the
    sandbox's (an infrastructure error, retried): an engine that does not answer, an exec whose output it lost, a
    transient API error, a paused or vanished container, an OOM kill are not shown to be the code's doing, and
    calling them the agent's failure would reject honest work."""
    try:
        return _check_between_groups(sandbox, comp, when, outputs, run)
    except SandboxError as exc:
        if isinstance(exc, EngineUnavailable) or not any(m in str(exc).lower() for m in FILLED):
            raise
        raise GraderInfraError("grader_sandbox", f"the grader's disk was full {when}: {exc}") from exc


def _check_between_groups(sandbox: Sandbox, comp: Composition, when: str, outputs: tuple[str, ...] = (),
                          run: TestRun | None = None) -> list[str]:
    """Before each group and after the last: every process the code under test left is killed (as the test user, who
    alone can), then a command as root (``CHECK_SCRIPT``) shows that none is left, that every trusted file is in
    place, byte for byte, still root's and read-only, and that every guarded folder (``guarded_folders``) is still
    root's and sticky. What appeared in a guarded folder is set aside by root before the next group
    (``ASIDE_SCRIPT``: renamed in place, so no later group loads one group's ``conftest.py``, ``__init__.py``,
    module, ``.pth`` or bytecode) and noted in ``run.set_aside``; only what could not be set aside is a problem. The
    code under test cannot write the trusted files; this check is what shows it, after that code stopped."""
    try:
        sandbox.exec(["bash", "-c", KILL_SCRIPT], timeout=60, env={"PATH": SYSTEM_PATH})
    except SandboxError as exc:
        if isinstance(exc, SandboxBroken):
            raise
    paths = sorted(comp.trusted)
    folders = sorted(guarded_folders(comp))
    uid = sandbox.spec.user.split(":", 1)[0]
    listing = "\0".join([uid, str(len(paths)), *paths, *folders]).encode("utf-8", "surrogateescape") + b"\0"
    sandbox.copy_in(_root_file(CHECK_LIST, listing), "/workspace")
    lines = _root_run(sandbox, CHECK_SCRIPT, [f"/workspace/{CHECK_LIST}/list"], "trusted-file check")
    if lines[-1] != f"end {len(paths)}":
        raise GraderInfraError("grader_output", "the trusted-file check did not run to its end")
    expected = {*comp.tree.files, *comp.tree.symlinks, *comp.tree.dirs,
                *(a for o in outputs for a in _with_ancestors(o))}
    problems, seen, new = [], {}, []
    alive = [line.split(" ", 1)[1] for line in lines if line.startswith("alive ")]
    if alive:
        problems.append(f"{len(alive)} process(es) the code under test started could not be killed {when}")
    for line in lines[:-1]:
        kind, _, rest = line.partition(" ")
        if kind == "file":
            owner, _, rest = rest.partition(" ")
            digest, _, path = rest.partition(" ")
            seen[path] = (owner, digest)
        elif kind == "folder":
            mode, _, folder = rest.partition(" ")
            if mode != "0:1777":
                problems.append(f"the guarded folder {folder} is no longer root's and sticky {when} ({mode})")
        elif kind == "entry":
            path = rest[2:]
            if path not in expected and not posixpath.basename(path).startswith(ASIDE):
                new.append(path)
    unread = [p for p in paths if p not in seen]
    if unread and not alive:
        # a trusted file the check could not read although nothing of the code under test runs any more (every
        # process of its user was killed, and none is alive): read again once. A read that failed for the grader's
        # own reasons (a fork refused on a loaded host) passes then; a file that is really gone is still gone. A
        # nop trial was rejected on grader_integrity with every trusted file "not in place" once, in a resumed run
        # beside other trialbox processes (this stop's CI); the cause is not known
        again = _root_run(sandbox, CHECK_SCRIPT, [f"/workspace/{CHECK_LIST}/list"], "trusted-file check, again")
        if again[-1] == f"end {len(paths)}":
            for line in again[:-1]:
                kind, _, rest = line.partition(" ")
                if kind == "file":
                    owner, _, rest = rest.partition(" ")
                    digest, _, path = rest.partition(" ")
                    if path in unread:
                        seen[path] = (owner, digest)
            if any(p in seen for p in unread):
                log.warning("trusted files unread by the check, read again", when=when,
                            files=sorted(p for p in unread if p in seen)[:5])
    for p in paths:
        owner, digest = seen.get(p, ("", ""))
        if p not in seen:
            problems.append(f"trusted file {p} is not in place in the grader {when} (missing or unreadable)")
        elif digest != hashlib.sha256(comp.trusted[p]).hexdigest():
            problems.append(f"trusted file {p} is not in place in the grader {when} (its content changed)")
        elif owner != "0:444":
            problems.append(f"trusted file {p} is no longer root's and read-only {when} ({owner})")
    if new:
        listing = "\0".join([secrets.token_hex(3), *new]).encode("utf-8", "surrogateescape") + b"\0"
        sandbox.copy_in(_root_file(CHECK_LIST, listing), "/workspace")
        moved = _root_run(sandbox, ASIDE_SCRIPT, [f"/workspace/{CHECK_LIST}/list"], "setting aside of new entries")
        loadable = {line.split(" ", 1)[1] for line in moved if line.startswith("loadable ")}
        for line in moved[:-1]:
            kind, _, path = line.partition(" ")
            if kind == "moved" and run is not None:
                run.set_aside.append(f"{path} ({when}{'; Python can load it' if path in loadable or path.endswith(LOADABLE) else ''})")
            elif kind == "stuck":
                problems.append(f"{path} appeared in a folder of trusted files {when} and could not be set aside")
    return problems


SUMMARY = re.compile(r"^=*\s*(\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b.*$")


def _summary(log: str) -> dict[str, int] | None:
    """pytest's closing counts in a group's log ("1 failed, 3 passed in 0.12s"); None when there is none."""
    for line in reversed(log.splitlines()):
        m = SUMMARY.match(line.strip())
        if m:
            counts: dict[str, int] = {}
            for part in m.group(1).split(", "):
                n, _, word = part.partition(" ")
                word = {"errors": "error", "warnings": "warning"}.get(word, word)
                counts[word] = counts.get(word, 0) + int(n)
            return counts
    return None


def _without_tripwire(log: str, wire: Tripwire) -> str:
    """A group's log for people to read: the tripwire's own failure section and lines left out (its name is
    trialbox's), said once at the top; pytest's counts still include its one failure."""
    name = wire.node.split("::")[-1]
    kept, skipping = [], False
    for line in log.splitlines():
        stripped = line.strip()
        if stripped.startswith("_") and stripped.endswith("_") and " " in stripped:
            skipping = bool(re.search(rf"(^|[ .]){re.escape(name)}(\[| |$)", stripped.strip("_ ")))
            if skipping:
                continue
        elif stripped.startswith("=") or stripped.startswith("-") and "captured" in stripped.lower():
            skipping = skipping and not stripped.startswith("=")
        if skipping or re.search(rf"::{re.escape(name)}\b", line):
            continue
        kept.append(line)
    return "\n".join(kept)


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


def _document(res) -> dict:
    """A group's result document, as its process streamed it (types checked: code under test can write to that
    stream; anything malformed is ``ValueError``, an integrity problem of the trial, never a crash)."""
    if res.stdout_size > len(res.stdout):
        raise ValueError("the results stream was larger than the grader reads")
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(f"the results stream held {len(lines)} documents, not one")
    try:
        data = json.loads(lines[0])
    except RecursionError as exc:
        raise ValueError("the results document is nested too deeply to read") from exc
    if not isinstance(data, dict):
        raise ValueError("the results document is not a JSON object")
    outcomes, errors = data.get("outcomes", {}), data.get("collect_errors", [])
    if not (isinstance(outcomes, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in outcomes.items())):
        raise ValueError("malformed outcomes in the results document")
    if not (isinstance(errors, list) and all(isinstance(e, dict) for e in errors)):
        raise ValueError("malformed collection errors in the results document")
    if type(data.get("exit_code")) is not int or not isinstance(data.get("junit"), (str, type(None))):
        raise ValueError("malformed exit code or JUnit report in the results document")
    if data["junit"] is not None and re.search(r"<!(DOCTYPE|ENTITY)", data["junit"], re.I):
        raise ValueError("the JUnit report declares a document type or entities (pytest writes none): forged")
    keys = len(outcomes) + len(data.get("seals") or {}) + len(data.get("raised_at") or {})
    if keys > MAX_RESULT_KEYS:
        raise ValueError(f"the results document names {keys} test cases, more than any group runs: forged")
    seals, raised = data.get("seals", {}), data.get("raised_at", {})
    if not (isinstance(seals, dict) and all(isinstance(k, str) and isinstance(v, list) and all(
            isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) for r in v) for k, v in seals.items())):
        raise ValueError("malformed sealed values in the results document")
    if not (isinstance(raised, dict) and all(isinstance(k, str) and type(v) is int for k, v in raised.items())):
        raise ValueError("malformed failure lines in the results document")
    return {"outcomes": outcomes, "exit_code": data["exit_code"], "junit": data["junit"], "seals": seals,
            "raised_at": raised,
            "collect_errors": [{"node": str(e.get("node", "")), "error": str(e.get("error", ""))} for e in errors]}


FOREIGN = "(under a name it does not run under) "
MAX_RESULT_KEYS = 50_000
"""Test cases one group's results document may name (its outcomes, sealed values and failure lines together): more
than any test file's group runs; the host's checks cost time per name."""


def _owns(key: str, group: list[str], wire: Tripwire | None, key_of=lambda n: n) -> bool:
    """Whether a group may report ``key``: one of its requested tests (exactly the requested case where a parameter
    id was asked for, any case where none was), or its tripwire (the cases asked of its model)."""
    base, bracket, _ = key.partition("[")
    for n in group:
        k = key_of(n)
        if "[" in n:
            if key == k:
                return True
        elif base == k:
            return True
    if wire is None or base != key_of(wire.node):
        return False
    asked = [n for n in group if wire.model and n.partition("[")[0] == wire.model]
    if not bracket or not asked or any("[" not in n for n in asked):
        return True
    return any(key == key_of(wire.node + n[len(wire.model):]) for n in asked)


def wire_cases(wire: Tripwire, group: list[str]) -> list[str]:
    """The tripwire's node ids to run: the cases asked of its model where every one asked names its case (a copy run
    whole would report cases nobody asked for), else the tripwire itself."""
    asked = [n for n in group if wire.model and n.partition("[")[0] == wire.model]
    if asked and all("[" in n for n in asked):
        return [wire.node + n[len(wire.model):] for n in asked]
    return [wire.node]


def _wire_outcome(outcomes: dict[str, str], key: str) -> str | None:
    """The tripwire's outcome over its cases: failing where any case failed or errored (a case its model's
    parametrize marks xfail is xfailed like the model's), else what its cases say (None: none reported)."""
    found = [v for k, v in outcomes.items() if k == key or k.startswith(key + "[")]
    if not found:
        return None
    return next((v for v in found if v in FAILING), None) or next((v for v in found if v != "passed"), "passed")


def _as_run(node: str, names: dict[str, str]) -> str:
    """The node id a requested test runs under in the grader (``Composition.names``)."""
    base, bracket, params = node.partition("[")
    return names.get(base, base) + bracket + params


def _back(doc: dict, names: dict[str, str]) -> dict:
    """A group's document with its tests under their own names again: the plugin's node ids, and the JUnit report's
    test names (its ``name`` attribute, which is the function's name with its parameters)."""
    if not names:
        return doc
    reverse = {new: old for old, new in names.items()}

    def node(key: str) -> str:
        base, bracket, params = key.partition("[")
        if base in names:  # a test that runs under a drawn name cannot report under its own: written by the code
            return FOREIGN + key
        return reverse.get(base, base) + bracket + params

    out = {**doc, "outcomes": {node(k): v for k, v in doc["outcomes"].items()},
           "seals": {node(k): v for k, v in doc.get("seals", {}).items()},
           "raised_at": {node(k): v for k, v in doc.get("raised_at", {}).items()}}
    if doc["junit"] is not None:
        try:
            root = ET.fromstring(doc["junit"])
        except ET.ParseError:
            return out
        by_key = {_junit_key(new): old for new, old in reverse.items()}
        own_names = {_junit_key(old) for old in names}
        for case in root.iter("testcase"):
            key = f"{case.get('classname', '')}::{case.get('name', '')}"
            base, bracket, params = key.partition("[")
            if base in own_names:
                case.set("name", FOREIGN + case.get("name", ""))
            elif base in by_key:
                case.set("name", by_key[base].split("::")[-1] + bracket + params)
        try:
            out["junit"] = ET.tostring(root, encoding="unicode")
        except RecursionError:  # nested past what can be written back: not a report
            out["junit"] = None
    return out


def in_file_order(argv: list[str], source: bytes) -> list[str]:
    """Node ids in the order their tests are defined in ``source`` (the composed file), cases of one test in the
    order given. The argument list then says nothing the file does not: the order of the requested tests as a
    task lists them, with a tripwire inserted among them, would tell the tripwire apart. A node whose test is not
    found keeps its place after the found ones."""
    from ..pyparse import parse

    try:
        module = parse(source.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return argv
    lines: dict[tuple[str, ...], int] = {}
    stack: list[tuple[tuple[str, ...], list]] = [((), module.body)]
    while stack:
        prefix, body = stack.pop()
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines.setdefault((*prefix, n.name), n.lineno)
            elif isinstance(n, ast.ClassDef):
                stack.append(((*prefix, n.name), n.body))
    never = max(lines.values(), default=0) + 1

    def key(item: tuple[int, str]) -> tuple[int, int]:
        i, node = item
        return lines.get(tuple(node.partition("[")[0].split("::")[1:]), never), i

    return [n for _, n in sorted(enumerate(argv), key=key)]


def _group_nodes(nodes: list[str], file: str) -> list[str]:
    return [n for n in nodes if posixpath.normpath(n.split("::", 1)[0]) == file]


def _run_test_groups(sandbox: Sandbox, nodes: list[str], comp: Composition, limits: GraderLimits, task: Task,
                     outputs: tuple[str, ...] = ()) -> TestRun:
    """Every test file's group in a command of its own, driven from the host: before each and after the last, every
    process left is killed and every trusted file checked (``_between_groups``); each group's results are streamed
    back on its command's output and read as soon as it ended; then the channels are cross-checked (``_judge``)."""
    run = TestRun(configuration=comp.config_source)
    cfg = {**task.runtime.grader_config(), "config": f"/workspace/{comp.config}"}
    env = {"TRIALBOX_TEST_TIMEOUT": str(int(limits.test_timeout_s)), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "TRIALBOX_GROUP_CONFIG": json.dumps(cfg), "PYTHONDONTWRITEBYTECODE": "1"}
    files = test_files(nodes)
    wires = {w.group: w for w in comp.wires}
    rng = secrets.SystemRandom()
    deadline = time.monotonic() + limits.timeout_s
    logs: list[str] = []
    groups: list[tuple[list[str], Tripwire | None, dict | None, dict[str, int] | None]] = []
    for i, file in enumerate(files):
        run.integrity += _between_groups(sandbox, comp, f"before group {i}", outputs, run)
        group, wire = _group_nodes(nodes, file), wires.get(file)
        argv = [_as_run(n, comp.names) for n in group]
        if wire is not None and wire.embedded:  # every test in the order of the file, the tripwire at its own place
            argv = in_file_order(argv + wire_cases(wire, group), comp.tree.files.get(file, b""))
        elif wire is not None:  # in a file of its own: its place among the others drawn
            after = max((j + 1 for j, n in enumerate(group) if n.partition("[")[0] == wire.model), default=0) \
                if wire.after_model else 0
            at = rng.randrange(after, len(argv) + 1)
            argv[at:at] = wire_cases(wire, group)
        remaining = deadline - time.monotonic()
        if remaining <= 1:
            run.timed_out = True
            break
        try:
            res = sandbox.exec([task.runtime.command.interpreter, "-s", "-E", "-B", f"{TOOLS_MOUNT}/run_tests.py",
                                *argv], timeout=remaining, env=env)
        except SandboxBroken as exc:
            run.oom = exc.reason == "oom"
            run.log_tail = f"grader sandbox broke: {exc.message}"
            run.outcomes = {}
            return run
        run.exit_codes.append(res.exit_code if res.exit_code is not None else -1)
        run.oom = run.oom or res.oom_killed
        log = res.stderr.decode(errors="replace")
        shown = _without_tripwire(log, wire) if wire is not None else log
        own_names = {new.split("::")[-1]: old.split("::")[-1] for old, new in comp.names.items()
                     if old.split("::", 1)[0] == file}
        if own_names:  # the log speaks of the tests by their own names (one pass, whatever the log's size)
            pattern = "|".join(re.escape(n) for n in sorted(own_names, key=len, reverse=True))
            shown = re.sub(rf"(?<!\w)({pattern})(?!\w)", lambda m: own_names[m.group(1)], shown)
        logs.append(f"== {file} (exit {res.exit_code}; trialbox's tripwire test of this group left out) ==\n" + shown)
        if res.timed_out:
            run.timed_out = True
            break
        try:
            doc: dict | None = _back(_document(res), comp.names)
        except (ValueError, RecursionError, MemoryError) as exc:  # what the code under test can write there
            doc = None
            run.integrity.append(f"group {i} ({file}): no results: {exc}")
        try:
            counts = _summary(log) if res.stderr_size <= len(res.stderr) else None
        except ValueError as exc:  # a count past int()'s digit limit: written by the code under test (review 11)
            counts = None
            run.integrity.append(f"group {i} ({file}): pytest's closing counts do not read as numbers: "
                                 f"{str(exc)[:200]}")
        groups.append((group, wire, doc, counts))
    run.integrity += _between_groups(sandbox, comp, "after the last group", outputs, run)
    budget = max(1500, 6000 // max(1, len(logs)))
    run.log_tail = "\n".join(entry[-budget:] for entry in logs)[-12000:]
    codes = run.exit_codes
    run.exit_code = 0 if all(c == 0 for c in codes) else 1 if all(c in (0, 1) for c in codes) else \
        next((c for c in codes if c not in (0, 1)), None)
    if run.timed_out:  # a run that did not finish proves nothing: its reports count as not run
        run.outcomes = {}
        return run
    _judge(run, nodes, groups, comp.seals, comp.cases)
    return run


def _judge(run: TestRun, nodes: list[str], groups, seals: dict[str, list[Seal]] | None = None,
           least_cases: dict[str, int] | None = None) -> None:
    """The groups' channels against each other: the plugin's outcomes, the JUnit report, pytest's exit code (in the
    document and as the engine saw it), pytest's summary line in the log where it has one (``-qq`` in the task's
    options, or a log past what is read, leaves none: its absence proves nothing), each group's results for its own
    tests only (a group reporting another's tests is forgery), and the tripwire, which must have failed (with its
    values, where it has its own) wherever its group produced results, unless its model did not pass either."""
    plugin_all: dict[str, str] = {}
    junit_all: dict[str, str] = {}
    records: dict[str, list] = {}
    raised: dict[str, int] = {}
    found_any = False
    for i, (group, wire, doc, counts) in enumerate(groups):
        if doc is None:
            continue
        found_any = True
        foreign = sorted(k for k in [*doc["outcomes"], *doc.get("seals", {})] if not _owns(k, group, wire))
        records.update({k: v for k, v in doc.get("seals", {}).items() if _owns(k, group, wire)})
        raised.update({k: v for k, v in doc.get("raised_at", {}).items() if _owns(k, group, wire)})
        outcomes = {k: v for k, v in doc["outcomes"].items() if _owns(k, group, wire)}
        run.collect_errors += doc["collect_errors"]
        messages: dict[str, str] = {}
        junit: dict[str, str] = {}
        if doc["junit"] is not None:
            try:
                junit = _parse_junit(doc["junit"].encode(), messages)
                cases = [f"{c.get('classname', '')}::{c.get('name', '')}"
                         for c in ET.fromstring(doc["junit"]).iter("testcase")
                         if not any(str(e.get("message", "")).startswith("failed on teardown with")
                                    for e in c.iter("error"))]  # pytest's own second entry of a test
                if len(cases) != len(set(cases)):
                    run.integrity.append(f"group {i}: its JUnit report holds a test twice: results were forged")
            except (ET.ParseError, ValueError, LookupError, RecursionError) as exc:  # an encoding expat refuses
                run.integrity.append(f"group {i}: its JUnit report does not parse: {type(exc).__name__}: "
                                     f"{str(exc)[:300]}")  # raises LookupError or ValueError (review 11)
        elif doc["outcomes"]:
            run.integrity.append(f"group {i}: no JUnit report")
        junit = {k: v for k, v in junit.items() if not k.startswith("::")}  # a module that did not import
        foreign += sorted(k for k in junit if not _owns(k, group, wire, _junit_key))
        junit = {k: v for k, v in junit.items() if _owns(k, group, wire, _junit_key)}
        if foreign:  # a group speaks for its own tests only: one vouching for another's is forgery
            foreign = sorted(set(foreign))
            run.integrity.append(f"group {i} reported tests it was not given: {', '.join(foreign[:5])}")
        doc = {**doc, "outcomes": outcomes}
        plugin_all.update(outcomes)
        junit_all.update(junit)
        if doc["exit_code"] != run.exit_codes[i]:
            run.integrity.append(f"group {i}: pytest's exit code {doc['exit_code']} is not the process's "
                                 f"{run.exit_codes[i]}")
        passed = sum(v == "passed" for v in doc["outcomes"].values())
        if counts is not None and max(passed, sum(v == "passed" for v in junit.values())) > counts.get("passed", 0):
            run.integrity.append(f"group {i}: the results say {passed} passed, pytest's own summary "
                                 f"{counts.get('passed', 0)}")
        if wire is None:
            continue
        mine = _wire_outcome(doc["outcomes"], wire.node)
        theirs = _wire_outcome(junit, _junit_key(wire.node))
        if mine is None and theirs is None and not any(n in doc["outcomes"] for n in group) and \
                not select(junit, group, _junit_key):
            continue  # the group ran nothing (its module did not import): no result for the tripwire to vouch for
        asked = [n for n in group if wire.model and n.partition("[")[0] == wire.model]
        model = select(doc["outcomes"], asked)
        if asked and len(model) == len(asked) and all(v in ("skipped", "xfailed") for v in model.values()) and \
                mine in ("skipped", "xfailed"):
            continue  # every case of its model asked for was skipped or xfailed (by a mark, or by itself): so was it
        key = _junit_key(wire.node)
        text = " ".join(m for k, m in messages.items() if k == key or k.startswith(key + "["))
        if mine not in FAILING or theirs not in FAILING:
            run.integrity.append(f"group {i}: a test that must fail was reported {mine}/{theirs}: "
                                 "results were forged from inside the test process")
        elif not all(v in text for v in wire.shows):
            run.integrity.append(f"group {i}: a test that must fail failed without its values: the failure report "
                                 "was forged")
        elif run.exit_codes[i] == 0:
            run.integrity.append(f"group {i}: the runner exited with 0 although one of its tests must fail")
    run.results_found = found_any
    if not found_any:
        run.integrity.append("no plugin results from any group")
    run.collect_errors = one_per_file(run.collect_errors)
    run.outcomes = select(plugin_all, nodes)
    junit_sel = select(junit_all, nodes, _junit_key)
    for node in nodes:
        mine, theirs = run.outcomes.get(node), junit_sel.get(node)
        if (mine is None and theirs is None) or (mine is not None and theirs is None and not junit_all):
            continue
        if (mine == "passed") != (theirs == "passed"):
            run.integrity.append(f"{node}: plugin says {mine}, JUnit says {theirs}")
    for node, least in (least_cases or {}).items():  # a parametrized test passes only with every one of its cases
        reported = {k for k in plugin_all if k.startswith(node + "[")}
        if run.outcomes.get(node) == "passed" and len(reported) < least:
            run.integrity.append(f"{node}: {len(reported)} of its {least} cases reported: results were forged")
            run.outcomes[node] = "failed"
    if seals:
        _apply_seals(run, nodes, plugin_all, records, seals, raised)


MAX_SEAL_EVIDENCE = 10
"""Mismatched sealed assertions kept in a test's evidence (and integrity lines of one kind per test)."""
MAX_SEALED_VALUES = 1000
"""Sealed values one test case may send (the plugin's own bound)."""
SEAL_READING_S = 30.0
"""How long the host reads one grading's sealed values at most (honest ones take well under a second; each value's
own cost is bounded by ``seal.MAX_HASHED``)."""


def _apply_seals(run: TestRun, nodes: list[str], outcomes: dict[str, str], records: dict[str, list],
                 seals: dict[str, list[Seal]], raised_at: dict[str, int] | None = None) -> None:
    """Each requested test's sealed assertions against the values its cases sent (``seal``): a case passes only
    when pytest passed it and each of its sealed assertions sent exactly one value that meets its literal. A value
    that does not meet it fails the test; a passed case that sent none, or more than one, or one that does not
    decode, was forged (``grader_integrity``). Values sent by cases that failed anyway are compared too: that a
    test's failure on the untouched repository is a sealed value is what ``tasks check`` reports as sealed, as is
    a sealed assertion whose value raised (the line the test failed on, as the plugin saw it: ``raised``). Only
    cases with a reported outcome are read; reading stops at ``SEAL_READING_S`` (what is left fails, as forged)."""
    notes: list[str] = []
    deadline = time.monotonic() + SEAL_READING_S
    for node in nodes:
        mine = seals.get(node.partition("[")[0])
        if not mine:
            continue
        items = sorted(k for k in outcomes if k == node or k.startswith(node + "["))
        held, mismatched, missing, failed, malformed, raised = 0, [], [], False, 0, []
        held_literals: set[str] = set()
        budget = [MAX_ITEMS, HASHED_PER_GROUP]
        for item in items:
            if time.monotonic() > deadline:
                failed = True
                run.integrity.append(f"{node}: its sealed values were not all read within {SEAL_READING_S:.0f} s, "
                                     "far past what any test sends: results were forged")
                break
            passed = outcomes.get(item) == "passed"
            sent = records.get(item, [])
            line = (raised_at or {}).get(item)
            raised += [{"assertion": seal.statement, "expected": seal.expected, "case": item, "deciding": seal.deciding,
                        "literal": seal.canonical}
                       for seal in mine if line is not None and seal.lines[0] <= line <= seal.lines[1]
                       and not any(slot == seal.slot for slot, _ in sent)][:MAX_SEAL_EVIDENCE]
            if len(sent) > MAX_SEALED_VALUES:  # more than the plugin sends: the rest is not read
                run.integrity.append(f"{item}: {len(sent)} sealed values, more than trialbox's plugin sends: "
                                     "results were forged")
                failed, sent = True, sent[:MAX_SEALED_VALUES]
            for seal in mine:
                got = [data for slot, data in sent if slot == seal.slot]
                if passed and len(got) != 1:
                    failed = True
                    missing.append({"assertion": seal.statement, "case": item, "values_sent": len(got)})
                    if len(missing) <= MAX_SEAL_EVIDENCE:
                        run.integrity.append(f"{item}: passed but sent {len(got)} values for a sealed assertion "
                                             "that runs once: results were forged from inside the test process")
                if not got:
                    continue
                try:
                    value = decode(got[0], budget=budget)
                except Malformed as exc:
                    failed = failed or passed
                    malformed += 1
                    if malformed <= MAX_SEAL_EVIDENCE:
                        run.integrity.append(f"{item}: a sealed value that trialbox's plugin does not send ({exc}): "
                                             "results were forged")
                    continue
                if seal.holds(value):
                    held += 1
                    held_literals.add(seal.canonical)
                    continue
                failed = failed or passed
                if len(mismatched) < MAX_SEAL_EVIDENCE:
                    mismatched.append({"assertion": seal.statement, "expected": seal.expected, "got": shown(value),
                                       "case": item, "deciding": seal.deciding, "literal": seal.canonical})
        run.sealed[node] = {"sealed": len(mine), "held": held, "mismatched": mismatched, "missing": missing[:10],
                            "raised": raised[:MAX_SEAL_EVIDENCE], "held_literals": sorted(held_literals)[:50]}
        if failed and run.outcomes.get(node) == "passed":
            run.outcomes[node] = "failed"
        notes += [f"{m['case']}: {m['assertion'].splitlines()[0][:200]}: the test sent {m['got']}"
                  for m in mismatched] + [f"{m['case']}: passed without sending the value of "
                                          f"{m['assertion'].splitlines()[0][:200]}" for m in missing[:10]]
    if notes:  # pytest's own log counts such a test passed: the host's account beside it
        run.log_tail += "\n== sealed assertions, compared on the host (pytest above holds no literal of them) ==\n" + \
            "\n".join(notes[:50])

