"""Second review of the pytest grader's tripwire (HEAD 638f2c3): ``compose._tripwires`` fed real-world-shaped test
files, each embedding then run by pytest (a subprocess, in a scratch folder) as the grader would run it: the requested
tests under their drawn names, the tripwire among them.

What must hold for an honest fix: the composed file parses, every requested test still passes under its drawn name,
and the tripwire fails or errors (``runner.FAILING``) with the values it must show; and, against a forger, the
tripwire stays inside its group's own file (a file of its own is told apart by its name and its template body).
Cases that broke it at 638f2c3 were ``xfail(strict=True)`` with the finding's number; they hold now, but for three
shapes of file that still get their tripwire in a file of their own (a stated limit).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orchestrator.grading import compose as C
from orchestrator.grading import runner as R

FILE = "tests/test_mod.py"
LIB = "def double(x):\n    return 2 * x\n\ndef big():\n    return 1e20\n\ndef name():\n    return 'abc'\n"
SEEDS = range(12)


def _compose(monkeypatch, seed: int, source: str, nodes: list[str], file: str = FILE, raw: bytes | None = None,
             extra: dict[str, bytes] | None = None):
    monkeypatch.setattr(C.secrets, "randbits", lambda k: seed)
    data = raw if raw is not None else source.encode()
    out, wires, names = C._tripwires([file], nodes, {file: data, **(extra or {})}, set())
    return {**(extra or {}), **out}, wires, names


def _run(tmp_path: Path, files: dict[str, bytes], argv: list[str], extra: list[str] = (),
         ini: str = "[pytest]\n") -> dict[str, tuple[str, str]]:
    """pytest on ``argv`` in a scratch repository holding ``files`` and the library: {junit key: (outcome, text)}."""
    root = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
    (root / "tests").mkdir(parents=True)
    (root / "lib.py").write_text(LIB)
    (root / "pytest.ini").write_text(ini)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    junit = root / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(root)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    subprocess.run([sys.executable, "-B", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                    f"--junitxml={junit}", "--rootdir", str(root), *extra, *argv], cwd=root, env=env,
                   capture_output=True, timeout=120)
    out = {}
    if junit.exists():
        messages: dict[str, str] = {}
        for k, v in R._parse_junit(junit.read_bytes(), messages).items():
            out[k] = (v, messages[k])
    return out


def _check(monkeypatch, tmp_path, source: str, nodes: list[str], extra: list[str] = (), ini: str = "[pytest]\n",
           seeds=SEEDS) -> list[str]:
    """Every seed's composed file run; the problems an honest fix would be rejected for (empty: none)."""
    problems = []
    for seed in seeds:
        out, wires, names = _compose(monkeypatch, seed, source, nodes)
        wire = wires[0]
        for data in out.values():
            ast.parse(data.decode())
        argv = [R._as_run(n, names) for n in nodes] + [wire.node]
        res = _run(tmp_path, out, argv, extra, ini)
        wire_results = R.select({k: v[0] for k, v in res.items()}, [wire.node], R._junit_key)
        got = wire_results.get(wire.node)
        if got not in R.FAILING:
            problems.append(f"seed {seed}: tripwire {wire.node} was {got}")
        elif wire.shows:
            key = R._junit_key(wire.node)
            text = " ".join(m for k, (o, m) in res.items() if k == key or k.startswith(key + "["))
            if not all(v in text for v in wire.shows):
                problems.append(f"seed {seed}: tripwire failed without its values")
        for n in nodes:
            o = R.select({k: v[0] for k, v in res.items()}, [R._as_run(n, names)], R._junit_key).get(R._as_run(n, names))
            if o != "passed":
                problems.append(f"seed {seed}: {n} (as {names.get(n, n)}) was {o}")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Shapes that hold today (the honest side): kept as regression tests.
# ---------------------------------------------------------------------------------------------------------------

YIELD_FIXTURE = """import pytest
from lib import double


@pytest.fixture
def value():
    v = [3]
    yield v
    v.clear()


def test_double(value):
    assert double(value[0]) == 6


def test_double_zero(value):
    value[0] = 0
    assert double(value[0]) == 0
"""

TESTCASE = """import unittest
from lib import double, name


class TestLib(unittest.TestCase):
    def setUp(self):
        self.x = 4

    def test_double(self):
        result = double(self.x)
        assert result == 8

    def test_name(self):
        self.assertTrue(name())
        assert name() == 'abc'
"""

