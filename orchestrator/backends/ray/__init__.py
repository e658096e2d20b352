"""Trials on a Ray cluster (``execution.backend: ray``), split by concern: ``bundle`` (what travels to the
nodes), ``remote`` (what runs on them), ``membership`` (which nodes may be used), ``backend`` (admission,
placement, results and node loss on the driver), ``common`` (what driver and nodes share).


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

from .backend import RayBackend
from .membership import Membership, Node

__all__ = ["RayBackend", "Membership", "Node"]
