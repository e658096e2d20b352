"""An image removed from the engine mid-run (issue 25, item 3): the sandbox names the pinned image when the engine
has none (at creation, and at the start of a container created before the removal), the trial becomes
``infra_error(image_missing)`` naming the image, never the agent's rejection, the run loop does not retry it, a
resumed run runs it again, and the run ends with a message naming the image and how to restore it."""

from __future__ import annotations

import dataclasses
from collections import deque
from concurrent.futures import Future
from types import SimpleNamespace

import docker.errors
import pytest
import requests

from orchestrator.ahead import take
from orchestrator.attempts import owes_retry, rerun_recorded, resumed
from orchestrator.errors import ImageNotFound, SandboxError
from orchestrator.grading.grade import PreparedGrader
from orchestrator.grading.runner import GraderLimits, run_tests
from orchestrator.grading.verdict import infra_verdict
from orchestrator.job import _run_queue
from orchestrator.missingimages import (IMAGE_MISSING, ImagesMissing, image_name, images_missing, lock_names,
                                        missing_of, refusal, says_gone)
from orchestrator.resultparts import PreviousAttempt
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox
from orchestrator.store import RunPaths

from .test_engine_outage import infra, result
from .test_run_loop import Scripted, accepted, spec

ENV_ID = "sha256:" + "e" * 64
LAYER_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64


def trial_spec(i: int = 0, image_id: str = ENV_ID, grader_image_id: str | None = None, key: str = "pyalt",
               candidate: str = "oracle"):
    """A trial of a task on environment ``key`` (the attributes the refusal reads)."""
    s = spec(i)
    return dataclasses.replace(s, trial_id=f"t/{candidate}/{i}", task=SimpleNamespace(id="t", image_key=key),
                               candidate=SimpleNamespace(name=candidate), image_id=image_id,
                               grader_image_id=grader_image_id)


# --------------------------------------------------------------------------- the sandbox names the image
class FakeContainer:
    def __init__(self, start_error: Exception | None = None) -> None:
        self.start_error, self.removed = start_error, False

    def start(self):
        if self.start_error is not None:
            raise self.start_error

    def remove(self, **_):
        self.removed = True


class FakeClient:
    """What ``DockerSandbox`` asks of docker-py, with the engine's answers scripted."""

    def __init__(self, image_error=None, create_error=None, start_error=None) -> None:
        # the engine's API as DockerSandbox calls it (create_host_config, create_container, then containers.get)
        self.api = SimpleNamespace(api_version="1.41", create_host_config=lambda **kw: dict(kw),
                                   create_container=self._create_container)
        self.image_error, self.create_error, self.start_error = image_error, create_error, start_error
        self.images = SimpleNamespace(get=self._get)
        self.containers = SimpleNamespace(create=self._create, get=lambda cid: self.made[int(cid)])
        self.made: list[FakeContainer] = []

    def _create_container(self, image_id, **kw):
        self._create(image_id, **kw)
        return {"Id": str(len(self.made) - 1)}

    def _get(self, image_id):
        if self.image_error is not None:
            raise self.image_error
        return SimpleNamespace(id=image_id)

    def _create(self, image_id, **_):
        if self.create_error is not None:
            raise self.create_error
        c = FakeContainer(self.start_error)
        self.made.append(c)
        return c


def response(status: int) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    return r


def sandbox(client: FakeClient) -> DockerSandbox:
    sb = DockerSandbox(SandboxSpec(image_id=ENV_ID, name="tb-test-image-missing"), client)
    sb._create_volume = lambda: setattr(sb, "volume", SimpleNamespace(name="v"))  # no disk: nothing of the host
    sb._account_mounts = lambda uid: ()  # no account files read from the (absent) image, none written
    return sb


def test_a_sandbox_whose_image_is_not_on_the_engine_names_its_pinned_id():
    sb = sandbox(FakeClient(image_error=docker.errors.ImageNotFound("No such image: " + ENV_ID, response(404))))
    with pytest.raises(ImageNotFound) as err:
        sb.create()
    assert err.value.image == ENV_ID and ENV_ID in err.value.message and "never pulls" in err.value.message
    assert sb.volume is None  # refused before anything was made


