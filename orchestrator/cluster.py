"""Trials on a Ray cluster: ``execution.backend: ray``.

trialbox does not schedule machines itself. Every trial is a Ray task asking
for the trial's CPU and memory reservations plus a little of the custom
``docker`` resource, which marks the nodes that have a Docker engine; Ray
starts it only where those reservations fit, so Ray does admission control
across machines. The task runs the trial against its node's own engine (no
engine is assumed shared) and returns the result with the trial's artifacts;
the driver writes them into the run folder and records them in its store,
which stays the single source of truth. No shared filesystem is assumed: the
manifest, the task and grader folders and the candidates' files travel to the
nodes once per run, as one content-addressed bundle in Ray's object store.

Placement: the trials of one block (task × period, every candidate) go to one
node, with a hard node-affinity strategy, so paired trials share hardware.
A new block goes to the node with the most free room. Before the first trial,
every node with the ``docker`` resource is probed: trialbox's version and
commit must equal the lock's, the pinned image IDs must exist on its engine
(``trialbox images save`` / ``load`` put them there), node names must be
distinct; any problem refuses the run, naming the node. Nodes that join later
are probed the same way and used only when they pass.

Faults: a node lost while running a trial turns that attempt into
``infra_error(node_lost)`` (``worker_lost`` when only the worker process died),
written to the attempt's folder by the driver; the run loop retries it once,
on the block's node when it is alive again under the same name, else
elsewhere, and the block then counts as split in the report. The lost
attempt's spend is unknown (its events were on the node); the result says so.
Ray's own task retries are off, so nothing runs twice unseen. Ctrl-C cancels
every running task and then removes the run's containers on every node.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import math
import os
import shutil
import socket
import tarfile
import time
import traceback
import uuid
from collections import deque
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # before ray is imported: no usage reports

import ray  # noqa: E402
import ray.exceptions  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from .backends import Finished  # noqa: E402
from .engine import connect  # noqa: E402
from .errors import Cancelled, ClusterError, ConfigError, NodeError, TrialboxError  # noqa: E402
from .grading.runner import GraderLimits  # noqa: E402
from .grading.verdict import infra_verdict  # noqa: E402
from .log import get_logger  # noqa: E402
from .manifest import LoadedManifest  # noqa: E402
from .nodes import node_info  # noqa: E402
from .settings import load_settings  # noqa: E402
from .store import RunPaths  # noqa: E402
from .tasks import Task  # noqa: E402
from .textsafe import printable  # noqa: E402
from .trial import TrialSpec, ended_attempt, run_trial  # noqa: E402

log = get_logger("cluster")

RESOURCE = "docker"
"""The custom resource a node offers when it has a Docker engine (``ray start --resources '{"docker": 1}'``)."""
MARKER = 0.001
"""How much of it a trial asks for: it selects nodes, it never limits how many trials run on one."""
MODEL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
"""Driver environment a trial's agent and judge use on its node."""


# --------------------------------------------------------------------------- what travels to the nodes
def _abs(p: Path) -> Path:
    """Absolute and free of ``..`` (lexically: the same name on the driver and inside the bundle)."""
    return Path(os.path.normpath(p.absolute()))


def bundle_paths(loaded: LoadedManifest, tasks: list[Task]) -> list[Path]:
    """Every file or folder a trial reads on its node: manifest, candidate files, task and grader folders."""
    paths = [_abs(loaded.path)]
    for c in loaded.manifest.candidates:
        for field in ("script", "system_prompt"):
            if getattr(c, field, None) is not None:
                paths.append(_abs(loaded.resolve(getattr(c, field))))
    for t in tasks:
        paths += [_abs(t.folder), _abs(t.grader_folder)]
        src = _abs(t.repo_source())
        if not src.is_relative_to(_abs(t.folder)):
            paths.append(src)
    return sorted(set(paths))


