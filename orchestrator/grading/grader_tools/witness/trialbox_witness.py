"""A pytest plugin that trialbox makes discoverable in a script grader's test run (a Harbor task's test.sh).

It is found through its entry point when this folder is on the Python path (trialbox appends it to
``PYTHONPATH`` for the test script) and does nothing else: when pytest loads it, it connects to the witness's
server (``trialbox_witness_server``, a root process outside the test's reach, at the socket ``TRIALBOX_WITNESS``
names), waits for its ``ok``, and then tells it that a pytest session started and how it finished (the exit
status and the count of each outcome). The server takes the sender of every message from the kernel, so another
process (a daemon the code under test left, a child it forked) cannot speak for this one; a process that started a
session and never finished it (the code under test calling ``os._exit`` after writing the reward itself) is seen.
What it cannot stop is code running inside this same process sending this session's finish itself (see
``grading/script.py``). When the script runs pytest another way (another Python path, plugin autoloading
disabled), nothing is loaded and nothing is checked: a missing witness is never an error.

Sessions nested in this process (pytester's inline runs) are told apart by depth; their outcomes are their own.
"""

import json
import os
import socket

_SOCK = []
_STACK = []


def _connect():
    path = os.environ.get("TRIALBOX_WITNESS")
    if not path or _SOCK:
        return
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(10)
        sock.connect(path)
        if sock.recv(16) != b"ok":
            sock.close()
            return
        _SOCK.append(sock)
    except OSError:
        pass


def _send(event, **fields):
    if not _SOCK:
        return
    try:
        _SOCK[0].send(json.dumps(dict(event=event, **fields)).encode())
    except OSError:
        pass


_connect()  # at import, when pytest loads its plugins: before any test module (the code under test) is imported


def pytest_sessionstart(session):
    _STACK.append({})
    _send("start", depth=len(_STACK) - 1)


def pytest_runtest_logreport(report):
    if _STACK and (report.when == "call" or report.outcome != "passed"):
        counts = _STACK[-1]
        counts[report.outcome] = counts.get(report.outcome, 0) + 1


def pytest_sessionfinish(session, exitstatus):
    counts = _STACK.pop() if _STACK else {}
    _send("finish", depth=len(_STACK), exitstatus=int(exitstatus), counts=counts)
