"""The Ray backend on a local cluster of several nodes (``LocalRayCluster``).

Every Ray process and every driver here runs in a network namespace that has
only loopback. The nodes share this machine's Docker engine, so they simulate
several machines; the code under test assumes nothing about that.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.events import verify_events
from orchestrator.testing.raylocal import LocalRayCluster, NodeSpec
from orchestrator.sandbox.docker import owner_label
from orchestrator.sandbox.gc import owner_alive
from orchestrator.settings import load_settings
from orchestrator.store import RunPaths

pytestmark = pytest.mark.docker

ENV = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
OWNER = "org.trialbox.owner"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, client, images):
    c = LocalRayCluster(tmp_path_factory.mktemp("ray"))
    try:
        c.start([NodeSpec("n1", cpus=1, memory_mb=2048), NodeSpec("n2", cpus=1, memory_mb=2048)])
        yield c
    finally:
        c.stop()


def driver(cluster: LocalRayCluster, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return cluster.run([sys.executable, "-m", "orchestrator.cli", *args], env=ENV, cwd=cwd, timeout=timeout)


def rows(run: Path) -> list[dict]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return [json.loads(r[0]) for r in db.execute("SELECT result FROM trials")]
    finally:
        db.close()


@dataclass(frozen=True)
class Seen:
    id: str
    name: str
    labels: dict


def run_containers(client, run: Path) -> list[Seen]:
    """The run's containers in one engine call (listing then inspecting each races with their removal)."""
    found = client.api.containers(all=True, filters={"label": f"org.trialbox.run={RunPaths(run).key}"})
    return [Seen(c["Id"], c["Names"][0].lstrip("/"), c.get("Labels") or {}) for c in found]


def sleepy_manifest(folder: Path, repo_root: Path, seconds: int, trials: int = 2, deadline: int = 120) -> Path:
    """Two candidates whose agent sleeps, then submits; two tasks."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sleep.yaml").write_text(f'steps:\n  - bash: {{command: "sleep {seconds}", timeout: {seconds + 60}}}\n'
                                       '  - submit: {summary: done}\n')
    (folder / "sleepy.yaml").write_text(f"""
experiment: {{name: sleepy, seed: 3}}
candidates:
  - {{name: a, agent: script, script: sleep.yaml}}
  - {{name: b, agent: script, script: sleep.yaml}}
environment: {{cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 512, memory_reservation_mb: 256, disk_limit_mb: 128}}
execution: {{trials_per_task: {trials}, deadline_seconds: {deadline}}}
tasks:
  path: {repo_root}/tasks
  graders: {repo_root}/graders
  images: {repo_root}/images
  select: [textkit-slug-unicode, ledger-negative-format]
