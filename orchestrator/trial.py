"""One trial end to end: sandbox → agent → stop → export → grade → ``TrialResult``.

``run_trial`` never raises for the agent's failure: whatever the agent did,
the trial ends with a verdict. Infrastructure failures (the sandbox cannot
start, the grader is broken) become ``infra_error`` verdicts with their kind.
Configuration problems (a missing API key) are raised before any container
starts, by ``make_agent``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker
import structlog

from .agents import BudgetLimits, make_agent
from .stops import AgentResult, Outcome
from .agents.session import agent_session
from .engine import ATTEMPT_LABEL, RUN_LABEL, TRIAL_LABEL
from .errors import Cancelled, InstallFailed, SandboxError
from .events import read_events
from .grading.export import ExportLimits, export_workspace
from .grading.grade import grade_trial
from .grading.judge import Judge
from .grading.runner import GraderLimits
from .grading.criteria import Criterion
from .grading.verdict import Verdict, infra_verdict
from .hashing import tree_sha256
from .log import get_logger
from .manifest import EnvironmentConfig, LoadedManifest
from .nodes import node_info
from .prepare import prepare
from .sandbox.base import SandboxSpec
from .sandbox.docker import docker_sandboxes
from .sandbox.meter import Usage
from .store import AttemptPaths, RunPaths, slug
from .tasks import Task
from .textsafe import recordable, recordable_data

log = get_logger("trial")


@dataclass(frozen=True)
class TrialSpec:
    """A resolved trial: the task, the candidate, the replicate, the pinned image, the limits."""

    trial_id: str
    run_id: str
    task: Task
    candidate: Any
    replicate: int
    image_id: str
    environment: EnvironmentConfig
    limits: BudgetLimits
    attempt: int = 1
    retries: int = 0
    prior_cost_usd: float = 0.0
    """What the attempts this one replaces spent (an infrastructure retry keeps their cost)."""
    block: int = 0
    """The plan's block (task × period): its trials, one per candidate, run on one node."""
    previous_attempts: tuple[dict[str, Any], ...] = ()
    """The attempts this one replaces: attempt, kind, detail, node, cost (None when lost with its node)."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def sandbox_spec(spec: TrialSpec) -> SandboxSpec:
    env = spec.environment
    return SandboxSpec(
        image_id=spec.image_id, name=f"tb-{spec.run_id[:12]}-{slug(spec.trial_id).replace('.', '-')}-a{spec.attempt}"[:120],
        labels={RUN_LABEL: spec.run_id, TRIAL_LABEL: spec.trial_id, ATTEMPT_LABEL: str(spec.attempt)},
        cpu_limit=env.cpu_limit, cpu_reservation=env.cpu_reservation, memory_limit_mb=env.memory_limit_mb,
        memory_reservation_mb=env.memory_reservation_mb, pids_limit=env.pids_limit, disk_limit_mb=env.disk_limit_mb,
        network="none", runtime=env.runtime)


def unknown_cost(spec: TrialSpec, this_attempt_known: bool) -> dict[str, Any]:
    """The fields saying a result's cost is a lower bound: attempts whose spend went down with a node."""
    unknown = sum(a.get("cost_usd") is None for a in spec.previous_attempts) + (not this_attempt_known)
    return {"cost_is_lower_bound": True, "attempts_with_unknown_cost": unknown} if unknown else {}


def ended_attempt(spec: TrialSpec, verdict, attempt_cost: float | None, node: dict[str, Any] | None,
                  folder, cost_note: str | None = None) -> dict[str, Any]:
    """The result of an attempt that ended without running to its verdict (trialbox failed, its node was
    lost), written to the attempt's folder; ``attempt_cost`` None when its spend is unknown."""
    result = {"id": spec.trial_id, "task": spec.task.id, "candidate": spec.candidate.name,
              "replicate": spec.replicate, "attempt": spec.attempt, "retries": spec.retries, "block": spec.block,
              "image_id": spec.image_id, "attempt_cost_usd": attempt_cost,
              "cost_usd": round(spec.prior_cost_usd + (attempt_cost or 0.0), 8), "duration_s": None,
              "previous_attempts": list(spec.previous_attempts), "node": node, "verdict": verdict.to_dict(),
              **unknown_cost(spec, this_attempt_known=attempt_cost is not None)}
    if cost_note:
        result["cost_note"] = cost_note
    folder.mkdir(parents=True, exist_ok=True)
    AttemptPaths(folder).verdict.write_text(json.dumps(result, indent=2, default=str))
    return result


