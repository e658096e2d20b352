"""Third review of the pytest grader (HEAD 2ea21e7) as the agent under test: the host's judgement of a group's
results document (``runner._back`` then ``runner._judge``) fed documents a forger in the test process can write.

Each test builds what the group's pytest process would stream for an *untouched* task (the requested tests really
failed, the tripwire really failed with its values, exit code 1) plus what the forger adds, and asserts the verdict
that must hold: the requested tests do not come out passed without an integrity problem. Tests that fail on
2ea21e7 were ``xfail(strict=True)`` with their finding's number (fixed since) (the review's report has the reproduction and a fix);
``tests/docker/test_threats_review3.py`` runs the same forgers as script agents against the real engine.
"""

from __future__ import annotations

import pytest

from orchestrator.grading import runner as R
from orchestrator.grading.compose import Tripwire

FILE = "tests/test_slug_unicode.py"
MOD = "tests.test_slug_unicode"


def _accepted(run: R.TestRun, nodes: list[str]) -> bool:
    """What the verdict would read: every requested test passed and no integrity problem."""
    return not run.integrity and all(run.outcomes.get(n) == "passed" for n in nodes)


def _judge(doc: dict, nodes: list[str], wire: Tripwire, names: dict[str, str], log: str, code: int = 1):
    run = R.TestRun(exit_codes=[code])
    R._judge(run, nodes, [(nodes, wire, R._back(doc, names), R._summary(log))])
    return run


def _junit(cases: list[tuple[str, str, bool]]) -> str:
    body = "".join(f'<testcase classname="{c}" name="{n}" time="0.01">'
                   + ('<failure message="AssertionError: assert 1 == 2">assert 1 == 2</failure>' if failed else "")
                   + "</testcase>" for c, n, failed in cases)
    return f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'


# ---------------------------------------------------------------------------------------------------------------
# Finding 1: the forger writes outcomes under the tests' *own* names (public: the repository's and a published
# grader folder's), appended after the real ones. ``_back`` maps the drawn names back onto the very same keys, and
# the later (forged) value wins, in the plugin's outcomes and in the JUnit report alike; the forged keys pass the
# "own tests only" filter because the group's own tests are held under their own names. Nothing tells the tripwire
# apart: it fails for real, with its values, exit code 1; a last summary line printed on standard error covers the
# count. Untouched task accepted.
# ---------------------------------------------------------------------------------------------------------------

def _renamed_group():
    nodes = [f"{FILE}::test_accents", f"{FILE}::test_mixed"]
    names = {nodes[0]: f"{FILE}::test_mixed_accents", nodes[1]: f"{FILE}::test_done"}
    wire = Tripwire(f"{FILE}::test_accents_mixed", FILE, (), True, nodes[0])
    real = {f"{FILE}::test_mixed_accents": "failed", f"{FILE}::test_accents_mixed": "failed",
            f"{FILE}::test_done": "failed"}
    cases = [(MOD, "test_mixed_accents", True), (MOD, "test_accents_mixed", True), (MOD, "test_done", True)]
    return nodes, names, wire, real, cases


def test_honest_untouched_run_is_not_accepted():
    nodes, names, wire, real, cases = _renamed_group()
    doc = {"outcomes": real, "collect_errors": [], "exit_code": 1, "junit": _junit(cases)}
    run = _judge(doc, nodes, wire, names, "3 failed in 0.10s")
    assert run.integrity == [] and not _accepted(run, nodes)


def test_outcomes_under_the_tests_own_names_are_forgery():
    nodes, names, wire, real, cases = _renamed_group()
    forged = {**real, nodes[0]: "passed", nodes[1]: "passed"}  # appended last: their values win in _back
    doc = {"outcomes": forged, "collect_errors": [], "exit_code": 1,
           "junit": _junit(cases + [(MOD, "test_accents", False), (MOD, "test_mixed", False)])}
    run = _judge(doc, nodes, wire, names, "3 failed in 0.10s\n= 1 failed, 2 passed in 0.11s =")
    assert not _accepted(run, nodes), (run.integrity, run.outcomes)


def test_outcomes_under_the_tests_own_names_alone_before_the_real_ones():
    """The same keys written *before* the real ones lose (the mapped real failure comes later): no acceptance."""
    nodes, names, wire, real, cases = _renamed_group()
    forged = {nodes[0]: "passed", nodes[1]: "passed", **real}
    doc = {"outcomes": forged, "collect_errors": [], "exit_code": 1,
           "junit": _junit([(MOD, "test_accents", False), (MOD, "test_mixed", False)] + cases)}
    run = _judge(doc, nodes, wire, names, "= 1 failed, 2 passed in 0.11s =")
    assert not _accepted(run, nodes)


