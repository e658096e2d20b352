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
its check and its read. The reward is read by trialbox: ``reward.json`` (an object of named numbers) or else
``reward.txt`` (one number, the metric ``reward``), the order of Harbor's current verifier; each a regular file
(never a symbolic link), small, and parsing as the contract says, and the two agreeing on ``reward`` where a
script writes both; accepted exactly when every condition of the grader's ``acceptance`` holds.

Cross-checks (each failure an integrity problem of the trial, a rejection):

* the reward folder is empty when the script starts (it is new: nothing the agent wrote can be there);
* the script was not killed by a signal after a passing reward was written (code under test that writes the
  reward and then kills the script before the script's own verdict);
* nothing the agent added or changed replaces what the test runner runs (``replaced_runners``, judged on the
  host from the trees, against what ``PROBE`` found in the grader before any of the agent's code ran):

  - an executable in a folder of the script's ``PATH`` that lies inside the workspace;
  - a ``pytest11`` entry point in distribution metadata anywhere in the workspace, matched as
    ``importlib.metadata`` finds it: a ``*.dist-info`` or ``*.egg-info`` folder (or ``*.egg/EGG-INFO``) in any
    case, its ``entry_points.txt`` in any case too;
  - any change in a site folder of the runner's Python path inside the workspace (an environment installed
    there: its pytest, its plugins);
  - an importable top-level module (``name.py``, ``name*.so``, a package ``name/`` with an ``__init__``, a link
    named ``name``; a folder ``name/`` without one only when ``name`` is a namespace package elsewhere, since a
    namespace portion never wins over a module found later on the path) named like a module the environment's
    Python can import from outside the workspace: every name of its standard library
    (``sys.stdlib_module_names``) and built-in modules and every top-level name in the folders and archives of
    its path (site-packages: pytest, pluggy, every plugin), with this Python's standard library, pytest's own
    names, the witness's, and the names the standard library and pytest *try* to import whether or not they are
    installed (``TRIED_NAMES``: ``org``, which ``copy`` tries before pytest loads its plugins) always added;
    not only what ``import pytest`` loads, since pytest imports some of
    them later (``xml``, ``pdb``, ``code``…); judged in every folder
    of the workspace a module can be imported from when the tests run (its root, the folders of the path and of
    the script's ``PYTHONPATH`` inside it, the first non-package folder above each test and ``conftest.py``
    file), except names the original workspace itself has there (the task's own package);
* the pytest sessions the script ran, as the **witness** saw them. ``grader_tools/witness`` is a pytest plugin
  made discoverable on the script's Python path; when pytest loads it (before any test module is imported) it
  connects to the witness's server, ``trialbox_witness_server.py``, run by trialbox **as root** from the image's
  own ``python3`` before the script starts, listening on a socket in a folder only root can write
  (``/dev/shm/.trialbox-witness-<random>``). The server prints what it receives to its own output, which the
  engine streams to the host: there is no record file in the container, and the sandbox user can neither write to
  that output nor signal, trace or stop the server. The kernel names every sender (``SO_PEERCRED`` for the
  connection, ``SCM_CREDENTIALS`` for each message) and the server reads the connecting process's parents while
  it waits for its ``ok``. After the script, trialbox stops the server (it drains what was sent and prints its
  last line), then kills what the script left, then reads the reward. With a passing reward: the record must be
  whole (stopped by trialbox, its bound not reached); of the sessions the script itself started (processes whose
  parents lead to the script's exec through no other pytest process and not through init: a session nested in the
  tests, or in a process left detached, is not the script's verdict), every one must have finished, at least one
  with every test passing, and no message on a session's connection may come from another process (a forked
  child) or be other than the witness's. A script that runs pytest another way loads no witness, and then nothing
  of this is checked; an image without ``python3`` in its system folders runs no server (noted in the evidence).
  The socket's path is in the script's environment (``TRIALBOX_WITNESS``) and is no secret: connecting to it
  lets a process speak only as itself.

What cannot be checked, and the pytest grader can: the script's test runner runs the code under test in its own
process, as the same user, so that code can write the reward itself, and it can speak for its own process to the
witness: code running inside a pytest process the script started can send that session's finish (every test
passed) on the plugin's connection and end the process, or change pytest's reports in memory so pytest itself
counts them passed; where the host's kernel lets a process trace another of the same user (no Yama
``ptrace_scope`` ≥ 1), a process of the code under test can do the same inside another pytest process of the
script. What it cannot do: remove, rewrite or reorder what was sent, speak for another process without tracing
it, make a session it started count as the script's, or send after the server stopped. Code of the agent that
runs before pytest loads its plugins (a shadowing module, ``sitecustomize.py``, a ``.pth`` file) can keep the
witness from loading at all: the module checks above and the scope criterion (``conftest.py``,
``sitecustomize.py``, ``.pth`` files, pytest configuration) are what reject those. There is no tripwire and no
second result channel that code cannot reach.
"""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
import re
import secrets
import sys
import threading
import time
import uuid
from typing import Any

from ..engine import ROLE_LABEL
from ..errors import GraderInfraError, OutputLost, SandboxBroken, SandboxError
from ..sandbox.base import (READ_ATTEMPTS, Sandbox, SandboxFactory, SandboxSpec, home_for, remove_and_meter,
                            uid_gid)
from ..sandbox.dockerexec import SYSTEM_PATH
from ..sandbox.meter import Usage
from ..stageclock import lap
from ..tasks import Task
from ..textsafe import path_bytes
from .diff import is_artifact
from .runner import TOOLS, TOOLS_MOUNT, GraderLimits, TestRun
from .tree import Tree, changed_in, followed

MAX_REWARD_BYTES = 64 << 10
WITNESS_SERVER = f"{TOOLS_MOUNT}/witness/trialbox_witness_server.py"
WITNESS_STOP_S = 20.0
RUN_SCRIPT = 'PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$1" exec bash "$2"'
"""The test script, with the witness's folder appended (last) to whatever Python path the environment has."""
READ_REGULAR = ('[ -L "$1" ] && { echo link; exit 0; }; [ -e "$1" ] || { echo absent; exit 0; }; '
                '[ -f "$1" ] || { echo other; exit 0; }; n=$(wc -c < "$1") || exit 3; echo "file $n"; '
                'exec cat -- "$1"')
