"""pytest plugin of trialbox's grader: one outcome per test node, sent to the host by run_tests.py.

A test passes only when its call phase passed and neither setup nor teardown
failed; skipped and xfailed tests are not passes; a node id that was never
collected has no outcome at all.

``seal`` is what a sealed assertion of a test calls (see trialbox's ``grading/seal.py``): it records the value
the test computed, tagged so the host can rebuild it, under the test running now, and holds nothing the host
compares it with. Everything here runs beside the code under test: nothing in it is a secret.
"""

import base64
import collections as _collections
import collections.abc as _abc

import pytest

_outcomes = {}
_collect_errors = []
_seals = {}
_current = [None]
_sent = [0]
MAX_DEPTH = 64
MAX_ITEMS = 100000
MAX_BYTES = 2 << 20
"""What one session sends of sealed values, in all (past it, a value is sent as cut)."""
MAX_HASHED = 500
"""Entries of a set or dict sent (the host rebuilds no more)."""
MAX_RECORDS = 1000
"""Sealed values kept per test case."""


def pytest_runtest_logreport(report):
    node = report.nodeid
    current = _outcomes.get(node, "passed")
    if report.failed:
        _outcomes[node] = "error" if report.when != "call" else "failed"
    elif report.skipped:
        if current == "passed":
            _outcomes[node] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    elif report.when == "call" and node not in _outcomes:
        _outcomes[node] = "xpassed" if hasattr(report, "wasxfail") else "passed"


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append({"node": report.nodeid, "error": str(report.longrepr)[-2000:]})


_raised_at = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _seals[item.nodeid] = []  # a rerun's call phase starts again: only the last one's values count
    _raised_at.pop(item.nodeid, None)
    _current[0] = item.nodeid
    outcome = yield
    _current[0] = None
    excinfo = getattr(outcome, "excinfo", None)
    if excinfo:
        line = _line_in_test(item, excinfo[2])
        if line is not None:
            _raised_at[item.nodeid] = line


def _line_in_test(item, tb):
    """The line of the test function's own body where the exception passed last (None: not through it)."""
    func = getattr(item, "obj", None)
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    line = None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class _Cut(Exception):
    pass


def _encode(value, depth, budget):
    if depth > MAX_DEPTH:
        raise _Cut("nested deeper than %d" % MAX_DEPTH)
    budget[0] -= 1
    if budget[0] < 0:
        raise _Cut("more than %d items" % MAX_ITEMS)
    if value is None:
        return ["none"]
    if _own_equality(value):  # it decides its own equality: sent plain only where that equality agrees
        plain = _plain(value)
        if plain is not None and _agrees(value, plain):
            return _encode(plain, depth + 1, budget)
        # its own __eq__ says it is not its plain form: its repr (a str or int subclass inherits the plain form's)
        # would meet the very literal Python says it does not equal, so it is sent without one and meets nothing
        return _opaque(value, with_repr=False)
    if isinstance(value, bool):
        return ["bool", bool(value)]
    if isinstance(value, int):
        text = format(int(value), "x")
        budget[1] -= len(text)
        if budget[1] < 0:
            raise _Cut("larger than %d bytes" % MAX_BYTES)
        return ["int", text]
    if isinstance(value, float):
        return ["float", float(value).hex()]
    if isinstance(value, complex):
        return ["complex", value.real.hex(), value.imag.hex()]
    if isinstance(value, str):
        budget[1] -= len(value)
        if budget[1] < 0:
            raise _Cut("larger than %d bytes" % MAX_BYTES)
        return ["str", str.__str__(value)]
    if isinstance(value, memoryview) and value.ndim == 1 and value.format in ("B", "b", "c"):
        value = value.tobytes()  # compares equal to the bytes it holds
    if isinstance(value, (bytes, bytearray)):
        budget[1] -= len(value) * 4 // 3
        if budget[1] < 0:
            raise _Cut("larger than %d bytes" % MAX_BYTES)
        return ["bytearray" if isinstance(value, bytearray) else "bytes", base64.b64encode(bytes(value)).decode()]
    if not isinstance(value, (list, tuple, set, frozenset, dict)):
        if isinstance(value, _abc.Mapping):  # a mappingproxy, a ChainMap: equal to the dict of their items
            value = dict(value.items())
        elif isinstance(value, _abc.Set):  # dict.keys(), dict.items(): equal to the set of their members
            value = frozenset(value)
    for kind, tag in ((list, "list"), (tuple, "tuple"), (frozenset, "frozenset"), (set, "set")):
        if isinstance(value, kind):
            if tag in ("set", "frozenset") and len(value) > MAX_HASHED:
                raise _Cut("a set of more than %d entries" % MAX_HASHED)
            return [tag, [_encode(x, depth + 1, budget) for x in value]]
    if isinstance(value, dict):
        if len(value) > MAX_HASHED:
            raise _Cut("a dict of more than %d entries" % MAX_HASHED)
        return ["dict", [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)] for k, v in value.items()]]
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    if module == "decimal" and kind.__name__ == "Decimal":
        return ["decimal", str(value)]
    if module == "fractions" and kind.__name__ == "Fraction":
        parts = [format(value.numerator, "x"), format(value.denominator, "x")]
        if max(len(p) for p in parts) > 4096:
            raise _Cut("a fraction of more than 4096 hex digits")
        return ["fraction"] + parts
    if module == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        item = value.item()
        if type(item) is not kind:
            return _encode(item, depth + 1, budget)
    return _opaque(value)


