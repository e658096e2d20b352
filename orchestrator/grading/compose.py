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
import re
import secrets
import uuid
from collections import Counter
from dataclasses import dataclass, field

from ..tasks import Task
from .diff import is_artifact
from ..textsafe import path_bytes
from .tree import Tree, leaving_links
from .trusted import config_copy, trusted_tests
from ..pyparse import parse
from .seal import Corpus, Seal, bases_named, located, refusing_names, seal_source


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
    names: dict[str, str] = field(default_factory=dict)
    """The name each requested test runs under in the grader (``{node: node}``, without parameters; see
    ``_renamed``): host-side knowledge too."""
    links: list[str] = field(default_factory=list)
    """The repository's own symbolic links in test folders, as the initial commit has them (root's in the grader)."""
    cases: dict[str, int] = field(default_factory=dict)
    """Requested node ids of parametrized tests (named without a case) and how many cases each has at least
    (``case_counts``): fewer reported is forgery."""
    seals: dict[str, list[Seal]] = field(default_factory=dict)
    """The sealed assertions of each requested test (by node id without parameters, under its own name): their
    literals are host-side knowledge; the grader's copy of the file only sends values (``seal``)."""


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
    shows: tuple[str, ...]
    """Values its failure message must carry (even under ``--assert=plain``); none for a copy of a real test, which
    fails wherever its model's code fails."""
    embedded: bool
    """Inside the group's own test file (False: in a file of its own beside it, when that file cannot hold it)."""
    model: str | None = None
    """The requested test it is a copy of (its node id, under its own name): where that test did not pass (skipped
    by a mark or by itself, xfailed), the copy may not fail either."""
    after_model: bool = False
    """Its model takes fixtures, whose state a copy run first could change: it runs after its model (in the file
    and among the arguments), which tells a reader of both that it is the later of the two."""


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


def _identifiers(*texts: str | bytes) -> set[str]:
    """Every word (a maximal run of word characters) of the texts: the names a drawn test name must not take. A
    name used anywhere in a test file or another trusted file may be a method a class inherits (a mixin's test, in
    this file or another), an imported helper or a name a test calls; a tripwire or a renamed test under it would
    replace that test for pytest (a requested ``Sub::test_x`` inherited from ``Mixin`` would run the new one)."""
    out: set[str] = set()
    for text in texts:
        if isinstance(text, bytes):
            if len(text) > WORDS_READ_MAX or b"\0" in text[:8192]:
                continue  # data, not code: a fixture no test name is read from (and megabytes of words to hold)
            text = text.decode("utf-8", "replace")
        out.update(m.group() for m in WORD.finditer(text))
    return out


WORD = re.compile(r"\w+")
WORDS_READ_MAX = 2 * 1024 * 1024
"""A trusted file larger than this (bytes) is data to ``_identifiers``, as is one with a NUL byte near its start."""


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


OUTCOME_MARK_NAMES = ("xfail", "skip", "skipif")
"""Marks of the model test that are not copied: they would make the copy skipped or xfailed, not failed."""


CHAR_CLASSES = ("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789")
"""A drawn character of a string's copy is replaced within its own class (a lower-case letter by another, ...)."""


