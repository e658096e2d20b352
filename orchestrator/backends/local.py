"""The local backend: trials in threads on this machine, against its engine, as many at once as
``Admission`` allows; while they run, the next ones in plan order are prepared up to their sandbox's start
(``ahead.Ahead``: ``TRIALBOX_PREPARE_AHEAD`` of them, at most as many as the slots)."""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import docker
import docker.errors

from ..ahead import Ahead, discard_readied
from ..engine import RUN_LABEL
from ..grading.runner import GraderLimits
from ..manifest import LoadedManifest
from ..sandbox.docker import docker_host
from ..settings import load_settings
from ..store import RunPaths
from ..trial import TrialSpec, run_trial
from .base import Admission, Finished, remove_run_containers


class LocalBackend:
    """Trials in threads on this machine, against its engine."""

    name = "local"

    def __init__(self, admission: Admission, loaded: LoadedManifest, client: docker.DockerClient, paths: RunPaths,
                 judge) -> None:
        self.admission, self.slots = admission, admission.slots
        self.loaded, self.client, self.paths, self.judge = loaded, client, paths, judge
        self.cancel = threading.Event()
        self.host = docker_host(client)
        self.node = self.host.node
        self.pool = ThreadPoolExecutor(max_workers=max(1, self.slots), thread_name_prefix="trial")
        self.futures: dict[Future, TrialSpec] = {}
        self.ahead = Ahead(loaded, self.host, min(load_settings().prepare_ahead, self.slots))

    def describe(self) -> str:
        return (f"up to {self.slots} at once on {self.node['name']} ({self.admission.per_trial_cpu} CPU, "
                f"{self.admission.per_trial_memory_mb} MiB each)")

    def admit(self, queue: deque[TrialSpec]) -> TrialSpec | None:
        if queue and len(self.futures) < self.slots:
            return queue.popleft()
        self.ahead.keep(queue)  # no room: the next ones get ready while the running ones work
        return None

    def submit(self, spec: TrialSpec) -> None:
        readied = self.ahead.claim(spec)
        future = self.pool.submit(run_trial, spec, self.loaded, self.host, self.paths,
                                  GraderLimits.for_environment(spec.environment), self.judge, self.cancel,
                                  readied=readied)
        if readied is not None:  # a trial cancelled before it ran never takes what was made for it
            future.add_done_callback(lambda f: discard_readied(readied) if f.cancelled() else None)
        self.futures[future] = spec

    @property
    def running(self) -> int:
        return len(self.futures)

    expecting_nodes = False

    def node_for(self, spec: TrialSpec) -> dict[str, Any] | None:
        return self.node

    def wait(self) -> list[Finished]:
        done, _ = wait(self.futures, return_when=FIRST_COMPLETED)
        return [self._finished(f) for f in done]

    def _finished(self, future: Future) -> Finished:
        spec = self.futures.pop(future)
        exc = future.exception()
        return (spec, exc if exc is not None else future.result())

    def interrupt(self) -> list[Finished]:
        self.cancel.set()  # running trials stop before grading
        finished = [self._finished(f) for f in list(self.futures) if f.done() and not f.cancelled()]
        self.pool.shutdown(wait=False, cancel_futures=True)  # trials not started never will be
        self.ahead.close()  # what was made ahead, removed (disks and volumes too)
        remove_run_containers(self.client, self.paths.key)
        return finished

    def after_outage(self) -> list[str]:
        """After an engine outage, with none of the run's trials running: discard what was made ahead (made
        before the outage, or half made during it) and remove what the outage left of the run on the engine
        (containers the engine's stop killed and the trials could not remove, their volumes); returns them."""
        self.ahead.keep(deque())
        removed = remove_run_containers(self.client, self.paths.key)
        try:
            for v in self.client.volumes.list(filters={"label": f"{RUN_LABEL}={self.paths.key}"}):
                try:
                    v.remove(force=True)
                    removed.append(v.name)
                except docker.errors.APIError:
                    pass  # still in use by a container being removed: gc removes it
        except docker.errors.DockerException:
            pass
        return removed

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.ahead.close()
