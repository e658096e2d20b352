"""A Ray cluster of several nodes on this one machine, with no traffic leaving it.

Used by the tests and the benchmark of the Ray backend, and to try the
README's multi-machine steps on one machine. Every Ray process (and the
driver, through ``run``/``popen``) lives in a fresh network namespace that has
only loopback: Ray's outward probes (a cloud-metadata request from its
dashboard process, a UDP connect to a public resolver to find the node's
address, usage reports) have nowhere to go. The Docker engine is still
reached through its Unix socket, so all nodes share one engine here: this
simulates several machines, it does not make them.

Each node is one ``ray start --block`` process in its own session, with its
own ``--temp-dir``, its own ports, a bounded object store and short health
checks (a dead node is noticed in about two seconds). ``stop`` kills exactly
the processes it started, and whatever else is left in its namespace; it never
calls ``ray stop``, which would kill every Ray process on the machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HEAD_PORT = 6379
HEALTH_CHECK = {"RAY_health_check_initial_delay_ms": "0", "RAY_health_check_period_ms": "500",
                "RAY_health_check_timeout_ms": "500", "RAY_health_check_failure_threshold": "4"}


@dataclass
class NodeSpec:
    """One node: its name (``TRIALBOX_NODE_NAME``), logical CPUs and memory, and extra environment."""

    name: str
    cpus: float = 1
    memory_mb: int = 2048
    docker: bool = True
    env: dict[str, str] = field(default_factory=dict)


def _session(sid: int) -> list[int]:
    """Every process of session ``sid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
            out.append(int(stat.parent.name))
    return out


class LocalRayCluster:
    """A head (no ``docker`` resource, runs no trial) and worker nodes, in a loopback-only namespace."""

    def __init__(self, workdir: Path, object_store_mb: int = 100) -> None:
        self.workdir = Path(workdir)
        self.netns = f"tb-ray-{uuid.uuid4().hex[:8]}"
        self.object_store = object_store_mb << 20
        self.procs: dict[str, subprocess.Popen] = {}
        self.address = f"127.0.0.1:{HEAD_PORT}"
        self._next_port = 21000
        self.ray = str(Path(sys.executable).parent / "ray")

    # ---- the namespace
    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment of every process started here: no usage reports, short health checks."""
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **HEALTH_CHECK, "RAY_ADDRESS": self.address}
        env.pop("TRIALBOX_NODE_NAME", None)
        return {**env, **(extra or {})}

    def _ns(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 600,
            **kw) -> subprocess.CompletedProcess:
        """Run a command inside the namespace (the driver, for instance)."""
        return subprocess.run(self._ns(argv), env=self.env(env), timeout=timeout, capture_output=True, text=True, **kw)

    def popen(self, argv: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(self._ns(argv), env=self.env(env), **kw)

    def links(self) -> list[str]:
        """The namespace's network interfaces (only ``lo``)."""
        out = subprocess.run(self._ns(["ip", "-o", "link"]), capture_output=True, text=True, check=True).stdout
        return [line.split(":")[1].strip() for line in out.splitlines() if line.strip()]

    # ---- nodes
    def start(self, nodes: list[NodeSpec]) -> "LocalRayCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        subprocess.run(self._ns(["ip", "link", "set", "lo", "up"]), check=True)
        self._start("head", ["--head", f"--port={HEAD_PORT}", "--include-dashboard=false", "--num-cpus=0"], {})
        for spec in nodes:
            self.add_node(spec)
        return self

    def add_node(self, spec: NodeSpec) -> None:
        resources = '{"docker": 1}' if spec.docker else "{}"
        self._start(spec.name, [f"--address={self.address}", f"--num-cpus={spec.cpus}",
                                f"--memory={spec.memory_mb << 20}", f"--resources={resources}"],
                    {"TRIALBOX_NODE_NAME": spec.name, **spec.env})

    def _ports(self) -> list[str]:
        b = self._next_port
        self._next_port += 1000
        return [f"--node-manager-port={b}", f"--object-manager-port={b + 1}", f"--dashboard-agent-listen-port={b + 2}",
                f"--dashboard-agent-grpc-port={b + 3}", f"--runtime-env-agent-port={b + 4}",
                f"--metrics-export-port={b + 5}", f"--min-worker-port={b + 100}", f"--max-worker-port={b + 199}"]

    def _start(self, name: str, args: list[str], env: dict[str, str], timeout: float = 60) -> None:
        temp = self.workdir / name
        temp.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{name}.log", "w")
        argv = [self.ray, "start", "--block", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
                f"--temp-dir={temp}", f"--object-store-memory={self.object_store}", *self._ports(), *args]
        proc = subprocess.Popen(self._ns(argv), env=self.env(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        self.procs[name] = proc
        deadline = time.monotonic() + timeout
        while "Ray runtime started" not in (self.workdir / f"{name}.log").read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ray node {name} did not start:\n{tail}")
            time.sleep(0.2)

    def node_of(self, pid: int) -> str | None:
        """The node whose processes include ``pid`` (None: not one of ours).

        Each node runs in its own session, led by its ``ray start``; Ray puts its workers in process
        groups of their own, but they stay in that session."""
        try:
            sid = os.getsid(pid)
        except ProcessLookupError:
            return None
        return next((n for n, p in self.procs.items() if p.pid == sid), None)

    def kill_node(self, name: str) -> None:
        """Lose a node at once: SIGKILL to every process of its session (its machine 'fails')."""
        proc = self.procs.pop(name)
        for pid in _session(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Kill what this cluster started and anything left in its namespace, then remove the namespace."""
        for name in list(self.procs):
            self.kill_node(name)
        pids = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    def __enter__(self) -> "LocalRayCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