NESTED = """# -*- coding: utf-8 -*-
from lib import double


class TestOuter:
    class TestInner:
        def test_double(self):
\t\t\tassert double(2) == 4

        def test_more(self):
\t\t\tassert double(5) == 10
""".replace("\t\t\t", "            ")

PARAM_IDS = """import pytest
from lib import double


@pytest.mark.parametrize("x,y", [(1, 2), (2, 4)], ids=["one", "two"])
def test_pairs(x, y):
    assert double(x) == y


def test_literal():
    assert double(21) == 42
"""


@pytest.mark.parametrize("source,nodes", [
    (YIELD_FIXTURE, [f"{FILE}::test_double", f"{FILE}::test_double_zero"]),
    (TESTCASE, [f"{FILE}::TestLib::test_double", f"{FILE}::TestLib::test_name"]),
    (NESTED, [f"{FILE}::TestOuter::TestInner::test_double", f"{FILE}::TestOuter::TestInner::test_more"]),
    (PARAM_IDS, [f"{FILE}::test_pairs", f"{FILE}::test_literal"]),
], ids=["yield-fixture", "unittest-setUp", "nested-classes", "parametrize-ids"])
def test_honest_shapes_hold(monkeypatch, tmp_path, source, nodes):
    assert _check(monkeypatch, tmp_path, source, nodes, seeds=range(6)) == []


# ---------------------------------------------------------------------------------------------------------------
# Finding 5 (false rejection): the copy keeps what makes its model not fail. A test of the scope that skips itself at
# run time (pytest.importorskip, pytest.skip in its body), is skipped or xfailed by a mark under another name (a
# module alias such as ``requires_net = pytest.mark.skipif(...)``), or whose last constant is a float too large for
# ``+ n + 0.5`` to change, is a model like any other: its copy is skipped, xfailed or passes, and the honest fix is
# rejected as "results were forged". Each file has one other, uncopyable test, so the model is that one for every
# seed; in a real file it is drawn among the scope's tests (one chance in N per group).
# ---------------------------------------------------------------------------------------------------------------

_REQUESTED = """

def test_requested():
    assert double(3) in (6,)
"""
SKIPS_AT_RUN_TIME = "import pytest\nfrom lib import double\n\n\ndef test_needs_numpy():\n" \
                    "    pytest.importorskip('no_such_module_here')\n    assert double(1) == 2\n" + _REQUESTED
SKIP_MARK_ALIAS = "import pytest\nfrom lib import double\n\nrequires_net = pytest.mark.skipif(True, reason='no net')\n\n\n" \
                  "@requires_net\ndef test_remote():\n    assert double(1) == 2\n" + _REQUESTED
XFAIL_MARK_ALIAS = "import pytest\nfrom lib import double\n\nknown_bug = pytest.mark.xfail(reason='#12', strict=True)\n\n\n" \
                   "@known_bug\ndef test_known():\n    assert double(1) == 3\n" + _REQUESTED
BIG_FLOAT = "from lib import big, double\n\n\ndef test_big():\n    assert big() == 1e20\n" + _REQUESTED


def test_model_skipping_at_run_time(monkeypatch, tmp_path):
    assert _check(monkeypatch, tmp_path, SKIPS_AT_RUN_TIME, [f"{FILE}::test_requested"], seeds=range(2)) == []


def test_model_with_aliased_skip_mark(monkeypatch, tmp_path):
    assert _check(monkeypatch, tmp_path, SKIP_MARK_ALIAS, [f"{FILE}::test_requested"], seeds=range(2)) == []


def test_model_with_aliased_xfail_mark(monkeypatch, tmp_path):
    assert _check(monkeypatch, tmp_path, XFAIL_MARK_ALIAS, [f"{FILE}::test_requested"], seeds=range(2)) == []


def test_model_comparing_a_big_float(monkeypatch, tmp_path):
    assert _check(monkeypatch, tmp_path, BIG_FLOAT, [f"{FILE}::test_requested"], seeds=range(2)) == []


def test_big_float_mutation_is_no_change():
    import random
    assert all(C._mutated(random.Random(s), 1e20) != 1e20 for s in range(20))


# ---------------------------------------------------------------------------------------------------------------
# Finding 6 (the tripwire told apart): files that parse still get the tripwire in a file of its own, a bare
# template (``expected = N / observed = M``) in a file the repository does not have, the old finding 1a's shape: any
# CRLF file, a file with a form feed, a file in another encoding (a ``# -*- coding: latin-1`` line), and a scope
# whose every test has a decorator over several lines (black's formatting of a long parametrize). The README says so
# only of a file that does not parse.
# ---------------------------------------------------------------------------------------------------------------

