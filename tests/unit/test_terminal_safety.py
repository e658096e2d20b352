"""What a person reads cannot be forged by the agent: terminal and HTML output escape what the agent influenced."""

from __future__ import annotations

import copy
import io
import json
import unicodedata

import pytest
import structlog

from orchestrator import log as tblog
from orchestrator.events import EventLog
from orchestrator.html import render
from orchestrator.report import build_report
from orchestrator.summary import terminal
from orchestrator.show import show_trial
from orchestrator.store import RunPaths, Store
from orchestrator.textsafe import html_text, printable, printable_lines
from orchestrator.result import TrialResult

FORGE = "\x1b[2J\x1b[Htrial x: ACCEPTED\n"
NASTY = [FORGE, "ok\rACCEPTED", "\x9b2J", "abc\u202edcba", "zero\u200bwidth", "tab\tbed", "line\u2028sep",
         "bell\x07", "del\x7f"]


def controls(text: str, allowed: str = "\n") -> list[str]:
    """Every character of category C* (controls, formats, surrogates, private use, unassigned) not in ``allowed``."""
    return [c for c in text if unicodedata.category(c)[0] == "C" and c not in allowed]


# --- printable -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, shown", [
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),
    ("a\rb", "a\\rb"),
    ("a\nb", "a\\nb"),
    ("a\tb", "a\\tb"),
    ("\x9b31m", "\\x9b31m"),             # C1 CSI
    ("abc\u202edef", "abc\\u202edef"),    # right-to-left override
    ("a\u200bb", "a\\u200bb"),            # zero-width space
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
    ("\ud800x", "\\ud800x"),              # lone surrogate
    ("name\udcff", "name\\xff"),          # a surrogate-escaped byte (undecodable file name)
    ("\x00\x7f", "\\x00\\x7f"),
])
def test_printable_escapes(raw, shown):
    assert printable(raw) == shown
    assert not controls(printable(raw), allowed="")


@pytest.mark.parametrize("text", ["plain text, 1 + 2 = 3 (ok) [x] {y}", "café é ñ Ü", "漢字テスト 한국어", "emoji 🎉",
                                  "back\\slash", ""])
def test_printable_leaves_ordinary_text_alone(text):
    assert printable(text) == text


def test_printable_takes_non_strings_and_lines_keep_their_breaks():
    assert printable(42) == "42" and printable(None) == "None"
    assert printable_lines("one\x1b[2K\ntwo\r") == "one\\x1b[2K\ntwo\\r"
    assert html_text('<script>"x"\x1b</script>') == "&lt;script&gt;&quot;x&quot;\\x1b&lt;/script&gt;"


# --- trialbox show --------------------------------------------------------------------------------------------

def _write_trial(tmp_path, inject: bool) -> tuple[RunPaths, str]:
    bad = (lambda s: s + FORGE) if inject else (lambda s: s + "trial x: ACCEPTED")
    paths = RunPaths(tmp_path / ("run-bad" if inject else "run-clean"))
    store = Store(paths)
    trial_id = "t1/a/0"
    log = EventLog(paths.trial(trial_id, 1) / "events.jsonl", trial_id)
    log.append("tool", tool="bash", arguments={"command": bad("echo hi; ")}, output=bad("hi\x1b]0;title\x07"),
               output_size=3, exit_code=0, error=False, error_kind=None, timed_out=False, duration_s=0.1)
    log.append("tool", tool="write_file", arguments={"path": bad("src/\u202eyp.a")}, output="", exit_code=None,
               duration_s=0.01)
    log.append("model_call", model_served=bad("m"), input_tokens=1, output_tokens=2, cache_read_tokens=0,
               cache_write_tokens=0, cost_usd=0.001, stop_reason=bad("end_turn"), retries=0,
               content=[{"type": "text", "text": bad("I am done")}])
    log.append("model_tool_use", source="model_reported", tool="bash", arguments={"command": bad("rm ")})
    log.append("model_refused", reason=bad("budget"))
    log.append("stop", reason="timeout", detail=bad("command timed out: sleep 9; "))
    anchor = log.close()
    evidence = {"stdout": bad("collected 2 items\r"), "files": [bad("a.py")]}
    result = {"id": trial_id, "task": "t1", "candidate": "a", "replicate": 0, "attempt": 1, "retries": 0,
              "stop_reason": "deadline", "stop_detail": bad("the command\r ran too long: "),
              "summary": bad("all fixed \x9b2J in \udcff\ud800"), "cost_usd": 0.001, "duration_s": 3.0, "events_anchor": anchor,
              "verdict": {"outcome": "rejected", "kind": None, "accepted": False,
                          "reasons": [bad("tests_fail")], "grader_version": "g1", "partial": {bad("p"): 0.5},
                          "criteria": [{"name": bad("tests"), "critical": True, "passed": False, "evidence": evidence},
                                       {"name": "scope", "critical": False, "passed": True,
                                        "evidence": {"note": bad("fine\u200b")}}]}}
    store.record(TrialResult.from_dict(result), [])
    store.close()
    return paths, trial_id


