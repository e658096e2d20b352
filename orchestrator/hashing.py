"""Content hashes of folders and files, stable across machines.

A tree hash covers each regular file's relative path, executable bit and
content, and each symlink's target; ``.git`` folders and Python caches are
left out (a repository's commit is recorded on its own).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def iter_tree(root: Path):
    """Yield (relative posix path, absolute path) of every file and symlink, sorted."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
        links = [d for d in os.listdir(dirpath) if os.path.islink(os.path.join(dirpath, d)) and os.path.isdir(os.path.join(dirpath, d))]
        for name in sorted(set(filenames) | set(links)):
            if name.endswith(".pyc"):
                continue
            full = Path(dirpath) / name
            yield full.relative_to(root).as_posix(), full


def tree_sha256(root: Path) -> str:
    """A content hash of a folder: paths, executable bits, contents, symlink targets."""
    h = hashlib.sha256()
    for rel, full in iter_tree(Path(root)):
        if full.is_symlink():
            h.update(f"L {rel}\0{os.readlink(full)}\0".encode())
        else:
            mode = "x" if os.access(full, os.X_OK) else "f"
            h.update(f"{mode} {rel}\0{sha256_file(full)}\0".encode())
    return h.hexdigest()


def combine(named: dict[str, str]) -> str:
    """One hash over a mapping of names to hashes (order-independent)."""
    h = hashlib.sha256()
    for key in sorted(named):
        h.update(f"{key}\0{named[key]}\0".encode())
    return h.hexdigest()
