"""The task repository at its commit, ready inside the container.

A generated medium repository (about 2,000 files, 20 MB, 300 commits of
history) is made ready in /workspace of a freshly started sandbox:

* trialbox, seeded: the workspace disk is a sparse copy of a golden ext4 image
  holding the history-free repository (built once per repository, commit and
  disk size); nothing crosses the engine's API;
* trialbox, copy-in: the cached history-free tar copied in through the engine;
* baseline: ``git archive <commit> | tar -x`` into the container (no .git at all).

Each measurement covers starting the sandbox and making the repository ready;
removal is outside it.
Run: .venv/bin/python benchmarks/repo_ready.py [pairs]
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

from _common import report

from orchestrator.engine import connect
from orchestrator.images import resolve_image
from orchestrator.repos import materialize
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox
from orchestrator.settings import load_settings
from orchestrator.tasks import GraderConfig, Task, TaskConfig, git_env

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("TRIALBOX_BENCH_DIR", "/tmp/trialbox-bench"))


def generate_repo(path: Path, files: int = 2000, size_mb: int = 20, commits: int = 300) -> str:
    """A deterministic repository; returns its head commit (reused when already there)."""
    if (path / ".git").is_dir():
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True).stdout.strip()
    rng = random.Random(42)
    path.mkdir(parents=True)
    env = {**git_env(), "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}
    git = lambda *a: subprocess.run(["git", *a], cwd=path, env=env, check=True, capture_output=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    per_file = size_mb * 2**20 // files
    names = [f"pkg{i % 40}/mod{i}.py" for i in range(files)]
    for name in names:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        words = [f"value_{rng.randrange(10**6)} = {rng.randrange(10**9)}" for _ in range(per_file // 28)]
        (path / name).write_text("\n".join(words) + "\n")
    git("add", "-A")
    git("commit", "-q", "-m", "initial")
    for c in range(commits - 1):
        for name in rng.sample(names, 5):
            with open(path / name, "a") as fh:
                fh.write(f"change_{c} = {rng.randrange(10**9)}\n")
        git("commit", "-q", "-am", f"change {c}")
    return generate_repo(path)


def main(pairs: int = 12) -> int:
    client = connect()
    image = resolve_image(client, ROOT / "images", "python").image_id
    source = WORK / "medium-repo"
    commit = generate_repo(source)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "instruction.md").write_text("bench\n")
    task = Task(config=TaskConfig(id="bench", repo={"git": str(source), "commit": commit}, image="python",
                                  difficulty="medium"),
                folder=WORK, grader=GraderConfig(tests=Path("."), fail_to_pass=["x"]), grader_folder=WORK)
    cache = load_settings().repos_dir
    t0 = time.perf_counter()
    repo = materialize(task, cache)
    print(f"history-free repository: commit {repo.commit[:12]}, tar {repo.tar_path.stat().st_size / 2**20:.1f} MiB, "
          f"made (or found) in {time.perf_counter() - t0:.2f}s")

    def started(seed: Path | None = None) -> DockerSandbox:
        sb = DockerSandbox(SandboxSpec(image_id=image, name=f"bench-repo-{uuid.uuid4().hex[:8]}", disk_limit_mb=512,
                                       workspace_seed=str(seed) if seed else None), client)
        sb.start()
        return sb

    def trialbox_seeded() -> DockerSandbox:
        return started(materialize(task, cache).tar_path)  # cache hit after the first trial of this (repo, commit)

    def trialbox_copy_in() -> DockerSandbox:
        sb = started()
        with open(materialize(task, cache).tar_path, "rb") as fh:
            sb.copy_in(fh, "/workspace")
        return sb

    def git_archive() -> DockerSandbox:
        sb = started()
        proc = subprocess.Popen(["git", "archive", "--format=tar", commit], cwd=source, stdout=subprocess.PIPE, env=git_env())
        sb.copy_in(proc.stdout, "/workspace")
        assert proc.wait() == 0
        return sb

    times: dict[str, list[float]] = {"seeded": [], "copy_in": [], "archive": []}
    variants = [("seeded", trialbox_seeded), ("copy_in", trialbox_copy_in), ("archive", git_archive)]
    for i in range(pairs + 1):
        for name, fn in (variants if i % 2 == 0 else variants[::-1]):
            t = time.perf_counter()
            sb = fn()
            elapsed = time.perf_counter() - t
            try:
                assert sb.exec(["test", "-f", "/workspace/pkg0/mod0.py"]).exit_code == 0
            finally:
                sb.remove()
            if i > 0:  # the first round is a warm-up
                times[name].append(elapsed)
    print("each side: a fresh sandbox started and the repository ready in /workspace")
    ok = report("repository ready (workspace disk seeded from a cached golden image)",
                "trialbox seeded disk", times["seeded"], "git archive | tar -x", times["archive"], 1.0)
    report("repository ready (history-free tar copied in through the engine)",
           "trialbox copy-in", times["copy_in"], "git archive | tar -x", times["archive"], 1.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 12))
