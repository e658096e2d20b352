"""A whole trial, sequential: trialbox's ``run_trial`` (the oracle on a sample task) against the same steps done
bare with docker-py, alternately.

The bare steps: an agent container from the task's image (the same limits and hardening, an anonymous engine
volume at /workspace), the repository copied in, the oracle's three commands (read the file, write it back
patched, submit: one exec), the workspace exported as a tar, the container removed; then a grader container,
the final workspace and the held-out tests copied in, pytest on the named tests, the exit code read, the
container removed. trialbox does more on the same path (a bounded workspace disk, canaries, the event log, the
export checked against the sandbox's own listing, the trusted test files restored and verified, two result
channels and a tripwire, the criteria, the record): the ratio is the price of all of it.

Targets: ≤ 1.3× the bare steps (issue 16), and ≤ 0.75× once the next trial is prepared while this one runs.
The second measurement is that: each trialbox trial is given what was made for it (``ahead.ready_trial``: its
sandbox and its grader's container created, its disk seeded, its canaries) in a background thread while the
trial before it ran, as the local backend does; the time is the trial's own, from ``run_trial`` to its result.

    .venv/bin/python benchmarks/trial.py [PAIRS]
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from _common import alternate, report
from _baretrial import BareTrial

from orchestrator.agents import BudgetLimits
from orchestrator.ahead import ready_trial
from orchestrator.grading.runner import GraderLimits
from orchestrator.engine import connect
from orchestrator.loading import load_manifest
from orchestrator.manifest import OracleCandidate
from orchestrator.sandbox.docker import docker_host
from orchestrator.stageclock import STAGES
from orchestrator.store import RunPaths
from orchestrator.taskload import load_tasks
from orchestrator.trial import TrialSpec, run_trial

ROOT = Path(__file__).resolve().parent.parent
TASK = "textkit-slug-unicode"


def main(pairs: int = 10) -> int:
    client = connect()
    loaded = load_manifest(ROOT / "examples" / "smoke.yaml")
    task = next(t for t in load_tasks(loaded) if t.id == TASK)
    bare_trial = BareTrial.of(client, loaded, task)
    host = docker_host(client)
    env = loaded.manifest.environment
    stages: list[dict[str, float]] = []

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def trialbox(i: int) -> None:
            run_id = f"bench-{uuid.uuid4().hex[:8]}"
            spec = TrialSpec(f"{TASK}/oracle/{max(i, 0)}", run_id, task, OracleCandidate(name="oracle", agent="oracle"),
                             max(i, 0), bare_trial.image, env, BudgetLimits(deadline_seconds=300))
            result = run_trial(spec, loaded, host, RunPaths(work / run_id))
            assert result.accepted, result.verdict.to_dict()
            if i >= 0:
                stages.append(dict(result.stage_seconds or {}))

        ta, tb = alternate(trialbox, lambda i: bare_trial.run(), pairs)
        plain = list(stages)
        stages.clear()
        pool = ThreadPoolExecutor(max_workers=1)
        limits = GraderLimits.for_environment(env)
        upcoming: dict[int, tuple[TrialSpec, Future]] = {}

        def spec_for(i: int) -> TrialSpec:
            return TrialSpec(f"{TASK}/oracle/{i}", f"bench-{uuid.uuid4().hex[:8]}", task,
                             OracleCandidate(name="oracle", agent="oracle"), i, bare_trial.image, env,
                             BudgetLimits(deadline_seconds=300))

        def ready(i: int) -> None:
            spec = spec_for(i)
            upcoming[i] = (spec, pool.submit(ready_trial, spec, loaded, host, limits))

        ready(-1)
        order = [-1, -2, *range(pairs)]  # alternate()'s warm-up calls, then the pairs

        def prepared(i: int) -> None:
            spec, readied = upcoming.pop(i)
            nxt = order.index(i) + 1
            if nxt < len(order):
                ready(order[nxt])  # made while this one runs
            result = run_trial(spec, loaded, host, RunPaths(work / spec.run_id), readied=readied)
            assert result.accepted and result.conditions.prepared_ahead, result.verdict.to_dict()
            if i >= 0:
                stages.append(dict(result.stage_seconds or {}))

        tc, td = alternate(prepared, lambda i: bare_trial.run(), pairs)
        pool.shutdown(wait=True)
    ok = report("a whole trial, sequential (oracle on a sample task)", "trialbox run_trial", ta,
                "bare docker-py steps", tb, 1.3)
    print_stages(plain)
    ok_ahead = report("the same, the next trial prepared while this one runs", "trialbox, prepared ahead", tc,
                      "bare docker-py steps", td, 0.75)
    print_stages(stages)
    return 0 if ok and ok_ahead else 1


def print_stages(stages: list[dict[str, float]]) -> None:
    print("  trialbox's stages, median seconds: " + ", ".join(
        f"{s} {sorted(x.get(s, 0.0) for x in stages)[len(stages) // 2]:.3f}" for s in STAGES
        if any(s in x for x in stages)))


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