MODULE_PATH = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.py|(?:\.[^/]*)?\.so|(/.*\.(?:py|so)))$")
"""A path (relative to a folder on the Python path) that makes its first component an importable top-level name:
``name.py``, ``name*.so``, or a Python file anywhere under ``name/`` (a package, or a namespace portion: group 2)."""
INIT = re.compile(r"^__init__(?:\.py|(?:\.[^/]*)?\.so)$")
ENTRY_POINTS = re.compile(r"(?:^|/)(?:[^/]*\.(?:dist-info|egg-info)|[^/]*\.egg/egg-info)/entry_points\.txt$",
                          re.IGNORECASE)
"""Distribution metadata whose entry points ``importlib.metadata`` reads (it matches the folder's suffix in any
case; the file name too, here, in case the filesystem does not tell case)."""
SITE_FOLDER = re.compile(r"(?:^|/)(?:site-packages|dist-packages|lib/python[0-9]+(?:\.[0-9]+)?t?(?:/lib-dynload)?)$")
"""A site folder, or a Python's own library folder (``lib/python3.11``, ``lib/python3.13t``; never ``python3compat``,
the seventeenth review)."""
TEST_FILE = re.compile(r"(?:^|/)(?:conftest\.py|test_[^/]*\.py|[^/]*_test\.py)$")
TRIED_NAMES = frozenset({
    # the standard library's imports of modules outside it (present on other platforms, or optional): copy and
    # pickle try Jython's ``org.python.core`` when imported, before pytest loads any plugin (the eighteenth
    # review: ``org/__init__.py`` ran in place of the test run, accepted); platform, xml.sax and logging try
    # these others
    "org", "java", "_winreg", "vms_lib", "win32api", "win32con", "win32evtlog", "win32evtlogutil", "docutils", "pip",
    "pgen2",
    # pytest's and pluggy's optional imports
    "annotationlib", "argcomplete", "numpy", "pexpect", "pkg_resources", "twisted", "typing_extensions", "zope"})
"""Top-level names that the standard library and pytest *try* to import, installed or not (found by reading every
import statement of CPython 3.11's library and of pytest 8-9, pluggy, iniconfig and packaging): a module of the
agent's with such a name would run when they try, even though nothing by that name is installed."""
FALLBACK_NAMES = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {
    "pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "exceptiongroup", "tomli", "pygments",
    "colorama"} | TRIED_NAMES