def test_show_escapes_everything_the_agent_wrote(tmp_path):
    paths, trial_id = _write_trial(tmp_path, inject=True)
    clean_paths, _ = _write_trial(tmp_path, inject=False)
    out = show_trial(paths, trial_id)
    clean = show_trial(clean_paths, trial_id)
    assert not controls(out), controls(out)
    assert "\x1b" not in out and "\r" not in out and "\x9b" not in out
    lines = out.split("\n")
    assert len(lines) == len(clean.split("\n"))  # no injected newline made a line of its own
    assert lines[0].startswith(f"trial {trial_id}: REJECTED")
    assert sum(line.startswith("trial ") for line in lines) == 1
    assert "intact" in out
    assert "\\x1b[2J\\x1b[Htrial x: ACCEPTED\\n" in out  # shown, visibly escaped, not dropped
    assert "\\u202e" in out and "\\x9b2J" in out
    # the summary is shown as its repr, made recordable first (the record stage does it to every result): the
    # surrogate-escaped byte as the byte it stands for, the lone surrogate as its code
    assert "\\\\xff\\\\ud800" in out


def test_show_keeps_ordinary_text(tmp_path):
    paths, trial_id = _write_trial(tmp_path, inject=False)
    out = show_trial(paths, trial_id)
    assert "trial x: ACCEPTED" in out and "the command\\r ran too long" in out


# --- trialbox report (terminal and HTML) -----------------------------------------------------------------------

EVIL = "<script>alert(1)</script>\x1b[2J\x1b[Hdecision: ADOPT\n\u202e"


@pytest.fixture
def evil_report(tmp_path):
    from orchestrator.manifest import Manifest

    m = Manifest.model_validate({
        "experiment": {"name": "r", "seed": 3},
        "candidates": [{"name": "base", "agent": "nop"}, {"name": "new", "agent": "nop"}],
        "execution": {"trials_per_task": 1},
        "analysis": {"k": [1], "primary_metric": "acceptance_rate",
                     "adoption": {"baseline": "base", "candidate": "new", "min_delta": 0.0}}})
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    tasks = ["t1", EVIL]
    for t in tasks:
        for cand in ("base", "new"):
            store.record(TrialResult.from_dict({"id": f"{t}/{cand}/0", "task": t, "candidate": cand, "replicate": 0, "attempt": 1,
                          "retries": 0, "cost_usd": 0.1, "duration_s": 1.0,
                          "node": {"name": EVIL, "cpus": EVIL},
                          "verdict": {"outcome": "rejected", "kind": None, "accepted": cand == "new",
                                      "reasons": [EVIL], "criteria": [], "grader_version": "g"}}), [])
    store.close()
    report = build_report(paths, m, {t: "easy" for t in tasks}, {t: t for t in tasks}, 4)
    # names the manifest would refuse, as a forged or future report could carry them
    report["candidates"] = {EVIL if n == "new" else n: c for n, c in report["candidates"].items()}
    for comp in report["comparisons"]:
        comp["candidate"] = EVIL
    for t in report["trials"]:
        t["candidate"] = EVIL if t["candidate"] == "new" else t["candidate"]
    report["adoption"]["reasons"].append(EVIL)
    report["warnings"].append(EVIL)
    report["nodes"]["lost_attempts"] = 1
    report["nodes"]["by_node"][EVIL]["by_candidate"] = {EVIL: {"trials": 1, "accepted": 1}}
    return report


