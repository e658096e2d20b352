"""``trialbox tasks check``: is this task set fit to be trusted?

For every task: the oracle is accepted on every replicate; nop is never
accepted; every fail-to-pass test fails and every pass-to-pass test passes on
the untouched repository; outcomes do not change between identical runs
(flaky tests); the repository holds one commit and nothing of the held-out
material; the task image holds none of the held-out files either.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import docker

from .agents import BudgetLimits
from .grading.export import tree_from_tar
from .grading.runner import GraderLimits, compose, run_tests
from .job import ensure_lock
from .manifest import LoadedManifest, NopCandidate, OracleCandidate
from .repos import materialize
from .sandbox.base import SandboxSpec
from .sandbox.docker import DockerSandbox
from .settings import load_settings
from .store import RunPaths
from .tasks import Task, git_env
from .trial import TrialSpec, run_trial


def _held_out(task: Task) -> dict[str, bytes]:
    out = {}
    for p in sorted(task.grader_folder.rglob("*")):
        if p.is_file() and p.name != "grader.yaml" and "__pycache__" not in p.parts and p.stat().st_size > 0:
            out[p.relative_to(task.grader_folder).as_posix()] = p.read_bytes()
    return out


def _history(tar: Path) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tar) as tf:
        tf.extractall(tmp, filter="data")
        proc = subprocess.run(["git", "-c", "safe.directory=*", "log", "--all", "--format=%H"], cwd=tmp,
                              capture_output=True, text=True, env=git_env())  # our own repository, made on the host
        return proc.stdout.split()


def _image_leaks(client, image_id: str, held: dict[str, bytes]) -> list[str]:
    names = sorted({Path(p).name for p in held})
    spec = SandboxSpec(image_id=image_id, name=f"tb-taskcheck-{uuid.uuid4().hex[:8]}", disk_limit_mb=32)
    with DockerSandbox(spec, client) as sb:
        script = 'for n in "$@"; do find / -xdev -type f -name "$n" -exec sha256sum {} + 2>/dev/null; done'
        out = sb.exec(["sh", "-c", script, "sh", *names], timeout=120).text()
    digests = {hashlib.sha256(v).hexdigest(): k for k, v in held.items()}
    return [f"{digests[line.split()[0]]} is in the image at {line.split(maxsplit=1)[1]}"
            for line in out.splitlines() if line.split() and line.split()[0] in digests]


def check_task(task: Task, loaded: LoadedManifest, client, image_id: str, replicates: int, folder: Path) -> list[str]:
    problems: list[str] = []
    repo = materialize(task, load_settings().repos_dir)
    commits = _history(repo.tar_path)
    if commits != [repo.commit]:
        problems.append(f"the repository shows {len(commits)} commits, expected exactly its one")
    original = tree_from_tar(repo.tar_path)
    held = _held_out(task)
    repo_digests = {hashlib.sha256(v).digest() for v in original.files.values()}
    problems += [f"held-out {p} is in the repository" for p, v in held.items() if hashlib.sha256(v).digest() in repo_digests]
    problems += _image_leaks(client, image_id, held)
    g = task.grader
    nodes = g.fail_to_pass + g.pass_to_pass
    runs = [run_tests(client, image_id, compose(original, original, task), task, nodes, GraderLimits(), "tb-taskcheck")
            for _ in range(2)]
    problems += [f"grader integrity on the untouched repository: {p}" for r in runs for p in r.integrity]
    untouched = runs[0].outcomes
    problems += [f"fail-to-pass {n} passes on the untouched repository" for n in g.fail_to_pass if untouched.get(n) == "passed"]
    problems += [f"pass-to-pass {n} does not pass on the untouched repository ({untouched.get(n, 'not run')})"
                 for n in g.pass_to_pass if untouched.get(n) != "passed"]
    verdicts = {}
    paths = RunPaths(folder)
    run_id = f"taskcheck-{uuid.uuid4().hex[:8]}"  # concurrent checks never share container names
    limits = BudgetLimits(deadline_seconds=600)
    m = loaded.manifest
    for i in range(replicates):
        spec = TrialSpec(f"{task.id}/oracle/{i}", run_id, task, OracleCandidate(name="oracle", agent="oracle"), i,
                         image_id, m.environment, limits)
        verdicts[spec.trial_id] = run_trial(spec, loaded, client, paths)["verdict"]
    nop = TrialSpec(f"{task.id}/nop/0", run_id, task, NopCandidate(name="nop", agent="nop"), 0, image_id,
                    m.environment, limits)
    verdicts[nop.trial_id] = run_trial(nop, loaded, client, paths)["verdict"]
    for tid, v in verdicts.items():
        if "/oracle/" in tid and not v["accepted"]:
            problems.append(f"the oracle was not accepted ({tid}: {v['outcome']} {v['reasons']})")
        if "/nop/" in tid and v["accepted"]:
            problems.append(f"nop was accepted ({tid})")
    outcome_sets = [runs[0].outcomes, runs[1].outcomes] + [
        {k: v for c in verdict["criteria"] if c["name"] in ("fail_to_pass", "pass_to_pass")
         for k, v in c["evidence"]["outcomes"].items()} for tid, verdict in verdicts.items() if "/oracle/" in tid]
    for node in nodes:
        if len({s.get(node) for s in outcome_sets[:2]}) > 1 or len({s.get(node) for s in outcome_sets[2:]}) > 1:
            problems.append(f"flaky: {node} changed outcome between identical runs")
    return problems


def check_tasks(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, replicates: int = 2,
                say: Callable[[str], None] = print) -> bool:
    lock = ensure_lock(loaded, tasks, client)
    ok = True
    with tempfile.TemporaryDirectory(prefix="trialbox-taskcheck-") as tmp:
        for task in tasks:
            image_id = lock["images"][task.config.image]["image_id"]
            problems = check_task(task, loaded, client, image_id, replicates, Path(tmp))
            ok = ok and not problems
            say(f"{task.id:32s} {'ok' if not problems else 'PROBLEMS'}")
            for p in problems:
                say(f"    {p}")
    say("task set ok" if ok else "task set has problems")
    return ok
