"""An image removed from the engine mid-run (issue 25, item 3), the trial's part: a missing image ends the trial
as ``infra_error(image_missing)`` naming it, whoever's container needed it, never the agent's rejection, and
processing the agent's work is not repeated for it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orchestrator import trial as trial_mod
from orchestrator.errors import ImageNotFound
from orchestrator.grading.runner import GraderLimits
from orchestrator.missingimages import IMAGE_MISSING
from orchestrator.trial import _Gathered, _again_if_passing, _stages

from .test_image_missing import ENV_ID, trial_spec


def fake_files(tmp_path):
    return SimpleNamespace(events=tmp_path / "events.jsonl")


@pytest.mark.parametrize("stage, whose", [("sandbox", "the agent's sandbox; the agent did not start"),
                                          ("export", "the agent's sandbox, started again to export"),
                                          ("grading", "the grader's container (at grading)")])
def test_the_trial_is_refused_by_name_whoever_needed_the_image(monkeypatch, tmp_path, stage, whose):
    def stages(spec, agent, prepared, host, files, grader_limits, judge, cancel, got, ready):
        got.stage = stage
        raise ImageNotFound("image not found on the engine: No such image", image=ENV_ID)

    monkeypatch.setattr(trial_mod, "_agent_to_verdict", stages)
    got = _Gathered()
    verdict, ended = _stages(trial_spec(), None, None, None, fake_files(tmp_path), GraderLimits(), None, None, got)
    assert verdict.outcome.value == "infra_error" and verdict.kind == IMAGE_MISSING and not verdict.accepted
    assert ended.__name__ == "failed"  # an infrastructure error, never a graded rejection
    assert ENV_ID in verdict.reasons[0] and "images.pyalt" in verdict.reasons[0] and whose in verdict.reasons[0]
    assert "trialbox run" in verdict.reasons[0] and "make images" in verdict.reasons[0]


def test_processing_the_agents_work_is_not_repeated_for_a_missing_image():
    calls = []

    def grade():
        calls.append(1)
        raise ImageNotFound("gone", image=ENV_ID)

    got = _Gathered(stage="grading")
    with pytest.raises(ImageNotFound):
        _again_if_passing(got, grade)
    assert calls == [1] and "processing_repeated" not in got.conditions
