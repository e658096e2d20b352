"""The install step: a task's declared set-up command, run from trusted inputs only.

Run in the workspace while it holds the trusted initial commit, as the
sandbox user, with the task's environment: before the agent starts in the
agent's sandbox, and again in the grader before the final files go in. The
files it creates in the workspace (an ``*.egg-info``, a built extension) are
its *outputs*: they belong to trialbox, not to the agent, so they are left out
of the agent's diff and scope, and in the grader the outputs of the grader's
own install run are put back over whatever the agent left at those paths.
Bytecode is never an output (a stale ``.pyc`` must never stand for changed
source). Writes outside the workspace can only go to ``$HOME`` and ``/tmp``
(the root filesystem is read-only): ``pip install --user`` puts a package in
``$HOME/.local``, whose site folder the grader adds explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sandbox.base import Sandbox

BEFORE = "/tmp/.trialbox-before"
NEW = "/tmp/.trialbox-new"
STASH = "/tmp/.trialbox-install-out.tar"
LIST_NEW = r"""
set -e
cd /workspace
find . -mindepth 1 \( -type f -o -type l \) -printf '%P\0' | LC_ALL=C sort -z > /tmp/.trialbox-after
LC_ALL=C sort -z /tmp/.trialbox-before > /tmp/.trialbox-before-sorted
LC_ALL=C comm -z -23 /tmp/.trialbox-after /tmp/.trialbox-before-sorted \
  | { grep -zvE '(^|/)__pycache__/|\.py[co]$' || true; } > /tmp/.trialbox-new
"""
STASH_AND_CLEAR = f"""
set -e
cd /workspace
tar --null -cf {STASH} -T {NEW}
find /workspace -mindepth 1 -delete
"""


@dataclass(frozen=True)
class InstallResult:
    """What the install step did."""

    exit_code: int | None
    log_tail: str
    outputs: tuple[str, ...]
    """Workspace paths it created (bytecode left out)."""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_install(sandbox: Sandbox, command: str, original_paths: list[str], timeout: float = 600.0) -> InstallResult:
    """Run ``command`` in the workspace (which holds the trusted initial commit) and list what it created."""
    res = sandbox.exec(["sh", "-c", command], timeout=timeout)
    tail = (res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace"))[-3000:]
    if not res.ok:
        return InstallResult(res.exit_code, tail, (), res.timed_out)
    sandbox.write_file(BEFORE, b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in original_paths))
    listed = sandbox.exec(["sh", "-c", LIST_NEW], timeout=120)
    if not listed.ok:
        return InstallResult(listed.exit_code, "listing the install step's outputs failed: " + listed.text()[-1000:], ())
    raw = sandbox.read_file(NEW, max_bytes=64 << 20)
    outputs = tuple(p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p)
    return InstallResult(0, tail, outputs)


def stash_outputs_and_clear(sandbox: Sandbox) -> bool:
    """Keep the install outputs aside and empty the workspace; False when the sandbox refused."""
    return sandbox.exec(["sh", "-c", STASH_AND_CLEAR], timeout=300).ok


def restore_outputs(sandbox: Sandbox) -> bool:
    """Put the stashed install outputs back over the workspace (they win over the agent's files)."""
    # whatever the agent left at those paths (a file, a folder, a link) is removed first, never written through
    return sandbox.exec(["tar", "-C", "/workspace", "--unlink-first", "--recursive-unlink", "-xf", STASH],
                        timeout=300).ok
