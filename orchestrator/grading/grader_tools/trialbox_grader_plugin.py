"""pytest plugin of trialbox's grader: one outcome per test node, sent to the host by run_tests.py.

A test passes only when its call phase passed and neither setup nor teardown
failed; skipped and xfailed tests are not passes; a node id that was never
collected has no outcome at all.
"""

_outcomes = {}
_collect_errors = []


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


def results():
    """What the session recorded; called by run_tests.py once its session ended."""
    return {"outcomes": _outcomes, "collect_errors": _collect_errors}
