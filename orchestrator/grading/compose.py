"""The grader's workspace, composed on the host from data: the final tree with the trusted files over it.

``compose`` takes the agent's final tree and the trusted original and returns the ``Composition`` the grader
container receives (see ``runner`` for the order and the reasons): the held-out or post-patch test files, every
test file and folder the grader names restored, every ``conftest.py`` and the pytest configuration restored
from the original, and one tripwire test per test file, with the phrase it must fail with. Paths the grader
cannot hold (build artifacts, names longer than ``MAX_GRADER_PATH`` bytes) are left out and named.
"""

from __future__ import annotations

import ast
import dataclasses
import posixpath
import random
import secrets
import uuid
from dataclasses import dataclass, field

from ..tasks import Task
from .diff import is_artifact
from ..textsafe import path_bytes
from .tree import Tree, resolve
from .trusted import config_copy, trusted_tests


MAX_GRADER_PATH = 3800
"""Longer workspace paths (bytes) are not put into the grader's workspace: the engine's archive cannot
create them (its host-side path passes ``PATH_MAX``). They are exported and scanned like any file; no
test can import from there in practice."""


def test_files(node_ids: list[str]) -> list[str]:
    return sorted({posixpath.normpath(n.split("::", 1)[0]) for n in node_ids})


@dataclass
class Composition:
    """What goes into the grader container, and what was done to get there."""

    tree: Tree
    restored: list[str]
    removed: list[str]
    trusted: dict[str, bytes]
    tripwires: list[str]
    nonce: str
    config: str = ""
    """The workspace path of the trusted pytest configuration copy handed to pytest (``-c``)."""
    config_source: str | None = None
    """The repository file it was copied from (None: the repository has none)."""
    original: Tree | None = None
    """The trusted initial commit, on which the install step runs before the final files go in."""
    ignored: list[str] = field(default_factory=list)
    """Left out of the grader's workspace, never tampering: bytecode and test caches (artifacts of running tools)
    and paths longer than ``MAX_GRADER_PATH``."""
    phrase: str = ""
    """What every tripwire must fail with (see ``tripwire_phrase``)."""


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _drop(tree: Tree, path: str) -> None:
    tree.files.pop(path, None)
    tree.symlinks.pop(path, None)
    tree.executable.discard(path)


def _trusted(final: Tree, original: Tree, task: Task) -> tuple[dict[str, bytes], set[str], set[str]]:
    """Files that must be exactly the trusted copies; test folders; paths that must not exist.

    The trusted copies are the initial commit's files with the test patch applied on the host (post-patch
    versions of what it adds or changes; what it deletes must be absent) and the held-out folder's files."""
    g = task.grader
    tests = trusted_tests(task, original)
    names = set(test_files(g.fail_to_pass + g.pass_to_pass)) | set(tests.files) | set(tests.deleted)
    test_dirs = {posixpath.dirname(p) for p in names} - {""}
    trusted = {p: b for p, b in original.files.items()
               if any(p.startswith(d + "/") for d in test_dirs) or p in names or posixpath.basename(p) == "conftest.py"}
    trusted.update(tests.files)
    for p in tests.deleted:
        trusted.pop(p, None)
    absent = {p for p in [*final.files, *final.symlinks]
              if p not in trusted and (p in names or posixpath.basename(p) == "conftest.py"
                                       or any(p.startswith(d + "/") for d in test_dirs))}
    return trusted, test_dirs, absent


WORDS = ("parse", "format", "render", "load", "merge", "split", "order", "limit", "value", "range", "cache", "state",
         "record", "entry", "total", "round", "match", "index", "update", "report", "config", "export", "lookup", "batch",
         "count", "field", "group", "label", "level", "table", "token", "width", "block", "check", "clean", "event",
         "frame", "input", "layer", "model", "node", "offset", "owner", "price", "queue", "score", "shape", "stack",
         "store", "style", "title", "trace", "unit", "user", "view", "weight", "window", "year", "amount", "header")


def tripwire_phrase() -> str:
    """What a tripwire must fail with: ordinary-looking words and numbers (about 50 random bits), so forging code
    cannot tell the tripwire's failure from a real one by its message's shape (a hex nonce would give it away)."""
    rng = secrets.SystemRandom()
    words = [rng.choice(WORDS) for _ in range(5)]
    return f"{words[0]} {rng.randrange(10, 9999)} {words[1]} {words[2]} {rng.randrange(10, 9999)} {words[3]} {words[4]}"


