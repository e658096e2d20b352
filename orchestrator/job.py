"""Many trials: ``trialbox run``, ``regrade`` and ``reproduce``.

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
import os
import shutil
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from .agents import BudgetLimits
from .agents.base import AgentResult
from .agents.budget import StopReason
from .errors import DriftError, LockError
from .events import read_events
from .grading.export import tree_from_tar
from .grading.grade import grade_trial
from .grading.judge import calibrate, make_judge
from .grading.runner import GraderLimits
from .hashing import sha256_file, tree_sha256
from .lock import check_lock, lock_path, read_lock, resolve_lock, write_lock
from .manifest import LoadedManifest
from .plan import arrangement, plan
from .repos import materialize
from .sandbox.gc import collect_garbage
from .settings import load_settings
from .store import RunPaths, Store
from .tasks import Task
from .log import get_logger
from .trial import Cancelled, TrialSpec, run_trial

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
        drifted = [k for k in ("manifest_sha256", "dataset_revision", "grader_commit", "images", "tasks", "prompts",
                               "scripts", "environment", "execution") if previous.get(k) != lock.get(k)]
        if drifted:
            raise DriftError([f"{k}: differs from the lock the run started with" for k in drifted])
    else:
        root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(loaded.path, paths.manifest)
        paths.source.write_text(json.dumps({"manifest": str(loaded.path)}) + "\n")
        paths.lock.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return paths


def trial_specs(loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any], run_id: str) -> list[TrialSpec]:
    """The run's trials in the order ``plan`` gives (counterbalanced blocks unless sequential)."""
    m = loaded.manifest
    ex = m.execution
    limits = BudgetLimits(ex.deadline_seconds, ex.max_tool_calls, ex.max_total_tokens, ex.max_cost_usd)
    by_task = {t.id: t for t in tasks}
    by_name = {c.name: c for c in m.candidates}
    planned = plan([t.id for t in tasks], [c.name for c in m.candidates], ex.trials_per_task, m.experiment.seed,
                   ex.order)
    return [TrialSpec(p.trial_id, run_id, by_task[p.task], by_name[p.candidate], p.replicate,
                      lock["images"][by_task[p.task].config.image]["image_id"], m.environment, limits)
            for p in planned]


@dataclass(frozen=True)
class Admission:
    """How many trials may run at once without oversubscribing the host.

    The host offers ``share`` of its CPUs and memory (``TRIALBOX_HOST_SHARE``,
    default 0.8); every trial reserves the manifest's ``cpu_reservation`` and
    ``memory_reservation_mb``. Trials start only while the sum of the running
    ones' reservations fits; ``concurrency: N`` caps it further.
    """

    cpus: float
    memory_mb: float
    per_trial_cpu: float
    per_trial_memory_mb: float
    cap: int | None

    @classmethod
    def for_manifest(cls, m) -> "Admission":
        share = float(os.environ.get("TRIALBOX_HOST_SHARE", "0.8"))
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
        env, c = m.environment, m.execution.concurrency
        return cls((os.cpu_count() or 1) * share, mem_mb * share, env.cpu_reservation, env.memory_reservation_mb,
                   None if c == "auto" else int(c))

    @property
    def slots(self) -> int:
        fit = int(min(self.cpus / self.per_trial_cpu, self.memory_mb / self.per_trial_memory_mb) + 1e-9)
        return max(0, min(fit, self.cap) if self.cap else fit)


def _progress(say: Callable[[str], None], done: int, total: int, running: int, failed: int, t0: float,
              cost: float, spec: TrialSpec, result: dict[str, Any]) -> None:
    v = result["verdict"]
    label = f"{v['outcome']}({v['kind']})" if v["kind"] else v["outcome"]
    reasons = f" [{', '.join(v['reasons'])}]" if v["reasons"] else ""
    elapsed = time.monotonic() - t0
    eta = elapsed / done * (total - done) if done else 0.0
    say(f"[{done}/{total}] {spec.trial_id:46s} {label}{reasons}  {result['duration_s']:.1f}s ${result.get('cost_usd') or 0:.4f}"
        f"  | running {running}, failed {failed}, elapsed {elapsed:.0f}s, ~{eta:.0f}s left, cost ${cost:.4f}")