"""Names judged whatever the environment's Python says (it may not be the Python the script runs pytest with, or
could not be asked): this Python's standard library and built-in modules, pytest's own and its dependencies', and
the names they try to import (``TRIED_NAMES``)."""
WITNESS_NAMES = frozenset({"trialbox_witness", "trialbox_witness_server"})
"""The witness's own modules (on the script's Python path after the workspace: a module of the agent's with that
name would be loaded in the witness's place)."""
PROBE = r"""
import json, os, sys
root = sys.argv[1].rstrip("/")
def inside(p):
    return p == root or p.startswith(root + "/")
names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
namespaces = set()
found, workspace, pythonpath = [], [], []
extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
entries = list(sys.path)
import site  # run with -S: the site folders and what their .pth files add, read here without running any of it
for d in site.getsitepackages():
    entries.append(d)
    try:
        pths = sorted(n for n in os.listdir(d) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        continue
    for n in pths:
        try:
            lines = open(os.path.join(d, n), encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.rstrip()
            if line and not line.startswith(("#", "import ", "import\t")):
                entries.append(os.path.join(d, line))
for entry in entries + extra:
    p = os.path.normpath(os.path.join(root, entry)) if entry else root
    if inside(p):
        (pythonpath if entry in extra else workspace).append(p[len(root) + 1:])
        continue
    found.append(p)
    if os.path.isdir(p):
        try:
            listing = os.listdir(p)
        except OSError:
            continue
    else:
        try:
            import zipfile
            listing = {n.split("/")[0] for n in zipfile.ZipFile(p).namelist()}
        except Exception:
            continue
    for n in listing:
        head = n.split(".")[0]
        if head.isidentifier() and (n.endswith((".py", ".pyc", ".so")) or "." not in n):
            names.add(head)
            d = os.path.join(p, n)
            if "." not in n and os.path.isdir(d) and not any(c.startswith("__init__.") for c in os.listdir(d)):
                namespaces.add(n)
print(json.dumps({"names": sorted(names), "namespaces": sorted(namespaces), "workspace": sorted(set(workspace)),
                  "pythonpath": sorted(set(pythonpath)), "stdlib_listed": hasattr(sys, "stdlib_module_names")}))
"""
"""Run in the grader before any of the agent's code (the environment's own ``python3``, isolated and without
``site``, from ``/``; ``.pth`` files are read as data, their ``import`` lines never run):
every top-level name its Python can import from outside the workspace (its standard library, built-in modules and
every folder and archive of its path: site-packages with pytest and its plugins, and what ``.pth`` files add), and
the folders of that path, and of the script's ``PYTHONPATH``, inside the workspace."""


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
    return changed_in(tree, original)


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


def import_folders(tree: Tree, probed: dict) -> tuple[list[str], list[str]]:
    """The workspace's folders (relative; ``""`` is its root) where a top-level module can be imported from when
    the tests run: its root (the working directory), the folders of the script's Python path inside it, and the
    folder pytest puts first on the path for each test or ``conftest.py`` file (the first one upwards that is not a
    package); and apart, the site folders of the path inside it (an environment installed in the workspace)."""
    site = sorted({d for d in probed.get("workspace", []) if SITE_FOLDER.search(d)})
    out = {"", *probed.get("pythonpath", []), *(d for d in probed.get("workspace", []) if d not in site)}
    for path in [*tree.files, *tree.symlinks]:
        if TEST_FILE.search(path):
            d = posixpath.dirname(path)
            while d and f"{d}/__init__.py" in tree.files:
                d = posixpath.dirname(d)
            out.add(d)
    return sorted(out), site


def _is_package(tree: Tree, folder: str) -> bool:
    """Whether ``folder`` of ``tree`` is a regular package (an ``__init__`` module in it)."""
    return any(INIT.match(p[len(folder) + 1:]) for p in [*tree.files, *tree.symlinks] if p.startswith(f"{folder}/"))


def _top_names(tree: Tree, folder: str, paths: list[str], namespaces: set[str] | None = None) -> set[str]:
    """The top-level names these paths (of ``tree``) make importable from ``folder``. With ``namespaces`` (the
    names that are namespace packages elsewhere), a file under a folder that is no package in ``tree`` (no
    ``__init__``) counts only for those: a namespace portion never wins over a module or package found later on
    the path."""
    prefix = f"{folder}/" if folder else ""
    out = set()
    for p in paths:
        if not p.startswith(prefix):
            continue
        rel = p[len(prefix):]
        if m := MODULE_PATH.match(rel):
            name = m.group(1)
            if m.group(2) and namespaces is not None and name not in namespaces \
                    and not _is_package(tree, f"{prefix}{name}"):
                continue
            out.add(name)
        elif p in tree.symlinks and rel.isidentifier():  # a link to a package folder, named like the package
            out.add(rel)
    return out