# ---------------------------------------------------------------------------------------------------------------
# Finding 2: the model/consistency rule reads the model's outcome over *every* key of its base name, requested or
# not, and the tripwire's the same way. Where the model is parametrized and requested with its parameters
# (``test_accents[creme]``, as SWE-bench lists them), a forger that does not know the tripwire flips every
# parametrized test to passed and adds, for each parametrized base, one made-up case reported skipped
# (``base[spare]``). The model then reads "skipped", the tripwire too (its real cases passed, its made-up one
# skipped), so the tripwire is not consulted; the requested cases, selected exactly, read passed; the made-up keys
# pass the own-tests filter (their base is the group's). Summary and exit code 0 agree (every real report passed).
# ---------------------------------------------------------------------------------------------------------------

def _parametrized_group():
    nodes = [f"{FILE}::test_accents[creme]", f"{FILE}::test_accents[naive]"]
    names = {f"{FILE}::test_accents": f"{FILE}::test_accents_unicode"}
    wire = Tripwire(f"{FILE}::test_unicode_accents", FILE, (), True, f"{FILE}::test_accents")
    return nodes, names, wire


def test_made_up_skipped_cases_do_not_excuse_the_tripwire():
    nodes, names, wire = _parametrized_group()
    outcomes = {}
    cases = []
    for base in ("test_accents_unicode", "test_unicode_accents"):
        for p in ("creme", "naive"):
            outcomes[f"{FILE}::{base}[{p}]"] = "passed"
            cases.append((MOD, f"{base}[{p}]", False))
        outcomes[f"{FILE}::{base}[spare]"] = "skipped"
    doc = {"outcomes": outcomes, "collect_errors": [], "exit_code": 0, "junit": _junit(cases)}
    run = _judge(doc, nodes, wire, names, "= 4 passed, 2 skipped in 0.11s =", code=0)
    assert not _accepted(run, nodes), (run.integrity, run.outcomes)


def test_made_up_skipped_case_on_the_tripwire_alone_is_caught():
    """Control: the tripwire's own cases forged without a skipped model is caught (the rule as intended)."""
    nodes, names, wire = _parametrized_group()
    outcomes = {f"{FILE}::test_accents_unicode[creme]": "passed", f"{FILE}::test_accents_unicode[naive]": "passed",
                f"{FILE}::test_unicode_accents[creme]": "passed", f"{FILE}::test_unicode_accents[spare]": "skipped"}
    cases = [(MOD, k.split("::")[-1], False) for k in outcomes if "spare" not in k]
    doc = {"outcomes": outcomes, "collect_errors": [], "exit_code": 0, "junit": _junit(cases)}
    run = _judge(doc, nodes, wire, names, "= 3 passed, 1 skipped in 0.11s =", code=0)
    assert not _accepted(run, nodes)


# ---------------------------------------------------------------------------------------------------------------
# Finding 3 (honest fix rejected): a requested parametrized test whose id holds "::" (an IPv6 address ``::1``, a
# C++ or Rust path, ``Class::method``), which pytest selects and reports fine (JUnit: classname the module, name
# ``test_ip[::1]``). ``runner._junit_key`` splits the whole node id on "::", parameters included, so it looks the
# test up in the JUnit report as ``tests.test_net.test_ip[::1]``, finds nothing, and the final cross-check reads
# "plugin says passed, JUnit says None": a grader_integrity problem for an honest run.
# ---------------------------------------------------------------------------------------------------------------

NET = "tests/test_net.py"
NET_TESTS = '''import pytest


@pytest.mark.parametrize("addr", ["::1", "127.0.0.1"])
def test_ip(addr):
    assert ":" in addr or "." in addr
'''


