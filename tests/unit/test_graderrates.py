"""The graders' own error rates from recorded checks (``graderrates``, ``trialbox calibrate --graders``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.graderrates import grader_rates, rates_lines


def record(graded=None, survivors=0, accepted=0, rejected=0):
    out = {"ok": True}
    if graded is not None:
        out["strength"] = {"graded": graded, "rejected": graded - survivors,
                           "survivors": [{"id": f"m{i}"} for i in range(survivors)]}
    if accepted or rejected:
        out["alternatives"] = {"total": accepted + rejected, "accepted": ["a"] * accepted, "rejected": ["r"] * rejected}
    return out


def test_per_task_exact_intervals_and_a_pooled_mean_over_tasks_with_a_cluster_robust_interval():
    records = {"a": record(graded=6, survivors=3, accepted=2), "b": record(graded=6, survivors=0),
               "c": record(graded=2, survivors=2, accepted=1, rejected=1), "d": None, "e": record()}
    rates = grader_rates(records, {"a": "r1", "b": "r1", "c": "r2", "d": "r3", "e": "r3"})
    a = rates["tasks"]["a"]["false_accept"]
    assert (a["errors"], a["cases"], a["rate"]) == (3, 6, 0.5)
    assert a["interval"][0] == pytest.approx(0.1181, abs=1e-3) and a["interval"][1] == pytest.approx(0.8819, abs=1e-3)
    assert rates["tasks"]["b"]["false_accept"]["interval"][0] == 0.0  # no survivor: exact, from 0
    fa = rates["pooled"]["false_accept"]
    assert fa["value"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)  # the mean of per-task rates, not 5 of 14
    assert (fa["tasks"], fa["clusters"], fa["errors"], fa["cases"]) == (3, 2, 5, 14)
    assert fa["interval"][0] <= fa["value"] <= fa["interval"][1]
    fr = rates["pooled"]["false_reject"]
    assert fr["value"] == pytest.approx((0.0 + 0.5) / 2) and (fr["errors"], fr["cases"]) == (1, 4)
    assert rates["unmeasured"] == {"false_accept": ["d", "e"], "false_reject": ["b", "d", "e"]}
    text = "\n".join(rates_lines(rates))
    assert "false accept 50.0% [11.8%, 88.2%] (3 of 6)" in text and "nothing measured" in text
    assert "pooled false reject rate: 25.0%" in text and "not measured on 3 task(s): b, d, e" in text


def test_nothing_measured_is_said_so_never_a_zero_rate():
    rates = grader_rates({"a": record(), "b": None}, {})
    assert rates["pooled"]["false_accept"]["value"] is None
    assert rates["pooled"]["false_accept"]["reason"] == "no task measured"
    assert "pooled false accept rate: n/a" in "\n".join(rates_lines(rates))


@pytest.mark.parametrize("args, message", [
    (["calibrate"], "expected RUN LABELS (the judge) or --graders MANIFEST"),
    (["calibrate", "run", "labels.yaml", "--graders", "m.yaml"], "--graders MANIFEST takes no run or labels")])
def test_calibrate_says_which_of_its_two_forms_it_expected(args, message, tmp_path):
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode != 0 and message in res.stderr and "Traceback" not in res.stderr
