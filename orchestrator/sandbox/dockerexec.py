"""The Docker sandbox's commands: exec with a bounded capture, a timeout that kills everything the command started,
and a dead sandbox told apart from a slow engine.

``exec`` runs the command with a per-call marker in its environment (the engine already starts every exec in a
session of its own). On timeout a second exec, as the same user, kills every process carrying the marker and
every process in their sessions (background children included, even ones that called setsid again); it repeats
until none is left. An engine error is settled before it is reported: a sandbox whose init died is
``SandboxBroken`` (out of memory told apart), one that still answers was a transient fault.
"""

from __future__ import annotations

import threading
import time
import uuid

import docker
import docker.errors
import docker.types
import docker.utils

from ..engine import docker_errors
from ..errors import OutputLost, SandboxBroken, SandboxError
from ..log import get_logger
from .base import CAPTURE_BYTES, ExecResult

log = get_logger("sandbox")

MARKER_VAR = "TRIALBOX_EXEC"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH of trialbox's own commands in a sandbox: the image's read-only folders only (never the workspace,
``$HOME`` or ``/tmp``, where the agent could have planted a ``find``)."""


# Kills every process carrying the marker, and every process in their sessions,
# until a pass finds none. bash builtins only (read, kill, globbing, an arithmetic
# loop): it forks nothing, so it still works when a fork bomb holds every pid the
# cgroup allows. (Its pass list was a command substitution, which forks: under a
# bomb that fork waited on bash's retries; a CI run on a busy host then found the
# bomb still running 10 s after the kill.)
KILL_SCRIPT = r"""
m="$1"; me=$$
for ((pass = 1; pass <= 60; pass++)); do
  found=""; sids=" "
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$me" ] && continue
    while IFS= read -r -d '' kv; do
      if [ "$kv" = "$m" ]; then
        found="$found $p"
        if read -r st < "$d/stat"; then
          set -- ${st##*) }
          [ "${4:-0}" -gt 1 ] && sids="$sids$4 "
        fi
        break
      fi
    done < "$d/environ" 2>/dev/null
  done
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$me" ] && continue
    read -r st < "$d/stat" 2>/dev/null || continue
    set -- ${st##*) }
    case "$sids" in *" ${4:-x} "*) found="$found $p" ;; esac
  done
  [ -z "$found" ] && exit 0
  kill -9 $found 2>/dev/null
done
exit 1
"""


# Kills every process left in the container but PID 1 (the engine's init) and the container's own command (the
# oldest child of PID 1: everything the script left that was orphaned is adopted by PID 1 later), until two passes
# in a row find none. bash builtins only (read, kill, globbing), like KILL_SCRIPT above. A zombie with no live
# thread is not counted: it runs nothing and holds no file, and its reaping is init's, which on a loaded host can
# take longer than many passes (a zombie leader whose threads still run is killed like any process). Passes go on
# for up to KILL_BUDGET_S seconds, not a number of passes: a killed process can take a while to finish exiting.
KILL_BUDGET_S = 10
KILL_FUNCTION = r"""
kill_leftovers() {
  local me=$$ main="" d p st found empty=0 end=$((SECONDS + %d))
  for d in /proc/[0-9]*; do
    p=${d#/proc/}; st=""
    IFS= read -r -d '' st < "$d/stat" 2>/dev/null; [ -n "$st" ] || continue  # the whole of it: a name can hold a newline
    set -- ${st##*) }
    if [ "$2" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then main=$p; fi
  done
  while :; do
    found=""
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case "$p" in 1|"$me"|"$main") continue ;; esac
      st=""; IFS= read -r -d '' st < "$d/stat" 2>/dev/null; [ -n "$st" ] || continue
      set -- ${st##*) }
      if [ "$1" = Z ]; then
        set -- "$d"/task/[0-9]*
        [ "$#" -gt 1 ] || continue
      fi
      found="$found $p"
    done
    if [ -z "$found" ]; then
      empty=$((empty + 1))
      [ "$empty" -ge 2 ] && return 0  # two passes in a row with none: not a fork that outran one scan
    else
      empty=0
      kill -9 $found 2>/dev/null
    fi
    [ "$SECONDS" -le "$end" ] || return 1
  done
}
""" % KILL_BUDGET_S
KILL_LEFTOVERS = KILL_FUNCTION + "kill_leftovers\n"


class _Capture:
    """Keeps the first CAPTURE_BYTES of a stream and counts the rest."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.kept = 0
        self.size = 0

    def add(self, chunk: bytes | None) -> None:
        if not chunk:
            return
        self.size += len(chunk)
        room = CAPTURE_BYTES - self.kept
        if room > 0:
            self.parts.append(chunk[:room])
            self.kept += min(room, len(chunk))

    def data(self) -> bytes:
        return b"".join(self.parts)


class DockerExec:
    """The exec part of ``DockerSandbox`` (a mixin: it uses the sandbox's ``spec``, ``client``, ``container``,
    ``_require``, ``_broken`` and ``_tracks_oom``)."""

    def _exec_create(self, cmd: list[str], user: str, env: dict[str, str], cwd: str) -> str:
        container = self._require()
        try:
            return self._stream_api.exec_create(container.id, cmd, user=user, environment=env,
                                                workdir=cwd, stdout=True, stderr=True)["Id"]
        except docker.errors.APIError as exc:
            if exc.status_code == 409 or not self.is_running():
                raise SandboxBroken(f"sandbox no longer accepts commands: {exc.explanation}",
                                    container=self.spec.name) from exc
            raise SandboxError(f"exec refused: {exc.explanation}", container=self.spec.name) from exc

    def exec(self, cmd: list[str], timeout: float | None = None, *, user: str | None = None,
             env: dict[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        try:
            return self._exec(cmd, timeout, user=user, env=env, cwd=cwd)
        except SandboxBroken:
            raise
        except SandboxError as exc:
            raise self._settled(exc) from exc

    SETTLE_S = 15.0

    def kill_leftovers(self) -> bool:
        """See ``Sandbox.kill_leftovers`` (``KILL_LEFTOVERS``, as the sandbox user)."""
        try:
            return self.exec(["bash", "-c", KILL_LEFTOVERS], timeout=30, env={"PATH": SYSTEM_PATH}).exit_code == 0
        except SandboxError:
            return False

    SETTLE_CONFIRM_S = 1.0
    """How long an engine error under a command waits for the sandbox's state to settle (see ``_settled``)."""

    def _settled(self, exc: SandboxError) -> SandboxError:
        """Which fault an engine error under a command is: the sandbox's own death (the agent's, ``SandboxBroken``)
        or the engine's (``exc`` itself). A sandbox whose init the agent killed goes away over a moment, and on a
        loaded host the engine can answer "no such exec" or cut a stream before its state says "exited": so the
        state is watched until it settles: exited (broken), running and running commands (the engine's error),
        running but refusing every command for ``SETTLE_S`` (broken: unresponsive)."""
        t0 = time.monotonic()
        while True:
            try:
                running: bool | None = self.is_running()
            except SandboxError:
                running = None  # the engine does not answer: not the sandbox's to decide
            if running is False:
                return self._broken()
            if running and self._responds():
                if time.monotonic() - t0 >= self.SETTLE_CONFIRM_S:
                    return exc  # still running commands a moment later: the engine failed, not the sandbox
                time.sleep(0.25)
                continue
            if time.monotonic() - t0 > self.SETTLE_S:
                if running is None:
                    return exc
                return SandboxBroken(f"the sandbox stopped running commands ({exc.message})",
                                     container=self.spec.name, reason="unresponsive")
            time.sleep(0.25)

    def _exec(self, cmd: list[str], timeout: float | None = None, *, user: str | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None) -> ExecResult:
        marker = uuid.uuid4().hex
        full_env = {"HOME": self.spec.home, **self.spec.env, **(env or {}), MARKER_VAR: marker}
        user = user or self.spec.user
        oom_before = self.oom_kill_count() if self._tracks_oom() else None
        t0 = time.monotonic()
        exec_id = self._exec_create(list(cmd), user, full_env, cwd or self.spec.workdir)
        out, err = _Capture(), _Capture()
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                for o, e in self._stream_api.exec_start(exec_id, stream=True, demux=True):
                    out.add(o)
                    err.add(e)
            except BaseException as exc:  # surfaced below
                failure.append(exc)

        reader = threading.Thread(target=pump, daemon=True, name=f"exec-{marker[:8]}")
        reader.start()
        timed_out = self._wait(reader, t0, timeout)
        if timed_out:
            self._kill_marked(marker, user)
            reader.join(10)
            if reader.is_alive():
                raise SandboxBroken("a timed-out command could not be stopped", container=self.spec.name,
                                    reason="unresponsive")
        duration = time.monotonic() - t0
        with docker_errors(self.spec.name):
            exit_code = self._stream_api.exec_inspect(exec_id).get("ExitCode")
        if failure and not timed_out:
            if not self.is_running():
                raise self._broken()
            # the output stream broke while the sandbox lives: what was captured cannot be trusted
            raise OutputLost(f"the output of {cmd[0]!r} was cut off: {failure[0]!r}"[:500], container=self.spec.name)
        oom = False
        if oom_before is not None:
            after = self.oom_kill_count()
            oom = after is not None and after > oom_before
        # The engine reports an exec it could not run or finish (the sandbox died under
        # it) as exit code 126 or 128 with its message as output: confirm with a probe.
        if exit_code in (126, 128) and not self._responds():
            raise self._broken(oom)
        return ExecResult(exit_code, out.data(), err.data(), out.size, err.size, timed_out, duration, oom)

    def _wait(self, reader: threading.Thread, t0: float, timeout: float | None) -> bool:
        """Wait for a command's output to end; True on timeout. A dead sandbox raises ``SandboxBroken``."""
        last_check = t0
        while True:
            reader.join(0.25)
            if not reader.is_alive():
                return False
            now = time.monotonic()
            if timeout is not None and now - t0 >= timeout:
                return True
            if now - last_check >= 1.0:
                last_check = now
                if not self.is_running():
                    raise self._broken()

    def _responds(self) -> bool:
        """Whether a trivial command still runs (the engine reports exec failures as output)."""
        try:
            res = self._require().exec_run(["true"], user=self.spec.user)
        except docker.errors.APIError:
            return False
        return res.exit_code == 0

    def _kill_marked(self, marker: str, user: str) -> None:
        """Kill every process of one exec (see KILL_SCRIPT); escalate to stopping PID 1."""
        for attempt in range(20):
            try:
                res = self.container.exec_run(["bash", "-c", KILL_SCRIPT, "kill", f"{MARKER_VAR}={marker}"],
                                              user=user, environment={"PATH": "/usr/bin:/bin"})
                if res.exit_code == 0:
                    return
            except docker.errors.APIError:
                pass
            time.sleep(0.1)
        if not self.is_running():
            raise self._broken()
        log.warning("could not kill a timed-out command inside; killing the sandbox", sandbox=self.spec.name)
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass
        raise SandboxBroken("a timed-out command could not be killed; the sandbox was stopped",
                            container=self.spec.name, reason="unresponsive")
