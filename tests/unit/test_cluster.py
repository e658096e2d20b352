"""The Ray backend's logic that needs no cluster: the bundle sent to nodes, and block placement."""

from __future__ import annotations

import io
import tarfile
from collections import deque
from dataclasses import replace

from orchestrator.backends.ray import Membership, Node, RayBackend
from orchestrator.backends.ray.bundle import bundle_paths, make_bundle, rebase_task
from orchestrator.loading import load_manifest
from orchestrator.repos import materialize
from orchestrator.taskload import load_tasks
from orchestrator.trial import TrialSpec


def test_the_bundle_is_deterministic_and_holds_what_trials_read(repo_root, tmp_path):
    loaded = load_manifest(repo_root / "examples/offline-demo.yaml")
    tasks = load_tasks(loaded)
    paths = bundle_paths(loaded, tasks)
    assert all(".." not in p.parts and p.is_absolute() for p in paths)
    assert repo_root / "examples/offline-demo.yaml" in paths
    assert repo_root / "examples/scripts/slug-fix.yaml" in paths and repo_root / "examples/prompts/terse.md" in paths
    assert repo_root / "tasks/_repos/ledger.bundle" in paths  # a repository outside its task folder
    assert not any(p.is_relative_to(repo_root / "orchestrator") for p in paths)
    data = make_bundle(paths)
    assert data == make_bundle(paths)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        assert all(not n.startswith("/") and ".." not in n.split("/") for n in names)
        tar.extractall(tmp_path, filter="tar")
    for task in tasks:
        moved = rebase_task(task, tmp_path)
        assert moved.folder.is_relative_to(tmp_path) and moved.grader_folder.is_relative_to(tmp_path)
        assert (moved.grader_folder / "grader.yaml").read_bytes() == (task.grader_folder / "grader.yaml").read_bytes()
        # the same repository commit on a node as on the driver
        assert materialize(moved, tmp_path / "node-cache").commit == materialize(task, tmp_path / "driver-cache").commit


class Say(list):
    def __call__(self, line: str) -> None:
        self.append(line)


def backend(nodes: dict[str, int]) -> RayBackend:
    b = RayBackend.__new__(RayBackend)
    b.say = Say()
    b.members = Membership({}, {}, 1.0, 1024, b.say)
    b.members.nodes = {n: Node(n, f"id-{n}", fit, {"name": n}) for n, fit in nodes.items()}
    b.members.alive_ids = {f"id-{n}" for n in nodes}
    b.members.refreshed = 1e18
    b.block_node, b.refs, b.cap = {}, {}, None
    b._pending, b._soft = "", False
    return b


def specs(blocks: int, per_block: int = 2) -> deque:
    base = TrialSpec("t/c/0", "run", None, None, 0, "sha256:x", None, None)
    return deque(replace(base, trial_id=f"t{b}/c{i}/0", block=b) for b in range(blocks) for i in range(per_block))


def take(b: RayBackend, queue: deque) -> tuple[str, str] | None:
    spec = b.admit(queue)
    if spec is None:
        return None
    b.members.nodes[b._pending].load += 1
    return spec.trial_id, b._pending


def test_a_block_stays_on_one_node_and_new_blocks_go_where_there_is_room():
    b = backend({"n1": 2, "n2": 2})
    queue = specs(3)
    placed = [take(b, queue) for _ in range(4)]
    assert [p[1] for p in placed] == ["n2", "n2", "n1", "n1"]  # block 0 fills one node, block 1 the other
    assert take(b, queue) is None and len(queue) == 2  # both full: block 2 waits
    b.members.nodes["n1"].load -= 1
    assert take(b, queue) == ("t2/c0/0", "n1")
    assert take(b, queue) is None  # block 2's second trial waits for n1, never goes to n2
    b.members.nodes["n2"].load -= 2
    assert take(b, queue) is None
    b.members.nodes["n1"].load -= 1
    assert take(b, queue) == ("t2/c1/0", "n1")


def test_a_block_whose_node_is_gone_moves_and_is_announced_split():
    b = backend({"n1": 2, "n2": 2})
    queue = specs(1)
    assert take(b, queue)[1] == "n2"
    b.members.alive_ids.discard("id-n2")
    retry = replace(queue[0], attempt=2)
    assert take(b, deque([retry]))[1] == "n1"
    assert b.block_node[0] == "n1" and any("split" in line for line in b.say)


def test_a_retry_prefers_its_blocks_node_softly_first_attempts_are_hard():
    b = backend({"n1": 1, "n2": 1})
    first = specs(1)
    take(b, first)
    assert b._soft is False
    b.members.nodes[b.block_node[0]].load = 0
    take(b, deque([replace(first[0], attempt=2)]))
    assert b._soft is True and b._pending == b.block_node[0]


def test_concurrency_caps_what_is_running_across_the_cluster():
    b = backend({"n1": 4, "n2": 4})
    b.cap = 1
    queue = specs(2)
    spec = b.admit(queue)
    b.refs[object()] = (spec, b._pending)
    assert b.admit(queue) is None


def test_an_unreachable_cluster_address_fails_at_once_naming_it():
    import socket

    import pytest

    from orchestrator.backends.ray.membership import reachable as _reachable
    from orchestrator.errors import ClusterError

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        _reachable(f"127.0.0.1:{port}")
    with pytest.raises(ClusterError, match=f"127.0.0.1:{port}"):
        _reachable(f"127.0.0.1:{port}")  # nothing listens there any more
    _reachable("auto")  # not host:port: left to Ray
