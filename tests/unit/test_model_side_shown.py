"""The reports show the model side (issue 24, item 7): the models served, model calls, tool calls run and
reported, proxy refusals and submit summaries are in the terminal report, the HTML report and ``show``, not only
in ``report --json``."""

from __future__ import annotations

import json

from orchestrator.html import render
from orchestrator.manifest import Manifest
from orchestrator.report import build_report
from orchestrator.result import TrialResult
from orchestrator.show import show_trial
from orchestrator.store import RunPaths, Store
from orchestrator.summary import terminal

TASKS = [f"t{i}" for i in range(3)]


def _row(task, cand, r, summary, served, reported, refused):
    return TrialResult.from_dict({
        "id": f"{task}/{cand}/{r}", "task": task, "candidate": cand, "replicate": r, "attempt": 1, "retries": 0,
        "cost_usd": 0.01, "duration_s": 4.0, "stop_reason": "submitted", "summary": summary, "model_calls": 3,
        "tool_calls": 0, "model_reported_tool_calls": reported, "proxy_refused_requests": refused,
        "models_served": served,
        "verdict": {"outcome": "accepted", "kind": None, "accepted": True, "reasons": [], "criteria": [],
                    "grader_version": "g"}})


def test_the_model_side_is_in_every_report_and_in_show(tmp_path):
    m = Manifest.model_validate({
        "experiment": {"name": "x", "seed": 1},
        "candidates": [{"name": "mini", "agent": "command", "command": "mini", "model_snapshot": "m-1"},
                       {"name": "nothing", "agent": "nop"}],
        "execution": {"trials_per_task": 1}, "analysis": {"k": [1], "primary_metric": "acceptance_rate"}})
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text(json.dumps({"price_table_version": "p"}))
    for i, t in enumerate(TASKS):
        store.record(_row(t, "mini", 0, "" if i else "Fixed it.", ["m-1"], 3, {"path_not_relayed": 1} if i == 2 else {}), [])
        store.record(TrialResult.from_dict({"id": f"{t}/nothing/0", "task": t, "candidate": "nothing", "replicate": 0,
                                            "attempt": 1, "stop_reason": "submitted", "verdict": {
                                                "outcome": "rejected", "kind": None, "accepted": False,
                                                "reasons": ["fail_to_pass"], "criteria": [], "grader_version": "g"}}), [])
    store.close()
    report = build_report(paths, m, {}, {t: t for t in TASKS}, 6)
    assert report["candidates"]["mini"]["summaries"] == {"trials_with_one": 1, "trials": 3}
    text = terminal(report)
    [line] = [ln for ln in text.splitlines() if "model side" in ln]
    assert "served m-1" in line and "3.0 model call(s)" in line and "3.0 reported by the model" in line
    assert "proxy refused path_not_relayed 1" in line and "a submit summary in 1/3 trial(s)" in line
    assert text.count("model side") == 1  # the nop candidate has no model side
    page = render(report)
    assert "<h2>Model side</h2>" in page and "path_not_relayed 1" in page and "<td>1/3</td>" in page
    shown = show_trial(paths, "t2/mini/0")
    assert "model side: served m-1; 3 model call(s), 0 tool call(s) run by trialbox, 3 reported by the model; " \
           "proxy refused path_not_relayed 1" in shown
    assert "model side" not in show_trial(paths, "t2/nothing/0")