def make_bundle(paths: list[Path]) -> bytes:
    """A deterministic tar of ``paths`` under their absolute names (without the leading ``/``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top in paths:
            members = [top] + (sorted(top.rglob("*")) if top.is_dir() and not top.is_symlink() else [])
            for p in members:
                info = tar.gettarinfo(str(p), arcname=str(p).lstrip("/"))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isfile():
                    with open(p, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def _rebase(p: Path, root: Path) -> Path:
    return root / str(_abs(p)).lstrip("/")


def rebase_task(task: Task, root: Path) -> Task:
    """The task with its folders (and an absolute repository path) inside an unpacked bundle."""
    config = task.config
    if config.repo.git is not None and Path(config.repo.git).is_absolute():
        config = config.model_copy(update={"repo": config.repo.model_copy(
            update={"git": str(_rebase(Path(config.repo.git), root))})})
    return task.model_copy(update={"config": config, "folder": _rebase(task.folder, root),
                                   "grader_folder": _rebase(task.grader_folder, root)})


def _unpack_bundle(sha: str, holder: list) -> Path:
    """The run's bundle on this node, unpacked once per node (content-addressed, atomic)."""
    root = load_settings().state_dir / "ray" / "bundles" / sha
    if root.is_dir():
        return root
    data = ray.get(holder[0])
    if hashlib.sha256(data).hexdigest() != sha:
        raise TrialboxError(f"the experiment bundle arrived damaged (expected sha256 {sha})")
    tmp = root.with_name(f".{sha}.{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp, filter="tar")
    try:
        tmp.rename(root)
    except OSError:  # another worker of this node unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _pack_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(folder.rglob("*")):
            tar.add(str(p), arcname=str(p.relative_to(folder)), recursive=False)
    return buf.getvalue()


# --------------------------------------------------------------------------- on a node
def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def node_problems(client, image_ids: dict[str, str], harness: dict[str, str]) -> list[str]:
    """What keeps this machine from running a run's trials: another trialbox, or a pinned image missing."""
    from .lock import harness_identity

    problems: list[str] = []
    mine = harness_identity()
    if mine != harness:
        problems.append(f"trialbox {mine['version']}+{mine['commit']} differs from the lock's "
                        f"{harness['version']}+{harness['commit']}: install the same trialbox on every node")
    for name, image_id in sorted(image_ids.items()):
        try:
            found = client.images.get(image_id).id
        except Exception:  # noqa: BLE001 - not found or unreadable: either way not the pinned image
            found = None
        if found != image_id:
            problems.append(f"image {name} {image_id} is not on this node's engine (`trialbox images save` where "
                            "it was built, `trialbox images load` here; never a rebuilt look-alike)")
    return problems


@ray.remote
def probe_node(image_ids: dict[str, str], harness: dict[str, str]) -> dict[str, Any]:
    """This node's description, and what keeps it from running the run's trials (empty when nothing)."""
    from .nodes import node_name
    from .sandbox.gc import collect_garbage

    try:
        client = connect(timeout=30)
    except TrialboxError as exc:
        return {"info": {"name": node_name(), "id": _node_id()}, "problems": [str(exc)]}
    try:
        info = node_info(client, _node_id())
        problems = node_problems(client, image_ids, harness)
        collect_garbage(client, load_settings())  # leftovers of trials whose process died on this node
    finally:
        client.close()
    return {"info": info, "problems": problems}


@ray.remote
def node_trial(spec: TrialSpec, loaded: LoadedManifest, bundle_sha: str, bundle: list, judge,
               model_env: dict[str, str]) -> dict[str, Any]:
    """Run one trial on this node's engine; returns its result and its folder as a tar."""
    root = _unpack_bundle(bundle_sha, bundle)
    here = LoadedManifest(path=_rebase(loaded.path, root), manifest=loaded.manifest)
    spec = dataclasses.replace(spec, task=rebase_task(spec.task, root))
    from .sandbox.docker import owner_label

    work = load_settings().state_dir / "ray" / "trials" / uuid.uuid4().hex
    work.mkdir(parents=True)
    (work / "owner").write_text(owner_label())  # a worker killed mid-trial leaves this folder: clean_node removes it
    # exactly the driver's model endpoint and key: a node's own values never stand in for them
    env = {**{k: v for k, v in os.environ.items() if k not in MODEL_ENV}, **model_env}
    paths = RunPaths(work)
    folder = paths.trial(spec.trial_id, spec.attempt)
    client = connect()
    try:
        result = run_trial(spec, here, client, paths, GraderLimits.for_environment(spec.environment), judge, None,
                           env, node_info(client, _node_id()))
        return {"result": result, "artifacts": _pack_folder(folder)}
    except Exception as exc:  # noqa: BLE001 - the driver records it; the events written so far come back with it
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:],
                "artifacts": _pack_folder(folder) if folder.is_dir() else b""}
    finally:
        client.close()
        shutil.rmtree(work, ignore_errors=True)