_BUILTINS = (bool, int, float, complex, str, bytes, bytearray, list, tuple, frozenset, set, dict)
_VIEWS = (type({}.keys()), type({}.items()), type(type.__dict__), _collections.OrderedDict, _collections.Counter)
"""Types equal to a plain literal as their builtin or abstract type is (an ``OrderedDict`` or ``Counter`` compares
with a plain dict as a dict does)."""


def _own_equality(value):
    """Whether the value's class decides equality otherwise than the builtin or abstract type it is sent as (a
    ``str`` subclass with its own ``__eq__``, a case-insensitive mapping, a class whose ``__eq__`` the test checks):
    the host, which compares plain values, would judge it by another rule."""
    kind = type(value)
    if kind in _BUILTINS or kind in _VIEWS:
        return False
    for base in _BUILTINS:
        if isinstance(value, base):
            return getattr(kind, "__eq__", None) is not base.__eq__
    if isinstance(value, _abc.Mapping):
        return getattr(kind, "__eq__", None) is not _abc.Mapping.__eq__
    if isinstance(value, _abc.Set):
        return getattr(kind, "__eq__", None) is not _abc.Set.__eq__
    return False


def _plain(value):
    """The builtin or abstract form a value of a class with its own equality would be sent as (None: none)."""
    try:
        for base in _BUILTINS:
            if isinstance(value, base):
                return base.__str__(value) if base is str else base(value)
        if isinstance(value, _abc.Mapping):
            return dict(value.items())
        if isinstance(value, _abc.Set):
            return frozenset(value)
    except Exception:  # noqa: BLE001 - a value whose copy raises is sent as what it is
        return None
    return None


def _agrees(value, other):
    """Whether the value's own ``__eq__`` says it equals ``other`` (its plain form, its number), as ``assert`` reads
    it (by truth: numpy 2's ``float64`` answers ``np.True_``): only then may the host compare that form instead. A
    class whose ``__eq__`` a test checks, broken, says no, and meets no literal."""
    try:
        return bool(value == other)
    except Exception:  # noqa: BLE001 - an answer without a truth value (an array) is no agreement
        return False


def _opaque(value, with_repr=True):
    kind = type(value)
    name = "%s.%s" % (getattr(kind, "__module__", "?"), getattr(kind, "__qualname__", kind.__name__))
    try:
        text = repr(value)[:4097] if with_repr else None
    except Exception:  # noqa: BLE001 - a value whose repr raises has none
        text = None
    index = number = None
    if hasattr(kind, "__index__"):
        try:
            whole = int(kind.__index__(value))
            index = format(whole, "x") if _agrees(value, whole) else None
        except Exception:  # noqa: BLE001
            index = None
    if hasattr(kind, "__float__"):
        try:
            real = float(kind.__float__(value))
            number = real.hex() if _agrees(value, real) else None
        except Exception:  # noqa: BLE001
            number = None
    return ["opaque", name[:300], text if text is None or len(text) <= 4096 else None, index, number]


def seal(value, slot):
    """Record ``value`` for the sealed assertion ``slot`` of the test running now (never raises)."""
    node = _current[0]
    if node is None:
        return
    records = _seals.setdefault(node, [])
    if len(records) >= MAX_RECORDS:
        return
    budget = [MAX_ITEMS, MAX_BYTES - _sent[0]]
    try:
        data = _encode(value, 0, budget)
        _sent[0] = MAX_BYTES - budget[1]  # charged only when sent: one value cut leaves the others their room
    except _Cut as exc:
        data = ["cut", str(exc)]
    except RecursionError:
        data = ["cut", "nested too deeply"]
    except MemoryError:
        data = ["cut", "out of memory"]
    except Exception:  # noqa: BLE001 - a value that fails to encode (its iteration raised) is sent as what it is
        try:
            own = _own_equality(value)
        except Exception:  # noqa: BLE001
            own = True
        data = _opaque(value, with_repr=not own)
    records.append([str(slot), data])


def results():
    """What the session recorded; called by run_tests.py once its session ended."""
    return {"outcomes": _outcomes, "collect_errors": _collect_errors, "seals": _seals, "raised_at": _raised_at}
