"""The grader's workspace, composed on the host from data: the final tree with the trusted files over it.

``compose`` takes the agent's final tree and the trusted original and returns the ``Composition`` the grader
container receives (see ``runner`` for the order and the reasons): the held-out or post-patch test files, every
test file and folder the grader names restored, every ``conftest.py`` and the pytest configuration restored
from the original, and one tripwire test per test file (inside it where it can be: see ``_tripwires``). Paths the grader
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
from ..pyparse import parse


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
    wires: list["Tripwire"] = field(default_factory=list)
    """Each group's tripwire (``tripwires`` holds their node ids): host-side knowledge, never in the grader."""


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


@dataclass(frozen=True)
class Tripwire:
    """One group's tripwire: a test that fails in every honest run. Only the host knows which node it is and what
    its failure must show; in the grader it is one more test of its group's own file."""

    node: str
    group: str
    """The test file whose group it runs in."""
    shows: tuple[str, str]
    """The two values its failure message carries (even under ``--assert=plain``)."""
    embedded: bool
    """Inside the group's own test file (False: in a file of its own beside it, when that file cannot hold it)."""


def _scope_of(module: ast.Module, classes: list[str]) -> list[ast.stmt] | None:
    body: list[ast.stmt] = module.body
    for name in classes:
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
        if not found:
            return None
        body = found[-1].body
    return body


def _test_defs(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")]


def _draw_name(rng: random.Random, real: list[str], taken: set[str]) -> str:
    """A test name made of the tokens of the scope's own test names (no token twice), as many as one of them has."""
    tokens = sorted({t for n in real for t in n.split("_")[1:] if t.isidentifier()})
    tokens += [w for w in WORDS if w not in tokens][:max(0, 6 - len(tokens))]  # few tests: a few plain words too
    for attempt in range(200):
        length = max(1, len(rng.choice(real).split("_")) - 1) if real else 2
        name = "_".join(["test", *rng.sample(tokens, min(len(tokens), length + attempt // 50))])
        if name not in taken and name not in real:
            return name
    return f"test_{rng.choice(WORDS)}_{secrets.token_hex(3)}"  # every draw taken: still unique


def _wire_body(rng: random.Random, indent: str, name: str, method: bool) -> tuple[str, tuple[str, str]]:
    expected, observed = rng.randrange(100, 99999), rng.randrange(100, 99999)
    while observed == expected:
        observed = rng.randrange(100, 99999)
    inner = indent + "    "
    body = (f"{indent}def {name}({'self' if method else ''}):\n"
            f"{inner}expected = {expected}\n"
            f"{inner}observed = {observed}\n"
            f"{inner}assert observed == expected, (observed, expected)\n" + ("\n" if method else "\n\n"))
    return body, (str(observed), str(expected))


def _embed(rng: random.Random, source: bytes, file: str, requested: list[str]) -> tuple[bytes, str, tuple[str, str]] | None:
    """``source`` with a tripwire among its tests, in the scope (module or test class) of one requested node drawn
    at random, before one of that scope's tests drawn at random (or after the last), named from that scope's own
    test names; None when the file cannot hold one (it does not parse, the scope is not found, has no test)."""
    try:
        text = source.decode("utf-8")
        module = parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not requested or "\r" in text or "\f" in text:
        return None
    classes = rng.choice(requested).split("::")[1:-1]
    scope = _scope_of(module, classes)
    if scope is None:
        return None
    defs = _test_defs(scope)
    if not defs:
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    taken = {n.name for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    name = _draw_name(rng, [d.name for d in defs], taken)
    pick = rng.randrange(len(defs) + 1)
    if pick < len(defs):
        d = defs[pick]
        at = min([d.lineno, *(x.lineno for x in d.decorator_list)]) - 1
        indent = " " * d.col_offset
    else:
        at, indent = (defs[-1].end_lineno or len(lines)), " " * defs[-1].col_offset
        lines.insert(at, "\n")
        at += 1
    body, shows = _wire_body(rng, indent, name, bool(classes))
    lines.insert(at, body)
    node = "::".join([file, *classes, name])
    out = "".join(lines)
    try:  # never hand pytest a file the insertion broke
        parse(out)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return out.encode("utf-8"), node, shows


def _imports(source: bytes | None) -> str:
    """The module-level import statements of a trusted test file, as written (none when it does not parse)."""
    if not source:
        return ""
    try:
        text = source.decode("utf-8")
        module = parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    parts = [ast.get_source_segment(text, node) or "" for node in module.body
             if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(p for p in parts if p) + ("\n\n\n" if parts else "")


def _tripwires(files: list[str], nodes: list[str], trusted: dict[str, bytes],
               taken: set[str]) -> tuple[dict[str, bytes], list[Tripwire]]:
    """One tripwire per test-file group, made to be indistinguishable from the group's tests by anything the test
    process can read: it is *inside the group's own file* (the same imports, fixtures, marks and module-level code),
    in the scope of a requested test drawn at random, at a position drawn at random among that scope's tests, named
    from their own names' tokens, and fails like an ordinary assertion on two ordinary numbers. Which node it is, and
    the numbers its failure must show, stay on the host. A file that cannot hold one (it does not parse, it is not
    Python) gets it in a file of its own beside it, named from the group's file name and its tests' tokens."""
    rng = random.Random(secrets.randbits(64))
    out: dict[str, bytes] = {}
    wires: list[Tripwire] = []
    for file in files:
        requested = [n for n in nodes if posixpath.normpath(n.split("::", 1)[0]) == file]
        source = trusted.get(file)
        embedded = _embed(rng, source, file, requested) if source is not None and file.endswith(".py") else None
        if embedded is not None:
            data, node, shows = embedded
            out[file] = data
            wires.append(Tripwire(node, file, shows, True))
            continue
        folder = posixpath.dirname(file)
        stem = posixpath.basename(file)[:-3] if file.endswith(".py") else "test_it"
        real = [n.split("::")[-1].split("[")[0] for n in requested]
        path = ""
        while not path or path in taken or path in out:  # never over a file of the repository or the agent
            path = posixpath.join(folder, f"{stem}_{_draw_name(rng, real, set()).split('_', 1)[1]}.py")
        name = _draw_name(rng, real, set())
        body, shows = _wire_body(rng, "", name, False)
        out[path] = (_imports(source) + body).encode()
        wires.append(Tripwire(f"{path}::{name}", file, shows, False))
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
    nonce = uuid.uuid4().hex + uuid.uuid4().hex[:8]
    files = test_files(task.grader.fail_to_pass + task.grader.pass_to_pass)
    wires, tripwires = _tripwires(files, task.grader.fail_to_pass + task.grader.pass_to_pass, trusted,
                                  set(tree.files) | set(tree.symlinks) | set(trusted) | set(original.files))
    config_path, config_body, config_source = config_copy(original, files, nonce)
    trusted_all = {**trusted, **wires, config_path: config_body}
    for path, data in sorted(trusted_all.items()):
        for ancestor in _ancestors(path):  # a file or link where a folder must be would displace trusted files
            if ancestor in tree.files or ancestor in tree.symlinks:
                _drop(tree, ancestor)
                removed.append(ancestor)
        plain = trusted.get(path) if path in trusted else None  # a test file holding a tripwire: compared without it
        if (plain is not None or (path not in wires and path != config_path)) and \
                (tree.files.get(path) != (plain if plain is not None else data) or path in tree.symlinks):
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
    return Composition(tree, sorted(set(restored)), sorted(set(removed)), trusted_all, [w.node for w in tripwires],
                       nonce, config_path, config_source, original, ignored, tripwires)