@ray.remote
def clean_node(run_key: str | None) -> list[str]:
    """Remove the run's containers on this node (with ``run_key``), then every leftover whose owner
    process died (containers, volumes, disks, and the work folders of killed workers)."""
    from .backends import remove_run_containers
    from .sandbox.gc import collect_garbage, owner_alive

    client = connect(timeout=30)
    try:
        removed = remove_run_containers(client, run_key) if run_key else []
        gc = collect_garbage(client, load_settings())
    finally:
        client.close()
    for work in (load_settings().state_dir / "ray" / "trials").glob("*"):
        owner = work / "owner"
        if not owner.exists() or not owner_alive(owner.read_text().strip()):
            shutil.rmtree(work, ignore_errors=True)
    return removed + [c for c in gc.containers if c not in removed]


# --------------------------------------------------------------------------- on the driver
@dataclasses.dataclass
class Node:
    name: str
    id: str
    fit: int
    info: dict[str, Any]
    load: int = 0


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Fail at once, naming the address, when nothing listens at a ``host:port`` cluster address."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # another form of address (``auto``, ``ray://``): Ray resolves it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address}: {exc} (is `ray start --head` running there?)") from exc


def _on(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id, soft=False)


class RayBackend:
    """Trials as Ray tasks, each block on one node (see the module docstring)."""

    name = "ray"
    PROBE_TIMEOUT_S = 120.0
    REFRESH_S = 1.0

    def __init__(self, loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any], paths: RunPaths, judge,
                 say) -> None:
        m = loaded.manifest
        self.loaded, self.lock, self.paths, self.judge, self.say = loaded, lock, paths, judge, say
        self.cpu, self.memory_mb = m.environment.cpu_reservation, m.environment.memory_reservation_mb
        self.cap = None if m.execution.concurrency == "auto" else int(m.execution.concurrency)
        self.image_ids = {name: v["image_id"] for name, v in lock["images"].items()}
        self.nodes: dict[str, Node] = {}        # by name: the nodes that passed the probe and are alive
        self.rejected: set[str] = set()          # Ray node ids that failed the probe
        self.clashed: dict[str, str] = {}        # node id -> the name another live node held when it was probed
        self.info_by_id: dict[str, dict[str, Any]] = {}
        self.placed: dict[tuple[str, int], dict[str, Any]] = {}  # (trial, attempt) -> node info
        self.probing: dict[Any, str] = {}        # probe ref -> Ray node id
        self.probe_started: dict[str, float] = {}
        self.block_node: dict[int, str] = {}     # block -> node name
        self.refs: dict[Any, tuple[TrialSpec, str, str]] = {}  # ref -> (trial, node name, node id)
        self.model_env = {k: os.environ[k] for k in MODEL_ENV if os.environ.get(k)}
        data = make_bundle(bundle_paths(loaded, tasks))
        self.bundle_sha = hashlib.sha256(data).hexdigest()
        self.bundle = [ray.put(data)]  # in a list: passed by reference, fetched once per node
        self.refreshed = 0.0
        self._alive_ids: set[str] = set()
        self._pending, self._soft = "", False  # where admit placed the trial submit starts next

    @classmethod
    def connect(cls, address: str | None, loaded: LoadedManifest, tasks: list[Task], lock: dict[str, Any],
                paths: RunPaths, judge, say) -> "RayBackend":
        address = address or os.environ.get("RAY_ADDRESS")
        if not address:
            raise ConfigError("backend ray needs the cluster's address: execution.ray_address, --ray-address "
                              "or RAY_ADDRESS")
        if not ray.is_initialized():
            _reachable(address)  # ray.init retries an unreachable address for minutes
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(f"no Ray cluster answers at {address}: {exc}") from exc
        try:
            backend = cls(loaded, tasks, lock, paths, judge, say)
            backend.preflight()
        except BaseException:
            ray.shutdown()
            raise
        return backend

    # ---- nodes
    def _docker_nodes(self) -> dict[str, dict[str, Any]]:
        return {n["NodeID"]: n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(RESOURCE, 0) > 0}

    def _fit(self, ray_node: dict[str, Any]) -> int:
        res = ray_node["Resources"]
        by_cpu = res.get("CPU", 0) / self.cpu if self.cpu > 0 else math.inf
        by_mem = res.get("memory", 0) / (self.memory_mb * 2**20) if self.memory_mb > 0 else math.inf
        return int(min(by_cpu, by_mem) + 1e-9)

    def _probe(self, node_id: str):
        return probe_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=_on(node_id),
                                  max_retries=0).remote(self.image_ids, self.lock["trialbox"])

    def _admit_probe(self, node_id: str, ray_node: dict[str, Any], probe: dict[str, Any]) -> list[str]:
        name = probe["info"].get("name", node_id[:12])
        problems = list(probe["problems"])
        fit = self._fit(ray_node)
        if fit < 1:
            problems.append(f"offers {ray_node['Resources'].get('CPU', 0)} CPUs and "
                            f"{ray_node['Resources'].get('memory', 0) / 2**20:.0f} MiB: not one trial fits "
                            f"({self.cpu} CPU, {self.memory_mb} MiB)")
        other = self.nodes.get(name)
        if other is not None and other.id != node_id and other.id in self._alive_ids:
            problems.append(f"its name {name!r} is already taken by node {other.id[:12]}: give every node its own "
                            "TRIALBOX_NODE_NAME")
            self.clashed[node_id] = name  # probed again once that node is gone (a machine that rejoined early)
        if problems:
            self.rejected.add(node_id)
            return [f"node {name} ({node_id[:12]}): {p}" for p in problems]
        self.info_by_id[node_id] = probe["info"]
        self.nodes[name] = Node(name, node_id, fit, probe["info"])  # a rejoined machine starts empty
        return []

    def preflight(self) -> None:
        """Probe every node with the ``docker`` resource; refuse the run naming every problem."""
        ray_nodes = self._docker_nodes()
        self._alive_ids = set(ray_nodes)
        if not ray_nodes:
            raise ClusterError(f"no live node of the Ray cluster offers the {RESOURCE!r} resource: start each machine "
                               f"that has a Docker engine with `ray start ... --resources '{{\"{RESOURCE}\": 1}}'`")
        refs = {self._probe(i): i for i in ray_nodes}
        ready, missing = ray.wait(list(refs), num_returns=len(refs), timeout=self.PROBE_TIMEOUT_S)
        problems = [f"node {refs[r][:12]}: did not answer the probe within {self.PROBE_TIMEOUT_S:.0f}s" for r in missing]
        for r in ready:
            try:
                probe = ray.get(r)
            except (ray.exceptions.NodeDiedError, ray.exceptions.TaskUnschedulableError):
                self.say(f"node {refs[r][:12]} left the cluster during the probe: not used")
                self.rejected.add(refs[r])
                continue
            except ray.exceptions.RayError as exc:
                problems.append(f"node {refs[r][:12]}: probe failed: {exc}")
                continue
            problems += self._admit_probe(refs[r], ray_nodes[refs[r]], probe)
        if not problems and not self.nodes:
            raise ClusterError("no node with the 'docker' resource stayed in the cluster through the probe")
        if problems:
            raise ClusterError("the cluster cannot run this experiment:\n" + "\n".join(f"  {p}" for p in problems))
        self.refreshed = time.monotonic()

    def _refresh(self, force: bool = False) -> None:
        """Drop dead nodes, probe new ones (without waiting), admit those whose probe passed."""
        if not force and time.monotonic() - self.refreshed < self.REFRESH_S:
            return
        self.refreshed = time.monotonic()
        ray_nodes = self._docker_nodes()
        self._alive_ids = set(ray_nodes)
        for node_id, name in list(self.clashed.items()):
            if not self._alive(name):
                del self.clashed[node_id]
                self.rejected.discard(node_id)
        known = {n.id for n in self.nodes.values()} | self.rejected | set(self.probing.values())
        for node_id in set(ray_nodes) - known:
            self.probing[self._probe(node_id)] = node_id
            self.probe_started[node_id] = time.monotonic()
        for ref, node_id in list(self.probing.items()):
            if time.monotonic() - self.probe_started.get(node_id, 0) > self.PROBE_TIMEOUT_S:
                del self.probing[ref]
                ray.cancel(ref, force=True)
                self.rejected.add(node_id)
                self.say(f"not using node {node_id[:12]}: it did not answer the probe within {self.PROBE_TIMEOUT_S:.0f}s")
        if self.probing:
            ready, _ = ray.wait(list(self.probing), num_returns=len(self.probing), timeout=0)
            for r in ready:
                node_id = self.probing.pop(r)
                try:
                    problems = self._admit_probe(node_id, ray_nodes.get(node_id, {"Resources": {}}), ray.get(r))
                except ray.exceptions.RayError as exc:
                    problems = [f"node {node_id[:12]}: probe failed: {exc}"]
                    self.rejected.add(node_id)
                for p in problems:
                    self.say(f"not using {printable(p)}")
                if not problems:
                    self.say(f"node {next(n.name for n in self.nodes.values() if n.id == node_id)} joined")

    def _alive(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.id in self._alive_ids

    @property
    def slots(self) -> int:
        total = sum(n.fit for n in self.nodes.values() if self._alive(n.name))
        return min(total, self.cap) if self.cap else total

    def describe(self) -> str:
        alive = [n for n in self.nodes.values() if self._alive(n.name)]
        return (f"up to {self.slots} at once on {len(alive)} node(s): "
                + ", ".join(f"{n.name} ({n.fit})" for n in sorted(alive, key=lambda n: n.name))
                + f"; {self.cpu} CPU, {self.memory_mb} MiB each")

    # ---- admission and placement
    def _place(self, spec: TrialSpec) -> str | None:
        home = self.block_node.get(spec.block)
        if home is not None and self._alive(home):
            self._soft = spec.attempt > 1
            return home if self.nodes[home].load < self.nodes[home].fit else None
        self._soft = False
        free = [n for n in self.nodes.values() if self._alive(n.name) and n.load < n.fit]
        if not free:
            return None
        best = max(free, key=lambda n: ((n.fit - n.load) / n.fit, n.name))
        if home is not None:
            self.say(f"block {spec.block} moves from node {home} (gone) to {best.name}: it counts as split")
        self.block_node[spec.block] = best.name
        return best.name

    def admit(self, queue: deque[TrialSpec]) -> TrialSpec | None:
        self._refresh()
        if self.cap is not None and len(self.refs) >= self.cap:
            return None
        for i, spec in enumerate(queue):
            name = self._place(spec)
            if name is not None:
                del queue[i]
                self._pending = name
                return spec
        if not self.refs and not any(self._alive(n) for n in self.nodes):
            self._refresh(force=True)
            if not any(self._alive(n) for n in self.nodes) and not self.probing:
                raise ClusterError("no node with the 'docker' resource is left alive: finished trials are kept; "
                                   "run the same command again when nodes are back")
            time.sleep(self.REFRESH_S)  # a node is being probed: look again shortly
        return None

    def submit(self, spec: TrialSpec) -> None:
        name = self._pending
        node = self.nodes[name]
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
        return bool(self.probing)

    def node_for(self, spec: TrialSpec) -> dict[str, Any] | None:
        """The node an attempt was placed on (for records the driver writes itself)."""
        return self.placed.get((spec.trial_id, spec.attempt))

    # ---- results
    def wait(self) -> list[Finished]:
        ready: list = []
        while not ready:
            ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=self.REFRESH_S)
            if not ready and self.probing:
                self._refresh()
        more, _ = ray.wait([r for r in self.refs if r not in ready], num_returns=len(self.refs) - len(ready),
                           timeout=0) if len(self.refs) > len(ready) else ([], [])
        return [self._finished(r) for r in ready + more]

    def _finished(self, ref) -> Finished:
        spec, name, node_id = self.refs.pop(ref)
        node = self.nodes.get(name)
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
            return spec, NodeError(f"the trial's folder did not arrive whole: {exc}",
                                   spend=None if "error" in out else out["result"].get("attempt_cost_usd"))
        if "error" in out:
            log.error("trial failed on its node", trial=spec.trial_id, node=name, traceback=out["traceback"])
            return spec, NodeError(out["error"])  # its events came back: the spend is read from them
        ran_on = (out["result"].get("node") or {}).get("name")
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

    def _lost(self, spec: TrialSpec, name: str, node_id: str, exc: BaseException) -> dict[str, Any]:
        """The record of an attempt that died with its node or worker (written by the driver)."""
        # a node's death arrives as NodeDiedError once Ray's health checks notice it; a worker that died
        # alone (killed, out of memory) as WorkerCrashedError with its node still alive
        self._refresh(force=True)
        died = isinstance(exc, (ray.exceptions.NodeDiedError, ray.exceptions.TaskUnschedulableError))
        kind = "node_lost" if died or node_id not in self._alive_ids else "worker_lost"
        detail = f"{kind.replace('_', ' ')}: node {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        result = ended_attempt(spec, infra_verdict(kind, detail), None,
                               self.info_by_id.get(node_id) or {"name": name, "id": node_id},
                               self.paths.trial(spec.trial_id, spec.attempt),
                               "this attempt's spend is unknown: its events were on the lost node")
        log.warning("trial lost with its node", trial=spec.trial_id, node=name, error=type(exc).__name__)
        if kind == "worker_lost":  # its sandbox outlives the worker: have the node remove it now, not at the end
            clean_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=_on(node_id),
                               max_retries=0).remote(None)
        return result

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
        return [f for f in finished if isinstance(f[1], dict)]

    def clean(self) -> list[str]:
        """Remove the run's containers, and leftovers of dead processes, on every live node."""
        refs = [clean_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=_on(n.id),
                                   max_retries=0).remote(self.paths.key)
                for n in self.nodes.values() if self._alive(n.name)]
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