def _site_folders(paths: list[str]) -> set[str]:
    """The site folders (``SITE_FOLDER``) these workspace paths lie in, each the shortest such prefix."""
    out = set()
    for p in paths:
        parts = p.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if SITE_FOLDER.search(prefix):
                out.add(prefix)
                break
    return out


def _has_pytest_entry_point(*texts: bytes | None) -> bool:
    return any(t is not None and b"pytest11" in t.lower() for t in texts)


def replaced_runners(tree: Tree, workdir: str, changed: list[str], path_env: str, probed: dict,
                     original: Tree | None = None) -> list[str]:
    """What of the agent's changes would run in place of the test runner's own code (see the module docstring):
    an executable in a ``PATH`` folder inside the workspace; a pytest entry point in distribution metadata
    anywhere in it (read as ``importlib.metadata`` reads it); a change in a site folder of the Python path inside
    it; a top-level module, in a folder it can be imported from, named like one the environment's Python can
    import from elsewhere (``probed``: ``PROBE``'s answer) and not the task's own there."""
    out = []
    original = original or Tree()
    root = workdir.rstrip("/")
    # a PATH entry as the shell uses it: relative ones (``node_modules/.bin``, ``.``, an empty entry) from the
    # working directory the script starts in, the workspace (the sixteenth review: a relative entry was not
    # judged at all); ``/app/./bin`` and ``/app//bin`` are ``/app/bin``
    entries = [posixpath.normpath(x if x.startswith("/") else posixpath.join(root, x)) for x in path_env.split(":")]
    for d in dict.fromkeys(entries):
        if d != root and not d.startswith(root + "/"):
            continue
        rel = d[len(root) + 1:]
        hits = [p for p in changed if posixpath.dirname(p) == rel and (p in tree.executable or p in tree.symlinks)]
        out += [f"{p}: an executable added or changed in {d}, a folder of the test script's PATH (it would run in "
                f"place of a command)" for p in hits]
    for p in changed:
        if ENTRY_POINTS.search(p) and _has_pytest_entry_point(tree.files.get(p), original.files.get(p)):
            out.append(f"{p}: the agent added or changed a pytest11 entry point in distribution metadata (pytest "
                       "would load the plugin it names into the test run)")
    folders, site = import_folders(tree, probed)
    if "names" not in probed:  # the environment's Python was not asked (a python3 in the workspace, or none): every
        # site folder of the workspace counts as one of the runner's (the sixteenth review: a virtual environment
        # in the workspace had turned the check off)
        site = sorted(set(site) | _site_folders([*tree.files, *tree.symlinks]))
    for d in site:
        hits = [p for p in changed if p.startswith(f"{d}/") and not ENTRY_POINTS.search(p)]
        out += [f"{p}: the agent added or changed a file of {root}/{d}, a site folder of the test runner's Python "
                f"path inside the workspace (installed code runs as the runner's own)" for p in hits[:20]]
    names = set(probed.get("names") or ()) | FALLBACK_NAMES | WITNESS_NAMES
    # a folder without ``__init__`` is a namespace portion, imported when no module of that name is found anywhere
    # on the path: so for a tried name nothing installs (``org``), a plain folder ``org/`` runs its modules too
    namespaces = set(probed.get("namespaces") or ()) | (TRIED_NAMES - set(probed.get("names") or ()))
    for d in folders:
        # the task's own modules there are exempt, judged as the final's are: a plain folder without ``__init__``
        # in the original is no module of its (the sixteenth review: ``code/`` exempted the agent's ``code``)
        shadow = (_top_names(tree, d, changed, namespaces) & names) - _top_names(original, d, [*original.files,
                                                                                           *original.symlinks],
                                                                                 namespaces)
        where = f"{root}/{d}" if d else root
        out += [f"{(d + '/') if d else ''}{t}: the agent added or changed an importable module in {where} with the "
                f"name of a module the environment's Python can import (it would be imported in its place)"
                for t in sorted(shadow)]
    return list(dict.fromkeys(out))


PROBE_RUN = ('printf "%s\\n" "$PATH"; printf "%s\\n" "${PYTHONPATH-}"; p=$(command -v python3) || exit 0; '
             'case "$p" in "$2"/*) '
             'printf "inside %s %s\\n" "$(readlink -f "$p" 2>/dev/null)" "$p"; exit 0 ;; esac; '
             'cd / && exec "$p" -I -S -c "$1" "$2"')