def _mutated(rng: random.Random, value: object, pool: list[object] = ()) -> object | None:
    """Another value of the same type, changed by a *symmetric* draw: the chance of changing ``a`` into ``b`` is the
    chance of changing ``b`` into ``a``, so a reader of the pair who knows this rule cannot tell from the rule which
    of the two is the original (what looks more natural stays a tell: a stated limit). A string or bytes value has
    one character replaced by another of the same class (``CHAR_CLASSES``, at a position drawn among the
    characters of a class: both values have the same such positions); an int moves by 1 to 96 either way. None:
    not a value the copy's last assertion can be made to fail on this way (no such character; bools, None and
    floats, whose sums can round back). ``pool`` is not used: a value taken from elsewhere in the file would
    appear there twice, which tells the copy apart."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return None
    if isinstance(value, (str, bytes)):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        spots = [i for i, c in enumerate(text) if any(c in k for k in CHAR_CLASSES)]
        if not spots:
            return None
        i = rng.choice(spots)
        kind = next(k for k in CHAR_CLASSES if text[i] in k)
        out = text[:i] + rng.choice([c for c in kind if c != text[i]]) + text[i + 1:]
        return out.encode("latin-1") if isinstance(value, bytes) else out
    if isinstance(value, int):
        delta = rng.randrange(1, 97)
        return value + delta if rng.random() < 0.5 else value - delta
    return None


def _decorators(lines: list[str], model: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str] | None:
    """The model's decorators as written (each over as many lines as it takes), but the marks that would make a copy
    skipped or xfailed instead of failed; None when one shares a line with another statement."""
    out = []
    for d in model.decorator_list:
        if d.end_lineno is None or d.col_offset < 1 or lines[d.lineno - 1][:d.col_offset - 1].strip():
            return None
        chunk = "".join(lines[d.lineno - 1:d.end_lineno])
        if lines[d.end_lineno - 1].rstrip("\r\n")[d.end_col_offset or 0:].strip():
            return None
        if not _outcome_mark(d):
            out.append(chunk)
    return out


def _outcome_mark(node: ast.expr) -> bool:
    """Whether a decorator is itself a skip, skipif or xfail mark (``pytest.mark.xfail``, ``mark.skipif(...)``):
    read from the syntax, not its text, so a ``parametrize`` whose argument is named ``skipna`` or whose cases carry
    ``marks=`` is kept whole (its copy gets the same arguments as its model)."""
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr in OUTCOME_MARK_NAMES and \
        isinstance(target.value, ast.Attribute) and target.value.attr == "mark"


def _literal_like(written: str, value: object) -> str | None:
    """``value`` written as ``written`` is (its quotes, its bytes prefix); None for a raw or implicitly joined
    string, whose writing cannot be kept."""
    literal = repr(value)
    if not isinstance(value, (str, bytes)):
        return literal
    prefix = written[:len(written) - len(written.lstrip("bBuU"))]
    if any(c in written[:len(prefix) + 1].lower() for c in "rf") or written.count(written[len(prefix):][:1]) > 2 \
            and not written[len(prefix):].startswith(('"""', "'''")):
        return None
    quote = written[len(prefix):][:1]
    start = 1 if isinstance(value, bytes) else 0
    inner = literal[start + 1:-1]
    if quote == '"' and literal[start] == "'" and '"' not in inner:
        inner = inner.replace("\\'", "'")
    elif quote != literal[start]:
        return None
    return prefix + quote + inner + quote if quote in "\"'" else None


def _copy_of(rng: random.Random, text: str, lines: list[str], model: ast.FunctionDef | ast.AsyncFunctionDef,
             name: str, pool: list[object] = ()) -> str | None:
    """``model`` as written (its decorators but the outcome marks, its signature, its body) under ``name``, with the
    constant its last assertion compares with changed to another of the same type, so that it fails wherever the
    model passes and wherever it fails (None: its last statement is no such assertion, or it spans lines oddly)."""
    last = model.body[-1]
    if not (isinstance(last, ast.Assert) and isinstance(last.test, ast.Compare) and len(last.test.ops) == 1
            and isinstance(last.test.ops[0], ast.Eq) and last.lineno == last.end_lineno):
        return None
    side = next((n for n in (last.test.comparators[0], last.test.left)
                 if isinstance(n, ast.Constant) and n.lineno == n.end_lineno and _mutated(rng, n.value) is not None), None)
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("skip", "importorskip", "xfail")
           for n in ast.walk(model)):
        return None  # it may skip or xfail itself: no copy that must fail
    first = model.body[0]
    if side is None or first.lineno <= model.lineno or any(
            isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for n in ast.walk(model)):
        return None
    new = _mutated(rng, side.value, pool)
    decorators = _decorators(lines, model)
    if decorators is None:
        return None
    header = "".join(lines[model.lineno - 1:first.lineno - 1])
    renamed = re.sub(rf"\bdef\s+{re.escape(model.name)}\b", f"def {name}", header, count=1)
    if renamed == header:
        return None
    body = lines[first.lineno - 1:last.lineno - 1]
    if first.lineno <= model.lineno:
        return None
    line = lines[last.lineno - 1].encode("utf-8")  # AST columns are UTF-8 byte offsets
    literal = _literal_like(line[side.col_offset:side.end_col_offset].decode("utf-8"), new)
    if literal is None:
        return None
    line = (line[:side.col_offset] + literal.encode("utf-8") + line[side.end_col_offset:]).decode("utf-8")
    return "".join([*decorators, renamed, *body, line])


