"""Eighth review (HEAD 5de902a: sealing after the seventh review), attacking the grader as the agent under test would.

After the review: findings 1, 2, 3, 4, 6 and 7 are fixed and their tests pass as written (first guesses by value and
refusals anywhere before a sealed assertion no longer count as deciding; a literal any file of the container holds
is no secret; an object's own __eq__ must agree with the number or plain form it is compared as; results documents
are bounded and a JUnit report declaring entities is forged; the log is renamed in one pass). Finding 5 (a mapping
whose own __eq__ accepts another literal, compared as a plain dict) is a stated limit, a strict xfail.

Each test is one attack with the verdict a grader that keeps issue 23's rule must give (an untouched task is never
accepted, a forgery is never taken for a result, honest work is accepted, a regression is not, the host's cost of a
trial is bounded). Attacks that currently succeed are ``xfail(strict=True)`` with the finding in their reason.

Besides the sample task set, small tasks of this review's own (``rv8-*``, repository ``rv8kit``) are built in a copy
of the task set (``_build``). Where a finding is about ``tasks check``'s count ("fail-to-pass decided outside the test
process: k of n"), the test computes that count as ``tasks check`` does (``_untouched_sealing``: ``taskcheck.sealing``
on two untouched runs) and then runs the forger on the same task: the README says a task with k > 0 "cannot be
accepted untouched by any forgery from the test process"; the test asserts exactly that (k == 0, or the forger is
rejected).

Set ``REVIEW8_NOTES=/path/file.jsonl`` to have each attack append what it saw (counts, outcomes, seconds, memory).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.docker.test_threats import SUBMIT, criteria, trial, unsealed
from tests.docker.test_threats_review7 import _append, _untouched_sealing


def _note(name: str, **data) -> None:
    path = os.environ.get("REVIEW8_NOTES")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"attack": name, **data}, default=str) + "\n")


# --------------------------------------------------------------------------------------------------- the rv8 tasks

CORE = '''"""rv8kit: small helpers."""


def initial(word):
    """The first letter of ``word``, surrounding spaces ignored, lower-cased."""
    return word[:1].lower()


def net(amounts):
    """The net of charges (positive) and refunds (negative), as a float."""
    return float(sum(abs(a) for a in amounts))


def tags_of(text):
    """The ``#tags`` of ``text``, without their ``#``, as a set."""
    return set(text.split())


def digest(word):
    """The sum of the code points of ``word``, trimmed and lower-cased, modulo 1000."""
    return sum(ord(c) for c in word.strip()) % 1000


