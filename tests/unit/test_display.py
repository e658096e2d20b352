"""The run's display: the same counts on a terminal (a live panel) and in a pipe (a line per trial), accepted and
rejected kept apart from infrastructure errors, agent text escaped, and the log kept out of both."""

from __future__ import annotations

import io
import json
import re
from types import SimpleNamespace


from orchestrator.display import LiveDisplay, PlainDisplay, Tally
from orchestrator.log import configure, get_logger, to_file


def _result(outcome: str, reasons=(), stages=None):
    verdict = SimpleNamespace(label=outcome, reasons=list(reasons))
    return SimpleNamespace(verdict=verdict, accepted=outcome == "accepted", is_infra_error=outcome == "infra_error",
                           duration_s=2.0, node_name="", stage_seconds=stages or {"agent": 3.0, "grading": 1.0})


def test_a_pipe_gets_one_plain_line_per_trial_with_the_outcomes_apart():
    said: list[str] = []
    tally = Tally(4, cost=0.0, cap=2.0)
    display = PlainDisplay(said.append)
    for i, outcome in enumerate(["accepted", "rejected", "infra_error"]):
        tally.count(_result(outcome, ["fail_to_pass"] if outcome == "rejected" else []))
        tally.cost += 0.25
        display.trial(tally, f"t/c/{i}", _result(outcome), 0.25, running=1)
    assert len(said) == 3 and all("\x1b" not in line for line in said)
    assert said[-1].startswith("[3/4] t/c/2")
    assert "running 1, left 0; accepted 1, rejected 1, infra errors 1; cost $0.7500 of $2.0000" in said[-1]
    assert "slowest stage agent 75%" in said[-1]


def test_a_terminal_gets_a_live_panel_and_agent_text_stays_text():
    out = io.StringIO()
    tally = Tally(2, cap=None)
    display = LiveDisplay(tally, file=out, force_terminal=True)
    try:
        tally.count(_result("rejected"))
        display.trial(tally, "t/c/0\x1b[2J\x1b]0;owned\x07", _result("rejected", ["scope\x1b[31m"]), 0.0, running=1)
    finally:
        display.close()
    text = out.getvalue()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "trialbox run" in plain and "accepted / rejected / infra errors" in plain and "0 / 1 / 0" in plain
    assert "1/2 done, 1 running, 0 left" in plain
    assert "\x1b[2J" not in text and "\x1b]0;" not in text and "\\x1b[2J" in plain  # escaped, never obeyed


def test_the_run_log_goes_to_its_file_and_is_counted_never_to_the_terminal(tmp_path, capsys):
    configure("INFO", json=True)
    log = get_logger("test")
    path = tmp_path / "trialbox.log"
    with to_file(path) as warned:
        log.info("started")
        log.warning("engine slow", trial="t/c/0")
        log.error("grader broke")
        assert warned() == 2
    captured = capsys.readouterr()
    assert "engine slow" not in captured.err + captured.out
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["started", "engine slow", "grader broke"]
    assert lines[1]["level"] == "warning" and lines[1]["trial"] == "t/c/0"
    log.warning("after")  # the earlier configuration is back
    assert "after" in capsys.readouterr().err and "after" not in path.read_text()
