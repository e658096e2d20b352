"""One trial end to end, as stages, each in the module named for it and each taking and returning a type:

1. **prepare** (``prepare.prepare``): ``TrialSpec`` → ``Prepared``: the repository at its commit once, the
   sandbox spec fully resolved, the trial's canaries;
2. **agent** (``agents.session.agent_session``): the sandbox from the ``SandboxHost``'s factory, the agent run in
   it through the tool contract, every call recorded on the host;
3. **stop** (``stops``): how the agent's run ended, typed (``AgentResult`` → ``resultparts.AgentRun``);
4. **export** (``grading.export.export_workspace``): the stopped sandbox's workspace as data (``grading.tree.Tree``);
5. **grade** (``grading.grade.grade_trial``, which ``regrade`` and ``tasks check`` call too): the ``Verdict``;
6. **record** (``write_result``): the ``result.TrialResult`` in the attempt's folder; the run loop records it in
   the store.

The trial id is bound to the log context for the whole trial, grading included.
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
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from .agents import BudgetLimits, make_agent
from .ahead import discard_readied, take
from .stops import Outcome
from .agents.session import agent_session
from .errors import Cancelled, ImageNotFound, InstallFailed, SandboxError
from .events import read_events
from .grading.export import export_workspace
from .grading.tree import ExportLimits
from .grading.grade import PreparedGrader, grade_trial
from .grading.judge import Judge
from .grading.runner import GraderLimits
from .grading.specs import grader_spec
from .grading.criteria import Criterion
from .grading.verdict import Verdict, infra_verdict
from .hashing import tree_sha256
from .hostspace import host_full, write_atomic
from .log import get_logger
from .manifest import EnvironmentConfig, LoadedManifest
from .missingimages import IMAGE_MISSING, refusal
from .prepare import Prepared, grader_labels, prepare, sandbox_spec
from .result import TrialResult
from .resultparts import AgentRun, AttemptUsage, Conditions, PreviousAttempt
from .stageclock import lap, timing
from .sandbox.base import SandboxHost
from .sandbox.meter import Usage
from .store import AttemptPaths, RunPaths
from .tasks import Task
from .textsafe import recordable

if TYPE_CHECKING:
    from .ahead import Readied

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
    previous_attempts: tuple[PreviousAttempt, ...] = ()
    """The attempts this one replaces (their cost None when lost with their node)."""
    grader_image_id: str | None = None
    """The grader's image when the agent's differs: the environment's (under an agent layer), or the grader's own
    (``GraderConfig.image``)."""
    agent_layered: bool | None = None
    """The agent's image is its layer on the environment (``agent_images`` of the lock); None: not said (then a
    grader image of another ID, on a task whose grader has no image of its own, means a layer)."""

    @property
    def grader_image(self) -> str:
        return self.grader_image_id or self.image_id


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


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
    return _spent(events)


def _spent(events: list[dict[str, Any]]) -> float:
    return round(sum(e.get("cost_usd") or 0.0 for e in events if e.get("kind") == "model_call"), 8)


def write_result(result: TrialResult, folder) -> TrialResult:
    """The record stage: the result in the attempt's folder (``verdict.json``), made recordable."""
    result = result.recordable()
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(AttemptPaths(folder).verdict, json.dumps(result.to_dict(), indent=2, default=str))  # whole or absent
    return result


def ended_attempt(spec: TrialSpec, verdict: Verdict, attempt_cost: float | None, node: dict[str, Any] | None,
                  folder, cost_note: str | None = None) -> TrialResult:
    """The result of an attempt that ended without running to its verdict (trialbox failed, its node was
    lost), written to the attempt's folder; ``attempt_cost`` None when its spend is unknown."""
    return write_result(TrialResult.ended(spec, verdict, attempt_cost, node, cost_note), folder)