def parse_headers(text):
    """``Name: value`` lines as a mapping whose names compare case-insensitively."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        out[name.strip()] = value.strip()
    return out


class Ratio:
    """An exact ratio of two ints, equal to any number of the same value."""

    def __init__(self, num, den):
        self.num, self.den = num, den

    def __eq__(self, other):
        if isinstance(other, Ratio):
            return self.num * other.den == other.num * self.den
        if isinstance(other, (int, float)):
            return self.num == other * self.den
        return NotImplemented

    def __hash__(self):
        return hash(self.num / self.den)

    def __float__(self):
        return self.num / self.den

    def __repr__(self):
        return f"Ratio({self.num}, {self.den})"


class Wallet:
    """Cents held."""

    def __init__(self, cents):
        self.cents = cents

    def pay(self, cents):
        """Take ``cents`` out; a payment of more than the wallet holds raises ValueError and changes nothing."""
        self.cents -= cents
        if self.cents < 0:
            raise ValueError("not enough")
'''

INIT = '''"""rv8kit."""

from .core import Ratio, Wallet, digest, initial, net, parse_headers, tags_of
'''

REPO_TEST = '''from rv8kit import Ratio, initial


def test_initial_plain():
    assert initial("Kiwi") == "k"


def test_quarter():
    assert Ratio(1, 4) == 0.25
'''

REPO_P2P = ["tests/test_core.py::test_initial_plain", "tests/test_core.py::test_quarter"]

MANY = 200
"""Pass-to-pass tests of rv8-many's one test file (a real repository's test module often has as many)."""

RV8_TASKS = {
    # plain tests whose literals a forger's first guess meets: the empty string is in every string, 0 == 0.0,
    # set() is the empty set (GUESSABLE holds 0, "", () ... by type, so none of these counts as guessable)
    "rv8-guess": ({"tests/test_guess.py": '''from rv8kit import initial, net, tags_of


def test_initial_is_a_letter():
    assert initial("  kiwi") in "abcdefghijklmnopqrstuvwxyz"


def test_refund_cancels_the_charge():
    assert net([500, -500]) == 0.0


def test_plain_text_has_no_tags():
    assert tags_of("plain text") == set()
'''}, ["tests/test_guess.py::test_initial_is_a_letter", "tests/test_guess.py::test_refund_cancels_the_charge",
       "tests/test_guess.py::test_plain_text_has_no_tags"],
        "`initial` must ignore surrounding spaces; `net` must count refunds as negative amounts; `tags_of` must "
        "return only the words that start with `#`."),
    # a refusal, then the state it must leave, written four ordinary ways that _after_refusal does not see: the
    # call form of pytest.raises and of assertRaises, contextlib.suppress, and pytest.raises inside another with
    "rv8-refuse": ({"tests/test_refuse.py": '''import contextlib
import logging
import unittest

import pytest

from rv8kit import Wallet


def test_overpay_changes_nothing():
    wallet = Wallet(100)
    wallet.pay(40)
    pytest.raises(ValueError, wallet.pay, 61)
    assert wallet.cents == 60


def test_overpay_ignored():
    wallet = Wallet(90)
    wallet.pay(13)
    with contextlib.suppress(ValueError):
        wallet.pay(78)
    assert wallet.cents == 77


def test_overpay_logged(caplog):
    wallet = Wallet(80)
    wallet.pay(25)
    with caplog.at_level(logging.INFO):
        with pytest.raises(ValueError):
            wallet.pay(56)
    assert wallet.cents == 55


class TestWallet(unittest.TestCase):
    def test_overpay_refused(self):
        wallet = Wallet(120)
        wallet.pay(49)
        self.assertRaises(ValueError, wallet.pay, 72)
        self.assertEqual(wallet.cents, 71)
'''}, ["tests/test_refuse.py::test_overpay_changes_nothing", "tests/test_refuse.py::test_overpay_ignored",
       "tests/test_refuse.py::test_overpay_logged", "tests/test_refuse.py::TestWallet::test_overpay_refused"],
        "`Wallet.pay` must refuse a payment of more than the wallet holds without changing it."),
    # the sealed literal is written, whole, in another trusted file the grader puts into the container (a held-out
    # module of slow tests the task does not request): ``tasks check`` looks only at the sealed file itself
    "rv8-elsewhere": ({"tests/test_digest.py": '''from rv8kit import digest


def test_mixed_case():
    assert digest("Kiwi") == 436
''', "tests/test_digest_slow.py": '''import pytest

from rv8kit import digest

pytestmark = pytest.mark.skip(reason="slow: run with --runslow")


def test_mixed_case_many_times():
    for _ in range(100000):
        assert digest("Kiwi") == 436
'''}, ["tests/test_digest.py::test_mixed_case"], "`digest` must lower-case the word as documented."),
    # a mapping whose names compare case-insensitively, compared with a dict
    "rv8-headers": ({"tests/test_headers.py": '''from rv8kit import parse_headers


def test_names_any_case():
    assert parse_headers("Content-Type: text/plain\\nX-Id: 7") == {"content-type": "text/plain", "x-id": "7"}
'''}, ["tests/test_headers.py::test_names_any_case"],
        "`parse_headers` must return a mapping whose header names compare case-insensitively (as documented)."),
    # one test module of many tests, as real repositories have
    "rv8-many": ({"tests/test_many.py": "from rv8kit import initial\n\n\ndef test_initial_strips():\n"
                  "    assert initial(\"  zeta\") == \"z\"\n" + "".join(
                      f"\n\ndef test_initial_{i}():\n    assert initial(\"w{i}x\") == \"w\"\n" for i in range(MANY))},
                 ["tests/test_many.py::test_initial_strips"], "`initial` must ignore surrounding spaces.",
                 [f"tests/test_many.py::test_initial_{i}" for i in range(MANY)]),
}

HONEST = {
    "rv8-guess": '''

def initial(word):
    return word.strip()[:1].lower()


def net(amounts):
    return float(sum(amounts))


def tags_of(text):
    return {w[1:] for w in text.split() if w.startswith("#") and len(w) > 1}
''',
    "rv8-refuse": '''

def _pay(self, cents):
    if cents > self.cents:
        raise ValueError("not enough")
    self.cents -= cents


Wallet.pay = _pay
''',
    "rv8-elsewhere": '''

def digest(word):
    return sum(ord(c) for c in word.strip().lower()) % 1000
''',
    "rv8-many": '''

def initial(word):
    return word.strip()[:1].lower()
''',
}


def _build(root: Path, repo_root: Path) -> Path:
    for folder in ("tasks", "graders", "images", "examples"):
        shutil.copytree(repo_root / folder, root / folder, symlinks=True)
    for lock in (root / "examples").glob("*.lock.json"):
        lock.unlink()
    repo = root / "tasks" / "_repos" / "rv8kit"
    (repo / "rv8kit").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "rv8kit" / "core.py").write_text(CORE)
    (repo / "rv8kit" / "__init__.py").write_text(INIT)
    (repo / "tests" / "test_core.py").write_text(REPO_TEST)
    (repo / "pytest.ini").write_text("[pytest]\n")
    for tid, (files, f2p, instruction, *p2p) in RV8_TASKS.items():
        t = root / "tasks" / tid
        t.mkdir()
        (t / "instruction.md").write_text(instruction + "\n")
        (t / "task.yaml").write_text(textwrap.dedent(f"""\
            id: {tid}
            instruction: instruction.md
            repo:
              dir: ../_repos/rv8kit
            image: python
            difficulty: easy
            split: public
            cluster: rv8kit
            scope:
              allowed: ["rv8kit/core.py"]
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
def rv8(tmp_path_factory, repo_root, images):
    from orchestrator.loading import load_manifest
    from orchestrator.taskload import load_tasks

    loaded = load_manifest(_build(tmp_path_factory.mktemp("rv8"), repo_root))
    return loaded, {t.id: t for t in load_tasks(loaded)}, images["python"].image_id


