"""A trial prepared ahead, against the engine: what is made before the trial's turn (created containers, the
seeded disk), used once by its trial, discarded when its inputs drifted, and nothing of it left behind by a
discard, by the preparer's close or at the end of a run."""

from __future__ import annotations

import uuid
from collections import deque
from concurrent.futures import Future

import pytest

from orchestrator.agents import BudgetLimits
from orchestrator.ahead import Ahead, ready_trial, take
from orchestrator.engine import RUN_LABEL
from orchestrator.grading.runner import GraderLimits
from orchestrator.loading import load_manifest
from orchestrator.manifest import OracleCandidate
from orchestrator.sandbox.docker import docker_host
from orchestrator.settings import load_settings
from orchestrator.store import RunPaths
from orchestrator.taskload import load_tasks
from orchestrator.trial import TrialSpec, run_trial

TASK = "textkit-slug-unicode"


@pytest.fixture(scope="module")
def setup(project, client, images):
    loaded = load_manifest(project / "examples" / "smoke.yaml")
    task = next(t for t in load_tasks(loaded) if t.id == TASK)
    return loaded, task, docker_host(client), images["python"].image_id


def trial(setup, i: int = 0) -> TrialSpec:
    loaded, task, _, image = setup
    return TrialSpec(f"{TASK}/oracle/{i}", f"ahead-{uuid.uuid4().hex[:10]}", task,
                     OracleCandidate(name="oracle", agent="oracle"), i, image, loaded.manifest.environment,
                     BudgetLimits(deadline_seconds=300))


def of_run(client, run_id: str) -> dict[str, list]:
    """The run's containers (name → state), volumes and disk files."""
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    return {"containers": sorted((c["Names"][0], c["State"]) for c in client.api.containers(all=True, filters=flt)),
            "volumes": [v.name for v in client.volumes.list(filters=flt)],
            "disks": sorted(p.name for p in load_settings().disks_dir.glob(f"tb-{run_id[:12]}-*"))}


def done(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


def test_a_readied_trial_is_created_not_started_and_its_trial_uses_it_once(setup, client, tmp_path):
    loaded, task, host, _ = setup
    spec = trial(setup)
    r = ready_trial(spec, loaded, host, GraderLimits.for_environment(spec.environment))
    made = of_run(client, spec.run_id)
    assert [state for _, state in made["containers"]] == ["created", "created"]  # the agent's and the grader's
    assert len(made["volumes"]) == 2 and sum(d.endswith(".img") for d in made["disks"]) == 2  # their disks
    result = run_trial(spec, loaded, host, RunPaths(tmp_path / spec.run_id), readied=done(r))
    assert result.accepted, result.verdict.to_dict()
    assert result.conditions.prepared_ahead is True
    assert of_run(client, spec.run_id) == {"containers": [], "volumes": [], "disks": []}
    again = run_trial(trial(setup, 1), loaded, host, RunPaths(tmp_path / "again"))
    assert again.accepted and again.conditions.prepared_ahead is False


def test_a_readied_trial_whose_repository_changed_is_discarded_and_the_trial_uses_the_new_one(setup, client,
                                                                                                  tmp_path, project):
    loaded, task, host, _ = setup
    spec = trial(setup)
    r = ready_trial(spec, loaded, host, GraderLimits.for_environment(spec.environment))
    readme = project / "tasks" / "_repos" / "textkit" / "DRIFT.txt"
    readme.write_text("changed after the sandbox was prepared\n")
    try:
        assert take(done(r), spec, loaded) is None
        assert of_run(client, spec.run_id) == {"containers": [], "volumes": [], "disks": []}
        r2 = ready_trial(spec, loaded, host, GraderLimits.for_environment(spec.environment))
        readme.write_text("changed again\n")
        result = run_trial(spec, loaded, host, RunPaths(tmp_path / spec.run_id), readied=done(r2))
        assert result.conditions.prepared_ahead is False and result.accepted
        final = RunPaths(tmp_path / spec.run_id).attempt(spec.trial_id, 1).final_workspace
        import tarfile
        with tarfile.open(final) as tf:
            assert tf.extractfile("DRIFT.txt").read() == b"changed again\n"  # the current repository, not the old
    finally:
        readme.unlink()
    assert of_run(client, spec.run_id) == {"containers": [], "volumes": [], "disks": []}


def test_the_preparer_removes_everything_it_made_that_no_trial_took(setup, client):
    loaded, task, host, _ = setup
    specs = [trial(setup, i) for i in range(3)]
    run_id = f"ahead-{uuid.uuid4().hex[:10]}"
    specs = [TrialSpec(s.trial_id, run_id, s.task, s.candidate, s.replicate, s.image_id, s.environment, s.limits)
             for s in specs]
    a = Ahead(loaded, host, depth=2)
    a.keep(deque(specs))
    a.pool.submit(lambda: None).result()  # both preparations ran
    made = of_run(client, run_id)
    assert len(made["containers"]) == 4 and len(made["volumes"]) == 4  # two trials, never the third
    a.keep(deque(specs[1:]))  # the first went to a trial elsewhere (unclaimed here: discarded), the third next
    a.close()
    assert of_run(client, run_id) == {"containers": [], "volumes": [], "disks": []}