PLAIN = "from lib import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\ndef test_more():\n    assert double(5) == 10\n"
MULTILINE_PARAMS = """import pytest
from lib import double


@pytest.mark.parametrize(
    "x,y",
    [(1, 2), (2, 4)],
)
def test_pairs(x, y):
    assert double(x) == y


@pytest.mark.parametrize(
    "x",
    [0],
)
def test_zero(x):
    assert double(x) == 0
"""


@pytest.mark.parametrize("raw,nodes", [
    (PLAIN.replace("\n", "\r\n").encode(), ["test_double", "test_more"]),
    pytest.param(PLAIN.replace("def test_more", "\f\ndef test_more").encode(), ["test_double", "test_more"],
                 marks=pytest.mark.xfail(strict=True, reason="stated limit: this file gets its tripwire in a file of its own")),
    pytest.param(("# -*- coding: latin-1 -*-\n# caf\xe9\n" + PLAIN).encode("latin-1"), ["test_double", "test_more"],
                 marks=pytest.mark.xfail(strict=True, reason="stated limit: this file gets its tripwire in a file of its own")),
    (MULTILINE_PARAMS.encode(), ["test_pairs", "test_zero"]),
    pytest.param(b"from lib import double\n\n\ndef test_double(): assert double(2) == 4\n\n\n"
                 b"def test_more(): assert double(5) == 10\n", ["test_double", "test_more"], marks=pytest.mark.xfail(strict=True, reason="stated limit: this file gets its tripwire in a file of its own")),
], ids=["crlf", "form-feed", "latin-1", "multi-line-decorators", "one-line-tests"])
def test_parsing_files_hold_their_tripwire(monkeypatch, raw, nodes):
    for seed in range(4):
        out, wires, _ = _compose(monkeypatch, seed, "", [f"{FILE}::{n}" for n in nodes], raw=raw)
        assert wires[0].embedded, (seed, list(out))


# ---------------------------------------------------------------------------------------------------------------
# Finding 1 (the tripwire told apart inside its own file, nothing published needed): the copy differs from its model
# by one constant, always changed the same way (a string gets one letter appended, a number grows, bytes get a word
# appended). So of the two tests whose bodies differ in that constant alone, the copy is the one whose constant is
# the other's plus a letter / the larger one, every time. This is the forger's whole algorithm (PAIR_HUNTER in
# tests/docker/test_threats_review2.py does it inside the grader).
# ---------------------------------------------------------------------------------------------------------------

def find_wire(source: str) -> set[str]:
    """The tripwire's name, from the file alone."""
    found = set()
    tree = ast.parse(source)
    scopes = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in scopes:
        defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")]
        shapes = {}
        for d in defs:
            consts = sorted((n for n in ast.walk(d) if isinstance(n, ast.Constant)), key=lambda n: (n.lineno, n.col_offset))
            key = None
            if consts:
                last, consts[-1].value = consts[-1].value, None
                key = ast.dump(ast.Module(body=d.body, type_ignores=[]))
                consts[-1].value = last
            shapes.setdefault(key, []).append((d, consts[-1].value if consts else None))
        for pair in shapes.values():
            for a, va in pair:
                for b, vb in pair:
                    if a is b or type(va) is not type(vb):
                        continue
                    if isinstance(va, (str, bytes)) and vb.startswith(va) and len(vb) > len(va) or \
                            isinstance(va, (int, float)) and not isinstance(va, bool) and vb > va:
                        found.add(b.name)
        for d in defs:  # the simple form
            src = ast.unparse(d)
            if "expected = " in src and "observed = " in src and "assert observed == expected" in src:
                found.add(d.name)
    return found


@pytest.mark.parametrize("source,nodes", [
    (PLAIN, ["test_double", "test_more"]),
    (YIELD_FIXTURE, ["test_double", "test_double_zero"]),
    (TESTCASE, ["TestLib::test_double", "TestLib::test_name"]),
    (PARAM_IDS, ["test_pairs", "test_literal"]),
    ("from lib import name\n\n\ndef test_name():\n    assert name() == 'abc'\n\n\ndef test_upper():\n"
     "    assert name().upper() == 'ABC'\n", ["test_name", "test_upper"]),
], ids=["ints", "yield-fixture", "unittest", "parametrize", "strings"])
def test_tripwire_not_told_apart_by_its_own_file(monkeypatch, source, nodes):
    told = 0
    for seed in range(20):
        out, wires, _ = _compose(monkeypatch, seed, source, [f"{FILE}::{n}" for n in nodes])
        name = wires[0].node.split("::")[-1]
        guess = find_wire(out[FILE].decode())
        told += guess == {name}
    assert told < 15, f"the tripwire was told apart by its own file alone in {told} of 20 draws"


