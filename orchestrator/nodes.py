"""The machine a trial ran on: its name, hardware and Docker engine.

Every trial records the node it ran on, whichever backend ran it, so that a
report can show results by node and a reader can tell whether paired trials
shared hardware. A node's name is ``TRIALBOX_NODE_NAME`` when set (several Ray
nodes on one machine need distinct names), else the host name.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
from typing import Any

import docker

from .engine import docker_errors


def node_name() -> str:
    return os.environ.get("TRIALBOX_NODE_NAME", "").strip() or socket.gethostname()


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@functools.lru_cache(maxsize=1)
def _hardware() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "cpu_model": _cpu_model(), "cpus": os.cpu_count(),
            "memory_mb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20,
            "kernel": platform.release()}


def node_info(client: docker.DockerClient, node_id: str | None = None) -> dict[str, Any]:
    """Name, hardware and engine of this machine (``node_id``: the cluster's id for it, when there is one)."""
    with docker_errors():
        v = client.version()
    return {"name": node_name(), "id": node_id, **_hardware(),
            "docker": {"version": v.get("Version", ""), "api_version": v.get("ApiVersion", "")}}
