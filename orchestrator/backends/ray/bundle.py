"""What travels to the nodes: the run's files as one content-addressed bundle, and a trial's folder back.

No shared filesystem is assumed: the manifest, the task and grader folders and the candidates' files go to
the nodes once per run, as one deterministic tar in Ray's object store, unpacked once per node; paths inside
it are the driver's absolute paths, rebased under the node's unpack folder.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import uuid
from pathlib import Path

from .common import ray
from ...errors import TrialboxError
from ...manifest import LoadedManifest
from ...settings import load_settings
from ...tasks import Task


def _abs(p: Path) -> Path:
    """Absolute and free of ``..`` (lexically: the same name on the driver and inside the bundle)."""
    return Path(os.path.normpath(p.absolute()))


def bundle_paths(loaded: LoadedManifest, tasks: list[Task]) -> list[Path]:
    """Every file or folder a trial reads on its node: manifest, candidate files, task and grader folders."""
    paths = [_abs(loaded.path)]
    for c in loaded.manifest.candidates:
        for field in ("script", "system_prompt"):
            if getattr(c, field, None) is not None:
                paths.append(_abs(loaded.resolve(getattr(c, field))))
    for t in tasks:
        paths += [_abs(t.folder), _abs(t.grader_folder)]
        src = _abs(t.repo_source())
        if not src.is_relative_to(_abs(t.folder)):
            paths.append(src)
    return sorted(set(paths))


def make_bundle(paths: list[Path]) -> bytes:
    """A deterministic tar of ``paths`` under their absolute names (without the leading ``/``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top in paths:
            members = [top] + (sorted(top.rglob("*")) if top.is_dir() and not top.is_symlink() else [])
            for p in members:
                info = tar.gettarinfo(str(p), arcname=str(p).lstrip("/"))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isfile():
                    with open(p, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def rebase(p: Path, root: Path) -> Path:
    return root / str(_abs(p)).lstrip("/")


def rebase_task(task: Task, root: Path) -> Task:
    """The task with its folders (and an absolute repository path) inside an unpacked bundle."""
    config = task.config
    if config.repo.git is not None and Path(config.repo.git).is_absolute():
        config = config.model_copy(update={"repo": config.repo.model_copy(
            update={"git": str(rebase(Path(config.repo.git), root))})})
    return task.model_copy(update={"config": config, "folder": rebase(task.folder, root),
                                   "grader_folder": rebase(task.grader_folder, root)})


def unpack_bundle(sha: str, holder: list) -> Path:
    """The run's bundle on this node, unpacked once per node (content-addressed, atomic)."""
    root = load_settings().state_dir / "ray" / "bundles" / sha
    if root.is_dir():
        return root
    data = ray.get(holder[0])
    if hashlib.sha256(data).hexdigest() != sha:
        raise TrialboxError(f"the experiment bundle arrived damaged (expected sha256 {sha})")
    tmp = root.with_name(f".{sha}.{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp, filter="tar")
    try:
        tmp.rename(root)
    except OSError:  # another worker of this node unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def pack_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(folder.rglob("*")):
            tar.add(str(p), arcname=str(p.relative_to(folder)), recursive=False)
    return buf.getvalue()
