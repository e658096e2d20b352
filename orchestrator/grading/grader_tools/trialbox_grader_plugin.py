"""pytest plugin of trialbox's grader: one outcome per test node, written outside the workspace.

A test passes only when its call phase passed and neither setup nor teardown
failed; skipped and xfailed tests are not passes; a node id that was never
collected has no outcome at all.
"""

import json
import os

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


def write(out, exit_codes, name="results.json"):
    """Called by run_tests.py once its group's session ended."""
    with open(os.path.join(out, name), "w") as fh:
        json.dump({"outcomes": _outcomes, "collect_errors": _collect_errors, "exit_codes": exit_codes}, fh)