def _simple_wire(rng: random.Random, text: str, lines: list[str], model: ast.FunctionDef | ast.AsyncFunctionDef,
                 name: str) -> tuple[str, tuple[str, str]] | None:
    """Two numbers compared, under ``model``'s decorators (but the outcome marks) and signature, so that a module's
    or class's marks (a parametrize every test takes) hold for it as for its tests."""
    first = model.body[0]
    if first.lineno <= model.lineno:
        return None
    decorators = _decorators(lines, model)
    if decorators is None:
        return None
    header = "".join(lines[model.lineno - 1:first.lineno - 1])
    renamed = re.sub(rf"\bdef\s+{re.escape(model.name)}\b", f"def {name}", header, count=1)
    if renamed == header:
        return None
    expected, observed = rng.randrange(100, 99999), rng.randrange(100, 99999)
    while observed == expected:
        observed = rng.randrange(100, 99999)
    inner = " " * first.col_offset
    body = (f"{inner}expected = {expected}\n{inner}observed = {observed}\n"
            f"{inner}assert observed == expected, (observed, expected)\n")
    return "".join([*decorators, renamed, body]), (str(observed), str(expected))


def _place(rng: random.Random, defs: list, model) -> int:
    """Where among the scope's tests the tripwire goes (before ``defs[i]``, or after the last): drawn over all of
    them, so which of a pair of tests that differ in one constant is the copy is a coin toss to the file's reader."""
    return rng.randrange(len(defs) + 1)