def unprocessable_verdict(stage: str, exc: BaseException, more: Mapping[str, Any] | None = None) -> Verdict:
    """Where a fault lies decides its outcome: an error raised while trialbox processed what the agent left
    (its workspace, its events) is the agent's, a rejection, never an infrastructure error with a free retry.
    The evidence names the exception, so a defect of trialbox's own shows as what it is."""
    crit = Criterion("processable_output", True, False,
                     {"stage": stage, "error": recordable(f"{type(exc).__name__}: {exc}")[:1000], **(more or {})})
    return Verdict(Outcome.REJECTED, "unprocessable_output", False, ["processable_output"], [crit])


@dataclass
class _Gathered:
    """What an attempt gathered on its way through the stages (the result is made from it at the end)."""

    stage: str = "sandbox"
    agent: AgentRun | None = None
    agent_cost: float | None = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    sandbox_used: list[Usage] = field(default_factory=list)
    grader_used: list[Usage] = field(default_factory=list)
    recorded: dict[str, Any] = field(default_factory=dict)
    """The result's other fields each stage adds (the events anchor, the setup outputs, the changed paths…)."""
    conditions: dict[str, Any] = field(default_factory=dict)


def run_trial(spec: TrialSpec, loaded: LoadedManifest, host: SandboxHost, paths: RunPaths,
              grader_limits: GraderLimits = GraderLimits(), judge: Judge | None = None,
              cancel: threading.Event | None = None, env: Mapping[str, str] | None = None,
              readied: "Future[Readied] | None" = None) -> TrialResult:
    """Run one trial on ``host`` and write its artifacts; returns its result (also stored as verdict.json).
    Every log line of it, grading included, carries its trial id.

    ``cancel`` (set on Ctrl-C) stops the trial before grading: it raises ``Cancelled``. ``env`` is where the
    agent's API key and base URL come from (default: this process's environment). ``readied``: this trial's
    part up to its sandbox's start, made while earlier trials ran (``ahead``); used when its inputs have not
    changed since, otherwise the trial makes it itself."""
    with structlog.contextvars.bound_contextvars(trial_id=spec.trial_id), timing() as clock:
        ready, handed = None, False
        try:
            files = paths.attempt(spec.trial_id, spec.attempt)
            files.folder.mkdir(parents=True, exist_ok=True)
            for stale in files.folder.iterdir():  # a crashed earlier run of the same attempt left these: never mixed in
                stale.unlink()
            started, t0 = _now(), time.monotonic()
            ready, readied = take(readied, spec, loaded), None
            if ready is not None:
                agent, prepared = ready.agent, ready.prepared
            else:
                agent = make_agent(spec.candidate, spec.task, loaded, env)
                prepared = prepare(spec.task, sandbox_spec(spec), with_canaries=True)  # the repository once; the spec resolved
            write_atomic(files.canaries, json.dumps(prepared.canaries.values))  # host-only: kept for regrading
            lap("prepare")
            t = time.monotonic()
            host.ping()
            got = _Gathered(conditions={"load_at_start": os.getloadavg()[0],
                                        "docker_api_latency_s": round(time.monotonic() - t, 6),
                                        "prepared_ahead": ready is not None})
            handed = True  # from here on the stages remove what was made ahead, as what they made themselves
            verdict, ended = _stages(spec, agent, prepared, host, files, grader_limits, judge, cancel, got, ready)
        finally:
            if not handed:
                discard_readied(readied, ready)
        latencies = [e["latency_s"] for e in got.events if e.get("kind") == "model_call"]
        got.conditions.update(load_at_end=os.getloadavg()[0],
                              model_api_latency_s=round(sum(latencies) / len(latencies), 6) if latencies else None)
        result = ended(spec, verdict, got.agent, got.agent_cost, node=host.node, started_at=started,
                       finished_at=_now(), duration_s=round(time.monotonic() - t0, 3),
                       usage=AttemptUsage.measured(got.sandbox_used, got.grader_used, got.events),
                       conditions=Conditions.from_dict(got.conditions),
                       models_served=tuple(sorted({str(e.get("model_served")) for e in got.events
                                                   if e.get("kind") == "model_call"})),
                       stage_seconds=(lap("record"), clock.rounded())[1], **got.recorded)
        return write_result(result, files.folder).with_events(len(got.events))