"""The script's PATH and PYTHONPATH, then ``PROBE``'s answer from its python3 (isolated, without ``site``: no ``.pth``
file runs); a python3 inside the workspace is not run (it may be the agent's), its real path is printed instead."""


def _probe(sandbox: Sandbox, workdir: str, env: dict[str, str], changed: list[str] | None = None) -> tuple[str, dict]:
    """The script's PATH and what ``PROBE`` says (nothing when there is no python3). A python3 found in the
    workspace (an environment installed there) is run only when it is a link out of the workspace that nothing the
    agent changed in its folder stands in for: no code of the agent's runs before the witness's server is up (a
    link changed elsewhere on the way out ends in a program of the image, given only data)."""
    root = workdir.rstrip("/")
    res = sandbox.exec(["sh", "-c", PROBE_RUN, "sh", PROBE, root], timeout=60, env=env)
    lines = res.text().splitlines()
    path_env = lines[0] if lines else ""
    python_path = lines[1] if len(lines) > 1 else ""
    answer = lines[2] if len(lines) > 2 else ""
    if answer.startswith("inside "):
        real, _, command = answer[len("inside "):].partition(" ")
        folder = {posixpath.dirname(p) for p in (changed or [])}
        found = [d for d in path_env.split(":") if d.startswith(root + "/")]
        rel_dirs = {d[len(root) + 1:].rstrip("/") for d in found}
        if not real.startswith("/") or real == root or real.startswith(root + "/") or rel_dirs & folder:
            return path_env, {"note": "the python3 on the script's PATH is in the workspace: not asked",
                              "pythonpath": _inside(python_path, root)}
        # by its link, so that the environment it belongs to (its pyvenv.cfg, its site folder) is the one asked
        res = sandbox.exec(["sh", "-c", 'cd / && exec "$1" -I -S -c "$2" "$3"', "sh", command, PROBE, root],
                           timeout=60, env=env)
        lines = ["", *res.text().splitlines()]
        answer = lines[1] if len(lines) > 1 else ""
    try:
        probed = json.loads(answer) if answer else {}
    except ValueError:
        probed = {}
    if not isinstance(probed, dict):
        probed = {}
    if "names" not in probed:  # not asked: the script's PYTHONPATH folders in the workspace still come first on the
        # path (the seventeenth review: ``src/pytest.py`` under ``PYTHONPATH=/app/src`` with a workspace venv)
        probed["pythonpath"] = _inside(python_path, root)
    return path_env, probed


def _inside(python_path: str, root: str) -> list[str]:
    """The folders of a PYTHONPATH inside the workspace at ``root``, relative to it (``""`` for the root)."""
    entries = [posixpath.normpath(x if x.startswith("/") else posixpath.join(root, x))
               for x in python_path.split(":") if x]
    return sorted({e[len(root) + 1:] for e in entries if e.startswith(root + "/")} | ({""} if root in entries else set()))


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
    in the grader can change them), the reward folder new, its init and command root's."""
    g, workdir = task.grader, task.config.workdir
    return SandboxSpec(image_id=image_id, name=f"{name}-{uuid.uuid4().hex[:6]}", cpu_limit=limits.cpu_limit,
                       cpu_reservation=limits.cpu_reservation, memory_limit_mb=limits.memory_limit_mb,
                       memory_reservation_mb=limits.memory_reservation_mb, pids_limit=limits.pids_limit,
                       disk_limit_mb=limits.disk_limit_mb, network="none", runtime=limits.runtime, workdir=workdir,
                       home=home_for(workdir),
                       # copies of its own: no file of them is another grader's (a lock on one is seen by all)
                       copied_mounts=((str(task.grader_path(g.tests).resolve()), g.tests_mount),  # type: ignore[arg-type]
                                      (str(TOOLS), TOOLS_MOUNT)),
                       scratch_dirs=(g.reward_dir,), env=task.runtime.sandbox_env(),
                       # the container's init and own command are root's: no process of the test user can trace
                       # one and so outlive the kill of what the script left (the kill spares them)
                       init_user="0:0", labels={**(labels or {}), ROLE_LABEL: "grader"})


