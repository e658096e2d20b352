"""Many trials: ``trialbox run`` (``rerun`` holds ``regrade``, ``calibrate`` and ``reproduce``).

A run refuses to start on a drifted lock (every drifted identifier named),
copies the manifest and lock into its run folder, removes leftovers of
crashed runs, runs trials in the plan's order as admission control allows,
and records each trial in the store as soon as it finishes. Running it again on the same run folder continues where it
stopped: finished trials are kept, unfinished ones run again; a changed
manifest or lock is refused.
"""

from __future__ import annotations

import dataclasses

import datetime as dt
import json
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from . import crashpoint
from .agents import BudgetLimits, preflight
from .backends import Backend, choose, open_backend
from .errors import Cancelled, ConfigError, DriftError, LockError
from .events import read_events
from .grading.judge import make_judge
from .hashing import sha256_file
from .checkrecords import with_check_facts
from .display import LiveDisplay, PlainDisplay, Tally
from .lock import check_lock, drift, lock_path, read_lock, resolve_lock, write_lock
from .manifest import CostsConfig, LoadedManifest
from .plan import arrangement, plan
from .settings import load_settings
from .store import RunPaths, Store
from .tasks import Task
from .textsafe import printable
from .log import get_logger, to_file
from .attempts import charged, harness_failure, misconfigured_by, owes_retry, rerun_recorded, resumed, retry_of
from .errors import EngineOutage, HostDiskFull, InfraErrorsAbove
from .hostspace import Folder, SpaceGuard, failed_write, host_full, stop_message, write_atomic
from .missingimages import images_missing
from .outage import OUTAGE_KIND, EngineWatch, as_outage, docker_probe, outage_of, suspect
from .result import TrialResult
from .trial import TrialSpec, write_result

log = get_logger("job")


def ensure_lock(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient) -> dict[str, Any]:
    """The manifest's lock, written when absent; ``DriftError`` when anything drifted."""
    current = resolve_lock(loaded, tasks, client, load_settings())
    if lock_path(loaded.path).exists():
        check_lock(loaded, current)
        return read_lock(lock_path(loaded.path))
    write_lock(loaded, current)
    return current


def open_run(loaded: LoadedManifest, lock: dict[str, Any], out: Path | None) -> RunPaths:
    name = loaded.manifest.experiment.name
    root = out or Path("runs") / f"{name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    paths = RunPaths(root)
    if paths.manifest.exists():
        if sha256_file(paths.manifest) != sha256_file(loaded.path):
            raise LockError(f"{root} was started from another manifest: refusing to resume it with {loaded.path}")
        previous = json.loads(paths.lock.read_text())
        # every identifier, by the rule the manifest's lock is held to: a resumed run never mixes trialbox
        # versions, price tables, engines or tool contracts with the trials it already has
        drifted = drift(previous, lock)
        if drifted:
            raise DriftError([f"{d} (the run's own lock)" for d in drifted])
    else:
        root.mkdir(parents=True, exist_ok=True)
        # each file whole or absent, the manifest (what marks an opened run) last: a folder a full disk stopped
        # before it is opened again from the start
        write_atomic(paths.run_key, uuid.uuid4().hex[:12] + "\n")
        write_atomic(paths.source, json.dumps({"manifest": str(loaded.path)}) + "\n")
        write_atomic(paths.lock, json.dumps(lock, indent=2, sort_keys=True) + "\n")
        write_atomic(paths.manifest, loaded.path.read_bytes())
    return paths


