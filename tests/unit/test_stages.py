"""Where a trial's time goes: the stage clock, its record in the result, the report's summary."""

from __future__ import annotations

import threading
import time

from orchestrator.grading.verdict import Verdict
from orchestrator.report import stage_summary
from orchestrator.result import TrialResult
from orchestrator.stageclock import STAGES, lap, timing
from orchestrator.stops import Outcome


def test_laps_add_up_per_stage_and_go_to_this_contexts_clock_only():
    seen = {}

    def other():
        with timing() as clock:
            time.sleep(0.02)
            lap("agent")
            seen["other"] = clock.rounded()

    with timing() as clock:
        time.sleep(0.01)
        lap("prepare")
        t = threading.Thread(target=other)
        t.start()
        t.join()
        lap("grading")
        time.sleep(0.01)
        lap("grading")
    got = clock.rounded()
    assert list(got) == ["prepare", "grading"] and got["prepare"] >= 0.009 and got["grading"] >= 0.03
    assert list(seen["other"]) == ["agent"] and seen["other"]["agent"] >= 0.019
    lap("agent")  # no clock open: nothing happens, nothing raises


def _result(i: int, stages: dict | None) -> TrialResult:
    return TrialResult(f"t/c/{i}", "t", "c", i, 1, Verdict(Outcome.ACCEPTED, None, True, [], []), stage_seconds=stages)


def test_the_result_keeps_its_stages_and_old_results_have_none():
    r = _result(0, {"prepare": 0.1, "agent": 2.0})
    assert TrialResult.from_dict(r.to_dict()).stage_seconds == {"prepare": 0.1, "agent": 2.0}
    old = r.to_dict()
    del old["stage_seconds"]
    assert TrialResult.from_dict(old).stage_seconds is None


def test_the_report_gives_median_p95_and_share_per_stage():
    rows = [_result(i, {"prepare": 0.1, "agent": float(i + 1), "grading": 1.0}) for i in range(4)] + [_result(9, None)]
    s = stage_summary(rows)
    assert list(s) == ["prepare", "agent", "grading"]
    assert s["agent"]["trials"] == 4 and s["agent"]["median_s"] == 2.5
    total = 4 * 0.1 + (1 + 2 + 3 + 4) + 4 * 1.0
    assert abs(s["agent"]["share"] - round(10 / total, 4)) < 1e-9
    assert abs(sum(v["share"] for v in s.values()) - 1) < 1e-3
    assert stage_summary([_result(0, None)]) == {}
    assert set(STAGES) >= set(s)