def run_experiment(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, out: Path | None,
                   say: Callable[[str], None] = print) -> RunPaths:
    m = loaded.manifest
    judge = make_judge(loaded)  # a missing key is an error before any container starts
    lock = ensure_lock(loaded, tasks, client)
    paths = open_run(loaded, lock, out)
    collect_garbage(client, load_settings())
    admission = Admission.for_manifest(m)
    if admission.slots < 1:
        raise LockError(f"one trial reserves {admission.per_trial_cpu} CPUs and {admission.per_trial_memory_mb} MiB; "
                        f"this host offers {admission.cpus:.1f} CPUs and {admission.memory_mb:.0f} MiB")
    store = Store(paths)
    cancel = threading.Event()
    try:
        done = store.done()
        specs = trial_specs(loaded, tasks, lock, paths.root.name)
        plan_file = paths.root / "plan.json"
        if not plan_file.exists():
            plan_file.write_text(json.dumps({"order": m.execution.order,
                                             **arrangement([c.name for c in m.candidates], m.experiment.seed),
                                             "trials": [s.trial_id for s in specs]}, indent=1) + "\n")
        queue = deque(s for s in specs if s.trial_id not in done)
        cost = sum(r.get("cost_usd") or 0 for r in store.trials())
        cap = m.execution.max_run_cost_usd
        say(f"run {paths.root}: {len(specs)} trial(s), {len(done)} already done; up to {admission.slots} at once "
            f"({admission.per_trial_cpu} CPU, {admission.per_trial_memory_mb} MiB each)")
        say(f"worst-case cost: {len(queue)} trial(s) x ${m.execution.max_cost_usd} = ${len(queue) * m.execution.max_cost_usd:.2f}; "
            f"run cap: {'none' if cap is None else f'${cap:.2f}'}")
        stopped = _execute(queue, len(specs), len(done), admission.slots, cap, cost, store, loaded, client, paths,
                           judge, cancel, say)
        (paths.root / "run.json").write_text(json.dumps({"stopped_by_cost_cap": stopped, "host_share": os.environ.get(
            "TRIALBOX_HOST_SHARE", "0.8"), "slots": admission.slots}) + "\n")
        if stopped:
            say(f"stopped admitting trials: the run cost reached its cap of ${cap:.2f}")
    except KeyboardInterrupt:
        cancel.set()
        say("interrupted: finished trials are kept; run the same command again to continue")
        _remove_run_containers(client, paths.root.name)
        raise
    finally:
        store.close()
    return paths


def _execute(queue: deque, total: int, finished: int, slots: int, cap: float | None, cost: float, store: Store,
             loaded: LoadedManifest, client, paths: RunPaths, judge, cancel: threading.Event,
             say: Callable[[str], None]) -> bool:
    t0, failed, stopped = time.monotonic(), 0, False
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="trial")
    running: dict[Future, TrialSpec] = {}
    try:
        while queue or running:
            while queue and len(running) < slots:
                # a retry replaces a trial already admitted: the cap never strands it half-recorded
                if cap is not None and cost >= cap and queue[0].attempt == 1:
                    stopped = True
                    break
                spec = queue.popleft()
                running[pool.submit(run_trial, spec, loaded, client, paths,
                                    GraderLimits.for_environment(spec.environment), judge, cancel)] = spec
            if not running:
                break
            if stopped:
                queue = deque(s for s in queue if s.attempt > 1)
            finished_now, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished_now:
                spec = running.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # a harness bug in one trial never ends the run unrecorded  # noqa: BLE001
                    if isinstance(exc, Cancelled):
                        continue
                    log.error("trial crashed in the harness", trial=spec.trial_id, error=repr(exc))
                    result = _harness_failure(spec, exc)
                if result["verdict"]["outcome"] == "infra_error" and spec.attempt == 1:
                    say(f"infrastructure error in {spec.trial_id} ({result['verdict']['kind']}): retrying it once")
                    queue.appendleft(dataclasses.replace(spec, attempt=2, retries=1, prior_cost_usd=(
                        spec.prior_cost_usd + (result.get("cost_usd") or 0.0))))
                    continue
                events_file = paths.trial(spec.trial_id, spec.attempt) / "events.jsonl"
                store.record(result, read_events(events_file) if events_file.exists() else [])
                finished += 1
                cost += result.get("cost_usd") or 0
                failed += not result["verdict"]["accepted"]
                _progress(say, finished, total, len(running), failed, t0, cost, spec, result)
    except BaseException:
        cancel.set()  # running trials stop before grading; finished ones below are still recorded
        for future, spec in list(running.items()):
            if future.done() and not future.cancelled() and future.exception() is None:
                result = future.result()
                if result["verdict"]["outcome"] != "infra_error" or spec.attempt > 1:
                    events_file = paths.trial(spec.trial_id, spec.attempt) / "events.jsonl"
                    store.record(result, read_events(events_file) if events_file.exists() else [])
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return stopped


def _harness_failure(spec: TrialSpec, exc: BaseException) -> dict[str, Any]:
    from .grading.verdict import infra_verdict

    return {"id": spec.trial_id, "task": spec.task.id, "candidate": spec.candidate.name, "replicate": spec.replicate,
            "attempt": spec.attempt, "retries": spec.retries, "cost_usd": spec.prior_cost_usd, "duration_s": None,
            "verdict": infra_verdict("harness", repr(exc)[:500]).to_dict()}