def trial_specs(loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any], run_id: str) -> list[TrialSpec]:
    """The run's trials in the order ``plan`` gives (counterbalanced blocks unless sequential)."""
    m = loaded.manifest
    ex = m.execution
    limits = BudgetLimits(ex.deadline_seconds, ex.max_tool_calls, ex.max_total_tokens, ex.max_cost_usd)
    by_task = {t.id: t for t in with_check_facts(tasks, lock)}
    by_name = {c.name: c for c in m.candidates}
    planned = plan([t.id for t in tasks], [c.name for c in m.candidates], ex.trials_per_task, m.experiment.seed,
                   ex.order)
    def image(task: Task, candidate: str) -> tuple[str, str | None, bool]:
        """The agent's image (its layer on the environment, when it has one), the grader's (the grader's own
        image when it names one, else the environment; None when it is the agent's) and whether it is a layer."""
        environment = lock["images"][task.image_key]["image_id"]
        grader = lock["images"][task.grader_image_key]["image_id"]
        layer = (lock.get("agent_images") or {}).get(candidate, {}).get(task.image_key)
        agent = layer["image_id"] if layer else environment
        return agent, (grader if grader != agent else None), bool(layer)

    return [TrialSpec(p.trial_id, run_id, by_task[p.task], by_name[p.candidate], p.replicate, agent_image,
                      m.environment, task_limits(limits, by_task[p.task]), block=p.block, grader_image_id=grader_image,
                      agent_layered=layered)
            for p in planned for agent_image, grader_image, layered in [image(by_task[p.task], p.candidate)]]


def task_limits(limits: BudgetLimits, task: Task) -> BudgetLimits:
    """The trial's budget: the manifest's, with the task's own deadline when it is shorter."""
    own = task.config.deadline_seconds
    if own is None or own >= limits.deadline_seconds:
        return limits
    return dataclasses.replace(limits, deadline_seconds=own)


MODEL_AGENTS = ("claude", "command")
"""Agents whose trials can spend on a model (a command agent through the proxy); the others cost nothing."""


