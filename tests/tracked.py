"""Copying the project's own files for a test: only what git tracks, never a working tree's leftovers
(a lock written by hand, a run folder, a cache), so a test sees what a fresh clone has."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def tracked_files(repo_root: Path, path: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo_root), "ls-files", "-z", "--", path],
                         capture_output=True, check=True).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def copy_tracked(repo_root: Path, path: str, dest: Path) -> Path:
    """Copy what git tracks at ``path`` (a folder or a file of ``repo_root``) to ``dest`` (symlinks kept as
    links); returns ``dest``."""
    files = tracked_files(repo_root, path)
    assert files, f"nothing tracked at {path}"
    for rel in files:
        src = repo_root / rel
        inner = Path(rel).relative_to(path) if rel != path else Path()
        dst = dest / inner if inner != Path() else dest
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest
