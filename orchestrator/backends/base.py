"""What every backend is: the interface the run loop drives, and the one rule of how many trials fit.

A backend starts trials it admits, reports each as it finishes, and stops
everything on an interrupt. The run loop (``job._run_queue``) owns everything
that shapes results (plan order, the cost cap, infrastructure retries,
recording in the store) so that results do not depend on the backend. A
backend returns, for each finished trial, its ``TrialResult`` with the trial's
artifacts already in the run folder, or the exception that ended it.
"""

from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import docker

from ..engine import RUN_LABEL
from ..result import TrialResult
from ..settings import load_settings
from ..trial import TrialSpec

Finished = tuple[TrialSpec, TrialResult | BaseException]


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


def fit(cpus: float, memory_mb: float, per_trial_cpu: float, per_trial_memory_mb: float) -> int:
    """How many trials' reservations fit in ``cpus`` and ``memory_mb``: the one fitting rule, for this host
    and for every node of a cluster alike (a reservation of 0 never limits)."""
    by_cpu = cpus / per_trial_cpu if per_trial_cpu > 0 else math.inf
    by_mem = memory_mb / per_trial_memory_mb if per_trial_memory_mb > 0 else math.inf
    return int(min(by_cpu, by_mem) + 1e-9)


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
        n = fit(self.cpus, self.memory_mb, self.per_trial_cpu, self.per_trial_memory_mb)
        return max(0, min(n, self.cap) if self.cap else n)


def remove_run_containers(client: docker.DockerClient, run_id: str) -> list[str]:
    """End a run's trials at once (their own cleanup then removes disks and volumes); best effort."""
    from ..sandbox.gc import remove_containers

    try:
        return remove_containers(client, {"label": f"{RUN_LABEL}={run_id}"}, best_effort=True)
    except Exception:  # noqa: BLE001 - best effort during an interrupt; gc removes the rest
        return []