def _stages(spec: TrialSpec, agent, prepared: Prepared, host: SandboxHost, files: AttemptPaths,
            grader_limits: GraderLimits, judge: Judge | None, cancel: threading.Event | None, got: _Gathered,
            ready: "Readied | None" = None):
    """agent → stop → export → grade; returns the verdict and the constructor of the way the trial ended.

    Where a fault lies decides how: the engine failing is an infrastructure error; anything raised while
    trialbox processed what the agent left is the agent's (an unprocessable output); anything raised before
    the agent stopped is trialbox's own, and propagates (the run loop records it as ``infra_error(harness)``)."""
    try:
        return _agent_to_verdict(spec, agent, prepared, host, files, grader_limits, judge, cancel, got, ready), \
            TrialResult.graded
    except Cancelled:
        raise
    except ImageNotFound as exc:  # removed from the engine: refused by name, never the agent's rejection
        if cancel is not None and cancel.is_set():
            raise Cancelled(spec.trial_id) from exc
        log.warning("trial refused: its image is not on the engine", trial=spec.trial_id, image=exc.image)
        got.events = read_events(files.events) if files.events.exists() else []
        got.agent_cost = _spent(got.events)  # what was spent stays spent
        return infra_verdict(IMAGE_MISSING, refusal(spec, exc.image, got.stage)), TrialResult.failed
    except (SandboxError, OSError) as exc:
        if cancel is not None and cancel.is_set():  # the interrupt removed the sandbox: not an infrastructure error
            raise Cancelled(spec.trial_id) from exc
        if host_full(exc):  # the host's disk, not the sandbox: no verdict, no retry; the run loop stops the run
            raise
        log.warning("trial infrastructure error", trial=spec.trial_id, error=str(exc))
        got.events = read_events(files.events) if files.events.exists() else []
        got.agent_cost = _spent(got.events)  # what was spent stays spent
        return infra_verdict("install" if isinstance(exc, InstallFailed) else "sandbox", str(exc)), TrialResult.failed
    except Exception as exc:
        if got.stage == "sandbox" or host_full(exc):
            raise  # before the agent stopped: trialbox's own failure; or the host's full disk, never the agent's
        log.warning("the agent's output could not be processed", trial=spec.trial_id, stage=got.stage, error=repr(exc))
        got.events = read_events(files.events)
        first = got.conditions.get("processing_repeated")  # this stage was done twice: the error came again
        twice = first is not None and first.startswith(f"{got.stage}:")
        return unprocessable_verdict(got.stage, exc, {"first_error": first} if twice else None), TrialResult.graded


def _agent_to_verdict(spec: TrialSpec, agent, prepared: Prepared, host: SandboxHost, files: AttemptPaths,
                      grader_limits: GraderLimits, judge: Judge | None, cancel: threading.Event | None,
                      got: _Gathered, ready: "Readied | None" = None) -> Verdict:
    name, labels = grader_labels(spec)
    # the grader's container: made with the trial ahead, or created while the agent works
    ahead: list[PreparedGrader] = [ready.grader] if ready is not None else []

    def prepare_grader() -> None:
        if not ahead:
            ahead.append(PreparedGrader(host.sandboxes, grader_spec(spec.grader_image, spec.task, grader_limits,
                                                                f"{name}-grader", labels)))
    try:
        return _through_grading(spec, agent, prepared, host, files, grader_limits, judge, cancel, got, name, labels,
                                ahead, prepare_grader, ready.sandbox if ready is not None else None)
    finally:
        for grader in ahead:
            grader.discard()  # a no-op once grading took it


