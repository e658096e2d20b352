"""History-free repositories: a task's repository as one fresh commit.

The agent's container receives a repository with exactly one commit, no
remotes, tags, reflogs, hooks or other refs, so ``git log --all`` inside shows
nothing beyond the task's starting point (no future fix to read). It is built
on the host from *trusted* sources only (the task folder's files, or
``git archive`` of the task author's repository); git never runs on a ``.git``
the agent could have touched.

The commit is deterministic: fixed author, committer, dates and message, so
the same files give the same commit id on every machine. Nothing in it names
where the files came from (the message is ``initial state``; the upstream
commit id stays in the host's records), so an agent with any way out cannot
look the fix up by it. The result is cached
as a tar (owned by the sandbox user) keyed by the source's content.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import RepoError
from .hashing import sha256_bytes, tree_sha256
from .sandbox.disks import workspace_filter
from .tasks import Task, git_env, trusted_git_dir

FIXED_DATE = "2000-01-01T00:00:00+0000"
SANDBOX_UID = 1000
REPO_FORMAT = "repo/2"
"""Part of the cache key: a new format (repo/2: the commit message names no source) never reuses an old tar."""
SANDBOX_GID = 1000


@dataclass(frozen=True)
class MaterializedRepo:
    """A history-free repository ready to copy into a sandbox."""

    commit: str
    """The one commit's id (deterministic)."""
    source: str
    """Where it came from: ``dir:<tree sha256>`` or ``git:<commit>``."""
    tar_path: Path
    """Cached tar of the working tree with its one-commit ``.git``, owned by the sandbox user."""


def _git(cwd: Path, *args: str) -> str:
    env = git_env()
    env.update(GIT_AUTHOR_NAME="trialbox", GIT_AUTHOR_EMAIL="trialbox@localhost",
               GIT_COMMITTER_NAME="trialbox", GIT_COMMITTER_EMAIL="trialbox@localhost",
               GIT_AUTHOR_DATE=FIXED_DATE, GIT_COMMITTER_DATE=FIXED_DATE)
    proc = subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
                           "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", *args],
                          cwd=cwd, capture_output=True, env=env, text=True)
    if proc.returncode != 0:
        raise RepoError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def source_identity(task: Task) -> str:
    """What the repository's content is pinned by: the folder's hash or the source commit."""
    r = task.config.repo
    if r.dir is not None:
        return f"dir:{tree_sha256(task.repo_source())}"
    return f"git:{r.commit}"


def _export_source(task: Task, dest: Path) -> None:
    r = task.config.repo
    src = task.repo_source()
    if r.dir is not None:
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
        return
    proc = subprocess.run(["git", "-C", str(trusted_git_dir(src)), "-c", "core.hooksPath=/dev/null", "archive",
                           "--format=tar", r.commit or ""], capture_output=True, env=git_env())
    if proc.returncode != 0:
        raise RepoError(f"git archive {r.commit} failed in {src}: {proc.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tf:
        tf.extractall(dest, filter=workspace_filter)


def _strip_git_dir(git_dir: Path) -> None:
    """Leave only what one commit on one branch needs."""
    for name in ("hooks", "logs", "info", "description", "COMMIT_EDITMSG", "ORIG_HEAD", "FETCH_HEAD"):
        p = git_dir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _tar_tree(root: Path, out: Path) -> None:
    """A deterministic tar of ``root`` (sorted, fixed mtimes, owned by the sandbox user)."""
    def fix(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid, ti.gid, ti.uname, ti.gname, ti.mtime = SANDBOX_UID, SANDBOX_GID, "", "", 946684800
        return ti

    fd, name = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")  # concurrent builds never collide
    os.fchmod(fd, 0o644)
    os.close(fd)
    tmp = Path(name)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                full = Path(dirpath) / name
                tf.add(full, arcname=full.relative_to(root).as_posix(), recursive=False, filter=fix)
    os.replace(tmp, out)


def materialize(task: Task, cache_dir: Path) -> MaterializedRepo:
    """The task's repository as one deterministic commit, cached as a tar under ``cache_dir``."""
    identity = source_identity(task)
    key = sha256_bytes(f"{REPO_FORMAT}\0{identity}".encode())[:24]
    cache_dir.mkdir(parents=True, exist_ok=True)
    tar_path, commit_file = cache_dir / f"{key}.tar", cache_dir / f"{key}.commit"
    if tar_path.is_file() and commit_file.is_file():
        return MaterializedRepo(commit_file.read_text().strip(), identity, tar_path)
    with tempfile.TemporaryDirectory(prefix="trialbox-repo-") as tmp:
        work = Path(tmp) / "repo"
        work.mkdir()
        _export_source(task, work)
        _git(work, "init", "-q")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "--allow-empty", "-m", "initial state")  # no source id: the agent reads this
        commit = _git(work, "rev-parse", "HEAD")
        _strip_git_dir(work / ".git")
        _tar_tree(work, tar_path)
    fd, name = tempfile.mkstemp(dir=cache_dir, prefix=commit_file.name, suffix=".tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(commit + "\n")
    os.replace(name, commit_file)  # two builds of one source write the same content: either may win
    return MaterializedRepo(commit, identity, tar_path)
