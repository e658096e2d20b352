"""The change an agent made: computed on the host from two trees, never with git.

The original is the trusted history-free repository (from the host's cache);
the final tree is the exported workspace. Paths are compared as normalised
relative paths; the unified diff covers UTF-8 text files, binary files are
named.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .tree import Tree

MAX_DIFF_FILE = 1 << 20
ARTIFACT_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def is_artifact(path: str) -> bool:
    """Files tools leave behind when they run (bytecode, test caches): not changes, never graded."""
    parts = path.split("/")
    return any(p in ARTIFACT_DIRS for p in parts) or path.endswith((".pyc", ".pyo"))


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added | deleted | modified | mode | symlink


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)
    text: str = ""

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


def _text(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    if len(data) > MAX_DIFF_FILE or b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def compute_diff(original: Tree, final: Tree) -> Diff:
    diff = Diff()
    parts: list[str] = []
    for path in sorted(set(original.files) | set(final.files) | set(original.symlinks) | set(final.symlinks)):
        if is_artifact(path):
            continue
        a, b = original.files.get(path), final.files.get(path)
        la, lb = original.symlinks.get(path), final.symlinks.get(path)
        if la != lb:
            diff.changes.append(Change(path, "symlink"))
            parts.append(f"symlink {path}: {la!r} -> {lb!r}\n")
            continue
        if a == b:
            if a is not None and (path in original.executable) != (path in final.executable):
                diff.changes.append(Change(path, "mode"))
                parts.append(f"mode {path}: executable {path in final.executable}\n")
            continue
        kind = "added" if a is None else "deleted" if b is None else "modified"
        diff.changes.append(Change(path, kind))
        ta, tb = _text(a), _text(b)
        if ta is None or tb is None:
            parts.append(f"Binary files a/{path} and b/{path} differ\n")
        else:
            parts.extend(difflib.unified_diff(ta, tb, f"a/{path}" if a is not None else "/dev/null",
                                              f"b/{path}" if b is not None else "/dev/null"))
    diff.text = "".join(p if p.endswith("\n") else p + "\n" for p in parts)
    return diff