def _remove_run_containers(client, run_id: str) -> None:
    """End a run's running trials at once (their own cleanup then removes disks and volumes)."""
    try:
        for c in client.containers.list(all=True, filters={"label": f"org.trialbox.run={run_id}"}):
            c.remove(force=True)
    except Exception:  # noqa: BLE001 - best effort during an interrupt; gc removes the rest
        pass


def regrade_run(paths: RunPaths, loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient,
                say: Callable[[str], None] = print) -> int:
    """Grade every stored final workspace again with the current graders; returns how many verdicts changed."""
    by_id = {t.id: t for t in tasks}
    originals: dict[str, Any] = {}  # the trusted original tree, read once per task
    judge = make_judge(loaded)
    store = Store(paths)
    changed = 0
    try:
        for row in store.trials():
            task = by_id[row["task"]]
            folder = paths.trial(row["id"], row["attempt"])
            if row["verdict"]["outcome"] == "infra_error" and not (folder / "final-workspace.tar").exists():
                continue
            final = tree_from_tar(folder / "final-workspace.tar")
            if task.id not in originals:
                originals[task.id] = tree_from_tar(materialize(task, load_settings().repos_dir).tar_path)
            original = originals[task.id]
            events = read_events(folder / "events.jsonl")
            agent = _agent_result(row)
            canaries = json.loads((folder / "canaries.json").read_text())
            cand = next(c for c in loaded.manifest.candidates if c.name == row["candidate"])
            graded = grade_trial(client, row["image_id"], task, original, final, events, agent, canaries,
                                 loaded.manifest.environment.network_policy, cand.agent,
                                 GraderLimits.for_environment(loaded.manifest.environment),
                                 f"tb-{paths.root.name[:12]}-rg", judge, row["id"])
            verdict = graded.verdict.to_dict()
            verdict["grader_version"] += f"+{tree_sha256(task.grader_folder)[:12]}"
            if verdict["outcome"] != row["verdict"]["outcome"]:
                changed += 1
            store.regrade(row["id"], verdict)
            say(f"{row['id']:50s} {row['verdict']['outcome']} -> {verdict['outcome']}  ({verdict['grader_version']})")
    finally:
        store.close()
    return changed


def _agent_result(row: dict[str, Any]) -> AgentResult:
    tokens = row.get("tokens") or {}
    return AgentResult(StopReason(row["stop_reason"]), row.get("stop_detail", ""), row.get("summary"),
                       bool(row.get("abstained")), row.get("tool_calls", 0), row.get("model_calls", 0),
                       tokens.get("input", 0), tokens.get("output", 0), tokens.get("cache_read", 0),
                       tokens.get("cache_write", 0), row.get("cost_usd") or 0.0, row.get("interventions", 0), 0.0)


__all__ = ["run_experiment", "regrade_run", "ensure_lock"]


def calibrate_run(paths: RunPaths, labels: dict[str, str]) -> dict[str, Any]:
    """The judge's answers in a run against human labels (trial id → pass | fail)."""
    store = Store(paths)
    try:
        judged = {}
        for row in store.trials():
            for c in row["verdict"]["criteria"]:
                if c["name"] == "semantic_judge":
                    judged[row["id"]] = c["evidence"]["verdict"]
    finally:
        store.close()
    return calibrate(judged, labels)


def reproduce_run(paths: RunPaths, loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, out: Path,
                  say: Callable[[str], None] = print) -> list[str]:
    """Run the experiment again from the run's lock into ``out``; ``DriftError`` lists anything that drifted.

    Returns the trials whose verdict differs from the original run's."""
    from .lock import drift

    locked = json.loads(paths.lock.read_text())
    current = resolve_lock(loaded, tasks, client, load_settings())
    drifted = drift(locked, current)
    if drifted:
        raise DriftError(drifted)
    if lock_path(loaded.path).exists():
        lock_path(loaded.path).unlink()  # the run's lock is the reference: write it as the manifest's lock
    lock_path(loaded.path).write_text(json.dumps(locked, indent=2, sort_keys=True) + "\n")
    run_experiment(loaded, tasks, client, out, say)
    before, after = Store(paths), Store(RunPaths(out))
    try:
        old = {r["id"]: r["verdict"] for r in before.trials()}
        new = {r["id"]: r["verdict"] for r in after.trials()}
    finally:
        before.close()
        after.close()
    return sorted(t for t in old.keys() | new.keys()
                  if (old.get(t) or {}).get("outcome") != (new.get(t) or {}).get("outcome")
                  or (old.get(t) or {}).get("reasons") != (new.get(t) or {}).get("reasons"))