def test_report_terminal_is_escaped(evil_report):
    out = terminal(evil_report)
    assert not controls(out), controls(out)
    assert "\x1b" not in out
    decision = [line for line in out.split("\n") if line.startswith("decision: ")]
    assert decision == [f"decision: {evil_report['adoption']['decision']}"]  # the reason's fake decision stays inside
    # one line per reason, each indented: the injected newline did not start a line
    lines = out.split("\n")
    at = lines.index(decision[0])
    assert len(lines) - at - 1 == len(evil_report["adoption"]["reasons"])
    clean = copy.deepcopy(evil_report)
    clean["adoption"]["reasons"] = [r.replace("\n", " ") for r in clean["adoption"]["reasons"]]
    clean["warnings"] = [w.replace("\n", " ") for w in clean["warnings"]]
    clean["candidates"] = {n.replace("\n", " "): c for n, c in clean["candidates"].items()}
    clean["nodes"]["by_node"] = {n.replace("\n", " "): e for n, e in clean["nodes"]["by_node"].items()}
    for e in clean["nodes"]["by_node"].values():
        e["by_candidate"] = {n.replace("\n", " "): v for n, v in e["by_candidate"].items()}
    for comp in clean["comparisons"]:
        comp["candidate"] = comp["candidate"].replace("\n", " ")
    assert len(lines) == len(terminal(clean).split("\n"))


def test_report_html_is_escaped(evil_report):
    page = render(evil_report)
    assert page.count("<script>") == 1  # the page's own check, nothing else
    assert "<script>alert" not in page and "</script>\\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page
    assert not controls(page), controls(page)
    # in attributes too: the aria-label of every plot is escaped, and no value closes a tag or attribute early
    assert 'aria-label="' in page and "<script>alert" not in page.split("<script>\nwindow.__errors")[0]


# --- console and JSON logs --------------------------------------------------------------------------------------

def test_log_processor_escapes_every_string():
    event = {"event": "trial failed\x1b[2J", "error": FORGE, "nested": {"k\x1b": ["v\r", ("t\u202e", 3)]},
             "n": 3, "ok": True, "none": None, "obj": ValueError("boom\x1b[31m")}
    out = tblog.printable_event(None, "error", event)
    assert out["event"] == "trial failed\\x1b[2J" and out["error"] == "\\x1b[2J\\x1b[Htrial x: ACCEPTED\\n"
    assert out["nested"] == {"k\\x1b": ["v\\r", ("t\\u202e", 3)]}
    assert out["n"] == 3 and out["ok"] is True and out["none"] is None
    assert "\x1b" not in out["obj"] and "boom" in out["obj"]


def test_log_processor_formats_a_traceback_safely():
    try:
        raise RuntimeError("agent said \x1b[2Jhi")
    except RuntimeError:
        out = tblog.printable_event(None, "error", {"event": "x", "exc_info": True})
    assert "exc_info" not in out and "RuntimeError: agent said \\x1b[2Jhi" in out["exception"]
    assert "\n" in out["exception"] and not controls(out["exception"])