def test_an_image_removed_between_the_check_and_the_creation_is_the_same_refusal():
    client = FakeClient(create_error=docker.errors.ImageNotFound(f"No such image: {ENV_ID}", response(404)))
    with pytest.raises(ImageNotFound) as err:
        sandbox(client).create()
    assert err.value.image == ENV_ID


@pytest.mark.parametrize("error", [
    docker.errors.ImageNotFound(f"No such image: {ENV_ID}", response(404)),
    docker.errors.APIError("500 Server Error", response(500), explanation=f"No such image: {ENV_ID}"),
])
def test_a_container_prepared_before_its_image_was_removed_does_not_start_as_image_missing(error):
    """A sandbox or grader created ahead (``ahead.ready_trial``, ``PreparedGrader``) whose image left the engine
    before its start: the engine's error, whichever class docker-py gives it, names the pinned image."""
    sb = sandbox(FakeClient(start_error=error))
    sb.create()
    with pytest.raises(ImageNotFound) as err:
        sb.start()
    assert err.value.image == ENV_ID


def test_a_stopped_sandbox_started_again_for_its_export_names_the_image_too():
    sb = sandbox(FakeClient(start_error=docker.errors.ImageNotFound(f"No such image: {ENV_ID}", response(404))))
    sb.create()
    with pytest.raises(ImageNotFound) as err:
        sb.resume(timeout=1)
    assert err.value.image == ENV_ID


def test_other_engine_errors_at_start_stay_the_sandboxs():
    sb = sandbox(FakeClient(start_error=docker.errors.NotFound("No such container: x", response(404))))
    sb.create()
    with pytest.raises(SandboxError) as err:
        sb.start()
    assert not isinstance(err.value, ImageNotFound)
    assert says_gone("Error: No such image: sha256:abc") and not says_gone("No such container: x")


# --------------------------------------------------------------------------- grading and preparation pass it on
class Refusing:
    """A sandbox whose image the engine does not have."""

    def __init__(self, spec=None) -> None:
        self.spec, self.removed = spec, False

    def create(self):
        raise ImageNotFound(f"image {ENV_ID} is not on this engine", image=ENV_ID)

    start = create

    def remove(self):
        self.removed = True

    def resources_used(self):
        from orchestrator.sandbox.meter import Usage

        return Usage()


def test_a_grader_container_without_its_image_is_neither_a_grader_error_nor_retried():
    """``run_tests`` turns the sandbox's own errors into ``GraderInfraError`` (retried, then ``grader_start``); a
    missing image passes through, so the trial is refused for it rather than graded on a broken grader."""
    grader = Refusing()
    with pytest.raises(ImageNotFound):
        run_tests(None, ENV_ID, None, None, [], GraderLimits(), "g", prepared=grader)
    assert grader.removed


def test_a_prepared_grader_whose_image_is_missing_hands_over_nothing():
    prepared = PreparedGrader(lambda spec: Refusing(spec), spec=None)
    with pytest.raises(ImageNotFound):
        prepared.wait()
    assert prepared.take() is None  # the grading then makes its own, and meets the same refusal
    assert prepared.sandbox.removed


def test_a_trial_prepared_ahead_that_met_a_missing_image_prepares_itself():
    failed: Future = Future()
    failed.set_running_or_notify_cancel()
    failed.set_exception(ImageNotFound("gone", image=ENV_ID))
    assert take(failed, trial_spec(), loaded=None) is None


# --------------------------------------------------------------------------- naming
def test_the_refusal_names_the_image_as_the_lock_does():
    plain = trial_spec()
    assert image_name(plain, ENV_ID) == "images.pyalt"
    layered = trial_spec(image_id=LAYER_ID, grader_image_id=ENV_ID, candidate="aider")
    assert image_name(layered, LAYER_ID) == "agent_images.aider.pyalt"
    assert image_name(layered, ENV_ID) == "images.pyalt"
    assert image_name(layered, OTHER_ID) == OTHER_ID
    # an engine error that did not carry the ID: the image of the container that was being made
    assert LAYER_ID in refusal(layered, "No such image", "sandbox")
    assert LAYER_ID in refusal(layered, "No such image", "export")
    assert ENV_ID in refusal(layered, "No such image", "grading")


