"""A resumed run is held to its own lock by every identifier (a new-user try resumed a run under another trialbox
commit without a word), and a run whose output closes never exits 0."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from orchestrator.errors import DriftError
from orchestrator.job import open_run
from orchestrator.loading import load_manifest
from tests.conftest import ROOT

LOCK = {"manifest_sha256": "m", "trialbox": {"version": "0.1.0", "commit": "aaa"}, "price_table_version": "p1",
        "docker": {"version": "20.10"}, "task_checks": {"t": "passed"}, "created_at": "then"}


def test_a_resumed_run_is_refused_for_any_identifier_that_differs_from_its_own_lock(tmp_path):
    loaded = load_manifest(ROOT / "examples" / "smoke.yaml")
    out = tmp_path / "run"
    open_run(loaded, LOCK, out)
    again = dict(LOCK, created_at="now", task_checks={"t": "unchecked"})  # records and timestamps are not identity
    assert open_run(loaded, again, out).root == out
    for changed, name in ((dict(LOCK, trialbox={"version": "0.1.0", "commit": "bbb"}), "trialbox.commit"),
                          (dict(LOCK, price_table_version="p2"), "price_table_version"),
                          (dict(LOCK, docker={"version": "24.0"}), "docker.version")):
        with pytest.raises(DriftError) as exc:
            open_run(loaded, changed, out)
        assert [d.split(":")[0] for d in exc.value.drifted] == [name]
        assert "the run's own lock" in exc.value.drifted[0]
    assert json.loads((out / "lock.json").read_text())["trialbox"]["commit"] == "aaa"  # kept as it started


CLOSED = """
import argparse, sys
import orchestrator.cli as cli
def closed(args):
    raise BrokenPipeError  # what printing raises once the reader went away (`trialbox run M | head -3`)
class Parser:
    def parse_args(self, argv):
        return argparse.Namespace(func=closed, command=sys.argv[1], log_level="warning")
cli.build_parser = Parser
if sys.argv[1] == "run":
    cli.WORK_COMMANDS = {closed}
sys.exit(cli.main([]))
"""


def test_a_run_whose_output_closes_is_not_a_success_and_a_reading_is():
    import orchestrator.cli as cli

    assert {cli.cmd_run, cli.cmd_tasks_check} <= cli.WORK_COMMANDS and cli.cmd_report not in cli.WORK_COMMANDS
    work = subprocess.run([sys.executable, "-c", CLOSED, "run"], capture_output=True, text=True, cwd=ROOT)
    assert work.returncode == 141 and "`trialbox run` stopped before its end" in work.stderr, work
    reading = subprocess.run([sys.executable, "-c", CLOSED, "report"], capture_output=True, text=True, cwd=ROOT)
    assert reading.returncode == 0 and reading.stderr == ""  # `report | head`: the reading was what was wanted