def _embed(rng: random.Random, source: bytes, file: str, requested: list[str],
           failing: set[str] = frozenset(), avoid: set[str] = frozenset()
           ) -> tuple[bytes, str, tuple[str, ...], str, bool] | None:
    """``source`` with a tripwire among its tests, in the scope (module or test class) of one requested node drawn
    at random, before one of that scope's tests drawn at random (or after the last), named from that scope's own
    test names. The tripwire is a copy of one of that scope's tests drawn at random (its decorators, signature and
    body: the same fixtures, parameters and calls into the code under test) whose last assertion compares with
    another constant, so it fails like its model would; where no test of the scope ends so, it compares two numbers
    under a test's decorators and signature. Its name is none of the file's words nor of ``avoid`` (``_identifiers``).
    None when the file cannot hold one (it does not parse, the scope is not found, has no test, or the insertion
    would not parse)."""
    try:
        text = source.decode("utf-8")
        module = parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not requested or "\f" in text or re.search(r"\r(?!\n)", text):
        return None
    # a fail-to-pass test's scope and copy first: on the untouched repository it fails like its copy, so running
    # the pair tells code that has not fixed the bug nothing (a copy of a test that passes fails beside it)
    first = [n for n in requested if n in failing] or requested
    classes = rng.choice(first).split("[", 1)[0].split("::")[1:-1]  # a parameter id may hold "::"
    scope = _scope_of(module, classes)
    if scope is None:
        return None
    defs = _test_defs(scope)
    if not defs:
        return None
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += nl
    name = _draw_name(rng, [d.name for d in defs], _identifiers(text) | set(avoid))
    wanted = {n.split("[", 1)[0].split("::")[-1] for n in requested if n.split("[", 1)[0].split("::")[1:-1] == classes}
    models = rng.sample([d for d in defs if d.name in wanted], len([d for d in defs if d.name in wanted]))
    # a fail-to-pass model first (see above), then one that takes no fixture: its copy shares no fixture's state
    # with it, whichever runs first
    failing_here = {n.split("[", 1)[0].split("::")[-1] for n in requested if n in failing
                    and n.split("[", 1)[0].split("::")[1:-1] == classes}
    models.sort(key=lambda d: (d.name not in failing_here,
                               len(d.args.args) + len(d.args.kwonlyargs) - (1 if classes else 0) > 0))
    pool = [n.value for n in ast.walk(module) if isinstance(n, ast.Constant)]
    wire = next(((c, (), m) for m in models if (c := _copy_of(rng, text, lines, m, name, pool)) is not None), None)
    if wire is None:
        wire = next(((*w, m) for m in models if (w := _simple_wire(rng, text, lines, m, name)) is not None), None)
    if wire is None:
        return None
    body, shows, model = wire
    body = body.replace("\r\n", "\n").replace("\n", nl)
    takes = len(model.args.args) + len(model.args.kwonlyargs) - (1 if classes else 0) > 0
    pick = _place(rng, defs, model)  # before or after its model: its place tells nothing
    if takes and pick <= defs.index(model):  # a copy run first could change its fixtures' state: after it, then
        pick = rng.randrange(defs.index(model) + 1, len(defs) + 1)
    if pick < len(defs):
        d = defs[pick]
        at = min([d.lineno, *(x.lineno for x in d.decorator_list)]) - 1
        body += nl if classes else nl * 2
    else:
        at = defs[-1].end_lineno or len(lines)
        body = (nl if classes else nl * 2) + body
    lines.insert(at, body)
    node = "::".join([file, *classes, name])
    out = "".join(lines)
    try:  # never hand pytest a file the insertion broke
        parse(out)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return out.encode("utf-8"), node, shows, "::".join([file, *classes, model.name]), takes


NAME_READERS = (b"node.name", b"originalname", b"nodeid", b"request.node", b".name ==", b"item.name", b"snapshot")
"""Words in a trusted file that say a test may find something by its own name (a golden file, a snapshot, a marker
set by name in a conftest): its file's tests keep their names."""


def _renamed(rng: random.Random, data: bytes, file: str, requested: list[str],
             wire: str, trusted: dict[str, bytes] | None = None, avoid: set[str] = frozenset()
             ) -> tuple[bytes, dict[str, str]]:
    """``data`` with each requested test function renamed to a name drawn like the tripwire's (from its scope's own
    tokens), so the names an agent saw in the repository or a published grader folder name none of the tests the
    grader runs; ``{old node: new node}`` (without parameters). A test whose name occurs anywhere else in the file
    (called, aliased, named in a string) or in any other trusted file or file name keeps its name, as does a method of
    a class another class derives from (its subclass's node would name a method no longer there); so do all of them
    where a trusted file reads test names (``NAME_READERS``). A drawn name is none of the words of this file or any
    trusted file, nor of ``avoid`` (``_tripwires`` passes the requested tests' names and every word of the trusted
    files), nor one drawn before (``_identifiers``)."""
    others = {p: b for p, b in (trusted or {}).items() if p != file}
    if any(w in b for b in [data, *others.values()] for w in NAME_READERS):
        return data, {}
    text = data.decode("utf-8")
    try:
        module = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return data, {}
    lines = text.splitlines(keepends=True)
    mapping: dict[str, str] = {}
    drawn = {wire.split("::")[-1]}
    derived_from = {name for names in bases_named({file: data, **others}).values() for name in names}
    counts = Counter(WORD.findall(text))  # how often each name occurs in the file (once: only its definition)
    words = set(counts) | set(avoid)
    for node in dict.fromkeys(n.split("[", 1)[0] for n in requested):
        parts = node.split("::")[1:]
        if not parts or (len(parts) > 1 and parts[-2] in derived_from):
            continue  # a class another one derives from: a renamed method would leave the subclass without it
        scope = _scope_of(module, parts[:-1])
        name = parts[-1]
        defs = [d for d in _test_defs(scope or []) if d.name == name]
        if len(defs) != 1 or counts[name] != 1 or any(name.encode() in b or name in p for p, b in others.items()):
            continue
        new = _draw_name(rng, [d.name for d in _test_defs(scope or [])], words | drawn)
        line = lines[defs[0].lineno - 1]
        changed = re.sub(rf"\bdef\s+{re.escape(name)}\b", f"def {new}", line, count=1)
        if changed == line:
            continue
        lines[defs[0].lineno - 1] = changed
        drawn.add(new)
        mapping[node] = "::".join([file, *parts[:-1], new])
    out = "".join(lines)
    try:
        parse(out)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return data, {}
    return out.encode("utf-8"), mapping


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