def run_experiment(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, out: Path | None,
                   say: Callable[[str], None] = print, backend: str | None = None,
                   ray_address: str | None = None, unchecked: bool = False,
                   rerun_infra_errors: bool = False, live: bool = False) -> RunPaths:
    """Run (or continue) the experiment; ``backend``/``ray_address`` override the manifest's.

    A task whose last ``tasks check`` failed is refused; one never checked is refused unless ``unchecked``
    (``TaskSetError``); the run's lock records each task's check status.

    On a run folder that has results, trials recorded as infrastructure errors whose retry budget allows
    (``attempts.rerun_recorded``) run again, and with ``rerun_infra_errors`` every one of them; the new
    attempt's record replaces the old one, kept as history (``Store.record``). On the local backend an engine
    outage pauses the run (``outage``). A run that ends with more trials recorded as infrastructure errors than
    ``execution.max_infra_errors`` raises ``InfraErrorsAbove`` (exit 4) once everything is recorded."""
    from .checkrecords import grader_strengths, require_checked, untouched_timeouts

    m = loaded.manifest
    choice = choose(m.execution, backend, ray_address)  # a bad --backend is refused before anything is written
    preflight(loaded, tasks)  # a missing key, prompt hash or price is an error before any container starts
    missing = [f"{loaded.path}: analysis.suspect_evidence[{i}]: {e}: not a run folder (no results.sqlite)"
               for i, e in enumerate(m.analysis.suspect_evidence)
               if not (loaded.resolve(Path(e)) / "results.sqlite").is_file()]
    if missing:  # evidence is declared before the run: a wrong path is caught now, not by a later report's warning
        raise ConfigError("\n".join(missing))
    judge = make_judge(loaded)
    lock = ensure_lock(loaded, tasks, client)
    lock = {**lock, "task_checks": require_checked(tasks, lock, unchecked),
            "grader_strength": grader_strengths(tasks, lock), "untouched_timeouts": untouched_timeouts(tasks, lock)}
    try:
        paths = open_run(loaded, lock, out)
        store = Store(paths)
    except Exception as exc:
        if host_full(exc):  # the folder cannot even be opened: nothing ran
            raise HostDiskFull(stop_message(failed_write(exc), None, 0, 0, [], 0)) from exc
        raise
    runner: Backend | None = None
    space: SpaceGuard | None = None
    try:
        runner = open_backend(choice, loaded, tasks, lock, paths, judge, client, say)
        # checked before each trial starts; the state folder (its workspace disks) only on this machine's engine
        space = SpaceGuard([Folder("run folder", paths.root)]
                           + ([Folder("state folder", load_settings().state_dir)] if runner.name == "local" else []))
        done = store.done()
        specs = trial_specs(loaded, tasks, lock, paths.key)
        if not paths.plan.exists():
            write_atomic(paths.plan, json.dumps({"order": m.execution.order,
                                             **arrangement([c.name for c in m.candidates], m.experiment.seed),
                                             "trials": [s.trial_id for s in specs]}, indent=1) + "\n")
        recorded = store.trials()
        again = rerun_recorded(recorded, every=rerun_infra_errors, paths=paths)
        kept_infra = [r.id for r in recorded if r.is_infra_error and r.id not in again]
        rerun = {s.trial_id: resumed(s, paths, again[s.trial_id]) for s in specs if s.trial_id in again}
        queue = deque(rerun[s.trial_id] if s.trial_id in rerun else resumed(s, paths)
                      for s in specs if s.trial_id not in done or s.trial_id in rerun)
        kept = [r for r in recorded if r.id not in rerun]  # a trial that runs again counts when it is recorded again
        cost = sum(charged(r, m.execution.max_cost_usd, m.costs) for r in kept)  # a rerun's carries its old spend
        cap = m.execution.max_run_cost_usd
        say(f"run {paths.root}: {len(specs)} trial(s), {len(done) - len(rerun)} already done; backend {runner.name}: "
            f"{runner.describe()}")
        if rerun:
            why = "every infrastructure error (--rerun-infra-errors)" if rerun_infra_errors else \
                "recorded as infrastructure errors with their retry not spent"
            say(f"running again {len(rerun)} trial(s) {why}: " + ", ".join(sorted(rerun)))
        if kept_infra:
            say(f"{len(kept_infra)} trial(s) recorded as infrastructure errors spent their retry and are kept as they "
                f"are ({', '.join(sorted(kept_infra))}); `trialbox run --rerun-infra-errors` runs them again")
        paying = sum(s.candidate.agent in MODEL_AGENTS for s in queue)  # nop, oracle and script call no model
        say(f"worst-case cost: {paying} of {len(queue)} trial(s) call a model, x ${m.execution.max_cost_usd} = "
            f"${paying * m.execution.max_cost_usd:.2f}; run cap: {'none' if cap is None else f'${cap:.2f}'}")
        watch = EngineWatch(docker_probe(client)).start() if runner.name == "local" else None
        tally = Tally.of(len(specs), kept, cost, cap)
        log_file = paths.root / "trialbox.log"
        try:
            with to_file(log_file) as warned:  # no log line between the display's lines
                tally.warnings, tally.log_file = warned, str(log_file)
                display = LiveDisplay(tally) if live else PlainDisplay(say)
                try:
                    stopped, left = _run_queue(queue, len(specs), len(kept), cap, cost, store, runner, paths, say,
                                               m.execution.max_cost_usd, m.costs, sum(not r.accepted for r in kept),
                                               watch=watch, outage_wait_s=m.execution.engine_outage_wait_s,
                                               space=space, display=display, tally=tally)
                finally:
                    display.close()
        finally:
            if watch is not None:
                watch.stop()
            if tally.warnings():
                say(f"{tally.warnings()} warning(s) or error(s) were logged during the run: {log_file}")
        write_atomic(paths.run_record, json.dumps({
            "stopped_by_cost_cap": stopped, "backend": runner.name, "slots": runner.slots,
            "host_share": str(load_settings().host_share) if runner.name == "local" else None}) + "\n")
        if stopped:
            say(f"stopped admitting trials: the run cost reached its cap of ${cap:.2f}")
        if left:
            say(f"{left} trial(s) not run: no node could take them; run the same command again to continue")
        infra = [r for r in store.trials() if r.is_infra_error]
        if infra:
            kinds: dict[str, int] = {}
            for r in infra:
                kinds[str(r.verdict.kind)] = kinds.get(str(r.verdict.kind), 0) + 1
            allowed = m.execution.max_infra_errors
            line = (f"{len(infra)} trial(s) recorded as infrastructure errors ("
                    + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + "): "
                    + ", ".join(printable(r.id) for r in infra[:10]) + (" ..." if len(infra) > 10 else ""))
            gone = images_missing(infra, lock, str(loaded.path), str(paths.root))
            if gone is not None:  # not finished, whatever max_infra_errors allows: those trials wait for the image
                say(line)
                raise gone
            if len(infra) > allowed:
                raise InfraErrorsAbove(f"{line}; more than execution.max_infra_errors ({allowed}). The results are in "
                                       f"{paths.root}; `trialbox run --rerun-infra-errors` on it runs them again")
            say(line + f" (within execution.max_infra_errors: {allowed})")
    except KeyboardInterrupt:
        say("interrupted: finished trials are kept; run the same command again to continue")
        raise
    except HostDiskFull:
        raise
    except Exception as exc:
        if host_full(exc):  # a full disk outside the run loop (a record of the run's own): the same stop
            raise HostDiskFull(stop_message(failed_write(exc), space, 0, 0, [], 0)) from exc
        raise
    finally:
        store.close()
        if runner is not None:
            runner.close()
    return paths