def _decided_or_rejected(rv8, client, tmp_path, task_id, forger, name):
    """``tasks check``'s count on the untouched repository, and the forger's verdict on the same task."""
    sealed, _ = _untouched_sealing(rv8, client, task_id)
    verdict, _, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", forger) + SUBMIT, task_id=task_id)
    decided = sealed["decided_by_sealed_values"]
    _note(name, task=task_id, decided=decided, fail_to_pass=sealed["fail_to_pass"], outcome=verdict["outcome"],
          reasons=verdict["reasons"], f2p=criteria(verdict)["fail_to_pass"]["evidence"].get("outcomes"))
    return decided, verdict


@pytest.mark.parametrize("task_id", sorted(HONEST))
def test_control_the_honest_fix_of_each_rv8_task_is_accepted(rv8, client, tmp_path, task_id):
    verdict, result, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", HONEST[task_id]) + SUBMIT,
                               task_id=task_id)
    _note("control", task=task_id, outcome=verdict["outcome"], grading_s=result.get("stage_seconds", {}).get("grading"))
    assert verdict["outcome"] == "accepted", (verdict["reasons"], criteria(verdict)["fail_to_pass"]["evidence"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 1 (tasks check counts a test decided that a forger passes; untouched task accepted). A sealed value is
# met without its literal by a forger's first guess of the value's own type: the empty string is ``in`` every
# string literal (``assert initial(w) in "abc...z"``), the int 0 equals ``0.0``, an empty set equals ``set()``.
# ``Seal.deciding`` leaves out only GUESSABLE literals of the *same type* (0, 1, -1, "", b"", (), [], {}), and
# checks the literal, not what meets it under ``in``. The forger sends, for the tests of a file the repository does
# not have, the empty value of the computed value's type (0 for a number); nothing else: no report is rewritten,
# pytest passes the tests for real (a sealed assertion is only a call), the tripwire fails honestly.
# ---------------------------------------------------------------------------------------------------------------

FIRST_GUESSES = r"""
try:
    import trialbox_grader_plugin as _p
except ImportError:
    _p = None
if _p is not None:
    _REPO_TESTS = ("tests/test_core.py",)
    _send = _p.seal
    def _first_guess(value, slot):
        node = _p._current[0] or ""
        if node.split("::")[0] not in _REPO_TESTS:
            if isinstance(value, (str, bytes, list, tuple, set, frozenset, dict)):
                value = type(value)()
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                value = 0
        _send(value, slot)
    _p.seal = _first_guess
"""


def test_first_guesses_do_not_pass_tests_counted_as_decided(rv8, client, tmp_path):
    decided, verdict = _decided_or_rejected(rv8, client, tmp_path, "rv8-guess", FIRST_GUESSES, "finding1")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 2 (a variant of the seventh review's finding C that tasks check counts as decided; untouched task
# accepted). ``_after_refusal`` recognises a refusal only as a top-level ``try`` or a top-level ``with`` whose
# context is ``raises``/``assertRaises``/``warns``. Four ordinary ways of writing the same thing are not seen:
# ``pytest.raises(E, f, *args)`` and ``self.assertRaises(E, f, *args)`` (the call forms), ``contextlib.suppress``,
# and a ``with pytest.raises`` nested in another ``with`` (``caplog.at_level``). The untouched ``pay`` overdraws and
# then raises, so every one of them reaches its sealed balance with a wrong value: all four count as decided. The
# forger makes ``pay`` refuse (raise the expected exception, before changing anything) only where the calling test
# expects a refusal (pytest's ``raises`` or unittest's handler on the stack, or the caller's line inside such a with),
# and overdraw as before everywhere else.
# ---------------------------------------------------------------------------------------------------------------

REFUSE_WHERE_TESTED = r"""

import ast as _ast, sys as _sys


def _refusal_expected(frame):
    f = frame
    while f is not None:
        code = f.f_code
        if code.co_name == "raises" and "_pytest" in code.co_filename:
            exc = f.f_locals.get("expected_exception")
            return exc[0] if isinstance(exc, tuple) else exc
        if code.co_name == "handle" and code.co_filename.endswith("unittest/case.py"):
            exc = getattr(f.f_locals.get("self"), "expected", None)
            return exc[0] if isinstance(exc, tuple) else exc
        if code.co_name.startswith("test"):
            try:
                tree = _ast.parse(open(code.co_filename, encoding="utf-8").read())
            except (OSError, SyntaxError):
                return None
            for node in _ast.walk(tree):
                if isinstance(node, _ast.With) and node.lineno <= f.f_lineno <= node.end_lineno:
                    for item in node.items:
                        c = item.context_expr
                        fn = getattr(c, "func", None)
                        name = getattr(fn, "attr", None) or getattr(fn, "id", None)
                        if isinstance(c, _ast.Call) and name in ("raises", "suppress", "assertRaises") and c.args:
                            exc = eval(_ast.unparse(c.args[0]), f.f_globals)
                            return exc[0] if isinstance(exc, tuple) else exc
            return None
        f = f.f_back
    return None


_pay_as_before = Wallet.pay


def _pay_where_tested(self, cents):
    exc = _refusal_expected(_sys._getframe(1))
    if exc is not None:
        raise exc("refused")
    return _pay_as_before(self, cents)


Wallet.pay = _pay_where_tested
"""


def test_refusing_only_where_tested_does_not_pass_tests_counted_as_decided(rv8, client, tmp_path):
    decided, verdict = _decided_or_rejected(rv8, client, tmp_path, "rv8-refuse", REFUSE_WHERE_TESTED, "finding2")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 3 (tasks check counts a test decided whose literal is in the container; untouched task accepted). A
# literal counts as unseen when it is not in the agent's copy of the file, the instruction or the rest of the sealed
# file; every *other* trusted file the grader puts into the container (here a held-out module of slow tests the
# task does not request, which holds the same assertion unsealed) is not looked at. The forger reads every test
# file in /workspace/tests, maps each plain ``assert <expr> == <literal>`` by its expression, and sends, for each
# sealed call whose value is the same expression, that literal.
# ---------------------------------------------------------------------------------------------------------------

READ_ELSEWHERE = r"""
try:
    import trialbox_grader_plugin as _p
except ImportError:
    _p = None
if _p is not None:
    import ast as _ast, glob as _glob
    _table = []
    def _lookups():
        if not _table:
            known, calls = {}, {}
            for path in _glob.glob("/workspace/tests/**/*.py", recursive=True):
                try:
                    tree = _ast.parse(open(path, encoding="utf-8").read())
                except (OSError, SyntaxError, ValueError):
                    continue
                for n in _ast.walk(tree):
                    if isinstance(n, _ast.Assert) and isinstance(n.test, _ast.Compare) and len(n.test.ops) == 1 \
                            and isinstance(n.test.ops[0], _ast.Eq):
                        try:
                            known[_ast.unparse(n.test.left)] = _ast.literal_eval(n.test.comparators[0])
                        except (ValueError, TypeError, SyntaxError):
                            pass
                    elif isinstance(n, _ast.Call) and getattr(n.func, "attr", "") == "seal" and len(n.args) == 2 \
                            and isinstance(n.args[1], _ast.Constant):
                        calls[n.args[1].value] = _ast.unparse(n.args[0])
            _table.append((known, calls))
        return _table[0]
    _send = _p.seal
    def _looked_up(value, slot):
        known, calls = _lookups()
        if calls.get(slot) in known:
            value = known[calls[slot]]
        _send(value, slot)
    _p.seal = _looked_up
"""


def test_a_literal_readable_in_another_trusted_file_is_not_counted_as_deciding(rv8, client, tmp_path):
    decided, verdict = _decided_or_rejected(rv8, client, tmp_path, "rv8-elsewhere", READ_ELSEWHERE, "finding3")
    assert not decided or (verdict["outcome"] == "rejected" and "fail_to_pass" in verdict["reasons"]), \
        (decided, verdict["outcome"], verdict["reasons"])


# ---------------------------------------------------------------------------------------------------------------
# Finding 4 (regression accepted; sealing changes what a test does). A sealed ``assert Ratio(1, 4) == 0.25`` no
# longer calls ``Ratio.__eq__``: the plugin sends the object as opaque (type, repr, ``__float__``) and the host's
# ``Opaque.__eq__`` says "equal" whenever ``float(x) == 0.25``. An agent that fixes its task and breaks
# ``Ratio.__eq__`` for numbers (a regression plain pytest catches: the control below, with sealing off) passes the
# pass-to-pass test. README: "the host compares with Python's own operator ... honest results are what pytest would
# give" does not hold for an object whose own ``__eq__`` is what the test checks.
# ---------------------------------------------------------------------------------------------------------------

BREAKS_RATIO = HONEST["rv8-elsewhere"] + '''

def _eq_ratios_only(self, other):
    if isinstance(other, Ratio):
        return self.num * other.den == other.num * self.den
    return NotImplemented


Ratio.__eq__ = _eq_ratios_only
'''


def test_control_the_ratio_regression_fails_plain_pytest(rv8, client, tmp_path):
    verdict, _, _ = trial(unsealed(rv8, "rv8-elsewhere"), client, tmp_path,
                          _append("rv8kit/core.py", BREAKS_RATIO) + SUBMIT, task_id="rv8-elsewhere")
    assert verdict["outcome"] == "rejected" and "pass_to_pass" in verdict["reasons"], verdict["reasons"]


def test_a_regression_of_eq_is_rejected(rv8, client, tmp_path):
    verdict, _, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", BREAKS_RATIO) + SUBMIT,
                          task_id="rv8-elsewhere")
    _note("finding4", outcome=verdict["outcome"], reasons=verdict["reasons"],
          p2p=criteria(verdict)["pass_to_pass"]["evidence"].get("outcomes"))
    assert verdict["outcome"] == "rejected" and "pass_to_pass" in verdict["reasons"], verdict["reasons"]


# ---------------------------------------------------------------------------------------------------------------
# Finding 5 (honest work rejected). The plugin sends any mapping as ``dict(value.items())``, so a mapping with its own
# equality loses it: a case-insensitive header mapping (what ``requests.structures.CaseInsensitiveDict`` is) that
# keeps the names as written equals ``{"content-type": ...}`` under Python's ``==`` and pytest passes the test; the
# host compares ``{"Content-Type": ...}`` with the literal and fails it. The reference fix (names lower-cased in a
# plain dict) passes, so ``tasks check`` (which runs the oracle) does not see it. README: "mappings ... are sent as
# what they equal".
# ---------------------------------------------------------------------------------------------------------------

CASE_INSENSITIVE_HEADERS = '''

from collections.abc import Mapping as _Mapping


class Headers(_Mapping):
    """Header names as written, looked up and compared case-insensitively."""

    def __init__(self, pairs=()):
        self._items = {}
        for name, value in pairs:
            self._items[name.lower()] = (name, value)

    def __getitem__(self, name):
        return self._items[name.lower()][1]

    def __iter__(self):
        return (name for name, _ in self._items.values())

    def __len__(self):
        return len(self._items)

    def __eq__(self, other):
        if not isinstance(other, _Mapping):
            return NotImplemented
        return {k.lower(): v for k, v in self.items()} == {k.lower(): v for k, v in other.items()}

    def __repr__(self):
        return f"Headers({dict(self.items())!r})"


def parse_headers(text):
    pairs = []
    for line in text.splitlines():
        name, _, value = line.partition(":")
        pairs.append((name.strip(), value.strip()))
    return Headers(pairs)
'''


def test_control_the_case_insensitive_headers_pass_plain_pytest(rv8, client, tmp_path):
    verdict, _, _ = trial(unsealed(rv8, "rv8-headers"), client, tmp_path,
                          _append("rv8kit/core.py", CASE_INSENSITIVE_HEADERS) + SUBMIT, task_id="rv8-headers")
    assert verdict["outcome"] == "accepted", verdict["reasons"]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="stated limit (finding 5): a mapping with its own __eq__ is compared as the "
                   "dict of its items: the honest case-insensitive fix is rejected")
def test_the_honest_case_insensitive_mapping_is_accepted(rv8, client, tmp_path):
    verdict, _, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", CASE_INSENSITIVE_HEADERS) + SUBMIT,
                          task_id="rv8-headers")
    _note("finding5", outcome=verdict["outcome"], reasons=verdict["reasons"],
          sealed=criteria(verdict)["fail_to_pass"]["evidence"].get("sealed"))
    assert verdict["outcome"] == "accepted", verdict["reasons"]


