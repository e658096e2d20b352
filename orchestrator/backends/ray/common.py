"""What the Ray backend's driver and its nodes share: the resource that marks a Docker node, and how a
task is pinned to a node."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # before ray is imported: no usage reports

import ray  # noqa: E402
import ray.exceptions  # noqa: E402, F401 - ray.exceptions.* are caught across the package
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

RESOURCE = "docker"
"""The custom resource a node offers when it has a Docker engine (``ray start --resources '{"docker": 1}'``)."""
MARKER = 0.001
"""How much of it a trial asks for: it selects nodes, it never limits how many trials run on one."""
MODEL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
"""Driver environment a trial's agent and judge use on its node."""


def node_id() -> str:
    """The Ray id of the node this code runs on."""
    return ray.get_runtime_context().get_node_id()


def on(node: str) -> NodeAffinitySchedulingStrategy:
    """Run exactly on ``node`` (a Ray node id)."""
    return NodeAffinitySchedulingStrategy(node, soft=False)
