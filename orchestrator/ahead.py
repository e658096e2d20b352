"""The next trials prepared while the running ones work: everything of a trial up to its sandbox's start, made
before its turn, so that its turn begins with the start.

``ready_trial`` does, for one trial, what the trial would otherwise do first on its own path: the agent made
(a command agent's model proxy started, its socket folder ready), the repository materialised and its tree
read, fresh canaries, the sandbox **created** from the pinned image with the trial's limits and its workspace
disk seeded (nothing runs in it: it is not started), and the grader's container created the same way. The
result, a ``Readied``, is used once by that trial only (``trial.run_trial``'s ``readied``): still one fresh
container per trial, never reused, started when the trial's turn comes.

``Ahead`` is the local backend's preparer: one background thread, at most ``depth`` trials ready at a time,
always the next ones in plan order (``keep``: those no longer next, because a retry went first or the cost cap
emptied the queue, are discarded). What a readied trial holds is a created container (no process, so no CPU or
memory: admission counts reservations of running trials, and a readied trial starts only once admitted), a
sparse workspace disk holding the repository, a loop device, and for a command agent a proxy thread.

Everything made ahead is removed when it is not used: on discard, at the end of the run (``close``), on Ctrl-C
(``close`` from the backend's interrupt; the engine's containers of the run are removed by label as well) and
after a crash by ``trialbox gc`` (its containers, volumes and disks carry the owner label like any sandbox's).

**Drift.** A readied trial records what it was made from and could change on disk before its turn (``inputs``:
the task folder's and the repository's identity, the candidate's own file); when the trial takes it, the same
inputs are resolved again and any that differ discard it, named in the log, and the trial prepares itself from
the current inputs as if nothing had been made ahead. A readied sandbox has names of its own (a suffix), so a
discarded one still being made never meets the one its trial then makes itself.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .agents import make_agent
from .agents.session import sandbox_for
from .grading.grade import PreparedGrader
from .grading.runner import GraderLimits
from .grading.specs import grader_spec
from .log import get_logger
from .manifest import LoadedManifest
from .prepare import Prepared, grader_labels, prepare, sandbox_spec
from .repos import source_identity
from .sandbox.base import Sandbox, SandboxHost

log = get_logger("ahead")


@dataclass
class Readied:
    """One trial's part before its sandbox starts (``ready_trial``): used once, by that trial, or discarded."""

    key: tuple[str, int]
    """The trial id and attempt it was made for."""
    agent: Any
    prepared: Prepared
    sandbox: Sandbox
    """Created, not started."""
    grader: PreparedGrader
    inputs: dict[str, str]
    """What it was made from (``trial_inputs``)."""
    used: bool = False

    def discard(self) -> None:
        """Remove everything it made (its sandbox, its grader's container, the agent's proxy); idempotent."""
        if self.used:
            return
        self.used = True
        try:
            self.grader.discard()
        finally:
            try:
                self.sandbox.remove()
            finally:
                if hasattr(self.agent, "close"):
                    self.agent.close()


def trial_inputs(spec, loaded: LoadedManifest) -> dict[str, str]:
    """What a readied trial was made from and could change on disk before its turn, named as the run's lock
    names it: the task folder's and the repository's identity (the workspace disk is seeded from it) and the
    candidate's own file (a script, a system prompt: the agent is made from it). The images and the sandbox's
    limits come from the trial's spec, fixed when the run was planned (from its lock): not inputs that drift."""
    from .hashing import sha256_file, tree_sha256

    c = spec.candidate
    own = next((getattr(c, f) for f in ("script", "system_prompt") if getattr(c, f, None) is not None), None)
    return {"task_sha256": tree_sha256(spec.task.folder), "repo_source": source_identity(spec.task),
            "candidate_file": sha256_file(loaded.resolve(own)) if own is not None else ""}