def _module(source: bytes) -> ast.Module | None:
    """A Python file's syntax tree (None: not UTF-8 Python, or too large to read so)."""
    if len(source) > 2 << 20:
        return None
    try:
        return parse(source.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _sealed(trusted: dict[str, bytes], files: list[str], nodes: list[str],
            original: Tree | None, instruction: bytes = b"") -> tuple[dict[str, bytes], dict[str, list[Seal]]]:
    """The trusted test files with their requested tests' sealable assertions sealed (``seal.seal_source``), and the
    seals by test. A file that is not UTF-8 Python, or holds nothing sealable, is kept as it is. What the agent saw
    of a file (its copy, the instruction) marks a literal as seen; classes that another trusted file derives from
    keep their methods whole."""
    out = dict(trusted)
    seals: dict[str, list[Seal]] = {}
    bases = bases_named(trusted)
    # a refusal made in a fixture or helper of any trusted file, or of the repository's conftest.py files, test
    # folders, any file whose name says test, or any module a trusted file imports (a helper in rv9kit/testing.py,
    # pkg/test_utils.py or a root helpers.py), makes a value after it no secret
    imported = {part for m in map(_module, trusted.values()) if m is not None for n in ast.walk(m)
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for name in [getattr(n, "module", None) or "", *(a.name for a in n.names)] for part in name.split(".")}
    helpers = {**{p: d for p, d in (original.files.items() if original is not None else [])
                  if p.endswith(".py") and (posixpath.basename(p).startswith("conftest")
                                            or "test" in posixpath.basename(p)
                                            or posixpath.basename(p)[:-3] in imported
                                            or any("test" in part for part in p.split("/")[:-1]))}, **trusted}
    refusing = refusing_names([m for m in map(_module, helpers.values()) if m is not None])
    for file in files:
        source = trusted.get(file)
        if source is None or not file.endswith(".py"):
            continue
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError:
            continue
        requested = [n for n in nodes if posixpath.normpath(n.split("::", 1)[0]) == file]
        seen = (original.files.get(file, b"") if original is not None else b"") + b"\n" + instruction
        elsewhere = {name for path, names in bases.items() if path != file for name in names}
        sealed, found = seal_source(text, file, requested, seen, elsewhere, refusing)
        if found:
            out[file] = sealed.encode("utf-8")
            for seal in found:
                seals.setdefault(seal.test, []).append(seal)
    if seals:  # a literal written in any file the container holds, or the agent saw, is no secret
        corpus = Corpus([*out.values(), *(original.files.values() if original is not None else []), instruction])
        seals = {test: [dataclasses.replace(x, visible=x.visible or corpus.holds(x)) for x in found]
                 for test, found in seals.items()}
    return out, seals


SELECTION = re.compile(rb"(^|[\s=\"'])(-m|-k|--deselect|--lf|--last-failed|--sw|--stepwise|--ff)(\b|=|\s)")
"""Options that deselect some cases of a test (in the task's options or its trusted configuration): with one,
no case count is required."""


def _addopts(config: bytes) -> bytes:
    """The ``addopts`` setting of a pytest configuration (ini, cfg or toml), with its continuation lines: where a
    deselecting option would be (a ``markers`` description that mentions ``-m`` selects nothing)."""
    out, inside = [], False
    for line in config.splitlines():
        if re.match(rb"\s*addopts\s*=", line):
            inside = True
            out.append(line.split(b"=", 1)[1])
        elif inside and line[:1] in (b" ", b"\t") and line.strip():
            out.append(line)
        else:
            inside = inside and line.strip().startswith((b"\"", b"'", b"]"))  # a toml list's items
            if inside:
                out.append(line)
    return b"\n".join(out)


def _parametrize_count(node: ast.expr) -> int | None:
    """How many cases a ``parametrize`` decorator makes (None: not a parametrize; -1: not known from the syntax)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parametrize"):
        return None
    values = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "argvalues"), None)
    if not isinstance(values, (ast.List, ast.Tuple)) or any(isinstance(e, ast.Starred) for e in values.elts):
        return -1
    return len(values.elts)


def _marks_parametrize(body: list[ast.stmt]) -> bool:
    """Whether a ``pytestmark`` assignment in ``body`` (a module's or a class's) may parametrize its tests."""
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and "pytestmark" in ast.dump(n) and "parametrize" in ast.dump(n)
               for n in body)


def case_counts(source: bytes | None, file: str, requested: list[str]) -> dict[str, int]:
    """For each requested node id naming a parametrized test without a case, how many cases it has at least, from
    the syntax of its own ``parametrize`` decorators (their product; a parametrized fixture only adds cases). The
    runner refuses fewer: dropping the reports of a test's failing cases would otherwise leave only passes. Nodes
    whose count the syntax does not give (a computed list, a class's or module's ``pytestmark``) are left out."""
    if source is None:
        return {}
    try:
        module = parse(source.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    if _marks_parametrize(module.body):
        return {}
    out: dict[str, int] = {}
    for node in dict.fromkeys(n for n in requested if "[" not in n):
        parts = node.split("::")[1:]
        if not parts:
            continue
        body: list[ast.stmt] | None = module.body
        for name in parts[:-1]:
            found = [n for n in body or [] if isinstance(n, ast.ClassDef) and n.name == name]
            if not found or any(_parametrize_count(d) is not None for d in found[-1].decorator_list):
                body = None
                break
            body = found[-1].body
        if body is None or _marks_parametrize(body):
            continue
        defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == parts[-1]]
        counts = [c for c in (_parametrize_count(d) for d in (defs[-1].decorator_list if defs else [])) if c is not None]
        if counts and all(c > 0 for c in counts):
            total = 1
            for c in counts:
                total *= c
            if total > 1:
                out[node] = total
    return out


def _tripwires(files: list[str], nodes: list[str], trusted: dict[str, bytes],
               taken: set[str], failing: set[str] = frozenset()) -> tuple[dict[str, bytes], list[Tripwire], dict[str, str]]:
    """One tripwire per test-file group, made to be indistinguishable from the group's tests by anything the test
    process can read: it is *inside the group's own file* (the same imports, fixtures, marks and module-level code),
    in the scope of a requested test drawn at random, at a position drawn at random among that scope's tests, named
    from their own names' tokens, a copy of one of them that must fail (``_embed``), and the file's requested tests
    run under drawn names too (``_renamed``). Which node it is, the names, and the values its failure must show stay
    on the host. A file that cannot hold one (it does not parse, it is not
    Python) gets it in a file of its own beside it, named from the group's file name and its tests' tokens."""
    rng = random.Random(secrets.randbits(64))
    # no drawn name is a requested test's name (inherited or not) or any word of a trusted file (``_identifiers``)
    avoid = {n.split("[", 1)[0].split("::")[-1] for n in nodes} | _identifiers(*trusted.values())
    out: dict[str, bytes] = {}
    wires: list[Tripwire] = []
    names: dict[str, str] = {}
    for file in files:
        requested = [n for n in nodes if posixpath.normpath(n.split("::", 1)[0]) == file]
        source = trusted.get(file)
        embedded = _embed(rng, source, file, requested, failing, avoid) \
            if source is not None and file.endswith(".py") else None
        if embedded is not None:
            data, node, shows, model, after = embedded
            out[file], mapping = _renamed(rng, data, file, requested, node, trusted, avoid)
            names.update(mapping)
            wires.append(Tripwire(node, file, shows, True, model, after))
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
    return out, wires, names


def _instruction(task: Task) -> bytes:
    """The text the agent is given (a literal written there is no secret)."""
    try:
        return (task.folder / task.config.instruction).read_bytes()
    except (AttributeError, OSError, TypeError):
        return b""


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
    trusted, test_dirs, absent = _trusted(final, original, task)
    # the repository's own links in a test folder are trusted material too: kept as the initial commit has them
    links = {p: t for p, t in original.symlinks.items()
             if p not in trusted and any(p.startswith(d + "/") for d in test_dirs)}
    for path in sorted(absent - set(ignored)):
        if path in links and tree.symlinks.get(path) == links[path]:
            continue
        _drop(tree, path)
        if path not in links:
            removed.append(path)
    for path, target in sorted(links.items()):
        if tree.symlinks.get(path) != target:
            _drop(tree, path)
            restored.append(path)
        tree.symlinks[path] = target
    known = set(original.dirs) | {a for p in [*original.files, *original.symlinks, *trusted] for a in _ancestors(p)}
    for d in sorted(tree.dirs):  # a folder the agent made in a test folder: something for code to fill later
        if d not in known and any(d.startswith(t + "/") for t in test_dirs):
            tree.dirs.discard(d)
            removed.append(d)
    nonce = uuid.uuid4().hex + uuid.uuid4().hex[:8]
    files = test_files(task.grader.fail_to_pass + task.grader.pass_to_pass)
    # sealed first: the tripwire is then drawn among the tests as the grader runs them (a sealed test has no
    # literal left to change, so a group of sealed tests gets the two-number form)
    seals: dict[str, list[Seal]] = {}
    if task.grader.seal:
        sources, seals = _sealed(trusted, files, task.grader.fail_to_pass + task.grader.pass_to_pass, original,
                                 _instruction(task))
    else:
        sources = trusted
    wires, tripwires, names = _tripwires(files, task.grader.fail_to_pass + task.grader.pass_to_pass, sources,
                                         set(tree.files) | set(tree.symlinks) | set(trusted) | set(original.files),
                                         set(task.grader.fail_to_pass))
    requested = task.grader.fail_to_pass + task.grader.pass_to_pass
    config_path, config_body, config_source = config_copy(original, files, nonce)
    args = getattr(getattr(task, "runtime", None), "command", None)
    selecting = SELECTION.search(_addopts(config_body)) or \
        any(SELECTION.search(a.encode()) for a in getattr(args, "args", []))
    cases = {} if selecting else {
        k: v for file in files
        for k, v in case_counts(trusted.get(file), file,
                                [n for n in requested if posixpath.normpath(n.split("::", 1)[0]) == file]).items()}
    trusted_all = {**sources, **wires, config_path: config_body}  # the sealed copies: the literals stay here
    for test, found in seals.items():  # where each call stands once the tripwire is in
        seals[test] = located(found, trusted_all.get(posixpath.normpath(test.split("::", 1)[0]), b""))
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
    leaving = leaving_links(tree)  # as the kernel resolves, links through links too
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
                       nonce, config_path, config_source, original, ignored, tripwires, names,
                       sorted(p for p in links if p in tree.symlinks), cases, seals)