def spend_in(folder) -> float | None:
    """What an attempt's recorded model calls cost: 0 when it wrote no event log (it never reached its
    agent), None when the log cannot be read."""
    events_file = AttemptPaths(folder).events
    if not events_file.exists():
        return 0.0
    try:
        events = read_events(events_file)
    except (OSError, ValueError):
        return None
    return round(sum(e.get("cost_usd") or 0.0 for e in events if e.get("kind") == "model_call"), 8)


def agent_fields(r: AgentResult) -> dict[str, Any]:
    """What a result records of how the agent's run ended and what it spent."""
    return dict(stop_reason=r.stop_reason.value, stop_detail=r.detail, summary=r.summary, abstained=r.abstained,
                cost_usd=r.cost_usd, tool_calls=r.tool_calls, model_calls=r.model_calls,
                tokens={"input": r.input_tokens, "output": r.output_tokens, "cache_read": r.cache_read_tokens,
                        "cache_write": r.cache_write_tokens}, interventions=r.interventions)


def usage_record(sandbox: list[Usage], grader: list[Usage], events: list[dict[str, Any]]) -> dict[str, Any]:
    """What an attempt used besides its model tokens, as physical quantities (the report prices them with the
    manifest's ``costs``): its sandbox's and grader containers' CPU time and memory-time, and its calls of each
    tool of the tool contract (priced tools are counted from these)."""
    calls: dict[str, int] = {}
    for e in events:
        if e.get("kind") == "tool":
            name = str(e.get("tool") or e.get("name") or "")
            calls[name] = calls.get(name, 0) + 1
    return {"sandbox": sum(sandbox, Usage()).to_dict(), "grader": sum(grader, Usage()).to_dict(),
            "tool_calls": dict(sorted(calls.items()))}


def unprocessable_verdict(stage: str, exc: BaseException) -> Verdict:
    """Where a fault lies decides its outcome: an error raised while trialbox processed what the agent left
    (its workspace, its events) is the agent's, a rejection, never an infrastructure error with a free retry.
    The evidence names the exception, so a defect of trialbox's own shows as what it is."""
    crit = Criterion("processable_output", True, False,
                     {"stage": stage, "error": recordable(f"{type(exc).__name__}: {exc}")[:1000]})
    return Verdict(Outcome.REJECTED, "unprocessable_output", False, ["processable_output"], [crit])


def _conditions_start(client: docker.DockerClient) -> dict[str, Any]:
    t = time.monotonic()
    client.ping()
    return {"load_at_start": os.getloadavg()[0], "docker_api_latency_s": round(time.monotonic() - t, 6)}


