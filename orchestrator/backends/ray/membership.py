"""Which nodes a Ray run may use: each probed when it joins, dropped when it dies, named uniquely.

Before the first trial, every node with the ``docker`` resource is probed: trialbox's version and commit must
equal the lock's, the pinned image IDs must exist on its engine, its name must be its own, and one trial's
reservations must fit in it; any problem refuses the run, naming the node. Nodes that join later are probed
the same way (without waiting) and used only when they pass.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from typing import Any

from ...errors import ClusterError
from ...textsafe import printable
from ..base import fit
from .common import RESOURCE, MARKER, on, ray
from .remote import probe_node


@dataclasses.dataclass
class Node:
    name: str
    id: str
    fit: int
    info: dict[str, Any]
    load: int = 0


def reachable(address: str, timeout: float = 5.0) -> None:
    """Fail at once, naming the address, when nothing listens at a ``host:port`` cluster address."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # another form of address (``auto``, ``ray://``): Ray resolves it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address}: {exc} (is `ray start --head` running there?)") from exc


class Membership:
    """The nodes that passed the probe and are alive, by name; what was refused and why."""

    PROBE_TIMEOUT_S = 120.0
    REFRESH_S = 1.0

    def __init__(self, image_ids: dict[str, str], harness: dict[str, str], cpu: float, memory_mb: float,
                 say) -> None:
        self.image_ids, self.harness, self.cpu, self.memory_mb, self.say = image_ids, harness, cpu, memory_mb, say
        self.nodes: dict[str, Node] = {}        # by name: the nodes that passed the probe and are alive
        self.rejected: set[str] = set()          # Ray node ids that failed the probe
        self.clashed: dict[str, str] = {}        # node id -> the name another live node held when it was probed
        self.info_by_id: dict[str, dict[str, Any]] = {}
        self.probing: dict[Any, str] = {}        # probe ref -> Ray node id
        self.probe_started: dict[str, float] = {}
        self.refreshed = 0.0
        self.alive_ids: set[str] = set()

    def docker_nodes(self) -> dict[str, dict[str, Any]]:
        return {n["NodeID"]: n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(RESOURCE, 0) > 0}

    def _fit(self, ray_node: dict[str, Any]) -> int:
        res = ray_node["Resources"]
        return fit(res.get("CPU", 0), res.get("memory", 0) / 2**20, self.cpu, self.memory_mb)

    def _probe(self, node_id: str):
        return probe_node.options(num_cpus=0, resources={RESOURCE: MARKER}, scheduling_strategy=on(node_id),
                                  max_retries=0).remote(self.image_ids, self.harness)

    def _admit_probe(self, node_id: str, ray_node: dict[str, Any], probe: dict[str, Any]) -> list[str]:
        name = probe["info"].get("name", node_id[:12])
        problems = list(probe["problems"])
        room = self._fit(ray_node)
        if room < 1:
            problems.append(f"offers {ray_node['Resources'].get('CPU', 0)} CPUs and "
                            f"{ray_node['Resources'].get('memory', 0) / 2**20:.0f} MiB: not one trial fits "
                            f"({self.cpu} CPU, {self.memory_mb} MiB)")
        other = self.nodes.get(name)
        if other is not None and other.id != node_id and other.id in self.alive_ids:
            problems.append(f"its name {name!r} is already taken by node {other.id[:12]}: give every node its own "
                            "TRIALBOX_NODE_NAME")
            self.clashed[node_id] = name  # probed again once that node is gone (a machine that rejoined early)
        if problems:
            self.rejected.add(node_id)
            return [f"node {name} ({node_id[:12]}): {p}" for p in problems]
        self.info_by_id[node_id] = probe["info"]
        self.nodes[name] = Node(name, node_id, room, probe["info"])  # a rejoined machine starts empty
        return []

    def preflight(self) -> None:
        """Probe every node with the ``docker`` resource; refuse the run naming every problem."""
        ray_nodes = self.docker_nodes()
        self.alive_ids = set(ray_nodes)
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

    def refresh(self, force: bool = False) -> None:
        """Drop dead nodes, probe new ones (without waiting), admit those whose probe passed."""
        if not force and time.monotonic() - self.refreshed < self.REFRESH_S:
            return
        self.refreshed = time.monotonic()
        ray_nodes = self.docker_nodes()
        self.alive_ids = set(ray_nodes)
        for node_id, name in list(self.clashed.items()):
            if not self.alive(name):
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
                    self.say(f"node {printable(next(n.name for n in self.nodes.values() if n.id == node_id))} joined")

    def alive(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.id in self.alive_ids

    def alive_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if self.alive(n.name)]
