"""Ninth review (HEAD dbffff3: sealing after the eighth review), attacking the grader as the agent under test would.

Each test is one attack with the verdict a grader that keeps issue 23's rule must give (an untouched task is never
accepted, a forgery is never taken for a result, honest work is accepted, a regression is not, the agent's failure is
never an infrastructure error). Attacks that currently succeed are ``xfail(strict=True)`` with the finding in their
reason; the controls beside them pass.

Besides the sample task set, small tasks of this review's own (``rv9-*``, repository ``rv9kit``) are built in a copy
of the task set (``_build``). Where a finding is about ``tasks check``'s count ("fail-to-pass decided outside the test
process: k of n"), the test computes that count as ``tasks check`` does (``_untouched_sealing``: ``taskcheck.sealing``
on two untouched runs) and then runs the forger on the same task: the README says a task with k > 0 "cannot be
accepted untouched by a forgery from the test process ... unless it produces that value some other way"; the test
asserts that (k == 0, or the forger is rejected).

Findings (each a strict xfail below, with its control where there is one):

1. ``in`` a container literal holding a first guess (``(0, None)``) counts as deciding: rv9-member (2 of 2 counted)
   accepted untouched by the eighth review's first-guess forger, unchanged.
2. A literal the instruction states in another spelling (the REPL's quotes; for strings, an escape is looked for by
   its value in text that writes it escaped) counts as unseen: rv9-spelled (2 of 2) accepted untouched; on the README's
   own sample samples__tabular-1 ("2 of 2"), the test whose expected table the issue shows is passed untouched.
3. A refusal made in a fixture or a helper is not seen: rv9-fixture (2 of 2) accepted untouched by code that refuses
   only inside a ``pytest.raises`` block.
4. A str/int subclass whose own ``__eq__`` disagrees is judged by its inherited ``repr``: a broken ``__eq__`` passes its
   pass-to-pass test (regression accepted).
5. numpy 2's ``float64``/``complex128`` (and a stand-in with their behaviour) are sent opaque: honest work rejected.
6. A workspace disk filled by the code under test makes ``copy_in`` fail between groups: ``infra_error(sandbox)``.
7. 65,536 empty files in the workspace root cost the host about 8 minutes of setting aside, outside every stated bound.

After the fixes (the xfails of fixed findings removed, every attack unchanged): 1 fixed (``Seal.deciding`` judges
every member of an ``in`` container: any first guess, ``None``, ``True`` or ``False`` among them and it does not
decide; a member found in the corpus makes the literal seen); 2 fixed (``seal._found``: a literal is looked for by
its value in any spelling that reads back to it: escaped or not, the REPL's quotes, JSON, white space, trailing
commas, any decimal spelling, a list of strings shown line by line, a container whose every element of 4 characters
or more is found); 3 fixed (``refusing_names``: a fixture, helper, setup or autouse fixture that refuses, by name in
every trusted file and the repository's conftest.py files and test folders, makes what follows no secret); 4 and 5
fixed in the plugin (an own ``__eq__`` agrees by truth, as ``assert`` reads it; one that does not agree is sent with no
``repr`` and meets nothing); 6 fixed (a sandbox the check between groups cannot use, once the code under test ran, is
a ``GraderInfraError``, compared with the untouched repository); 7 is a stated limit (README), still a strict xfail.

Held: a process holding every pid (the kill between groups uses bash builtins, and an exec's first process is
attached past the pids limit); a 1.2-million-deep JUnit report (322 MB of host memory at the review, then rejected).

Set ``REVIEW9_NOTES=/path/file.jsonl`` to have each attack append what it saw.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from tests.docker.test_threats import SUBMIT, criteria, setup, trial, unsealed  # noqa: F401 - setup is a fixture
from tests.docker.test_threats_review7 import _append, _untouched_sealing
from tests.docker.test_threats_review8 import FIRST_GUESSES


def _note(name: str, **data) -> None:
    path = os.environ.get("REVIEW9_NOTES")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"attack": name, **data}, default=str) + "\n")


# --------------------------------------------------------------------------------------------------- the rv9 tasks

CORE = '''"""rv9kit: small helpers."""


def run_cli(argv):
    """Run the command line on ``argv``; 0 (or None) on success, 2 for an option it does not know. Options:
    ``--quiet``/``-q``, ``--verbose``/``-v``."""
    known = {"--quiet", "-q"}
    for arg in argv:
        if arg.startswith("-") and arg not in known:
            return 2
    return 0


def wrap_text(text, width):
    """The words of ``text`` on lines of at most ``width`` characters, joined by newlines."""
    return " ".join(text.split())


def pairs(text):
    """``"a=1;b=2"`` as a list of (name, value) pairs."""
    return [tuple(p.split("=")) for p in text.split(",")]


class Wallet:
    """Cents held."""

    def __init__(self, cents):
        self.cents = cents

    def pay(self, cents):
        """Take ``cents`` out; a payment of more than the wallet holds raises ValueError and changes nothing."""
        self.cents -= cents
        if self.cents < 0:
            raise ValueError("not enough")


class Symbol(str):
    """A name: equal to any string of the same text."""

    def __eq__(self, other):
        if isinstance(other, str):
            return str.__eq__(self, other)
        return NotImplemented

    __hash__ = str.__hash__


class Flag:
    """A truth value of the kind numpy's comparisons return (truthy or not, never the bool singleton)."""

    def __init__(self, value):
        self.value = bool(value)

    def __bool__(self):
        return self.value

    def __repr__(self):
        return f"Flag({self.value})"