def _real_junit(tmp_path, source: str, argv: list[str]) -> str:
    import os
    import subprocess
    import sys
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / NET).write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    subprocess.run([sys.executable, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                    f"--junitxml={tmp_path / 'j.xml'}", *argv], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    return (tmp_path / "j.xml").read_text()


def test_junit_key_of_a_plain_parametrized_id():
    assert R._junit_key("tests/test_net.py::test_ip[127.0.0.1]") == "tests.test_net::test_ip[127.0.0.1]"


def test_parameter_ids_holding_double_colons(tmp_path):
    nodes = [f"{NET}::test_ip[::1]", f"{NET}::test_ip[127.0.0.1]"]
    junit = _real_junit(tmp_path, NET_TESTS, nodes)
    assert R._parse_junit(junit.encode()).get("tests.test_net::test_ip[::1]") == "passed"  # pytest reports it so
    wire = Tripwire(f"{NET}::test_wire", NET, (), True, None)
    doc = {"outcomes": {n: "passed" for n in nodes}, "collect_errors": [], "exit_code": 0, "junit": junit}
    run = R.TestRun(exit_codes=[0])
    R._judge(run, nodes, [(nodes, None, doc, R._summary("2 passed in 0.01s"))])
    assert _accepted(run, nodes), run.integrity


# ---------------------------------------------------------------------------------------------------------------
# Finding 4 (the tripwire told apart by its file): the same ids make ``compose._embed`` read the parameters as
# classes (``node.split("::")[1:-1]`` is ``["test_ip["]``), find no such scope and give up, so the file's tripwire
# goes to a file of its own beside it, a shape the README's stated limits do not name, and which a forger tells
# apart by its file name alone (the pair hunter of review 1: forge every test of the group's own file).
# ---------------------------------------------------------------------------------------------------------------

def test_parameter_ids_holding_double_colons_keep_the_tripwire_embedded(monkeypatch):
    from orchestrator.grading import compose as C
    source = NET_TESTS + "\n\ndef test_loopback():\n    assert len('::1') == 3\n"
    nodes = [f"{NET}::test_ip[::1]", f"{NET}::test_loopback"]
    for seed in range(8):
        monkeypatch.setattr(C.secrets, "randbits", lambda k, s=seed: s)
        _, wires, _ = C._tripwires([NET], nodes, {NET: source.encode()}, set())
        assert wires[0].embedded and wires[0].node.startswith(NET + "::"), (seed, wires[0])


# ---------------------------------------------------------------------------------------------------------------
# Finding 5: pytest's summary read from a log the code under test writes to raises on a line whose counts end with
# ", ": the grading stops (unprocessable_output) before the canary scan. What must hold: it is read as no summary
# (or its counts), never an exception.
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["1 passed,  in 0.1s", "=== 2 failed, 1 passed,  in 0.01s ==="])
def test_a_summary_line_ending_with_a_comma_is_no_crash(line):
    # no crash; a line that is no summary is passed over (the one before it is read)
    assert R._summary(f"3 failed in 0.04s\n{line}") in (None, {"passed": 1}, {"failed": 2, "passed": 1}, {"failed": 3})


# The same ending (grading stopped before the canary scan, ``unprocessable_output``) from the results channels: the
# code under test writes its group's document (standard output, the JUnit file) and a deeply nested one raises
# RecursionError, which ``_run_test_groups`` does not catch (it catches ValueError): ``json.loads`` of the stream,
# and ``ET.tostring`` in ``_back`` (the serializer recurses) of a JUnit report nested 300,000 deep (2 MiB, under
# the 4 MiB the runner sends). What must hold: an integrity problem of the trial ("no results"), never an exception.
def _stream(text: str):
    from orchestrator.sandbox.base import ExecResult
    return ExecResult(1, text.encode(), b"", len(text.encode()), 0, False, 0.1)


def _deep_document():
    return R._document(_stream('{"outcomes": ' + "[" * 200_000 + "]" * 200_000 + "}"))


def _deep_junit():
    junit = ("<testsuites>" + "<a>" * 300_000 + '<testcase classname="tests.test_slug_unicode" name="test_done"/>'
             + "</a>" * 300_000 + "</testsuites>")
    doc = {"outcomes": {}, "collect_errors": [], "exit_code": 1, "junit": junit}
    return R._back(doc, {f"{FILE}::test_mixed": f"{FILE}::test_done"})


@pytest.mark.parametrize("read", [_deep_document, _deep_junit], ids=["stream", "junit"])
def test_a_deeply_nested_results_document_is_no_crash(read):
    try:
        read()
    except ValueError:
        pass  # the runner's own "no results" path


# ---------------------------------------------------------------------------------------------------------------
# Finding 6 (every trial of an honest task an infra_error): the root check between groups gets every trusted path
# and every guarded folder on its command line (``_root_run``: ``bash -c CHECK_SCRIPT bash uid n paths... folders...``).
# Every file under a test folder is trusted, data included; a test folder holding a corpus of ~30,000 files under a 50-character folder (a
# conformance suite such as test262, a fixtures tree) passes the kernel's ARG_MAX (2 MiB with the default 8 MiB
# stack), and ``docker exec`` then answers "exec /usr/bin/bash: argument list too long" (exit 1, no "end" line):
# three attempts, ``GraderInfraError(grader_output)``, the untouched repository fails the same way, ``grader_broken``.
# What must hold: the check's command line stays within ARG_MAX whatever the number of trusted files (paths on
# standard input, as the digests already are).
# ---------------------------------------------------------------------------------------------------------------