def _record(store: Store, paths: RunPaths, spec: TrialSpec, result: TrialResult) -> None:
    events_file = paths.attempt(spec.trial_id, spec.attempt).events
    store.record(result, read_events(events_file) if events_file.exists() else [])
    crashpoint.reached("recorded")


def _owe(paths: RunPaths, spec: TrialSpec, result: TrialResult) -> None:
    """Mark the retry an attempt earned: owed until recorded, a resumed run finds it here (``attempts.resumed``)."""
    owed = paths.attempt(spec.trial_id, spec.attempt)
    owed.folder.mkdir(parents=True, exist_ok=True)
    write_atomic(owed.retry_owed, json.dumps(result.to_dict(), default=str))  # whole or absent: absent owes nothing
    crashpoint.reached("owed")


def _write_stopped(paths: RunPaths, doc: dict) -> None:
    """``stopped.json``, whole or absent; on a full disk it stays absent (the exit code and message say why)."""
    try:
        write_atomic(paths.stopped, json.dumps(doc, indent=1) + "\n")
    except Exception as exc:
        if not host_full(exc):
            raise


def _outage_attempt(result: TrialResult, watch: EngineWatch, submitted: dict, spec: TrialSpec,
                    paths: RunPaths) -> TrialResult | None:
    """The attempt as ``infra_error(engine_outage)`` (rewritten in its folder) when an engine outage ended it
    (``outage_of``), else None."""
    evidence = outage_of(result, watch, submitted.pop((spec.trial_id, spec.attempt), None))
    if evidence is None:
        return None
    if result.is_infra_error and result.verdict.kind == OUTAGE_KIND:
        return result
    return write_result(as_outage(result, evidence), paths.trial(spec.trial_id, spec.attempt))


def _disk_mb(spec: TrialSpec) -> int:
    """The trial's workspace disk, in MiB (what ``SpaceGuard`` counts for it)."""
    return int(getattr(spec.environment, "disk_limit_mb", 0) or 0)


def _disk_failed_under(space: SpaceGuard, spec: TrialSpec) -> str | None:
    """Why an attempt that ended is not a result, or None: the state folder (its workspace disk, a sparse file
    that grows as the agent writes) has less free than the trial needs, so a write of the agent's may have failed
    there with an error inside the sandbox, as if the agent's own doing."""
    short = space.short(_disk_mb(spec), only="state folder")
    return f"{short}; {spec.trial_id} ended while it was so" if short else None


