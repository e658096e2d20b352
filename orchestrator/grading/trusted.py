"""What the grader trusts, computed on the host from the task author's files only.

* **Test files after the test patch.** A ``test_patch`` is applied on the host
  to the trusted initial commit (``git apply``, in a scratch folder, never on
  anything the agent wrote); the files it adds or modifies are trusted in
  their post-patch version, and the files it deletes must be absent when the
  tests run. A patch that does not apply is a task-set error
  (``TestPatchError``), never the agent's. A ``tests:`` folder's files are
  trusted as they are.
* **The repository's pytest configuration.** pytest's own rule picks the file:
  walking up from the test files' folder to the repository root, the first of
  ``pytest.ini``, ``.pytest.ini``, ``pytest.toml``, ``.pytest.toml``,
  ``pyproject.toml`` (with ``[tool.pytest.ini_options]`` or ``[tool.pytest]``),
  ``tox.ini`` (with ``[pytest]``), ``setup.cfg`` (with ``[tool:pytest]``). It is
  read from the trusted initial commit, never from the agent's copy, and handed
  to pytest as a copy under a name of the grader's (``-c``) beside the original,
  so relative paths in it (``pythonpath``, ``testpaths``) mean what they mean
  in the repository. A repository with no configuration gets an empty one at
  its root, so test ids are always relative to the repository root.
"""

from __future__ import annotations

import hashlib
import posixpath
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import TestPatchError
from ..tasks import Task, git_env
from .tree import Tree

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class TrustedTests:
    """The grader's trusted test material for one task."""

    __test__ = False
    files: dict[str, bytes]
    """Files added or changed by the test patch (post-patch) and the held-out ``tests:`` folder's files."""
    deleted: frozenset[str]
    """Files the test patch deletes: absent when the tests run."""


_cache: dict[tuple[str, str], TrustedTests] = {}


def held_out_files(task: Task) -> dict[str, bytes]:
    """The files of the grader's ``tests:`` folder, by their path in the workspace."""
    held: dict[str, bytes] = {}
    g = task.grader
    if g.tests is not None:
        base = task.grader_path(g.tests)
        for p in sorted(base.rglob("*")) if base.is_dir() else []:
            if p.is_file() and "__pycache__" not in p.parts:
                held[posixpath.join(str(g.tests).rstrip("/"), p.relative_to(base).as_posix())] = p.read_bytes()
    return held


def _apply(patch: bytes, original: Tree) -> tuple[dict[str, bytes], frozenset[str]]:
    with tempfile.TemporaryDirectory(prefix="trialbox-testpatch-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        for path, data in original.files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        for path, target in original.symlinks.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).symlink_to(target)
        (Path(tmp) / "test.patch").write_bytes(patch)
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(Path(tmp) / "test.patch")],
                              cwd=root, capture_output=True, env=git_env())
        if proc.returncode != 0:
            raise TestPatchError(proc.stderr.decode(errors="replace").strip()[-1500:] or "git apply failed")
        after: dict[str, bytes] = {}
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink():
                after[p.relative_to(root).as_posix()] = p.read_bytes()
    changed = {p: b for p, b in after.items() if original.files.get(p) != b}
    deleted = frozenset(p for p in original.files if p not in after)
    return changed, deleted


def trusted_tests(task: Task, original: Tree) -> TrustedTests:
    """The post-patch test files and the held-out folder's; ``TestPatchError`` when the patch does not apply."""
    g = task.grader
    held = held_out_files(task)
    if g.test_patch is None:
        return TrustedTests(held, frozenset())
    patch = task.grader_path(g.test_patch).read_bytes()
    key = (original.digest(), hashlib.sha256(patch).hexdigest())
    if key not in _cache:
        changed, deleted = _apply(patch, original)
        _cache[key] = TrustedTests(changed, deleted)
    t = _cache[key]
    return TrustedTests({**t.files, **held}, t.deleted)


def _declares_pytest(name: str, text: str) -> bool:
    if name in ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"):
        return True
    if name == "pyproject.toml":
        return "[tool.pytest.ini_options]" in text or "[tool.pytest]" in text
    if name == "tox.ini":
        return any(line.strip() == "[pytest]" for line in text.splitlines())
    return any(line.strip() == "[tool:pytest]" for line in text.splitlines())  # setup.cfg


def find_config(tree: Tree, test_files: list[str]) -> str | None:
    """The repository's pytest configuration file for these test files, as pytest picks it (None: none)."""
    dirs = [posixpath.dirname(f) for f in test_files] or [""]
    common = posixpath.commonpath(dirs) if all(dirs) else ""
    parts = common.split("/") if common else []
    for i in range(len(parts), -1, -1):
        folder = "/".join(parts[:i])
        for name in CONFIG_FILES:
            path = posixpath.join(folder, name) if folder else name
            data = tree.files.get(path)
            if data is not None and _declares_pytest(name, data.decode("utf-8", "replace")):
                return path
    return None


def config_copy(tree: Tree, test_files: list[str], nonce: str) -> tuple[str, bytes, str | None]:
    """(path in the workspace, content, original path) of the configuration file the grader hands to pytest."""
    found = find_config(tree, test_files)
    if found is None:
        return f".trialbox-pytest-{nonce[:12]}.ini", b"[pytest]\n", None
    folder, name = posixpath.split(found)
    data = tree.files[found]
    suffix = {".toml": ".toml", ".cfg": ".cfg"}.get(posixpath.splitext(name)[1], ".ini")
    if name in ("pytest.ini", ".pytest.ini") and b"[pytest]" not in data:
        data = b"[pytest]\n" + data  # an empty pytest.ini counts; under another name it needs its section
    copy = f".trialbox-pytest-{nonce[:12]}{suffix}"
    return (posixpath.join(folder, copy) if folder else copy), data, found
