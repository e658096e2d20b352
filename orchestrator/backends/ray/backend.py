"""The Ray backend on the driver: admission, placement of blocks on nodes, results and node loss.

Placement: the trials of one block (task × period, every candidate) go to one node, with a hard node-affinity
strategy, so paired trials share hardware. A new block goes to the node with the most free room.

Faults: a node lost while running a trial turns that attempt into ``infra_error(node_lost)``
(``worker_lost`` when only the worker process died), written to the attempt's folder by the driver; the run
loop retries it once, on the block's node when it is alive again under the same name, else elsewhere, and
the block then counts as split in the report. The lost attempt's spend is unknown (its events were on the
node); the result says so. Ray's own task retries are off, so nothing runs twice unseen. Ctrl-C cancels
every running task and then removes the run's containers on every node.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import tarfile
import time
from collections import deque
from typing import Any

from ...errors import Cancelled, ClusterError, ConfigError, NodeError
from ...grading.verdict import infra_verdict
from ...hostspace import host_full
from ...log import get_logger
from ...manifest import LoadedManifest
from ...store import RunPaths
from ...tasks import Task
from ...textsafe import printable
from ...result import TrialResult
from ...trial import TrialSpec, ended_attempt
from ..base import Finished
from .bundle import bundle_paths, make_bundle
from .common import MARKER, MODEL_ENV, RESOURCE, NodeAffinitySchedulingStrategy, on, ray
from .membership import Membership, reachable
from .remote import clean_node, node_trial, ping

log = get_logger("cluster")


class RayBackend:
    """Trials as Ray tasks, each block on one node (see the module docstring)."""

    name = "ray"

    def __init__(self, loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any], paths: RunPaths, judge,
                 say) -> None:
        m = loaded.manifest
        self.loaded, self.lock, self.paths, self.judge, self.say = loaded, lock, paths, judge, say
        self.cpu, self.memory_mb = m.environment.cpu_reservation, m.environment.memory_reservation_mb
        self.cap = None if m.execution.concurrency == "auto" else int(m.execution.concurrency)
        self.members = Membership({name: v["image_id"] for name, v in lock["images"].items()}, lock["trialbox"],
                                  self.cpu, self.memory_mb, say)
        self.placed: dict[tuple[str, int], dict[str, Any]] = {}  # (trial, attempt) -> node info
        self.block_node: dict[int, str] = {}     # block -> node name
        self.refs: dict[Any, tuple[TrialSpec, str, str]] = {}  # ref -> (trial, node name, node id)
        self.model_env = {k: os.environ[k] for k in MODEL_ENV if os.environ.get(k)}
        data = make_bundle(bundle_paths(loaded, tasks))
        self.bundle_sha = hashlib.sha256(data).hexdigest()
        self.bundle = [ray.put(data)]  # in a list: passed by reference, fetched once per node
        self._pending, self._soft = "", False  # where admit placed the trial submit starts next

    @classmethod
    def connect(cls, address: str | None, loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any],
                paths: RunPaths, judge, say) -> "RayBackend":
        address = address or os.environ.get("RAY_ADDRESS")
        if not address:
            raise ConfigError("backend ray needs the cluster's address: execution.ray_address, --ray-address "
                              "or RAY_ADDRESS")
        if not ray.is_initialized():
            reachable(address)  # ray.init retries an unreachable address for minutes
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(f"no Ray cluster answers at {address}: {exc}") from exc
        try:
            backend = cls(loaded, tasks, lock, paths, judge, say)
            backend.members.preflight()
        except BaseException:
            ray.shutdown()
            raise
        return backend

    @property
    def slots(self) -> int:
        total = sum(n.fit for n in self.members.alive_nodes())
        return min(total, self.cap) if self.cap else total

    def describe(self) -> str:
        alive = self.members.alive_nodes()
        return (f"up to {self.slots} at once on {len(alive)} node(s): "
                + ", ".join(f"{n.name} ({n.fit})" for n in sorted(alive, key=lambda n: n.name))
                + f"; {self.cpu} CPU, {self.memory_mb} MiB each")

    # ---- admission and placement
    def _place(self, spec: TrialSpec) -> str | None:
        home = self.block_node.get(spec.block)
        if home is not None and self.members.alive(home):
            self._soft = spec.attempt > 1
            return home if self.members.nodes[home].load < self.members.nodes[home].fit else None
        self._soft = False
        free = [n for n in self.members.nodes.values() if self.members.alive(n.name) and n.load < n.fit]
        if not free:
            return None
        best = max(free, key=lambda n: ((n.fit - n.load) / n.fit, n.name))
        if home is not None:
            self.say(f"block {spec.block} moves from node {printable(home)} (gone) to {printable(best.name)}: "
                     "it counts as split")
        self.block_node[spec.block] = best.name
        return best.name

    def admit(self, queue: deque[TrialSpec]) -> TrialSpec | None:
        self.members.refresh()
        if self.cap is not None and len(self.refs) >= self.cap:
            return None
        for i, spec in enumerate(queue):
            name = self._place(spec)
            if name is not None:
                del queue[i]
                self._pending = name
                return spec
        if not self.refs and not any(self.members.alive(n) for n in self.members.nodes):
            self.members.refresh(force=True)
            if not any(self.members.alive(n) for n in self.members.nodes) and not self.members.probing:
                raise ClusterError("no node with the 'docker' resource is left alive: finished trials are kept; "
                                   "run the same command again when nodes are back")
            time.sleep(self.members.REFRESH_S)  # a node is being probed: look again shortly
        return None

    def submit(self, spec: TrialSpec) -> None:
        name = self._pending
        node = self.members.nodes[name]
        ref = node_trial.options(
            num_cpus=self.cpu, memory=int(self.memory_mb * 2**20), resources={RESOURCE: MARKER},
            # a retry prefers its block's node but goes elsewhere if that node turns out to be gone
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=self._soft),
            max_retries=0, retry_exceptions=False,
            name=f"trialbox {spec.trial_id} a{spec.attempt}",
        ).remote(spec, self.loaded, self.bundle_sha, self.bundle, self.judge, self.model_env)
        node.load += 1
        self.refs[ref] = (spec, name, node.id)
        self.placed[(spec.trial_id, spec.attempt)] = node.info

    @property
    def running(self) -> int:
        return len(self.refs)

    @property
    def expecting_nodes(self) -> bool:
        return bool(self.members.probing)

    def node_for(self, spec: TrialSpec) -> dict[str, Any] | None:
        """The node an attempt was placed on (for records the driver writes itself)."""
        return self.placed.get((spec.trial_id, spec.attempt))

    # ---- results
    def wait(self) -> list[Finished]:
        ready: list = []
        while not ready:
            ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=self.members.REFRESH_S)
            if not ready and self.members.probing:
                self.members.refresh()
        more, _ = ray.wait([r for r in self.refs if r not in ready], num_returns=len(self.refs) - len(ready),
                           timeout=0) if len(self.refs) > len(ready) else ([], [])
        return [self._finished(r) for r in ready + more]

    def _finished(self, ref) -> Finished:
        spec, name, node_id = self.refs.pop(ref)
        node = self.members.nodes.get(name)
        if node is not None and node.id == node_id:
            node.load -= 1
        try:
            out = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return spec, Cancelled(spec.trial_id)
        except ray.exceptions.RayTaskError as exc:  # raised outside run_trial on the node: its events are gone
            if isinstance(exc.cause, KeyboardInterrupt):
                return spec, Cancelled(spec.trial_id)
            log.error("trial failed on its node", trial=spec.trial_id, node=name, traceback=str(exc)[-3000:])
            return spec, NodeError(f"{type(exc.cause).__name__}: {exc.cause}", spend=None)
        except ray.exceptions.RayError as exc:  # the node or its worker died: the attempt died with it
            return spec, self._lost(spec, name, node_id, exc)
        try:
            self._unpack(spec, out["artifacts"])
        except (OSError, tarfile.TarError) as exc:  # the node's account of the spend is all there is
            if host_full(exc):  # the run folder is full: no part of the attempt's files stays, and the run stops
                shutil.rmtree(self.paths.trial(spec.trial_id, spec.attempt), ignore_errors=True)
                return spec, exc
            return spec, NodeError(f"the trial's folder did not arrive whole: {exc}",
                                   spend=None if "error" in out else out["result"].cost.attempt_usd)
        if "error" in out:
            log.error("trial failed on its node", trial=spec.trial_id, node=name, traceback=out["traceback"])
            return spec, NodeError(out["error"])  # its events came back: the spend is read from them
        ran_on = out["result"].node_name
        if ran_on and ran_on != name:  # a soft-placed retry Ray had to run elsewhere
            self.say(f"block {spec.block} continues on node {printable(ran_on)} instead of {name}: it counts as split")
            self.block_node[spec.block] = ran_on
        return spec, out["result"]

    def _unpack(self, spec: TrialSpec, data: bytes) -> None:
        folder = self.paths.trial(spec.trial_id, spec.attempt)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        if data:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(folder, filter="data")

    def _lost(self, spec: TrialSpec, name: str, node_id: str, exc: BaseException) -> TrialResult:
        """The record of an attempt that died with its node or worker (written by the driver)."""
        # a node's death arrives as NodeDiedError once Ray's health checks notice it; a worker that died
        # alone (killed, out of memory) as WorkerCrashedError with its node still alive
        self.members.refresh(force=True)
        died = isinstance(exc, (ray.exceptions.NodeDiedError, ray.exceptions.TaskUnschedulableError))
        kind = "node_lost" if died or not self._node_answers(node_id) else "worker_lost"
        detail = f"{kind.replace('_', ' ')}: node {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        result = ended_attempt(spec, infra_verdict(kind, detail), None,
                               self.members.info_by_id.get(node_id) or {"name": name, "id": node_id},
                               self.paths.trial(spec.trial_id, spec.attempt),
                               "this attempt's spend is unknown: its events were on the lost node")
        log.warning("trial lost with its node", trial=spec.trial_id, node=name, error=type(exc).__name__)
        if kind == "worker_lost":  # its sandbox outlives the worker: have the node remove it now, not at the end
            clean_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=on(node_id),
                               max_retries=0).remote(None)
        return result

    NODE_ANSWER_S = 60.0
    """How long a node whose worker crashed has to answer a ping before it counts as lost with it."""

    def _node_answers(self, node_id: str) -> bool:
        """Whether the node of a crashed worker is still alive. A node killed whole kills its workers first:
        the driver hears of the worker's crash before Ray's health checks mark the node dead, so the
        membership alone would call every trial of a lost node ``worker_lost``. A ping pinned to the node
        answers only from a live node; the membership is watched meanwhile, so a node seen dead ends the wait."""
        ref = ping.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=on(node_id),
                           max_retries=0).remote()
        deadline = time.monotonic() + self.NODE_ANSWER_S
        try:
            while time.monotonic() < deadline:
                ready, _ = ray.wait([ref], timeout=1.0)
                if ready:
                    try:
                        return ray.get(ready[0]) == node_id
                    except ray.exceptions.RayError:
                        return False
                self.members.refresh(force=True)
                if node_id not in self.members.alive_ids:
                    return False
            return False
        finally:
            try:
                ray.cancel(ref, force=True)
            except (ray.exceptions.RayError, ValueError):  # finished, or its node is gone
                pass

    # ---- stopping
    def interrupt(self) -> list[Finished]:
        for ref in list(self.refs):
            ray.cancel(ref, force=False)  # KeyboardInterrupt on the node: the trial's sandbox is removed
        finished: list[Finished] = []
        if self.refs:
            ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=30)
            finished = [self._finished(r) for r in ready]
            stuck = list(self.refs)
            for ref in stuck:
                ray.cancel(ref, force=True)  # kills the worker: clean() below removes what it left
            ray.wait(stuck, num_returns=len(stuck), timeout=15)  # until Ray has seen those workers die
            for ref in stuck:
                self.refs.pop(ref, None)
        self.clean()
        return [f for f in finished if isinstance(f[1], TrialResult)]

    def clean(self) -> list[str]:
        """Remove the run's containers, and leftovers of dead processes, on every live node."""
        refs = [clean_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=on(n.id),
                                   max_retries=0).remote(self.paths.key)
                for n in self.members.nodes.values() if self.members.alive(n.name)]
        removed: list[str] = []
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=120) if refs else ([], [])
        for r in ready:
            try:
                removed += ray.get(r)
            except ray.exceptions.RayError as exc:
                log.warning("cleaning a node failed", error=str(exc)[:300])
        if removed:
            log.info("removed leftovers on the nodes", containers=removed)
        return removed

    def close(self) -> None:
        try:
            self.clean()
        finally:
            ray.shutdown()  # disconnects this driver; the cluster keeps running