analysis: {{k: [1]}}
""")
    return folder / "sleepy.yaml"


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, seen=None):
    """``predicate``'s first true value within ``timeout``; else fail with what was seen and, given the
    driver ``proc``, its output (it is stopped first: a busy host must be diagnosable from the log alone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    detail = f"; seen: {seen()}" if seen else ""
    if proc is not None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        detail += f"; the driver exited {proc.returncode}:\n{out[-3000:]}\n{err[-3000:]}"
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")


def interruptible() -> None:
    """Ctrl-C reaches the driver as it does from a terminal: a suite started in the background by a
    non-interactive shell (``.ci/run &``) has SIGINT ignored, which every child inherits, and a Python started so
    never installs its KeyboardInterrupt handler (the driver then ran to its end, ignoring the signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def node_of(cluster: LocalRayCluster, container) -> str | None:
    _, pid, _ = container.labels[OWNER].rsplit(":", 2)
    return cluster.node_of(int(pid))


def test_namespace_has_only_loopback(cluster):
    assert cluster.links() == ["lo"]


def test_a_node_that_does_not_match_refuses_the_run_naming_it(cluster, tmp_path, repo_root, client):
    cluster.add_node(NodeSpec("n3", cpus=1, env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}))
    try:
        manifest = sleepy_manifest(tmp_path / "m", repo_root, 1, trials=1)
        res = driver(cluster, "run", str(manifest), "--unchecked", "--backend", "ray", "--out", str(tmp_path / "run"), cwd=repo_root)
        assert res.returncode != 0, res.stdout
        assert "Traceback" not in res.stderr
        assert "node n3" in res.stderr and "no Docker engine answers" in res.stderr, res.stderr
        assert "node n1" not in res.stderr and "node n2" not in res.stderr
        assert not (tmp_path / "run" / "results.sqlite").exists() or rows(tmp_path / "run") == []
        assert run_containers(client, tmp_path / "run") == []
    finally:
        cluster.kill_node("n3")


def test_node_problems_names_a_missing_image_and_another_trialbox(client):
    from orchestrator.backends.ray.remote import node_problems
    from orchestrator.lock import harness_identity

    mine = harness_identity()
    assert node_problems(client, {}, mine) == []
    problems = node_problems(client, {"python": "sha256:" + "0" * 64}, {**mine, "commit": "f" * 40})
    assert len(problems) == 2
    assert "differs from the lock's" in problems[0]
    assert "image python sha256:" + "0" * 64 in problems[1] and "images load" in problems[1]


def test_same_verdicts_as_local_and_blocks_stay_on_one_node(cluster, tmp_path, repo_root, project, client):
    """The offline demo (every kind of agent, the model over HTTP) on Ray, reproduced on the local backend."""
    run = tmp_path / "ray-demo"
    res = driver(cluster, "run", str(project / "examples/offline-demo.yaml"), "--unchecked", "--backend", "ray",
                 "--scripted-model", str(project / "examples/scripted-model.yaml"), "--out", str(run), cwd=repo_root)
    assert res.returncode == 0, res.stdout + res.stderr
    got = rows(run)
    assert len(got) == 20
    nodes = {r["node"]["name"] for r in got}
    assert nodes == {"n1", "n2"}, nodes
    by_block: dict[int, set[str]] = {}
    for r in got:
        by_block.setdefault(r["block"], set()).add(r["node"]["name"])
        assert (run / "trials").is_dir() and r["node"]["docker"]["version"]
    assert len(by_block) == 4 and all(len(v) == 1 for v in by_block.values()), by_block
    # artifacts came back to the driver's run folder, and their hash chains hold up to the recorded anchor
    for r in got:
        folder = run / "trials" / r["id"].replace("/", "-") / f"a{r['attempt']}"
        assert (folder / "final-workspace.tar").is_file() and (folder / "verdict.json").is_file()
        check = verify_events(folder / "events.jsonl", expected_head=r["events_anchor"])
        assert check.ok and check.count > 0, check.problems
    report = json.loads(subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(run), "--json"],
                                       capture_output=True, text=True, env=ENV, cwd=repo_root, check=True).stdout)
    assert set(report["nodes"]["by_node"]) == {"n1", "n2"}
    assert report["nodes"]["split_blocks"] == [] and report["nodes"]["uneven_candidates"] == []
    # the same experiment on the local backend: every verdict the same
    local = tmp_path / "local-demo"
    rep = subprocess.run([sys.executable, "-m", "orchestrator.cli", "reproduce", str(run), "--unchecked", "--backend", "local",
                          "--scripted-model", str(project / "examples/scripted-model.yaml"), "--out", str(local)],
                         capture_output=True, text=True, env=ENV, cwd=repo_root, timeout=600)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "every verdict matches" in rep.stdout
    assert {r["node"]["name"] for r in rows(local)} == {os.uname().nodename}
    assert run_containers(client, run) == [] and run_containers(client, local) == []


@pytest.mark.timeout(1200)
def test_ctrl_c_on_the_driver_cancels_and_leaves_no_container_on_any_node(cluster, tmp_path, repo_root, client,
                                                                           python_image):
    # the agents sleep far longer than any start-up on a busy host: no trial can end before the Ctrl-C
    manifest = sleepy_manifest(tmp_path / "m", repo_root, 1500, deadline=1800)
    run = tmp_path / "interrupted"
    # another live run whose folder has the same name: its container must survive this run's clean-up
    bystander = client.containers.run(python_image, ["sleep", "300"], detach=True, network_mode="none", labels={
        "org.trialbox.managed": "true", "org.trialbox.run": run.name, OWNER: owner_label()})
    try:  # the bystander is removed whatever fails, the wait or the driver included
        proc = cluster.popen([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--backend",
                              "ray", "--out", str(run)], env=ENV, cwd=repo_root, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
        try:
            on_nodes = lambda: {node_of(cluster, c) for c in run_containers(client, run)}  # noqa: E731
            wait_for(lambda: on_nodes() >= {"n1", "n2"}, 300, "trials running on both nodes", proc, on_nodes)
            proc.send_signal(signal.SIGINT)
            # the interrupt path's own bounds: 30 s for the trials to stop, 15 s for killed workers, two
            # clean-ups of up to 120 s each on the nodes
            out, err = proc.communicate(timeout=330)
        finally:
            if proc.poll() is None:
                proc.kill()
        bystander.reload()
        assert bystander.status == "running"
    finally:
        bystander.remove(force=True)
    assert proc.returncode == 130, out + err
    assert "interrupted" in out + err and "Traceback" not in err
    assert run_containers(client, run) == []
    assert rows(run) == []  # nothing had finished: nothing recorded, nothing half-recorded


@pytest.mark.timeout(1500)
def test_a_lost_node_and_a_lost_worker_are_retried_once_and_nothing_is_lost(cluster, tmp_path, repo_root, client):
    # long enough that agents overlap on both nodes even when a busy host starts them far apart
    manifest = sleepy_manifest(tmp_path / "m", repo_root, 40, deadline=600)
    run = tmp_path / "faults"
    proc = cluster.popen([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--backend", "ray",
                          "--out", str(run)], env=ENV, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=interruptible)
    try:
        def agents_on_both():
            agents = [c for c in run_containers(client, run) if c.labels.get("org.trialbox.role") != "grader"]
            by_node = {}
            for c in agents:
                by_node.setdefault(node_of(cluster, c), []).append(c)
            return by_node if {"n1", "n2"} <= set(by_node) else None

        by_node = wait_for(agents_on_both, 300, "agents running on both nodes", proc,
                           lambda: [(node_of(cluster, c), c.labels.get("org.trialbox.role")) for c in
                                    run_containers(client, run)])
        victim = by_node["n1"][0]
        killed_worker_trial = victim.labels["org.trialbox.trial"]
        lost_trials = {c.labels["org.trialbox.trial"] for c in by_node["n2"]}
        os.kill(int(victim.labels[OWNER].rsplit(":", 2)[1]), signal.SIGKILL)  # n1's Ray worker dies alone
        cluster.kill_node("n2")                                               # n2 is lost with everything on it
        # the dead worker's sandbox is removed by its node at once, not at the end of the run: before the trial's
        # retry (another 40 s of sleep at least) is recorded. Not a wall-clock bound: on a busy host the driver
        # may first wait out n2's ping (up to NODE_ANSWER_S) and n1 may take long to start a worker for the clean
        def victim_gone():
            if victim.id in {c["Id"] for c in client.api.containers(all=True)}:
                return None
            try:
                return ("recorded then", [r for r in rows(run) if r["id"] == killed_worker_trial])
            except sqlite3.Error:  # the store is being written: look again
                return None

        _, recorded_then = wait_for(victim_gone, 600, "the killed worker's sandbox to be removed", proc)
        assert recorded_then == [], "the killed worker's sandbox stayed until its retry had finished"
        assert proc.poll() is None
        out, err = proc.communicate(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    got = rows(run)
    ids = [r["id"] for r in got]
    assert len(ids) == 8 and len(set(ids)) == 8  # every planned trial once: nothing lost, nothing counted twice
    by_id = {r["id"]: r for r in got}
    worker = by_id[killed_worker_trial]
    assert worker["retries"] == 1 and worker["previous_attempts"][0]["kind"] == "worker_lost"
    assert worker["node"]["name"] == "n1"  # retried on its block's node, which was still there
    # every trial that was on n2 (at least those seen there) was retried after node_lost, on n1
    node_lost = {r["id"] for r in got if r.get("previous_attempts") and r["previous_attempts"][0]["kind"] == "node_lost"}
    assert lost_trials <= node_lost
    for t in node_lost:
        r = by_id[t]
        assert r["retries"] == 1 and len(r["previous_attempts"]) == 1, r
        assert r["previous_attempts"][0]["node"] == "n2" and r["node"]["name"] == "n1"
        assert r["previous_attempts"][0]["cost_usd"] is None and r["cost_is_lower_bound"] is True
        lost = json.loads((run / "trials" / t.replace("/", "-") / "a1" / "verdict.json").read_text())
        assert lost["verdict"]["outcome"] == "infra_error" and lost["verdict"]["kind"] == "node_lost"
    for r in got:
        assert r["verdict"]["outcome"] != "infra_error", r["verdict"]
    report = json.loads(subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(run), "--json"],
                                       capture_output=True, text=True, env=ENV, cwd=repo_root, check=True).stdout)
    nodes = report["nodes"]
    assert set(nodes["split_blocks"]) == {by_id[t]["block"] for t in node_lost}
    assert nodes["lost_attempts"] == len(node_lost) + 1
    assert nodes["attempts_with_unknown_cost"] == len(node_lost) + 1
    assert sum(r["retries"] for r in got) == len(node_lost) + 1
    assert any("lost with their node" in w for w in report["warnings"])
    assert "retrying it once" in out
    # the driver removed what the dead processes left on the engine, and the killed worker's folder
    assert run_containers(client, run) == []
    work = load_settings().state_dir / "ray" / "trials"
    assert [w for w in work.glob("*") if not owner_alive((w / "owner").read_text().strip())] == []