class Witness:
    """The witness's server in one grader container (``grader_tools/witness/trialbox_witness_server.py``), run as
    root by an exec of its own in a thread, its output (the record) streamed to the host."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.folder = f"/dev/shm/.trialbox-witness-{secrets.token_hex(8)}"
        self.thread: threading.Thread | None = None
        self.result: Any = None
        self.stopped = False
        self.note = ""

    @property
    def socket(self) -> str:
        return f"{self.folder}/s"

    def start(self, timeout: float) -> bool:
        """Start the server and wait until it listens; False (and ``note``) when the image has no python3 for it.
        ``GraderInfraError`` when it has one and the server does not come up."""
        env = {"PATH": SYSTEM_PATH}
        made = self.sandbox.exec(["sh", "-c", 'command -v python3 >/dev/null 2>&1 || { echo none; exit 0; }; '
                                              'mkdir -m 0711 -- "$1" && echo made', "sh", self.folder],
                                 timeout=30, user="0", env=env).text().strip()
        if made == "none":
            self.note = "the image has no python3 in its system folders to run the witness's server"
            return False
        if made != "made":
            raise GraderInfraError("grader_setup", f"the witness's folder could not be made ({made[-200:]!r})")

        def serve() -> None:
            try:
                self.result = self.sandbox.exec(["python3", "-I", "-S", "-B", WITNESS_SERVER, self.folder],
                                                timeout=timeout, user="0", env=env, cwd="/")
            except BaseException as exc:  # noqa: BLE001  (told by the record's end, read on the host)
                self.result = exc

        self.thread = threading.Thread(target=serve, name="witness-server", daemon=True)
        self.thread.start()
        ready = self.sandbox.exec(["sh", "-c", 'i=0; while [ ! -f "$1/pid" ]; do i=$((i + 1)); [ "$i" -le 300 ] '
                                               '|| exit 1; sleep 0.05; done; echo ready', "sh", self.folder],
                                  timeout=60, user="0", env=env).text().strip()
        if ready != "ready" or not self.thread.is_alive():
            self.stop()
            raise GraderInfraError("grader_setup", f"the witness's server did not start ({self.outcome()[-200:]!r})")
        return True

    def signal(self) -> None:
        """Tell the server to stop (it drains what was sent, prints its last line and exits), once."""
        if self.thread is None or self.stopped:
            return
        self.stopped = True
        try:
            self.sandbox.exec(["sh", "-c", 'kill -TERM "$(cat "$1/pid")"', "sh", self.folder], timeout=30,
                              user="0", env={"PATH": SYSTEM_PATH})
        except SandboxError:
            pass

    def stop(self) -> str:
        """Stop the server (``signal``) and return its record, once its output has ended."""
        if self.thread is None:
            return ""
        self.signal()
        self.thread.join(WITNESS_STOP_S)
        return self.outcome()

    def outcome(self) -> str:
        res = self.result
        if res is None or isinstance(res, BaseException):
            return "" if res is None else f"{type(res).__name__}: {res}"
        return res.stdout.decode("utf-8", errors="replace")


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
    witness = Witness(sandbox)
    try:
        try:
            sandbox.start()
            sandbox.copy_in(tree.to_tar(None, *uid_gid(sandbox.spec.user)), workdir)
            # what the reward folder holds before the script (nothing)
            # find, not ls: ls stats its argument with statx, which gVisor as Debian 12 ships refuses; one x per
            # entry whatever its name holds (-exec printf: BusyBox's find has no -printf), and find's failure is
            # the check's (a pipe into wc would read it as an empty folder)
            found = sandbox.exec(["sh", "-c", 'n=$(find "$1" -mindepth 1 -maxdepth 1 -exec printf x \\;) || exit 3; '
                                  'echo "${#n}"', "sh", g.reward_dir], timeout=30,
                                 env={"PATH": SYSTEM_PATH}).text().strip()
            if not found.isdigit():
                raise GraderInfraError("grader_setup", f"the reward folder {g.reward_dir} could not be checked "
                                                       f"({found[-200:]!r})")
            # judged on the workspace as programs read it: what a link leads to stands at the link's path too
            before = followed(without_artifacts(original), workdir) if original else None
            seen = followed(tree, workdir)
            changed = changed_paths(seen, before)
            replaced = replaced_runners(seen, workdir, changed, *_probe(sandbox, workdir, g.env, changed),
                                        original=before) if changed else []
            if seen.truncated and (before is None or not before.truncated
                                   or any(before.symlinks.get(p) != t for p, t in seen.symlinks.items())):
                replaced.append(f"{seen.problems[-1]}: what the agent's links put in the test runner's way cannot "
                                "all be judged")
            # the server outlives the script by the time its end takes (leftovers killed, reward read)
            witnessed = witness.start(timeout + 120)
        except (SandboxError, OSError) as exc:
            raise GraderInfraError("grader_start", str(exc)) from exc
        lap("grader_start")
        run = _run(sandbox, task, timeout, witness if witnessed else None)
        if not witnessed:
            run.witness = {"loaded": False, "note": witness.note}
        run.ignored = ignored
        lap("grading")
        if found != "0":
            run.integrity.append(f"the reward folder {g.reward_dir} was not empty before the script ran ({found})")
        run.integrity[:0] = replaced
        return run
    finally:
        try:
            witness.stop()
        finally:
            remove_and_meter(sandbox, usage, "grader_cleanup")


def _run(sandbox: Sandbox, task: Task, timeout: float, witness: Witness | None) -> TestRun:
    g = task.grader
    run = TestRun()
    script = f"{g.tests_mount.rstrip('/')}/{g.script}"
    env = {**g.env, "TRIALBOX_WITNESS": witness.socket} if witness else dict(g.env)
    try:
        res = sandbox.exec(["sh", "-c", RUN_SCRIPT, "sh", f"{TOOLS_MOUNT}/witness", script], timeout=timeout, env=env)
        run.exit_code, run.timed_out, run.oom = res.exit_code, res.timed_out, res.oom_killed
        run.log_tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-6000:]
        if run.timed_out:  # a run that did not finish proves nothing
            return run
        if witness:  # told first: the sandbox user's kill cannot end a root process, and waits for it to exit
            witness.signal()
        killed = sandbox.kill_leftovers()  # nothing the script left can write any more
        record = witness.stop() if witness else None
        _read_reward(sandbox, run, task)
        accepted = g.acceptance.holds(run.reward)
        if accepted and not killed and sandbox.own_pid_namespace:
            run.integrity.append("the processes the test script left could not all be killed before the reward was "
                                 "read: a passing reward cannot be trusted")
        if accepted and (run.exit_code is None or run.exit_code >= 128):
            run.integrity.append(f"the test script was killed (exit {run.exit_code}) after a passing reward was "
                                 "written: the reward did not come from the script's own verdict")
        if record is not None:
            run.witness = witness_summary(record)
            if accepted:
                run.integrity += witness_problems(run.witness)
    except SandboxBroken as exc:  # the agent's code broke the grader's container: no result, the baseline decides
        run.oom = run.oom or exc.reason == "oom"
        run.reward, run.results_found = None, False
        run.log_tail += f"\ngrader sandbox broke: {exc.message}"
    return run


def _session_of_script(chain: list, session_pids: set[int]) -> bool:
    """Whether a connection's process was started by the test script itself: its parents, read while it waited,
    lead to the script's exec (a process whose parent is outside the container's pid namespace, not its init) and
    pass through no other pytest process (a session the code under test started inside one) nor init (a process
    left detached, adopted by it)."""
    if not chain or any(not isinstance(p, int) or isinstance(p, bool) for p in chain):
        return False
    return 1 not in chain and not any(p in session_pids for p in chain[1:])


def witness_summary(text: str) -> dict:
    """The witness server's record, summarised: the pytest sessions the test script started (each connection of
    a process the script started, its sessions at depth 0: finished with an exit status and outcome counts, or
    not), the sessions it did not start (nested in another one, or in a detached process: not the script's
    verdict), messages on a session's connection that another process sent, and whether the record is whole (the
    server stopped by trialbox, its bound not reached)."""
    conns: dict[int, dict] = {}
    intact = overflow = False
    malformed = 0
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            event = rec["event"]
        except (ValueError, KeyError, TypeError, RecursionError):
            malformed += 1
            continue
        if intact:  # nothing counts after the last line
            malformed += 1
            continue
        if event == "stopped":
            intact = True
        elif event in ("overflow", "refused"):  # its bound on what is kept, or on connections open at once
            overflow = True
        elif event == "open" and isinstance(rec.get("conn"), int) and isinstance(rec.get("pid"), int):
            conns[rec["conn"]] = {"pid": rec["pid"], "chain": rec.get("chain"), "open": None, "sessions": [],
                                  "foreign": [], "bad": 0, "closed": False}
        elif event == "close" and rec.get("conn") in conns:
            conns[rec["conn"]]["closed"] = True
        elif event == "msg" and rec.get("conn") in conns:
            c = conns[rec["conn"]]
            if rec.get("pid") != c["pid"]:
                c["foreign"].append(rec.get("pid"))
                continue
            try:
                msg = json.loads(rec["text"])
                kind, depth = msg["event"], msg.get("depth", 0)
            except (ValueError, KeyError, TypeError, RecursionError):
                c["bad"] += 1
                continue
            if depth != 0:
                continue
            if kind == "start":
                if c["open"] is not None:
                    c["sessions"].append(c["open"])  # a second start before the first finished
                c["open"] = {"pid": c["pid"], "finished": False}
            elif kind == "finish" and c["open"] is not None:
                c["open"].update(finished=True, exitstatus=msg.get("exitstatus"), counts=msg.get("counts"))
                c["sessions"].append(c["open"])
                c["open"] = None
            else:
                c["bad"] += 1
        else:
            malformed += 1
    pids = {c["pid"] for c in conns.values() if c["sessions"] or c["open"]}
    own, other, foreign, bad = [], 0, [], 0
    for c in conns.values():
        sessions = c["sessions"] + ([c["open"]] if c["open"] else [])
        if not _session_of_script(c["chain"], pids):
            other += len(sessions)
            continue
        own += sessions
        foreign += [{"session_pid": c["pid"], "sender": p} for p in c["foreign"]]
        bad += c["bad"]
    out: dict = {"loaded": bool(own), "sessions": len(own),
                 "finished": [{"exitstatus": s.get("exitstatus"), "counts": s.get("counts")} for s in own
                              if s["finished"]],
                 "unfinished": [s["pid"] for s in own if not s["finished"]],
                 "intact": intact and not overflow}
    if other:
        out["not_the_scripts"] = other
    if foreign:
        out["foreign_messages"] = foreign[:10]
    if bad:
        out["malformed_messages"] = bad
    if malformed:
        out["malformed_lines"] = malformed
    if overflow:
        out["note"] = "the record reached its bound"
    elif not intact:
        out["note"] = "the witness's server ended before trialbox stopped it" if text else "no record"
    return out


def witness_problems(w: dict) -> list[str]:
    """With a passing reward: what the witness's record contradicts (see the module docstring)."""
    if not w.get("intact", True):
        return [f"the pytest witness's record is not whole ({w.get('note', 'broken')}): the sessions of the test "
                "run cannot be told"]
    if not w.get("loaded"):
        return []
    out = []
    if w.get("foreign_messages"):
        f = w["foreign_messages"][0]
        out.append(f"another process (pid {f['sender']}) sent messages on the witness's channel of the pytest session "
                   f"of process {f['session_pid']}: the session's record was forged")
    if w.get("malformed_messages"):
        out.append(f"{w['malformed_messages']} message(s) on a pytest session's witness channel are not the "
                   "witness's: the session's record was tampered with")
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