def _again_if_passing(got: _Gathered, step):
    """The export of what the agent left, done once more on the same input when it raises an error that is neither
    the engine's nor an interrupt: such an error is the agent's (an unprocessable output) only when it comes again.
    One that does not was trialbox's, passing (a fault of the host's moment), and a rejection for it would be a
    wrong verdict; the repeat's result stands, and the first error is kept in the trial's conditions
    (``processing_repeated``). Only the export: no code of the agent's runs then (its sandbox is stopped), so it
    cannot choose the error. Grading is never repeated so: the agent's code runs in the grader and could raise an
    error there at will, to be graded a second time with other draws (an eleventh review's finding)."""
    try:
        return step()
    except (Cancelled, SandboxError, OSError, ImageNotFound):
        raise
    except Exception as exc:  # noqa: BLE001 - which errors come again is what this finds out
        if host_full(exc):
            raise  # the host's full disk: it would come again, and it is not the agent's
        first = recordable(f"{got.stage}: {type(exc).__name__}: {exc}")[:1000]
        log.warning("processing the agent's output failed; once more on the same input", stage=got.stage,
                    error=repr(exc)[:1000])
        got.conditions["processing_repeated"] = first
        return step()


def _through_grading(spec: TrialSpec, agent, prepared: Prepared, host: SandboxHost, files: AttemptPaths,
                     grader_limits: GraderLimits, judge: Judge | None, cancel: threading.Event | None,
                     got: _Gathered, name: str, labels: dict[str, str], ahead: list, prepare_grader,
                     sandbox=None) -> Verdict:
    with agent_session(agent, spec.task, prepared, host.sandboxes, files.events, spec.limits, spec.trial_id,
                       got.sandbox_used, on_ready=prepare_grader, sandbox=sandbox) as session:
        stopped = session.result  # the stop stage: how the agent's run ended, typed
        got.agent, got.agent_cost = AgentRun.of(stopped), stopped.cost_usd
        got.recorded.update(events_anchor=session.anchor, setup_outputs=tuple(session.setup_outputs),
                            sandbox={"host_config": session.sandbox.info.host_config if session.sandbox.info else None})
        got.conditions.update(session.usage)
        got.stage = "export"  # from here on, everything processed is what the agent left
        final = _again_if_passing(got, lambda: export_workspace(
            session.sandbox, spec.task.config.workdir, limits=ExportLimits(max_bytes=spec.environment.disk_limit_mb << 20),
            listing=session.listing))
        lap("export")
    if cancel is not None and cancel.is_set():
        raise Cancelled(spec.trial_id)
    got.events = read_events(files.events)
    final.to_tar(files.final_workspace)
    lap("export")
    got.stage = "grading"
    # never repeated: the agent's code runs in the grader and could raise an error at will to be graded again (an
    # eleventh review's finding); what that code can write is read as data and judged (an integrity problem)
    graded = grade_trial(
        host.sandboxes, spec.grader_image, spec.task, prepared.original, final, got.events, stopped,
        prepared.canaries.values, spec.environment.network_policy, spec.candidate.agent, grader_limits, name, judge,
        spec.trial_id, labels, setup_outputs=session.setup_outputs, usage=got.grader_used,
        tool_map=getattr(spec.candidate, "tool_map", None), text_edits=getattr(spec.candidate, "text_edits", "none"),
        owned_paths=tuple(getattr(spec.candidate, "owned_paths", ()) or ()),
        prepared=ahead[0] if ahead else None)
    got.recorded["grader_sha256"] = tree_sha256(spec.task.grader_folder)
    got.stage = "artifacts"
    write_atomic(files.diff, graded.diff.text.encode("utf-8", "surrogateescape"))  # names as their bytes
    write_atomic(files.grader_log, graded.run.log_tail if graded.run else "", errors="backslashreplace")
    got.recorded.update(changed_paths=tuple(graded.diff.paths), workspace_digest=final.digest())
    return graded.verdict