# ---------------------------------------------------------------------------------------------------------------
# Finding 7 (false rejection): the renamed tests and a trusted conftest.py that names tests (a common way to mark
# known-flaky or platform tests). The rename only keeps a name that occurs elsewhere *in the same file*; the conftest
# then no longer sees the test it names, here skipping a test the task expects to be skipped... and the converse: a
# conftest adding a fixture value by name. Shown with the runner's own rename and a conftest that parametrizes by name.
# ---------------------------------------------------------------------------------------------------------------

CONFTEST_BY_NAME = b"""import os

def pytest_runtest_setup(item):
    if item.name == "test_needs_setting":
        os.environ["LIB_SETTING"] = "on"
"""
NEEDS_SETTING = "import os\nfrom lib import double\n\n\ndef test_needs_setting():\n    assert os.environ.get('LIB_SETTING') in ('on',)\n" \
                "\n\ndef test_double():\n    assert double(2) == 4\n"


def test_rename_keeps_tests_named_by_a_conftest(monkeypatch, tmp_path):
    nodes = [f"{FILE}::test_needs_setting", f"{FILE}::test_double"]
    for seed in range(4):
        out, wires, names = _compose(monkeypatch, seed, NEEDS_SETTING, nodes, extra={"tests/conftest.py": CONFTEST_BY_NAME})
        res = _run(tmp_path, out,
                   [R._as_run(n, names) for n in nodes] + [wires[0].node])
        got = R.select({k: v[0] for k, v in res.items()}, [R._as_run(nodes[0], names)], R._junit_key)
        assert got == {R._as_run(nodes[0], names): "passed"}, (seed, names, res)


# Finding 7, the common form: snapshot / golden-file tests find their expected output by the test's own name
# (syrupy, pytest-snapshot, approvaltests, or a fixture of the repository's reading ``request.node.name``). Under a
# drawn name the golden file is not found and the honest fix's test fails.
GOLDEN_CONFTEST = b"""import pathlib
import pytest

@pytest.fixture
def golden(request):
    return (pathlib.Path(__file__).parent / "golden" / (request.node.originalname + ".txt")).read_text().strip()
"""
GOLDEN_TESTS = "from lib import double\n\n\ndef test_double_text(golden):\n    assert str(double(2)) == golden\n" \
               "\n\ndef test_double():\n    assert double(2) == 4\n"


def test_rename_keeps_golden_files_named_after_the_test(monkeypatch, tmp_path):
    nodes = [f"{FILE}::test_double_text", f"{FILE}::test_double"]
    for seed in range(4):
        out, wires, names = _compose(monkeypatch, seed, GOLDEN_TESTS, nodes, extra={
            "tests/conftest.py": GOLDEN_CONFTEST, "tests/golden/test_double_text.txt": b"4\n"})
        res = _run(tmp_path, out,
                   [R._as_run(n, names) for n in nodes] + [wires[0].node])
        got = R.select({k: v[0] for k, v in res.items()}, [R._as_run(nodes[0], names)], R._junit_key)
        assert got == {R._as_run(nodes[0], names): "passed"}, (seed, names)


# ---------------------------------------------------------------------------------------------------------------
# Finding 11 (false rejection): the copy runs its model's body once more, against the same module- or session-scoped
# fixtures and module state. A test that is correct but not idempotent (it adds to a module-scoped store and counts,
# registers a name that may be registered once, creates a file exclusively) fails when its copy ran first (the
# tripwire's place among the command's arguments is drawn: about one group in two), and the honest fix is rejected
# on fail_to_pass. Shown with the tripwire first among the arguments, one of the orders the runner draws.
# ---------------------------------------------------------------------------------------------------------------

SHARED_STORE = """import pytest
from lib import double


@pytest.fixture(scope="module")
def store():
    return []


def test_add(store):
    store.append(double(1))
    assert len(store) == 1
"""


def test_copy_of_a_test_with_shared_state(monkeypatch, tmp_path):
    nodes = [f"{FILE}::test_add"]
    for seed in range(3):
        out, wires, names = _compose(monkeypatch, seed, SHARED_STORE, nodes)
        res = _run(tmp_path, out, [R._as_run(n, names) for n in nodes] + [wires[0].node])  # the runner's order
        got = R.select({k: v[0] for k, v in res.items()}, [R._as_run(nodes[0], names)], R._junit_key)
        assert got == {R._as_run(nodes[0], names): "passed"}, (seed, names)