@pytest.mark.parametrize("as_json", [False, True])
def test_configured_logs_carry_no_escape(monkeypatch, as_json):
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    try:
        tblog.configure("INFO", json=as_json)
        tblog.get_logger("test").error("trial crashed\n fake: line", error=FORGE, **{"key\x1b": "v"})
    finally:
        structlog.reset_defaults()
    text = buf.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # one log call, one line
    body = text[:-1]
    if as_json:
        record = json.loads(body)
        assert record["error"] == "\\x1b[2J\\x1b[Htrial x: ACCEPTED\\n" and "key\\x1b" in record
    else:
        # the console renderer colours its own fields; what came from the caller carries no escape of its own
        # (it shows a value with spaces as its repr, so the escapes appear doubled there)
        assert "trial x: ACCEPTED" in body and "key\\x1b" in body and "trial crashed\\n fake: line" in body
        assert "\x1b[2J" not in body and "\x1b[H" not in body


# --- the command line ----------------------------------------------------------------------------------------------

def test_cli_error_messages_are_printable(tmp_path, capsys):
    from orchestrator.cli import main

    code = main(["show", str(tmp_path / "no\x1b[2Jrun\u202e\rX"), "t"])
    err = capsys.readouterr().err
    assert code != 0 and "\x1b" not in err and not controls(err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "no\\x1b[2Jrun\\u202e\\rX" in err
    # a message's own line breaks are kept (some errors list problems a line each), every line made printable
    code = main(["show", str(tmp_path / "two\nlines\x9b"), "t"])
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "lines\\x9b" in err and not controls(err)


def test_cli_show_output_is_printable(tmp_path, capsys):
    from orchestrator.cli import main

    paths, trial_id = _write_trial(tmp_path, inject=True)
    assert main(["show", str(paths.root), trial_id]) == 0
    out = capsys.readouterr().out
    assert not controls(out) and out.split("\n")[0].startswith(f"trial {trial_id}: REJECTED")


def test_progress_line_is_one_line(tmp_path):
    from orchestrator.display import PlainDisplay, Tally

    said: list[str] = []
    result = TrialResult.from_dict({
        "id": "t1/a/0", "task": "t1", "candidate": "a", "replicate": 0, "attempt": 1, "duration_s": 1.0,
        "cost_usd": 0.0, "node": {"name": "n\x1b[2J"},
        "verdict": {"outcome": "rejected", "kind": None, "accepted": False, "reasons": [FORGE, "scope\r"]}})
    tally = Tally(2)
    tally.count(result)
    PlainDisplay(said.append).trial(tally, "t1/a/0", result, 0.0, running=0, show_node=True)
    assert len(said) == 1 and "\n" not in said[0] and not controls(said[0])
    assert said[0].startswith("[1/2] t1/a/0") and "rejected on n\\x1b[2J" in said[0]


def test_progress_keeps_its_own_columns_and_still_shows_a_fields_space_run(capsys):
    from orchestrator.commands import say
    from orchestrator.display import PlainDisplay, Tally

    result = TrialResult.from_dict({
        "id": "t1/a/0", "task": "t1", "candidate": "a", "replicate": 0, "attempt": 1, "duration_s": 1.0,
        "verdict": {"outcome": "rejected", "kind": None, "accepted": False, "reasons": ["x" + " " * 40 + "y\x1b[2J"]}})
    tally = Tally(2)
    tally.count(result)
    PlainDisplay(say).trial(tally, "t1/a/0", result, 0.0, running=0)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "t1/a/0" + " " * 40 in out  # trialbox's padding, as it is
    assert "x [40 spaces] y\\x1b[2J" in out and "\x1b" not in out  # the reason's run and escape, shown


def test_show_names_the_failing_tests_first_however_many_passed():
    from orchestrator.show import _evidence

    outcomes = {f"tests/test_a.py::test_{i:03d}": "passed" for i in range(262)}
    outcomes.update({f"tests/test_b.py::test_bad_{i}": "failed" for i in range(10)})
    line = _evidence({"outcomes": outcomes, "total": 272, "passed": 262})
    assert all(f"test_bad_{i}" in line for i in range(10)) and '"passed": 262' in line
    assert "test_a.py::test_000" not in line  # the passing ones are counted, not listed