def _imports(source: bytes | None) -> str:
    """The module-level import statements of a trusted test file, as written (none when it does not parse)."""
    if not source:
        return ""
    try:
        text = source.decode("utf-8")
        module = ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return ""
    parts = [ast.get_source_segment(text, node) or "" for node in module.body
             if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(p for p in parts if p) + ("\n\n\n" if parts else "")


def _tripwires(phrase: str, files: list[str], nodes: list[str], trusted: dict[str, bytes],
               taken: set[str]) -> tuple[dict[str, bytes], list[str]]:
    """One held-out test per test-file group, beside the group's file, that must fail with ``phrase`` in its
    failure message. It is made to look like the group's own tests to code forging results from inside the test
    process: its file and test are named after the group's file and one of its tests (a forger matching names
    matches it too), it imports what the group's file imports (a forger that fires when the code under test is
    imported fires in it too), and it fails like an ordinary test (no trialbox vocabulary, no nonce shape)."""
    rng = random.Random(phrase)
    out, wires = {}, []
    for file in files:
        folder, stem = posixpath.dirname(file), posixpath.basename(file)[:-3] if file.endswith(".py") else "test_it"
        names = [n.split("::")[-1].split("[")[0] for n in nodes if n.split("::", 1)[0] == file]
        base = rng.choice(names) if names else f"test_{rng.choice(WORDS)}"
        path = ""
        while not path or path in taken or path in out:  # never over a file of the repository or the agent
            a, b, c = rng.sample(WORDS, 3)
            path = posixpath.join(folder, f"{stem}_{a}{rng.randrange(10, 99)}.py")
        body = (f'{_imports(trusted.get(file))}def _{c}():\n    return "{phrase}"\n\n\n'
                f'def {base}_{b}():\n    assert _{c}() == "{a}", _{c}()\n')  # the phrase even under --assert=plain
        out[path] = body.encode()
        wires.append(f"{path}::{base}_{b}")
    return out, wires


def compose(final: Tree, original: Tree, task: Task) -> Composition:
    """The grader's workspace: the final files; the held-out files over them; the test folders,
    named test files and every conftest.py restored to their trusted copies (files the agent
    added there removed); no stale bytecode; no symlink leaving the workspace or standing where
    a folder of trusted files must be; plus one tripwire test per test file's group that must fail."""
    tree = dataclasses.replace(final, files=dict(final.files), executable=set(final.executable),
                               symlinks=dict(final.symlinks), dirs=set(final.dirs), skipped=[])
    restored, removed = [], []
    ignored = sorted(p for p in [*tree.files, *tree.symlinks, *tree.dirs]
                     if is_artifact(p) or len(path_bytes(p)) > MAX_GRADER_PATH)
    for path in ignored:  # stale or planted bytecode never runs (any run of the tests leaves some: not tampering)
        _drop(tree, path)
    tree.dirs = {d for d in tree.dirs if not is_artifact(d) and len(path_bytes(d)) <= MAX_GRADER_PATH}
    trusted, _, absent = _trusted(final, original, task)
    for path in sorted(absent - set(ignored)):
        _drop(tree, path)
        removed.append(path)
    nonce, phrase = uuid.uuid4().hex + uuid.uuid4().hex[:8], tripwire_phrase()
    files = test_files(task.grader.fail_to_pass + task.grader.pass_to_pass)
    wires, tripwires = _tripwires(phrase, files, task.grader.fail_to_pass + task.grader.pass_to_pass, trusted,
                                  set(tree.files) | set(tree.symlinks) | set(trusted) | set(original.files))
    config_path, config_body, config_source = config_copy(original, files, nonce)
    trusted_all = {**trusted, **wires, config_path: config_body}
    for path, data in sorted(trusted_all.items()):
        for ancestor in _ancestors(path):  # a file or link where a folder must be would displace trusted files
            if ancestor in tree.files or ancestor in tree.symlinks:
                _drop(tree, ancestor)
                removed.append(ancestor)
        if path not in wires and path != config_path and (tree.files.get(path) != data or path in tree.symlinks):
            restored.append(path)
        tree.symlinks.pop(path, None)
        tree.files[path] = data
        tree.executable.discard(path)
    leaving = {p for p in tree.symlinks if resolve(tree, p) is None}  # as the kernel resolves, links through links too
    for path in list(tree.symlinks):
        leaves = path in leaving
        shadows = any(p.startswith(path + "/") for p in [*tree.files, *tree.dirs])
        if leaves or shadows:
            del tree.symlinks[path]
            removed.append(path)
    tree.dirs -= set(tree.files) | set(tree.symlinks)
    for path in list(tree.files):  # every parent folder exists
        for parent in _ancestors(path):
            tree.dirs.add(parent)
    return Composition(tree, sorted(set(restored)), sorted(set(removed)), trusted_all, tripwires, nonce,
                       config_path, config_source, original, ignored, phrase)
