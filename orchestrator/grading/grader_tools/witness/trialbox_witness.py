"""A pytest plugin that trialbox makes discoverable in a script grader's test run (a Harbor task's test.sh).

It is found through its entry point when this folder is on the Python path (trialbox appends it to
``PYTHONPATH`` for the test script) and does nothing else: it appends to the file named by
``TRIALBOX_WITNESS`` (outside the workspace) that a pytest session started, and how it finished (the exit
status and the count of each outcome). A process that started a session and never finished it (the code under
test calling ``os._exit``, or killing the runner, after writing the reward itself) is then seen. When the
script runs pytest another way (another Python path, plugin autoloading disabled), nothing is loaded and
nothing is checked: a missing witness is never an error.
"""

import json
import os

_PATH = os.environ.get("TRIALBOX_WITNESS")
_COUNTS = {}


def _record(event, **fields):
    if not _PATH:
        return
    try:
        with open(_PATH, "a") as fh:
            fh.write(json.dumps(dict(event=event, pid=os.getpid(), **fields)) + "\n")
    except OSError:
        pass


def pytest_sessionstart(session):
    _record("start")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _COUNTS[report.outcome] = _COUNTS.get(report.outcome, 0) + 1


def pytest_sessionfinish(session, exitstatus):
    _record("finish", exitstatus=int(exitstatus), counts=_COUNTS)
