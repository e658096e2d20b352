"""The bare reference of a whole trial, in docker-py: what trial.py and throughput.py compare trialbox with."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.images import resolve_recipe
from orchestrator.repos import materialize
from orchestrator.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
TASK = "textkit-slug-unicode"
"""The sample task the throughput and memory benchmarks run nop trials on."""


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.uid, ti.gid, ti.mode = len(data), 1000, 1000, 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def strip_root(tar: bytes) -> bytes:
    """The engine's export of /workspace (members under ``workspace/``) as members relative to it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tar)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for m in src.getmembers():
            name = m.name.split("/", 1)[1] if "/" in m.name else ""
            if not name:
                continue
            m.name = name
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return out.getvalue()



@dataclass
class BareTrial:
    """The steps of one trial done bare: agent container, repository in, the oracle's commands (or none: nop),
    export, grader container, final workspace and tests in, pytest, exit code (see trial.py's docstring)."""

    client: object
    image: str
    repo_tar: bytes
    target: str
    fixed: bytes
    tests: dict[str, bytes]
    nodes: list[str]
    env: object

    @classmethod
    def of(cls, client, loaded, task) -> "BareTrial":
        image = resolve_recipe(client, loaded.resolve(loaded.manifest.tasks.images), task.recipe).image_id
        repo_tar = materialize(task, load_settings().repos_dir).tar_path.read_bytes()
        g = task.grader
        patch = task.grader_path(g.solution).read_text()
        target = next(line[6:].strip() for line in patch.splitlines() if line.startswith("+++ b/"))
        tests = {p.relative_to(task.grader_folder).as_posix(): p.read_bytes()
                 for p in task.grader_path(g.tests).rglob("*") if p.is_file()}
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            with tarfile.open(fileobj=io.BytesIO(repo_tar)) as tf:
                tf.extractall(work / "repo", filter="data")
            subprocess.run(["patch", "-p1", "-s", "-d", str(work / "repo"), "-i", str(task.grader_path(g.solution))],
                           check=True)
            fixed = (work / "repo" / target).read_bytes()
        return cls(client, image, repo_tar, target, fixed, tests, g.fail_to_pass + g.pass_to_pass,
                   loaded.manifest.environment)

    def run(self, oracle: bool = True) -> None:
        env, client = self.env, self.client
        mem = env.memory_limit_mb * 2**20
        limits = dict(user="1000:1000", working_dir="/workspace", nano_cpus=int(env.cpu_limit * 1e9),
                      cpu_shares=512, mem_limit=mem, memswap_limit=mem, pids_limit=env.pids_limit,
                      network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"], read_only=True,
                      init=True, tmpfs={"/tmp": "size=64m", "/home/agent": "size=64m"}, volumes=["/workspace"])
        c = client.containers.create(self.image, ["sleep", "infinity"], name=f"bench-a-{uuid.uuid4().hex[:8]}",
                                     **limits)
        try:
            c.start()
            c.put_archive("/workspace", self.repo_tar)
            if oracle:
                assert c.exec_run(["cat", self.target]).exit_code == 0
                c.put_archive("/workspace/" + str(Path(self.target).parent),
                              tar_of({Path(self.target).name: self.fixed}))
            assert c.exec_run(["true"]).exit_code == 0  # submit
            stream, _ = c.get_archive("/workspace")
            final = b"".join(stream)
        finally:
            c.remove(force=True, v=True)
        gr = client.containers.create(self.image, ["sleep", "infinity"], name=f"bench-g-{uuid.uuid4().hex[:8]}",
                                      **limits)
        try:
            gr.start()
            gr.put_archive("/workspace", strip_root(final))
            gr.put_archive("/workspace", tar_of(self.tests))
            res = gr.exec_run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *self.nodes])
            assert (res.exit_code == 0) == oracle, res.output[-2000:]
        finally:
            gr.remove(force=True, v=True)


def nop_manifest(folder: Path, name: str, concurrency: int, trials: int, environment: dict, deadline_s: float,
                 agents: tuple[str, ...] = ("nop",)) -> Path:
    """A manifest of ``trials`` trials per candidate (one per agent of ``agents``: nop by default) on the sample
    task ``TASK`` (the repository's own task set), written into ``folder``: the benchmarks' runs of the whole
    ``trialbox run``."""
    m = {"experiment": {"name": f"{name}-{concurrency}", "seed": 1},
         "candidates": [{"name": a, "agent": a} for a in agents],
         "environment": {"cpu_limit": 1.0, **environment},
         "execution": {"trials_per_task": trials, "deadline_seconds": deadline_s, "concurrency": concurrency,
                       "order": "sequential"},
         "tasks": {"path": str(ROOT / "tasks"), "graders": str(ROOT / "graders"), "images": str(ROOT / "images"),
                   "select": [TASK]},
         "analysis": {"k": [1]}}
    path = folder / f"m{concurrency}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(m))
    return path