def test_the_root_check_command_line_stays_within_arg_max():
    import os
    import types

    from orchestrator.grading.tree import Tree
    from orchestrator.sandbox.base import ExecResult

    folder = "tests/conformance/built-ins/Array/prototype/flatMap"
    paths = [f"{folder}/case_{i:06d}.js" for i in range(30_000)]
    trusted = {p: b"// case\n" for p in paths}
    parts = folder.split("/")
    tree = Tree(files=dict(trusted), dirs={"/".join(parts[:i]) for i in range(1, len(parts) + 1)})
    comp = types.SimpleNamespace(trusted=trusted, tree=tree)
    sizes = []

    class Recorder:
        spec = types.SimpleNamespace(user="1000:1000")

        def exec(self, cmd, timeout=None, *, user=None, env=None, **kw):
            sizes.append(sum(len(a.encode()) + 1 + 8 for a in cmd) + sum(len(f"{k}={v}") + 9 for k, v in (env or {}).items()))
            out = f"end {len(paths)}\n".encode() if user == "0:0" else b""
            return ExecResult(0, out, b"", len(out), 0, False, 0.01)

        def copy_in(self, tar, dest):  # the list goes in as a file of root's, not on the command line
            sizes.append(0)

    R._between_groups(Recorder(), comp, "before group 0")
    limit = os.sysconf("SC_ARG_MAX") if hasattr(os, "sysconf") else 2 << 20
    assert max(sizes) < min(limit, 2 << 20), (max(sizes), limit)


# ---------------------------------------------------------------------------------------------------------------
# Finding 7 (the tripwire told apart from the file alone, every draw): ``_embed`` writes the copy after its model
# (before one of the *later* tests, or after the last), so of the two tests of a scope whose bodies differ in one
# constant, the later one is the copy. README: "guess which is the copy: right about one time in two". Over many
# draws of real-shaped files, the rule "the later of the pair" names the tripwire every time (30 of 40 draws where
# the file's own tests form near-pairs too); what must hold is the stated limit, about one time in two (<= 24 of 40).
# ---------------------------------------------------------------------------------------------------------------

def _later_of_pairs(source: str) -> set[str]:
    import ast
    tree = ast.parse(source)
    found = set()
    scopes = [tree.body] + [c.body for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
    for body in scopes:
        defs = [d for d in body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name.startswith("test")]
        for a in defs:
            for b in defs:
                if b.lineno <= a.lineno:
                    continue
                ca = [n for n in ast.walk(a) if isinstance(n, ast.Constant)]
                cb = [n for n in ast.walk(b) if isinstance(n, ast.Constant)]
                if len(ca) != len(cb) or sum(x.value != y.value for x, y in zip(ca, cb)) != 1:
                    continue
                if [type(x.value) for x in ca] == [type(y.value) for y in cb] and \
                        _no_constants(a) == _no_constants(b):
                    found.add(b.name)
    return found


def _no_constants(fn) -> str:
    import ast
    import copy
    fn = copy.deepcopy(fn)
    for n in ast.walk(fn):
        if isinstance(n, ast.Constant):
            n.value = None
    return ast.dump(ast.Module(body=fn.body, type_ignores=[]))


HELD_OUT_SHAPES = [
    ('from textkit import slugify\n\n\ndef test_accents():\n    assert slugify("Crème Brûlée") == "creme-brulee"\n'
     '    assert slugify("naïve café") == "naive-cafe"\n\n\ndef test_mixed():\n'
     '    assert slugify("Ünïcödé ✓ done") == "unicode-done"\n', ["test_accents", "test_mixed"]),
    ("from lib import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\ndef test_more():\n"
     "    assert double(5) == 10\n\n\nclass TestIt:\n    def test_zero(self):\n        assert double(0) == 0\n",
     ["test_double", "test_more", "TestIt::test_zero"]),
]


@pytest.mark.parametrize("source,tests", HELD_OUT_SHAPES, ids=["textkit", "lib"])
def test_the_later_of_a_pair_does_not_name_the_tripwire(monkeypatch, source, tests):
    from orchestrator.grading import compose as C
    file = "tests/test_it.py"
    nodes = [f"{file}::{t}" for t in tests]
    right = 0
    for seed in range(40):
        monkeypatch.setattr(C.secrets, "randbits", lambda k, s=seed: s)
        out, wires, _ = C._tripwires([file], nodes, {file: source.encode()}, set())
        wire = wires[0]
        if not wire.embedded or not wire.model:
            continue
        right += _later_of_pairs(out[file].decode()) == {wire.node.split("::")[-1]}
    assert right <= 24, f"the later of the pair named the tripwire in {right} of 40 draws"