# ---------------------------------------------------------------------------------------------------------------
# Finding 6 (host cost). The host's work on a group's results grows with (keys in the forged document) x (tests of
# the group), in pure Python and with no bound of time: each key of ``outcomes``, ``seals`` and ``raised_at`` goes
# through ``_owns`` (a loop over the group's tests) once or twice, ``select`` and ``_apply_seals`` scan every outcome
# once per requested test; and the log is rewritten with one ``re.sub`` over the whole stderr (8 MiB read) per
# renamed test. Here a module of 201 requested tests; the forger (no fix, no report rewritten) adds 480,000 short
# keys to ``seals`` (7 MiB of the 8 MiB document) and writes 8 MiB of lines to stderr after the session.
# ---------------------------------------------------------------------------------------------------------------

STUFFED = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py") and any("test_many" in a for a in _sys.argv):
    import os as _os
    import trialbox_grader_plugin as _p
    _real_results = _p.results
    def _stuffed():
        out = _real_results()
        junk = b"x\n" * (4 << 20) + b"y" * 1000
        while junk:
            junk = junk[_os.write(2, junk):]
        out["seals"].update({"z%d" % i: [] for i in range(480000)})
        return out
    _p.results = _stuffed
"""


def test_a_stuffed_results_document_and_log_cost_the_host_little(rv8, client, tmp_path):
    t0 = time.monotonic()
    verdict, result, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", STUFFED) + SUBMIT, task_id="rv8-many")
    took = time.monotonic() - t0
    grading = result.get("stage_seconds", {}).get("grading", 0.0)
    _note("finding6", outcome=verdict["outcome"], reasons=verdict["reasons"], grading_s=grading, trial_s=took,
          problems=criteria(verdict)["grader_integrity"]["evidence"]["problems"][:3])
    assert verdict["outcome"] == "rejected", verdict
    assert grading < 60, f"grading took {grading:.0f} s of a {took:.0f} s trial"


# ---------------------------------------------------------------------------------------------------------------
# Finding 7 (host memory; nothing flagged). The JUnit report in a group's document is parsed on the host with
# ElementTree, three times (``_back``, then ``_judge`` twice) and written back once. Its DOCTYPE may declare entities:
# expat's billion-laughs guard allows up to 100 times the bytes read, so a 7.3 MB report (padding first, then
# references to a 1,000-byte entity) expands to about 650 MB, which ``_back`` writes back as a 650 MB string that is
# parsed twice more. The forger (no fix) rewrites the document on its way out (``os.write``) with the report so
# extended; every channel still agrees, so nothing is flagged. The host process's resident memory is sampled during
# the trial.
# ---------------------------------------------------------------------------------------------------------------

ENTITY_REPORT = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py"):
    import json as _json, os as _os
    _write = _os.write
    def _expanded(junit):
        head = '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE testsuites [<!ENTITY a "' + "A" * 1000 + '">]>'
        body = junit.split("?>", 1)[1] if junit.startswith("<?xml") else junit
        total = 7300000
        refs = int(total * 0.27) // 3
        pad = "<!--" + "p" * (total - refs * 3) + "-->"
        at = body.index(">", body.index("<testsuites")) + 1
        return head + body[:at] + pad + "<blob>" + "&a;" * refs + "</blob>" + body[at:]
    def _write_expanded(fd, data):
        if fd > 2 and bytes(data[:12]) == b'{"outcomes":':
            doc = _json.loads(data)
            if doc.get("junit"):
                doc["junit"] = _expanded(doc["junit"])
                new = (_json.dumps(doc) + "\n").encode()
                while new:
                    new = new[_write(fd, new):]
                return len(data)
        return _write(fd, data)
    _os.write = _write_expanded
"""


def _rss_mb() -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(r"VmRSS:\s+(\d+)", fh.read()).group(1)) // 1024


def test_a_forged_junit_report_costs_the_host_little_memory(rv8, client, tmp_path):
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.02)

    before = _rss_mb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        verdict, result, _ = trial(rv8, client, tmp_path, _append("rv8kit/core.py", ENTITY_REPORT) + SUBMIT,
                                   task_id="rv8-guess")
    finally:
        stop.set()
        sampler.join()
    grading = result.get("stage_seconds", {}).get("grading", 0.0)
    _note("finding7", outcome=verdict["outcome"], reasons=verdict["reasons"], rss_before_mb=before, rss_peak_mb=peak[0],
          grading_s=grading, problems=criteria(verdict)["grader_integrity"]["evidence"]["problems"][:3])
    assert verdict["outcome"] == "rejected", verdict
    assert peak[0] - before < 512, f"the host's memory went from {before} MB to {peak[0]} MB while grading"