# --------------------------------------------------------------------------- retries, the loop, resume
def refused(s, image=ENV_ID):
    return result(s, infra_verdict(IMAGE_MISSING, refusal(trial_spec(image_id=image), image, "sandbox")))


def test_a_refusal_earns_no_retry_and_spends_none_of_the_trials_own():
    assert owes_retry(refused(spec(0))) is False
    after = result(spec(0), infra_verdict("sandbox", "exec refused"), attempt=2, retries=1,
                   previous_attempts=[PreviousAttempt(1, IMAGE_MISSING, "image missing").to_dict()])
    assert owes_retry(after) is True  # its own retry is still there


def test_resume_runs_every_refused_trial_again(tmp_path):
    r, kept = refused(spec(0)), infra(spec(1), "grader_start", "the grader could not start")
    kept = result(spec(1), kept.verdict, attempt=2, retries=1,
                  previous_attempts=[PreviousAttempt(1, "grader_start", "x").to_dict()])
    assert set(rerun_recorded([r, kept, accepted(spec(2))])) == {"t/a/0"}
    nxt = resumed(spec(0), RunPaths(tmp_path), r)
    assert nxt.attempt == 2 and [p.kind for p in nxt.previous_attempts] == [IMAGE_MISSING]


def test_the_loop_records_refusals_once_and_the_other_trials_go_on(store):
    """Trials 0, 2, 4 need the removed image; 1, 3, 5 do not."""
    paths, st = store
    backend = Scripted(lambda s: refused(s) if s.replicate % 2 == 0 else accepted(s))
    said: list[str] = []
    _run_queue(deque(spec(i) for i in range(6)), 6, 0, None, 0.0, st, backend, paths, said.append, 1.0)
    assert sorted(backend.submitted) == [(f"t/a/{i}", 1) for i in range(6)]  # none ran twice
    rows = {r.id: r for r in st.trials()}
    assert len(rows) == 6
    assert all(rows[f"t/a/{i}"].accepted for i in (1, 3, 5))
    assert all(missing_of(rows[f"t/a/{i}"]) == ENV_ID for i in (0, 2, 4))
    assert not any("retrying" in line for line in said)
    assert not any(paths.attempt(f"t/a/{i}", 1).retry_owed.exists() for i in range(6))


LOCK = {"images": {"pyalt": {"image_id": ENV_ID, "tag": "trialbox/pyalt:0123456789abcdef"},
                   "python": {"image_id": OTHER_ID, "tag": "trialbox/python:fedcba9876543210"}},
        "agent_images": {"aider": {"pyalt": {"image_id": LAYER_ID, "tag": "trialbox/agent-aider:00"}}}}


def test_the_run_ends_naming_the_image_its_trials_and_how_to_restore_it():
    rows = [refused(spec(0)), refused(spec(2)), accepted(spec(1)), infra(spec(3), "grader_start", "x")]
    error = images_missing(rows, LOCK, "m.yaml", "runs/r")
    assert isinstance(error, ImagesMissing) and error.exit_code == 66
    assert error.images == {ENV_ID: ["t/a/0", "t/a/2"]}
    text = error.message
    assert "2 trial(s) refused" in text and "images.pyalt (trialbox/pyalt:0123456789abcdef)" in text
    assert ENV_ID in text and "t/a/0, t/a/2" in text
    for how in ("trialbox images load", "make images", "trialbox images build --manifest m.yaml",
                "trialbox lock --check m.yaml", "`trialbox run` command on the run folder (runs/r)"):
        assert how in text, how
    assert images_missing([accepted(spec(1)), infra(spec(3))], LOCK, "m.yaml", "runs/r") is None
    assert lock_names(LOCK, LAYER_ID) == ["agent_images.aider.pyalt (trialbox/agent-aider:00)"]
    assert lock_names(LOCK, "sha256:" + "0" * 64) == []


def test_a_refusal_is_never_read_as_an_engine_outage():
    from orchestrator.outage import outage_of

    assert outage_of(refused(spec(0)), None) is None