def _run_queue(queue: deque, total: int, finished: int, cap: float | None, cost: float, store: Store,
             runner: Backend, paths: RunPaths, say: Callable[[str], None],
             max_cost_usd: float = 0.0, costs: CostsConfig | None = None, failed: int = 0,
             watch: EngineWatch | None = None, outage_wait_s: float = 600.0,
             space: SpaceGuard | None = None, display: PlainDisplay | None = None,
             tally: Tally | None = None) -> tuple[bool, int]:
    """Start trials in plan order as the backend admits them; record each as it ends. ``finished``, ``cost`` and
    ``failed`` (not accepted) count what an earlier session of the run already recorded.

    With ``watch`` (the local backend), an engine outage pauses the run (``outage``): no trial starts while the
    engine does not answer; once the running ones have ended, the loop waits up to ``outage_wait_s`` for it,
    removes what the outage left of the run, and goes on; attempts the outage ended run again after it without
    spending their trial's retry. Past the bound it raises ``EngineOutage`` (``stopped.json`` says why).

    With ``space``, a trial starts only while the run's folders have the room it needs (``hostspace``); a folder
    short of it, or an attempt or a record that meets a full file system (``host_full``), stops the run: no trial
    starts, the running ones end, an attempt the full disk ended is neither recorded nor owes a retry (it runs
    again), and it raises ``HostDiskFull`` (exit 74, ``stopped.json`` says why when it can be written).

    Returns whether the cost cap stopped admission, and how many trials were left unrun."""
    stopped = False
    display = display or PlainDisplay(say)
    say = display.note  # every message of the loop goes through the display (a live panel is not torn)
    if tally is None:  # earlier sessions' trials counted as the caller says: not accepted, all as rejected
        tally = Tally(total, done=finished, accepted=finished - failed, rejected=failed, cost=cost, cap=cap)
    misconfigured: str | None = None
    unrecorded: list[str] = []  # attempts that ended on the run's configuration error: listed, never recorded
    not_started = 0
    outage = False
    submitted: dict[tuple[str, int], float] = {}  # when each attempt was submitted (wall clock), for ``outage_of``
    full: str | None = None  # why a full host file system stopped the run
    full_ended: list[str] = []  # the attempts it ended: not recorded, owing nothing (they run again)
    owed: set[str] = set()  # trials whose owed retry the stop left unrun (``retry-owed.json`` keeps it)

    def stop_full(why: str) -> None:
        nonlocal full, queue, not_started
        if full is None:
            full = why
            say(f"stopping: a host file system is (nearly) full: {why}; no trial starts ({runner.running} running)")
        owed.update(s.trial_id for s in queue if s.attempt > 1)
        not_started += sum(s.attempt == 1 for s in queue)
        queue = deque()

    try:
        while queue or runner.running:
            if watch is not None and queue and not outage and misconfigured is None and not watch.answers_now():
                outage = True
                say(f"engine outage: the Docker engine does not answer; no trial starts while it is out "
                    f"({runner.running} running)")
            if outage:
                if runner.running:
                    pass  # the trials in flight end on it first: their attempts are the outage's
                else:
                    watch.wait_back(outage_wait_s, say)
                    outage = False
                    after = getattr(runner, "after_outage", None)
                    if after is not None:
                        left_over = after()
                        if left_over:
                            say(f"removed what the outage left of this run: {', '.join(left_over)}")
                    continue
            while queue and not outage:
                short = space.short(_disk_mb(queue[0])) if space is not None and full is None else None
                if short or full is not None:
                    stop_full(short or full)
                    break
                # a retry replaces a trial already admitted: the cap never strands it half-recorded
                if cap is not None and cost >= cap and not stopped:
                    stopped = True
                    queue = deque(s for s in queue if s.attempt > 1)
                    continue
                spec = runner.admit(queue)
                if spec is None:
                    break
                if watch is not None:
                    submitted[(spec.trial_id, spec.attempt)] = watch.clock()
                runner.submit(spec)
            if not runner.running:
                if queue and runner.expecting_nodes:
                    time.sleep(0.5)
                    continue  # no room yet, but a node is being probed: admit again shortly
                break
            for spec, outcome in runner.wait():
                if isinstance(outcome, TrialResult) and (outcome.id, outcome.attempt) != (spec.trial_id, spec.attempt):
                    outcome = RuntimeError(f"the result names {outcome.id} attempt {outcome.attempt}")
                if isinstance(outcome, BaseException) and host_full(outcome):
                    full_ended.append(spec.trial_id)  # the host's disk: no verdict, no retry; it runs again
                    stop_full(failed_write(outcome))
                    continue
                under = _disk_failed_under(space, spec) if isinstance(outcome, TrialResult) and space else None
                if under:
                    full_ended.append(spec.trial_id)  # whatever its verdict: its workspace disk may have failed
                    stop_full(under)
                    continue
                try:
                    if isinstance(outcome, BaseException):
                        if isinstance(outcome, Cancelled):
                            continue
                        log.error("trial crashed in the harness", trial=spec.trial_id, error=repr(outcome))
                        result = harness_failure(spec, outcome, paths, runner.node_for(spec))
                    else:
                        result = outcome
                    wrong = misconfigured_by(paths, spec)
                    if wrong:  # the setup is wrong, not the agent: no new trial starts, and this one is not a result
                        if misconfigured is None:
                            misconfigured = wrong
                            say(f"stopping: {wrong}")
                            not_started = sum(s.attempt == 1 for s in queue)
                            queue = deque(s for s in queue if s.attempt > 1)
                        unrecorded.append(spec.trial_id)
                        continue
                    if watch is not None:
                        if suspect(result) and not watch.answers_now() and not outage:
                            outage = True
                            say(f"engine outage: the Docker engine does not answer; no trial starts while it is out "
                                f"({runner.running} running)")
                        converted = _outage_attempt(result, watch, submitted, spec, paths)
                        if converted is not None:
                            # whatever the last probe said, nothing starts until the engine answers steadily again
                            outage, result = True, converted
                    if result.is_infra_error and owes_retry(result):
                        if result.verdict.kind == OUTAGE_KIND:
                            say(f"{spec.trial_id}: attempt {spec.attempt} ended by the engine outage; it runs again once "
                                "the engine answers (its retry is not spent)")
                        else:
                            say(f"infrastructure error in {spec.trial_id} ({result.verdict.kind}): retrying it once")
                        _owe(paths, spec, result)
                        queue.appendleft(retry_of(spec, result))
                        continue
                    _record(store, paths, spec, result)
                    finished += 1
                    spent = charged(result, max_cost_usd, costs)
                    cost += spent
                    failed += not result.accepted
                    tally.cost = cost
                    tally.count(result)
                    display.trial(tally, spec.trial_id, result, spent, runner.running, runner.name == "ray")
                except Exception as exc:  # the loop's own records (verdict, retry owed, the store's row)
                    if not host_full(exc):
                        raise
                    full_ended.append(spec.trial_id)  # whole or absent: absent, so it runs again
                    stop_full(failed_write(exc))
    except BaseException as exc:
        # running trials stop before grading; finished ones are still recorded
        for spec, outcome in runner.interrupt():
            if isinstance(outcome, TrialResult) and not misconfigured_by(paths, spec):
                try:
                    if watch is not None:  # an attempt the outage ended is the outage's here too, never a result
                        outcome = _outage_attempt(outcome, watch, submitted, spec, paths) or outcome
                    if outcome.is_infra_error and owes_retry(outcome):
                        _owe(paths, spec, outcome)  # a resumed run runs its retry
                    else:
                        _record(store, paths, spec, outcome)
                except Exception as error:
                    if not host_full(error):
                        raise
                    # a full disk: this one stays absent and runs again; the stop's own error is raised
        if isinstance(exc, EngineOutage):
            unrun = sorted({s.trial_id for s in queue if s.attempt > 1})
            _write_stopped(paths, {"reason": exc.message, "cause": "engine_outage", "unrecorded": unrun,
                                   "not_started": sum(s.attempt == 1 for s in queue)})
        raise
    if full is not None:
        unrecorded = sorted(set(full_ended) | owed)
        message = stop_message(full, space, finished, total, unrecorded, not_started)
        _write_stopped(paths, {"reason": message, "cause": "host_disk_full", "unrecorded": unrecorded,
                               "not_started": not_started})
        raise HostDiskFull(message)
    if misconfigured is not None:
        not_started += len(queue)
        _write_stopped(paths, {"reason": misconfigured, "unrecorded": unrecorded, "not_started": not_started})
        raise ConfigError(f"the run stopped: {misconfigured}\n{len(unrecorded)} trial(s) ended on it and are not "
                          f"recorded ({', '.join(unrecorded)}); {not_started} not started. Fix the setup and run the "
                          "same command again: they run then.")
    paths.stopped.unlink(missing_ok=True)
    return stopped, len(queue)


__all__ = ["run_experiment", "ensure_lock"]


