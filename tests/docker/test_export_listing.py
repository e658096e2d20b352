"""The workspace listed before the stop: what the agent left is killed in the same command, the export is checked
against that listing without starting the sandbox again (used where the host cannot archive the stopped disk
itself and keeps processes from tracing one another, ``agents.session.ptrace_restricted``; exercised here
directly on every host, the host's own archive turned off)."""

from __future__ import annotations

import time

from orchestrator.grading.export import export_workspace, list_workspace


def test_leftovers_are_killed_and_the_listing_checks_the_export(make_sandbox):
    sb = make_sandbox()
    sb.host_archive = lambda deadline=None: None  # the path where the host cannot archive the disk itself
    # a background writer, one that renamed itself with a newline (it reads as a zombie to a one-line parser),
    # and one in a session of its own
    assert sb.exec(["bash", "-c", "mkdir -p d && echo hi > d/a.txt; "
                                  "(while true; do date >> d/log.txt; sleep 0.05; done) & "
                                  "(printf 'x) Z\\n' > /proc/self/comm; exec sleep 1000) & "
                                  "setsid sleep 1000 & sleep 0.3; exit 0"], timeout=30).exit_code == 0
    before = sb.exec(["sh", "-c", "ls /proc | grep -c '^[0-9]'"]).text().strip()
    listing = list_workspace(sb, "/workspace", 60, kill_first=True)
    assert listing is not None and listing.entries is not None
    left = sb.exec(["sh", "-c", "for d in /proc/[0-9]*; do tr '\\n' ' ' < $d/cmdline 2>/dev/null; echo; done"]).text()
    assert "sleep 1000" not in left and "while" not in left, left
    assert int(before) > 3
    size = listing.entries["d/log.txt"].size
    time.sleep(0.3)  # nothing writes any more
    sb.stop()
    tree = export_workspace(sb, "/workspace", listing=listing)
    assert tree.complete and len(tree.files["d/log.txt"]) == size and tree.files["d/a.txt"] == b"hi\n"
    assert not sb.is_running()  # exported from the stopped sandbox: it was not started again


def test_a_planted_find_on_the_agents_path_is_not_the_one_that_lists(make_sandbox):
    sb = make_sandbox(env={"PATH": "/workspace/bin:/usr/local/bin:/usr/bin:/bin"})
    assert sb.exec(["sh", "-c", "mkdir -p bin && printf '#!/bin/sh\\nprintf \"END\\\\0\"\\n' > bin/find && "
                                "chmod +x bin/find && echo data > kept.txt"]).exit_code == 0
    listing = list_workspace(sb, "/workspace", 60, kill_first=True)
    assert listing is not None and "kept.txt" in listing.entries and "bin/find" in listing.entries