def _read_reward(sandbox: Sandbox, run: TestRun, task: Task) -> None:
    """The reward: ``reward.json`` first, then ``reward.txt``, as Harbor's current verifier reads them. A script
    that writes both (many do: the number and the named numbers) must agree with itself: a ``reward.txt`` whose
    number differs from ``reward.json``'s ``reward`` is an integrity problem (one of the two was not the script's
    own verdict)."""
    g = task.grader
    found: dict[str, dict[str, float]] = {}
    for name in ("reward.json", "reward.txt"):
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
        try:
            found[name] = parse_reward(name, data)
        except ValueError as exc:
            run.integrity.append(f"{path} is malformed: {exc}")
            return
    if not found:
        run.reward_note = f"no reward.txt or reward.json in {g.reward_dir}"
        return
    run.reward_source = next(iter(found))
    run.reward = found[run.reward_source]
    if len(found) == 2 and "reward" in found["reward.json"] \
            and found["reward.json"]["reward"] != found["reward.txt"]["reward"]:
        run.integrity.append(f"reward.json says reward {found['reward.json']['reward']:g} but reward.txt says "
                             f"{found['reward.txt']['reward']:g}: the script's two reward files disagree")
    if missing := g.acceptance.missing(run.reward):
        run.integrity.append(f"{g.reward_dir}/{run.reward_source} has no metric {', '.join(map(repr, missing))} (it "
                             f"has {sorted(run.reward)[:10]}): declare which decide in grader.yaml's acceptance, or "
                             f"at import with --acceptance 'METRIC>=NUMBER,…'")
