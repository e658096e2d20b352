"""The hash-chained event log: every edit, removal, insertion and cut is detected."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from orchestrator.events import EventLog, read_events, verify_events


@pytest.fixture
def log_file(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", "trial-1")
    for i in range(4):
        log.append("tool", tool="bash", arguments={"command": f"echo {i}"}, output=f"{i}\n", exit_code=0)
    anchor = log.close()
    return tmp_path / "events.jsonl", anchor


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_intact_log_verifies(log_file):
    path, anchor = log_file
    result = verify_events(path, expected_head=anchor)
    assert result.ok and result.count == 6 and result.closed
    assert [e["kind"] for e in read_events(path)] == ["log_opened"] + ["tool"] * 4 + ["log_closed"]


def test_edited_line_is_detected(log_file):
    path, _ = log_file
    lines = _lines(path)
    event = json.loads(lines[2])
    event["exit_code"] = 1  # the agent's failure rewritten as a success
    lines[2] = json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    assert verify_events(path).problems == ["line 3: content does not match its hash (edited)"]


def test_edited_line_with_recomputed_hash_breaks_the_chain(log_file):
    from orchestrator.events import event_hash

    path, _ = log_file
    lines = _lines(path)
    event = json.loads(lines[2])
    event["output"] = "forged"
    event["hash"] = event_hash(event)
    lines[2] = json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    assert verify_events(path).problems == ["line 4: prev_hash does not match the line before (chain broken)"]


def test_removed_line_is_detected(log_file):
    path, _ = log_file
    lines = _lines(path)
    del lines[3]
    path.write_text("".join(lines))
    problems = verify_events(path).problems
    assert "line 4: seq 4 where 3 was expected (line removed or inserted)" in problems


def test_inserted_line_is_detected(log_file):
    path, _ = log_file
    lines = _lines(path)
    lines.insert(2, lines[1])
    path.write_text("".join(lines))
    assert any("line removed or inserted" in p for p in verify_events(path).problems)


def test_cut_tail_is_detected(log_file):
    path, anchor = log_file
    path.write_text("".join(_lines(path)[:-2]))
    result = verify_events(path, expected_head=anchor)
    assert "no log_closed event: the log was truncated or never closed" in result.problems
    assert any("differs from the recorded anchor" in p for p in result.problems)


def test_cli_verify_events(log_file):
    path, anchor = log_file
    ok = subprocess.run([sys.executable, "-m", "orchestrator.cli", "verify-events", str(path), "--head", anchor],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "intact (6 events" in ok.stdout
    path.write_text(path.read_text().replace('"echo 2"', '"echo 9"'))
    bad = subprocess.run([sys.executable, "-m", "orchestrator.cli", "verify-events", str(path)], capture_output=True, text=True)
    assert bad.returncode == 1 and "line 4: content does not match its hash (edited)" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_log_is_never_overwritten(log_file):
    path, _ = log_file
    with pytest.raises(FileExistsError):
        EventLog(path, "trial-1")