def ready_trial(spec, loaded: LoadedManifest, host: SandboxHost, grader_limits: GraderLimits,
                env: Mapping[str, str] | None = None) -> Readied:
    """Everything of ``spec``'s trial up to its sandbox's start (see the module docstring); raises whatever the
    trial itself would raise on that path (it then makes everything itself, and raises it there)."""

    inputs = trial_inputs(spec, loaded)  # before anything is made from them
    agent = make_agent(spec.candidate, spec.task, loaded, env)
    made: list[Any] = []
    try:
        base = sandbox_spec(spec)  # its own names: a discarded preparation still being made never meets the
        prepared = prepare(spec.task, dataclasses.replace(  # trial's own sandbox, made under the trial's names
            base, name=f"{base.name[:112]}-r{uuid.uuid4().hex[:6]}"), with_canaries=True)
        sandbox = sandbox_for(agent, prepared, host.sandboxes)
        made.append(sandbox)
        sandbox.create()
        name, labels = grader_labels(spec)
        grader = PreparedGrader(host.sandboxes, grader_spec(spec.grader_image, spec.task, grader_limits,
                                                            f"{name}-grader", labels))
        made.append(grader)
        grader.wait()
        return Readied((spec.trial_id, spec.attempt), agent, prepared, sandbox, grader, inputs)
    except BaseException:
        for thing in reversed(made):
            try:
                thing.discard() if isinstance(thing, PreparedGrader) else thing.remove()
            except Exception:  # noqa: BLE001 - the first error is the one to raise; gc removes the rest
                pass
        if hasattr(agent, "close"):
            agent.close()
        raise


def take(readied: "Future[Readied] | None", spec, loaded: LoadedManifest) -> Readied | None:
    """The readied trial ``spec`` may use: None when none was made, its preparation failed, or its inputs
    drifted (then it is discarded, and what drifted is named in the log)."""
    if readied is None or readied.cancel():  # not begun: the trial prepares itself rather than wait behind others
        return None
    try:
        got = readied.result()
    except BaseException as exc:  # noqa: BLE001 - the trial prepares itself and meets the error there
        log.debug("the trial made ahead could not be prepared", trial=spec.trial_id, error=repr(exc))
        return None
    if got.key != (spec.trial_id, spec.attempt) or got.used:
        got.discard()
        return None
    try:
        now = trial_inputs(spec, loaded)
    except BaseException:
        got.discard()
        raise
    drifted = sorted(k for k in now if now[k] != got.inputs.get(k))
    if drifted:
        log.warning("discarded the sandbox prepared ahead: its inputs changed", trial=spec.trial_id,
                    drifted=drifted)
        got.discard()
        return None
    got.used = True
    return got


def discard_readied(readied: "Future[Readied] | None", ready: Readied | None = None) -> None:
    """Remove what was made ahead for a trial that ended before its stages took it (``ready`` once taken)."""
    if ready is not None:
        ready.used = False
        ready.discard()
    elif readied is not None and not readied.cancel():
        readied.add_done_callback(_remove_made)


def _remove_made(f: Future) -> None:
    if f.cancelled() or f.exception() is not None:
        return
    try:
        f.result().discard()
    except Exception as exc:  # noqa: BLE001 - gc removes what is left
        log.warning("a sandbox prepared ahead could not be removed", error=repr(exc))


class Ahead:
    """The next trials' preparation, in one background thread (see the module docstring)."""

    def __init__(self, loaded: LoadedManifest, host: SandboxHost, depth: int,
                 env: Mapping[str, str] | None = None) -> None:
        self.loaded, self.host, self.depth, self.env = loaded, host, depth, env
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead")
        self.ready: dict[tuple[str, int], Future] = {}
        self.lock = threading.Lock()
        self.closed = False

    def keep(self, queue: deque) -> None:
        """Prepare the first ``depth`` trials of ``queue`` that are not yet; discard what is no longer among them."""
        if self.depth <= 0:
            return
        wanted = [(s.trial_id, s.attempt) for s in list(queue)[:self.depth]]
        with self.lock:
            if self.closed:
                return
            for key in [k for k in self.ready if k not in wanted]:
                discard_readied(self.ready.pop(key))
            for spec in list(queue)[:self.depth]:
                key = (spec.trial_id, spec.attempt)
                if key not in self.ready:
                    self.ready[key] = self.pool.submit(self._ready, spec)

    def _ready(self, spec) -> Readied:
        import structlog

        with structlog.contextvars.bound_contextvars(trial_id=spec.trial_id):
            return ready_trial(spec, self.loaded, self.host, GraderLimits.for_environment(spec.environment),
                               self.env)

    def claim(self, spec) -> "Future[Readied] | None":
        """The preparation made for ``spec`` (the trial takes it, ``take``), or None; no longer the preparer's."""
        with self.lock:
            return self.ready.pop((spec.trial_id, spec.attempt), None)

    def close(self) -> None:
        """Discard everything made ahead and not claimed, waiting until it is removed."""
        with self.lock:
            self.closed = True
            pending = list(self.ready.values())
            self.ready.clear()
        for future in pending:
            discard_readied(future)
        self.pool.shutdown(wait=True, cancel_futures=True)
