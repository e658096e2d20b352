"""Where trials run: the interface ``run_experiment`` drives, and the local backend.

A backend starts trials it admits, reports each as it finishes, and stops
everything on an interrupt. The run loop (``job._run_queue``) owns everything
that shapes results — plan order, the cost cap, infrastructure retries,
recording in the store — so that results do not depend on the backend. A
backend returns, for each finished trial, the result document with the trial's
artifacts already in the run folder, or the exception that ended it.

``LocalBackend`` runs trials in threads against this machine's engine, as many
at once as ``Admission`` allows. ``cluster.RayBackend`` runs them as Ray tasks
on the nodes of a Ray cluster.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

import docker

from .engine import RUN_LABEL
from .grading.runner import GraderLimits
from .manifest import LoadedManifest
from .nodes import node_info
from .settings import load_settings
from .store import RunPaths
from .trial import TrialSpec, run_trial

Finished = tuple[TrialSpec, dict[str, Any] | BaseException]


class Backend(Protocol):
    name: str
    slots: int

    def describe(self) -> str: ...

    def admit(self, queue: deque[TrialSpec]) -> TrialSpec | None:
        """Remove from ``queue`` and return the next trial that can start now (None: none can)."""

    def submit(self, spec: TrialSpec) -> None: ...

    @property
    def running(self) -> int: ...

    @property
    def expecting_nodes(self) -> bool:
        """Whether room may appear without a running trial ending (a node joining the cluster)."""

    def node_for(self, spec: TrialSpec) -> dict[str, Any] | None:
        """The node an attempt ran on, for the records the run loop writes itself (harness failures)."""

    def wait(self) -> list[Finished]:
        """Block until at least one running trial ends; each with its result or exception."""

    def interrupt(self) -> list[Finished]:
        """Stop every running trial and remove its containers; returns those that had finished."""

    def close(self) -> None: ...


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
        share = load_settings().host_share
        mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
        env, c = m.environment, m.execution.concurrency
        return cls((os.cpu_count() or 1) * share, mem_mb * share, env.cpu_reservation, env.memory_reservation_mb,
                   None if c == "auto" else int(c))

    @property
    def slots(self) -> int:
        fit = int(min(self.cpus / self.per_trial_cpu, self.memory_mb / self.per_trial_memory_mb) + 1e-9)
        return max(0, min(fit, self.cap) if self.cap else fit)


class LocalBackend:
    """Trials in threads on this machine, against its engine."""

    name = "local"

    def __init__(self, admission: Admission, loaded: LoadedManifest, client: docker.DockerClient, paths: RunPaths,
                 judge) -> None:
        self.admission, self.slots = admission, admission.slots
        self.loaded, self.client, self.paths, self.judge = loaded, client, paths, judge
        self.cancel = threading.Event()
        self.node = node_info(client)
        self.pool = ThreadPoolExecutor(max_workers=max(1, self.slots), thread_name_prefix="trial")
        self.futures: dict[Future, TrialSpec] = {}

    def describe(self) -> str:
        return (f"up to {self.slots} at once on {self.node['name']} ({self.admission.per_trial_cpu} CPU, "
                f"{self.admission.per_trial_memory_mb} MiB each)")

    def admit(self, queue: deque[TrialSpec]) -> TrialSpec | None:
        return queue.popleft() if queue and len(self.futures) < self.slots else None

    def submit(self, spec: TrialSpec) -> None:
        self.futures[self.pool.submit(run_trial, spec, self.loaded, self.client, self.paths,
                                      GraderLimits.for_environment(spec.environment), self.judge, self.cancel,
                                      None, self.node)] = spec

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
        remove_run_containers(self.client, self.paths.key)
        return finished

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def remove_run_containers(client: docker.DockerClient, run_id: str) -> list[str]:
    """End a run's trials at once (their own cleanup then removes disks and volumes); best effort."""
    from .sandbox.gc import remove_containers

    try:
        return remove_containers(client, {"label": f"{RUN_LABEL}={run_id}"}, best_effort=True)
    except Exception:  # noqa: BLE001 - best effort during an interrupt; gc removes the rest
        return []