def run_trial(spec: TrialSpec, loaded: LoadedManifest, client: docker.DockerClient, paths: RunPaths,
              grader_limits: GraderLimits = GraderLimits(), judge: Judge | None = None,
              cancel: threading.Event | None = None, env: Mapping[str, str] | None = None,
              node: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one trial and write its artifacts (see ``_run_trial``); every log line of it, grading included,
    carries its trial id."""
    with structlog.contextvars.bound_contextvars(trial_id=spec.trial_id):
        return _run_trial(spec, loaded, client, paths, grader_limits, judge, cancel, env, node)


def _run_trial(spec: TrialSpec, loaded: LoadedManifest, client: docker.DockerClient, paths: RunPaths,
               grader_limits: GraderLimits, judge: Judge | None, cancel: threading.Event | None,
               env: Mapping[str, str] | None, node: dict[str, Any] | None) -> dict[str, Any]:
    """Run one trial and write its artifacts; returns the result document (also stored as verdict.json).

    ``cancel`` (set on Ctrl-C) stops the trial before grading: it raises ``Cancelled``. ``env`` is
    where the agent's API key and base URL come from (default: this process's environment);
    ``node`` is the machine's description recorded with the result (default: this machine)."""
    files = paths.attempt(spec.trial_id, spec.attempt)
    folder = files.folder
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():  # a crashed earlier run of the same attempt left these: never mixed in
        stale.unlink()
    started, t0 = _now(), time.monotonic()
    agent = make_agent(spec.candidate, spec.task, loaded, env)
    prepared = prepare(spec.task, sandbox_spec(spec), with_canaries=True)  # the repository once; the spec resolved
    canaries, original = prepared.canaries, prepared.original
    files.canaries.write_text(json.dumps(canaries.values))  # host-only: kept for regrading
    result: dict[str, Any] = {"id": spec.trial_id, "task": spec.task.id, "candidate": spec.candidate.name,
                              "replicate": spec.replicate, "attempt": spec.attempt, "retries": spec.retries,
                              "started_at": started, "image_id": spec.image_id, "block": spec.block,
                              "node": node or node_info(client)}
    if spec.previous_attempts:
        result["previous_attempts"] = list(spec.previous_attempts)
        result.update(unknown_cost(spec, this_attempt_known=True))
    conditions = _conditions_start(client)
    stage = "sandbox"
    sandbox_used: list[Usage] = []
    grader_used: list[Usage] = []
    try:
        sandboxes = docker_sandboxes(client)  # the one place a trial knows its sandboxes are Docker's
        with agent_session(agent, spec.task, prepared, sandboxes, files.events, spec.limits, spec.trial_id,
                           sandbox_used) as session:
            anchor, agent_result = session.anchor, session.result
            result.update(agent_fields(agent_result), events_anchor=anchor, setup_outputs=list(session.setup_outputs),
                          sandbox={"host_config": session.sandbox.info.host_config if session.sandbox.info else None})
            conditions.update(session.usage)
            stage = "export"  # from here on, everything processed is what the agent left
            final = export_workspace(session.sandbox, limits=ExportLimits(max_bytes=spec.environment.disk_limit_mb << 20))
        if cancel is not None and cancel.is_set():
            raise Cancelled(spec.trial_id)
        events = read_events(files.events)
        final.to_tar(files.final_workspace)
        stage = "grading"
        graded = grade_trial(sandboxes, spec.image_id, spec.task, original, final, events, agent_result, canaries.values,
                             spec.environment.network_policy, spec.candidate.agent, grader_limits, f"tb-{spec.run_id[:12]}-g",
                             judge, spec.trial_id, {RUN_LABEL: spec.run_id, TRIAL_LABEL: spec.trial_id},
                             setup_outputs=session.setup_outputs, usage=grader_used)
        verdict = graded.verdict
        result["grader_sha256"] = tree_sha256(spec.task.grader_folder)
        stage = "artifacts"
        files.diff.write_bytes(graded.diff.text.encode("utf-8", "surrogateescape"))  # names as their bytes
        files.grader_log.write_text(graded.run.log_tail if graded.run else "", errors="backslashreplace")
        result.update(changed_paths=graded.diff.paths, workspace_digest=final.digest())  # made recordable below
    except Cancelled:
        raise
    except (SandboxError, OSError) as exc:
        if cancel is not None and cancel.is_set():  # the interrupt removed the sandbox: not an infrastructure error
            raise Cancelled(spec.trial_id) from exc
        log.warning("trial infrastructure error", trial=spec.trial_id, error=str(exc))
        verdict = infra_verdict("install" if isinstance(exc, InstallFailed) else "sandbox", str(exc))
        events = read_events(files.events) if files.events.exists() else []
        spent = sum(e.get("cost_usd") or 0.0 for e in events if e.get("kind") == "model_call")
        result.update(stop_reason=None, cost_usd=round(spent, 8), events_anchor=None)  # what was spent stays spent
    except Exception as exc:
        if stage == "sandbox":
            raise  # before the agent stopped: trialbox's own failure (the job records it as infra_error(harness))
        log.warning("the agent's output could not be processed", trial=spec.trial_id, stage=stage, error=repr(exc))
        verdict = unprocessable_verdict(stage, exc)
        events = read_events(files.events)
    result["usage"] = usage_record(sandbox_used, grader_used, events)
    latencies = [e["latency_s"] for e in events if e.get("kind") == "model_call"]
    result["models_served"] = sorted({str(e.get("model_served")) for e in events if e.get("kind") == "model_call"})
    conditions.update(load_at_end=os.getloadavg()[0],
                      model_api_latency_s=round(sum(latencies) / len(latencies), 6) if latencies else None)
    result["attempt_cost_usd"] = result.get("cost_usd")
    if spec.prior_cost_usd:
        result["cost_of_retried_attempts_usd"] = spec.prior_cost_usd
        result["cost_usd"] = round((result.get("cost_usd") or 0.0) + spec.prior_cost_usd, 8)
    result.update(verdict=verdict.to_dict(), finished_at=_now(), duration_s=round(time.monotonic() - t0, 3),
                  conditions=conditions)
    result = recordable_data(result)  # the agent's paths and texts as valid Unicode, escaped where they are not
    files.verdict.write_text(json.dumps(result, indent=2, default=str))
    result["events"] = len(events)
    return result