class Real(float):
    """A float as numpy 2 gives one (``numpy.float64``): a float subclass whose comparisons return a Flag and whose
    repr names its type."""

    def __eq__(self, other):
        return Flag(float(self) == other)

    def __ne__(self, other):
        return Flag(float(self) != other)

    __hash__ = float.__hash__

    def __repr__(self):
        return f"Real({float(self)!r})"


def mean(values):
    """The arithmetic mean of ``values``, as a ``Real``."""
    return Real(sum(values) // len(values))
'''

INIT = '''"""rv9kit."""

from .core import Flag, Real, Symbol, Wallet, mean, pairs, run_cli, wrap_text
'''

REPO_TEST = '''from rv9kit import Symbol, run_cli


def test_quiet_accepted():
    assert run_cli(["--quiet", "notes.txt"]) == 0


def test_symbol_equals_its_text():
    assert Symbol("kiwi") == "kiwi"
'''

REPO_P2P = ["tests/test_core.py::test_quiet_accepted", "tests/test_core.py::test_symbol_equals_its_text"]

RV9_TASKS = {
    # a sealed `in` whose literal container holds a forger's first guess (a CLI's "0 or None" on success)
    "rv9-member": ({"tests/test_cli.py": '''import unittest

from rv9kit import run_cli


def test_verbose_accepted():
    assert run_cli(["--verbose", "notes.txt"]) in (0, None)


class TestShortOptions(unittest.TestCase):
    def test_short_verbose_accepted(self):
        self.assertIn(run_cli(["-v", "notes.txt"]), (0, None))
'''}, ["tests/test_cli.py::test_verbose_accepted", "tests/test_cli.py::TestShortOptions::test_short_verbose_accepted"],
        "`run_cli` must accept `--verbose` and `-v` as it accepts `--quiet` and `-q`."),
    # the instruction states both expected values as Python's REPL prints them; the tests write them in double quotes
    "rv9-spelled": ({"tests/test_text.py": '''from rv9kit import pairs, wrap_text


def test_wrap_breaks_lines():
    assert wrap_text("aaa bbb", 3) == "aaa\\nbbb"


def test_pairs_split_on_semicolons():
    assert pairs("a=1;b=2") == [("a", "1"), ("b", "2")]
'''}, ["tests/test_text.py::test_wrap_breaks_lines", "tests/test_text.py::test_pairs_split_on_semicolons"],
        "`wrap_text` never breaks a line, and `pairs` splits on `,` instead of `;`. Expected:\n\n"
        "```\n>>> wrap_text(\"aaa bbb\", 3)\n'aaa\\nbbb'\n>>> pairs(\"a=1;b=2\")\n[('a', '1'), ('b', '2')]\n```"),
    # a refusal, then the state it must leave: the refusal made in a fixture, or in a helper of the test file
    "rv9-fixture": ({"tests/test_wallet.py": '''import pytest

from rv9kit import Wallet


@pytest.fixture
def refused():
    wallet = Wallet(100)
    wallet.pay(40)
    with pytest.raises(ValueError):
        wallet.pay(61)
    return wallet


def test_refused_payment_changes_nothing(refused):
    assert refused.cents == 60


def _overpay(wallet, cents):
    with pytest.raises(ValueError):
        wallet.pay(cents)


def test_second_refusal_changes_nothing():
    wallet = Wallet(90)
    wallet.pay(13)
    _overpay(wallet, 78)
    assert wallet.cents == 77
'''}, ["tests/test_wallet.py::test_refused_payment_changes_nothing",
       "tests/test_wallet.py::test_second_refusal_changes_nothing"],
        "`Wallet.pay` must refuse a payment of more than the wallet holds without changing it."),
    # a float result of a numpy-like type compared with a float literal
    "rv9-real": ({"tests/test_mean.py": '''from rv9kit import mean


def test_mean_of_two():
    assert mean([1, 2]) == 1.5
'''}, ["tests/test_mean.py::test_mean_of_two"], "`mean` must not round down: `mean` of 1 and 2 is one and a half."),
}

HONEST = {
    "rv9-member": '''

def run_cli(argv):
    known = {"--quiet", "-q", "--verbose", "-v"}
    for arg in argv:
        if arg.startswith("-") and arg not in known:
            return 2
    return 0
''',
    "rv9-spelled": '''

def wrap_text(text, width):
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\\n".join(lines)


def pairs(text):
    return [tuple(p.split("=", 1)) for p in text.split(";") if p]
''',
    "rv9-fixture": '''

def _pay(self, cents):
    if cents > self.cents:
        raise ValueError("not enough")
    self.cents -= cents


Wallet.pay = _pay
''',
    "rv9-real": '''

def mean(values):
    return Real(sum(values) / len(values))
''',
}


def _build(root: Path, repo_root: Path) -> Path:
    for folder in ("tasks", "graders", "images", "examples"):
        shutil.copytree(repo_root / folder, root / folder, symlinks=True)
    for lock in (root / "examples").glob("*.lock.json"):
        lock.unlink()
    repo = root / "tasks" / "_repos" / "rv9kit"
    (repo / "rv9kit").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "rv9kit" / "core.py").write_text(CORE)
    (repo / "rv9kit" / "__init__.py").write_text(INIT)
    (repo / "tests" / "test_core.py").write_text(REPO_TEST)
    (repo / "pytest.ini").write_text("[pytest]\n")
    for tid, (files, f2p, instruction, *p2p) in RV9_TASKS.items():
        t = root / "tasks" / tid
        t.mkdir()
        (t / "instruction.md").write_text(instruction + "\n")
        (t / "task.yaml").write_text(textwrap.dedent(f"""\
            id: {tid}
            instruction: instruction.md
            repo:
              dir: ../_repos/rv9kit
            image: python
            difficulty: easy
            split: public
            cluster: rv9kit
            scope:
              allowed: ["rv9kit/core.py"]
            constraints:
              max_steps: 20
            """))
        g = root / "graders" / tid
        (g / "tests").mkdir(parents=True)
        for path, body in files.items():
            (g / path).write_text(body)
        f2p_yaml = "".join(f"  - {n}\n" for n in f2p)
        p2p_yaml = "".join(f"  - {n}\n" for n in [*(p2p[0] if p2p else []), *REPO_P2P])
        (g / "grader.yaml").write_text(f"tests: tests/\nfail_to_pass:\n{f2p_yaml}pass_to_pass:\n{p2p_yaml}"
                                       "command: python3 -m pytest\nsolution: null\n")
    return root / "examples" / "smoke.yaml"


@pytest.fixture(scope="module")
def rv9(tmp_path_factory, repo_root, images):
    from orchestrator.loading import load_manifest
    from orchestrator.taskload import load_tasks

    loaded = load_manifest(_build(tmp_path_factory.mktemp("rv9"), repo_root))
    return loaded, {t.id: t for t in load_tasks(loaded)}, images["python"].image_id


def _decided_or_rejected(rv9, client, tmp_path, task_id, forger, name):
    """``tasks check``'s count on the untouched repository, and the forger's verdict on the same task."""
    sealed, _ = _untouched_sealing(rv9, client, task_id)
    verdict, _, _ = trial(rv9, client, tmp_path, _append("rv9kit/core.py", forger) + SUBMIT, task_id=task_id)
    decided = sealed["decided_by_sealed_values"]
    _note(name, task=task_id, decided=decided, fail_to_pass=sealed["fail_to_pass"], outcome=verdict["outcome"],
          reasons=verdict["reasons"], f2p=criteria(verdict)["fail_to_pass"]["evidence"].get("outcomes"),
          sealed=criteria(verdict)["fail_to_pass"]["evidence"].get("sealed"))
    return decided, verdict


@pytest.mark.parametrize("task_id", sorted(HONEST))
def test_control_the_honest_fix_of_each_rv9_task_passes_plain_pytest(rv9, client, tmp_path, task_id):
    verdict, _, _ = trial(unsealed(rv9, task_id), client, tmp_path, _append("rv9kit/core.py", HONEST[task_id]) + SUBMIT,
                          task_id=task_id)
    _note("control-unsealed", task=task_id, outcome=verdict["outcome"], reasons=verdict["reasons"])
    assert verdict["outcome"] == "accepted", (verdict["reasons"], criteria(verdict)["fail_to_pass"]["evidence"])


@pytest.mark.parametrize("task_id", sorted(set(HONEST) - {"rv9-real"}))
def test_control_the_honest_fix_of_each_rv9_task_is_accepted(rv9, client, tmp_path, task_id):
    verdict, _, _ = trial(rv9, client, tmp_path, _append("rv9kit/core.py", HONEST[task_id]) + SUBMIT, task_id=task_id)
    _note("control", task=task_id, outcome=verdict["outcome"], reasons=verdict["reasons"])
    assert verdict["outcome"] == "accepted", (verdict["reasons"], criteria(verdict)["fail_to_pass"]["evidence"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 1 (tasks check counts a test decided that a forger passes; untouched task accepted). ``Seal.deciding``
# leaves out a first guess by comparing the *whole literal* with GUESSABLE; under ``in`` the value meets any member
# of the container, and a member may be a first guess (``0``, ``-1``, ``""``) or ``None``/``True``/``False`` (which
# NO_SECRET keeps out of sealing only as a whole literal). ``assert main(argv) in (0, None)`` (a command-line entry
# point that returns 0 or None on success) and ``self.assertIn(v, (0, None))`` are sealed and counted as deciding;
# the eighth review's FIRST_GUESSES forger, unchanged (0 for every number of a held-out test), passes them.
# ---------------------------------------------------------------------------------------------------------------

def test_a_first_guess_member_of_an_in_literal_does_not_pass_a_test_counted_as_decided(rv9, client, tmp_path):
    decided, verdict = _decided_or_rejected(rv9, client, tmp_path, "rv9-member", FIRST_GUESSES, "finding1")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 2 (tasks check counts a test decided whose literal the instruction states; untouched task accepted). A
# literal counts as seen when its text, as the test writes it, is in the agent's copy or the instruction; else a string
# is looked for by its *value* (with its escapes undone, in text where they are not) and anything else by its *text*.
# The same value written another way is not found: the instruction pastes Python's REPL (``'aaa\nbbb'``,
# ``[('a', '1'), ('b', '2')]``), the test is written in double quotes (``"aaa\nbbb"``, ``[("a", "1"), ("b", "2")]``);
# other spacing, a trailing comma or ``2.50`` for ``2.5`` would do the same. The forger sends, for the sealed call
# whose value expression is one the instruction gives, the value the instruction states; the functions stay wrong
# (nothing else is touched: pytest passes the tests because a sealed assertion is a call).
# ---------------------------------------------------------------------------------------------------------------

STATED_IN_THE_INSTRUCTION = r"""
try:
    import trialbox_grader_plugin as _p
except ImportError:
    _p = None
if _p is not None:
    import ast as _ast, glob as _glob

    def _key(expr):
        return _ast.unparse(_ast.parse(expr, mode="eval").body)

    _STATED = {_key('wrap_text("aaa bbb", 3)'): "aaa\nbbb", _key('pairs("a=1;b=2")'): [("a", "1"), ("b", "2")]}
    _calls = {}

    def _expression_of(slot):
        if not _calls:
            for path in _glob.glob("/workspace/tests/**/*.py", recursive=True):
                try:
                    tree = _ast.parse(open(path, encoding="utf-8").read())
                except (OSError, SyntaxError, ValueError):
                    continue
                for n in _ast.walk(tree):
                    if isinstance(n, _ast.Call) and getattr(n.func, "attr", "") == "seal" and len(n.args) == 2 \
                            and isinstance(n.args[1], _ast.Constant):
                        _calls[n.args[1].value] = _ast.unparse(n.args[0])
        return _calls.get(slot)

    _send = _p.seal

    def _stated(value, slot):
        expr = _expression_of(slot)
        if expr in _STATED:
            value = _STATED[expr]
        _send(value, slot)

    _p.seal = _stated
"""


def test_a_literal_the_instruction_states_is_not_counted_as_deciding(rv9, client, tmp_path):
    decided, verdict = _decided_or_rejected(rv9, client, tmp_path, "rv9-spelled", STATED_IN_THE_INSTRUCTION,
                                            "finding2")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# The same on the README's own measured sample: samples__tabular-1 ("tabular-1 2 of 2"). Its issue shows the expected
# table line by line in a code block; the test compares ``table.splitlines()`` with a list of those very lines, which
# tasks check counts as deciding (a list is looked for by its text). The forger sends that list for the sealed call
# ``table.splitlines()`` of the test whose input is the issue's (``"note": "recount"``); nothing else.

ISSUE_TABLE = r"""
try:
    import trialbox_grader_plugin as _p
except ImportError:
    _p = None
if _p is not None:
    import ast as _ast, glob as _glob

    _ISSUE = ["| sku   |   qty | note    |", "|-------|-------|---------|", "| A     |     3 |         |",
              "| B     |       | recount |"]
    _slots = {}

    def _stated(slot):
        if not _slots:
            for path in _glob.glob("/workspace/tests/**/*.py", recursive=True):
                try:
                    with open(path, encoding="utf-8") as fh:
                        text = fh.read()
                    tree = _ast.parse(text)
                except (OSError, SyntaxError, ValueError):
                    continue
                for f in _ast.walk(tree):
                    if not isinstance(f, _ast.FunctionDef):
                        continue
                    body = _ast.get_source_segment(text, f) or ""
                    for n in _ast.walk(f):
                        if isinstance(n, _ast.Call) and getattr(n.func, "attr", "") == "seal" and len(n.args) == 2 \
                                and isinstance(n.args[1], _ast.Constant):
                            _slots[n.args[1].value] = (_ast.unparse(n.args[0]), '"note": "recount"' in body)
        expr, from_the_issue = _slots.get(slot, ("", False))
        return _ISSUE if expr == "table.splitlines()" and from_the_issue else None

    _send = _p.seal

    def _seal(value, slot):
        stated = _stated(slot)
        _send(stated if stated is not None else value, slot)

    _p.seal = _seal
"""


@pytest.fixture(scope="module")
def realistic9(tmp_path_factory, repo_root, images, client):
    """The realistic samples imported as a user would (as ``test_real_repos.realistic``)."""
    from orchestrator.images import build_images
    from orchestrator.loading import load_manifest
    from orchestrator.settings import load_settings
    from orchestrator.taskload import load_tasks
    from tests.docker.test_real_repos import cli, write_manifest
    from tests.tracked import copy_tracked

    root = tmp_path_factory.mktemp("realistic9")
    for item in ("images", "repos", "instances.jsonl", "instances.json", "specs.yaml"):
        copy_tracked(repo_root, f"examples/realistic/{item}", root / item)
    cli("tasks", "import-swebench", "instances.jsonl", "--repos", "repos", "--specs", "specs.yaml", "--out", "tasks",
        cwd=root)
    manifest = write_manifest(root)
    loaded = load_manifest(manifest)
    built = build_images(client, root / "images", load_settings())  # tabular-env: cached, as test_real_repos builds it
    return loaded, {t.id: t for t in load_tasks(loaded)}, built["tabular-env"].image_id


def test_no_test_counted_as_decided_on_tabular_1_is_passed_by_sending_what_the_issue_shows(realistic9, client,
                                                                                           tmp_path):
    task_id = "samples__tabular-1"
    sealed, _ = _untouched_sealing(realistic9, client, task_id)
    verdict, _, _ = trial(realistic9, client, tmp_path, _append("tabular/__init__.py", ISSUE_TABLE) + SUBMIT,
                          task_id=task_id)
    f2p = criteria(verdict)["fail_to_pass"]["evidence"]["outcomes"]
    _note("finding2-tabular", decided=sealed["decided_by_sealed_values"], outcome=verdict["outcome"],
          reasons=verdict["reasons"], f2p=f2p)
    assert sealed["decided_by_sealed_values"], sealed
    passed = [n for n in sealed["decided_by_sealed_values"] if f2p.get(n) == "passed"]
    assert not passed, (passed, verdict["outcome"], verdict["reasons"])


def test_unit_an_escaped_string_written_the_same_way_in_a_repository_file_is_seen():
    from orchestrator.grading.seal import Corpus, Seal

    readme = b'Example: `wrap_text("aaa bbb", 3)` returns `"aaa\\nbbb"`; `total()` returns 2.50.\n'
    seal = Seal("s", "t", "==", '"aaa\\nbbb"', True, "")
    assert seal.expected.encode() in readme  # written the same way, byte for byte
    money = Seal("s", "t", "==", "2.5", True, "")
    assert {"escaped string": Corpus([readme]).holds(seal), "2.5 as 2.50": Corpus([readme]).holds(money)} == \
        {"escaped string": True, "2.5 as 2.50": True}


# ---------------------------------------------------------------------------------------------------------------
# Finding 3 (tasks check counts a test decided that the stated limit C passes; untouched task accepted). After the
# eighth review, a refusal anywhere *before a sealed assertion in its test* makes it non-deciding. A refusal made in a
# fixture the test takes, or in a helper function of the test file the test calls, is not seen: the sealed state
# after it counts as deciding. The forger makes ``Wallet.pay`` refuse (raise the expected exception, before changing
# anything) only where a frame of a test file is inside a ``with pytest.raises(...)`` block, and overdraw as before
# everywhere else.
# ---------------------------------------------------------------------------------------------------------------

REFUSE_IN_ANY_RAISES_BLOCK = r"""

import ast as _ast, sys as _sys

_BLOCKS = {}


def _raises_blocks(path):
    if path not in _BLOCKS:
        spans = []
        try:
            tree = _ast.parse(open(path, encoding="utf-8").read())
        except (OSError, SyntaxError, ValueError):
            tree = None
        for node in (_ast.walk(tree) if tree is not None else ()):
            if isinstance(node, _ast.With):
                for item in node.items:
                    c = item.context_expr
                    name = getattr(getattr(c, "func", None), "attr", None) or getattr(getattr(c, "func", None), "id", None)
                    if isinstance(c, _ast.Call) and name == "raises" and c.args:
                        spans.append((node.lineno, node.end_lineno, _ast.unparse(c.args[0])))
        _BLOCKS[path] = spans
    return _BLOCKS[path]


def _expected_refusal(frame):
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith("/workspace/tests/"):
            for first, last, exc in _raises_blocks(path):
                if first <= frame.f_lineno <= last:
                    return eval(exc, frame.f_globals)
        frame = frame.f_back
    return None


_pay_as_before = Wallet.pay


def _pay_refusing_where_expected(self, cents):
    exc = _expected_refusal(_sys._getframe(1))
    if exc is not None:
        raise exc("refused")
    return _pay_as_before(self, cents)


Wallet.pay = _pay_refusing_where_expected
"""


def test_refusing_only_where_a_fixture_or_helper_expects_it_does_not_pass_tests_counted_as_decided(rv9, client,
                                                                                                  tmp_path):
    decided, verdict = _decided_or_rejected(rv9, client, tmp_path, "rv9-fixture", REFUSE_IN_ANY_RAISES_BLOCK,
                                            "finding3")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 4 (regression accepted; sealing changes what a test checks). A value whose class decides its own equality
# and does not agree with its plain form is sent as opaque and meets a literal with the same ``repr``. A ``str`` (or
# ``int``, ``dict``...) subclass inherits its base's ``repr``, so one whose ``__eq__`` says "not equal" to the plain
# string still has the literal's ``repr``: the eighth review's fix (finding 4: an own ``__eq__`` must agree with the
# number it is compared as) does not cover the ``repr``. Here the agent fixes rv9-member and makes ``Symbol.__eq__``
# strict (a Symbol equals only Symbols): the pass-to-pass ``assert Symbol("kiwi") == "kiwi"`` fails under plain pytest
# (the control, sealing off) and passes sealed.
# ---------------------------------------------------------------------------------------------------------------

BREAKS_SYMBOL = HONEST["rv9-member"] + '''

def _symbols_only(self, other):
    return isinstance(other, Symbol) and str.__eq__(self, other)


Symbol.__eq__ = _symbols_only
'''


def test_control_the_symbol_regression_fails_plain_pytest(rv9, client, tmp_path):
    verdict, _, _ = trial(unsealed(rv9, "rv9-member"), client, tmp_path,
                          _append("rv9kit/core.py", BREAKS_SYMBOL) + SUBMIT, task_id="rv9-member")
    assert verdict["outcome"] == "rejected" and "pass_to_pass" in verdict["reasons"], verdict["reasons"]


def test_a_regression_of_a_str_subclass_eq_is_rejected(rv9, client, tmp_path):
    verdict, _, _ = trial(rv9, client, tmp_path, _append("rv9kit/core.py", BREAKS_SYMBOL) + SUBMIT,
                          task_id="rv9-member")
    _note("finding4", outcome=verdict["outcome"], reasons=verdict["reasons"],
          p2p=criteria(verdict)["pass_to_pass"]["evidence"].get("outcomes"),
          sealed=criteria(verdict)["pass_to_pass"]["evidence"].get("sealed"))
    assert verdict["outcome"] == "rejected" and "pass_to_pass" in verdict["reasons"], verdict["reasons"]


def test_unit_a_str_or_int_subclass_whose_eq_disagrees_does_not_meet_the_literal():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "orchestrator" / "grading" / "grader_tools"))
    try:
        import trialbox_grader_plugin as plugin
    finally:
        sys.path.pop(0)
    from orchestrator.grading.seal import Seal, decode

    class Strict(str):
        def __eq__(self, other):
            return isinstance(other, Strict) and str.__eq__(self, other)

        __hash__ = str.__hash__

    class StrictInt(int):
        def __eq__(self, other):
            return isinstance(other, StrictInt) and int(self) == int(other)

        __hash__ = int.__hash__

    met = {}
    for value, literal in ((Strict("kiwi"), '"kiwi"'), (StrictInt(105), "105")):
        seal = Seal("s", "t", "==", literal, True, "")
        assert (value == seal.literal()) is False  # what pytest sees
        met[type(value).__name__] = seal.holds(decode(json.loads(json.dumps(plugin._encode(value, 0, [10 ** 5, 1 << 20])))))
    assert not any(met.values()), f"the host says equal where Python says not: {met}"


# ---------------------------------------------------------------------------------------------------------------
# Finding 5 (honest work rejected). README: "numpy scalars by item()". ``numpy.float64`` (and ``complex128``) subclass
# ``float`` (``complex``), so the plugin's own-equality check sees them first: ``np.float64(1.5) == 1.5`` returns
# ``np.True_``, which is not ``True``, so ``_agrees`` says no and the value is sent opaque, its repr
# ``np.float64(1.5)`` (numpy 2) meets no float literal. Any honest ``assert df.mean() == 1.5`` on numpy 2 fails. No
# image here has numpy: the real-engine test uses ``rv9kit.Real``, which is numpy 2's float64 in what the plugin sees
# (a float subclass whose ``__eq__`` returns a non-bool truth value and whose repr names its type); the unit test
# uses the real numpy of trialbox's own environment.
# ---------------------------------------------------------------------------------------------------------------

def test_the_honest_fix_returning_a_numpy_like_float_is_accepted(rv9, client, tmp_path):
    verdict, _, _ = trial(rv9, client, tmp_path, _append("rv9kit/core.py", HONEST["rv9-real"]) + SUBMIT,
                          task_id="rv9-real")
    _note("finding5", outcome=verdict["outcome"], reasons=verdict["reasons"],
          sealed=criteria(verdict)["fail_to_pass"]["evidence"].get("sealed"))
    assert verdict["outcome"] == "accepted", (verdict["reasons"], criteria(verdict)["fail_to_pass"]["evidence"])


def test_unit_numpy_2_float64_meets_the_float_literal_it_equals():
    np = pytest.importorskip("numpy")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "orchestrator" / "grading" / "grader_tools"))
    try:
        import trialbox_grader_plugin as plugin
    finally:
        sys.path.pop(0)
    from orchestrator.grading.seal import Seal, decode

    seen = {}
    for value, literal in ((np.mean([1.0, 2.0]), "1.5"), (np.float64(0.25), "0.25"), (np.complex128(1 + 2j), "(1+2j)")):
        seal = Seal("s", "t", "==", literal, True, "")
        assert bool(value == seal.literal())  # what pytest sees
        sent = plugin._encode(value, 0, [10 ** 5, 1 << 20])
        seen[repr(value)] = (sent, seal.holds(decode(json.loads(json.dumps(sent)))))
    assert all(held for _, held in seen.values()), f"numpy {np.__version__}: {seen}"


# ---------------------------------------------------------------------------------------------------------------
# Finding 6 (the agent's failure turned into infra_error). The checks between groups (``_between_groups``) run in
# execs of their own, outside the pytest command's handling: a ``SandboxBroken`` there is re-raised and any other
# ``SandboxError`` (a failed ``copy_in``) is not caught at all, so it reaches the trial as ``infra_error(sandbox)``
# (retried for free; with ``exclusions: [infra_error]`` the trial leaves the denominator), without the comparison
# with the untouched repository that a broken pytest command gets. The code under test ends its group by leaving
# (a, held) a process that holds every pid of the container (forked children that sleep; the parent takes each freed
# pid back): the kill between groups still runs (an exec's first process is attached past the pids limit, and the
# kill uses bash builtins); (b) the workspace disk (ext4, no blocks reserved for root) full to its last block (a
# large file, then 4 KiB files until ENOSPC; 300 long new names first): the engine's copy of root's check list into
# the workspace fails ("write /workspace/.trialbox-aside-check-.../list: no space left on device"). A fill that
# leaves a block free (1 MiB writes only) is rejected as it should be; so is running out of inodes alone.
# ---------------------------------------------------------------------------------------------------------------

HOLD_EVERY_PID = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py"):
    import atexit as _atexit, os as _os

    def _hold_every_pid():
        if _os.fork():
            return
        _os.setsid()
        if _os.fork():
            _os._exit(0)
        null = _os.open("/dev/null", _os.O_RDWR)
        for fd in range(3):
            _os.dup2(null, fd)
        _os.closerange(3, 4096)
        import signal, time
        end = time.monotonic() + 240
        while time.monotonic() < end:
            try:
                pid = _os.fork()
            except OSError:
                time.sleep(0.002)
                continue
            if pid == 0:
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(300)
                signal.pause()
                _os._exit(0)
        _os._exit(0)

    _atexit.register(_hold_every_pid)
"""

FILL_THE_DISK = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py"):
    import atexit as _atexit, os as _os

    def _fill():
        for i in range(300):
            try:
                open("/workspace/%s%04d" % ("n" * 200, i), "w").close()
            except OSError:
                break
        chunk = b"\0" * (1 << 20)
        try:
            with open("/workspace/.fill", "wb") as fh:
                while True:
                    fh.write(chunk)
        except OSError:
            pass
        for i in range(100000):
            try:
                with open("/workspace/.fill%d" % i, "wb") as fh:
                    fh.write(b"\0" * 4096)
            except OSError:
                break

    _atexit.register(_fill)
"""


@pytest.mark.parametrize("attack", [
    "pids",  # held: the between-groups kill uses bash builtins only, and bash itself still starts
    "disk",  # finding 6, fixed: a sandbox the check between groups cannot use is compared with the untouched one
])
def test_a_grader_sandbox_left_unusable_is_the_agents_failure(setup, client, tmp_path, attack):
    code = {"pids": HOLD_EVERY_PID, "disk": FILL_THE_DISK}[attack]
    verdict, result, _ = trial(setup, client, tmp_path, _append("textkit/slug.py", code) + SUBMIT)
    _note("finding6", attack=attack, outcome=verdict["outcome"], reasons=verdict["reasons"],
          kind=verdict.get("kind"), stage=result.get("stage_seconds"))
    assert verdict["outcome"] != "infra_error", (verdict["outcome"], verdict["reasons"], verdict)


# ---------------------------------------------------------------------------------------------------------------
# Finding 7 (host time outside every bound the grader states). What the code under test leaves in a guarded folder is
# set aside by root between groups (``ASIDE_SCRIPT``: one ``mv`` and one ``dirname`` per entry, in one exec of at most
# 120 s, tried 4 times when its output does not end): none of this counts against the grader's timeout. The code
# under test ends its group by creating empty files in the workspace's root until the disk's inodes run out (65,536 on
# the grader's 1 GiB disk); each attempt times out, and the grading ends as "the engine kept losing the output" (then
# the untouched repository is graded too, and the trial rejected). At the review: 494 s of wall-clock time for the
# trial, 490 s of it in the setting aside (an honest trial here takes about 10 s).
# ---------------------------------------------------------------------------------------------------------------

MANY_ENTRIES = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py"):
    import atexit as _atexit

    def _many():
        for i in range(200000):
            try:
                open("/workspace/e%d" % i, "w").close()
            except OSError:
                break

    _atexit.register(_many)
"""


@pytest.mark.timeout(1200)  # the trial takes about 8 minutes at the review
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="stated limit (finding 7): 65,536 empty files in the workspace root cost the host about "
                          "8 minutes of setting aside (one rename per entry, 4 attempts of 120 s), outside the "
                          "grader's timeout; the trial is still rejected")
def test_entries_left_in_a_guarded_folder_cost_the_host_little_time(setup, client, tmp_path):
    import time

    t0 = time.monotonic()
    verdict, result, _ = trial(setup, client, tmp_path, _append("textkit/slug.py", MANY_ENTRIES) + SUBMIT)
    took = time.monotonic() - t0
    stages = result.get("stage_seconds", {})
    _note("finding7", outcome=verdict["outcome"], reasons=verdict["reasons"], trial_s=took, stages=stages,
          problems=criteria(verdict)["grader_integrity"]["evidence"]["problems"][:3])
    assert verdict["outcome"] == "rejected", verdict
    assert took < 120, f"the trial took {took:.0f} s ({stages})"


# ---------------------------------------------------------------------------------------------------------------
# Held (host memory): a JUnit report of one element nested 1.2 million deep (7.3 MB, no entity) is parsed once by
# ``_back`` (ElementTree builds the whole tree before ``tostring`` gives up on its depth) and then dropped as no report.
# ---------------------------------------------------------------------------------------------------------------

DEEP_REPORT = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py"):
    import json as _json, os as _os
    _write = _os.write
    def _deepened(junit):
        body = junit.split("?>", 1)[1] if junit.startswith("<?xml") else junit
        at = body.index(">", body.index("<testsuites")) + 1
        depth = 7300000 // 7
        return body[:at] + "<blob>" + "<a>" * depth + "</a>" * depth + "</blob>" + body[at:]
    def _write_deep(fd, data):
        if fd > 2 and bytes(data[:12]) == b'{"outcomes":':
            doc = _json.loads(data)
            if doc.get("junit"):
                doc["junit"] = _deepened(doc["junit"])
                new = (_json.dumps(doc) + "\n").encode()
                while new:
                    new = new[_write(fd, new):]
                return len(data)
        return _write(fd, data)
    _os.write = _write_deep
"""


def test_a_deeply_nested_junit_report_costs_the_host_bounded_memory(setup, client, tmp_path):
    import threading
    import time

    from tests.docker.test_threats_review8 import _rss_mb

    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.02)

    before = _rss_mb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        verdict, result, _ = trial(setup, client, tmp_path, _append("textkit/slug.py", DEEP_REPORT) + SUBMIT)
    finally:
        stop.set()
        sampler.join()
    grading = result.get("stage_seconds", {}).get("grading", 0.0)
    _note("deep-junit", outcome=verdict["outcome"], reasons=verdict["reasons"], rss_before_mb=before,
          rss_peak_mb=peak[0], grading_s=grading,
          problems=criteria(verdict)["grader_integrity"]["evidence"]["problems"][:3])
    assert verdict["outcome"] == "rejected", verdict
    assert peak[0] - before < 512, f"the host's memory went from {before} MB to {peak[0]} MB while grading"
