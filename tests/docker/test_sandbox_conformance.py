"""Conformance suite: every Sandbox implementation (runc and gVisor) against the real engine.

The file and exec parts (``contract_sandbox``) run on the in-memory sandbox too, which has no engine.

Limits are read back from the cgroup (inside the container under runc; on the
host under gVisor, which exposes no cgroupfs inside). Isolation is checked
against a positive control: the same probe that fails under ``none`` succeeds
on the default bridge.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import threading
import time
from pathlib import Path

import pytest

from orchestrator.errors import SandboxBroken, SandboxError
from orchestrator.sandbox.base import CAPTURE_BYTES
from orchestrator.sandbox.docker import GVISOR_THREAD_HEADROOM

from .conftest import wait_until


def host_cgroup(sb, subsystem: str, name: str) -> str:
    return Path(f"/sys/fs/cgroup/{subsystem}/docker/{sb.container.id}/{name}").read_text().strip()


def cgroup_value(sb, subsystem: str, name: str) -> str:
    """A cgroup file as the container sees it (runc) or as the host sees it (gVisor)."""
    if sb.spec.runtime == "runc":
        res = sb.exec(["cat", f"/sys/fs/cgroup/{subsystem}/{name}"])
        assert res.exit_code == 0, res.stderr
        return res.text().strip()
    return host_cgroup(sb, subsystem, name)


def processes(sb) -> list[str]:
    """The sandbox's processes: a container's, as its own ``ps`` sees them; the memory sandbox's, those carrying its
    token (it runs on the host, whose other processes, another suite's ``sleep 300`` included, are not its own)."""
    from orchestrator.sandbox.memory import TOKEN_VAR, MemorySandbox

    if isinstance(sb, MemorySandbox):
        marker, out = f"{TOKEN_VAR}={sb.token}".encode(), []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                    out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
            except OSError:
                continue
        return out
    res = sb.exec(["ps", "-eo", "args", "--no-headers"])
    return [line.strip() for line in res.text().splitlines()]


def test_limits_are_applied_read_back_and_recorded(make_sandbox, runtime):
    sb = make_sandbox(runtime=runtime, cpu_limit=0.5, cpu_reservation=0.25, memory_limit_mb=384,
                      memory_reservation_mb=128, pids_limit=100)
    hc = sb.info.host_config
    mib = 1024 * 1024
    assert hc["NanoCpus"] == 500_000_000
    assert hc["CpuShares"] == 256
    assert hc["Memory"] == 384 * mib and hc["MemorySwap"] == 384 * mib
    assert hc["MemoryReservation"] == 128 * mib
    assert hc["NetworkMode"] == "none" and hc["Runtime"] == runtime
    assert hc["ReadonlyRootfs"] is True and hc["CapDrop"] == ["ALL"]
    assert hc["SecurityOpt"] == ["no-new-privileges"]

    quota, period = int(cgroup_value(sb, "cpu", "cpu.cfs_quota_us")), int(cgroup_value(sb, "cpu", "cpu.cfs_period_us"))
    assert quota / period == pytest.approx(0.5)
    assert int(cgroup_value(sb, "cpu", "cpu.shares")) == 256
    assert int(cgroup_value(sb, "memory", "memory.limit_in_bytes")) == 384 * mib
    assert int(cgroup_value(sb, "memory", "memory.soft_limit_in_bytes")) == 128 * mib
    if runtime == "runc":
        assert int(cgroup_value(sb, "pids", "pids.max")) == 100
        assert hc["PidsLimit"] == 100
    else:
        # gVisor's own threads count on the host: headroom there, RLIMIT_NPROC inside.
        assert int(cgroup_value(sb, "pids", "pids.max")) == 100 + GVISOR_THREAD_HEADROOM
        assert sb.exec(["bash", "-c", "ulimit -u"]).text().strip() == "100"


def test_hardening(make_sandbox, runtime):
    sb = make_sandbox(runtime=runtime)
    other = make_sandbox(runtime=runtime)
    # a host uid of its own (not the image's 1000, not another live sandbox's), under the image's user name
    uid = sb.exec(["id", "-u"]).text().strip()
    assert uid == sb.spec.user.split(":")[0] and uid != "1000"
    assert other.exec(["id", "-u"]).text().strip() not in (uid, "1000")
    assert sb.exec(["id", "-un"]).text().strip() == "agent" and sb.exec(["id", "-gn"]).text().strip() == "agent"
    owners = "import os; print(*{os.stat(p).st_uid for p in ('/tmp', '/workspace', os.environ['HOME'])})"
    assert sb.exec(["python3", "-c", owners]).text().split() == [uid]  # (gVisor here refuses statx: no ls -n)
    status = sb.exec(["cat", "/proc/self/status"]).text()
    caps = dict(line.split(":\t", 1) for line in status.splitlines() if line.startswith("Cap"))
    assert int(caps["CapEff"], 16) == 0 and int(caps["CapPrm"], 16) == 0
    if runtime == "runc":  # gVisor does not report the flag in /proc
        assert "NoNewPrivs:\t1" in status
    denied = sb.exec(["sh", "-c", "echo x > /usr/local/bin/pytest"])
    assert denied.exit_code != 0
    assert sb.exec(["sh", "-c", "echo ok > /workspace/f && cat /workspace/f"]).text() == "ok\n"


class Listener:
    """A TCP listener on the host answering 'pong' to every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"pong")
            conn.close()

    def close(self) -> None:
        self.sock.close()


PROBE = ("import socket,sys\n"
         "try:\n"
         "    s=socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print(s.recv(4).decode())\n"
         "except OSError as e:\n"
         "    print('blocked', e); sys.exit(7)\n")


def test_network_none_blocks_what_the_bridge_reaches(make_sandbox, runtime):
    listener = Listener()
    try:
        control = make_sandbox(runtime="runc", network="bridge")
        gateway = control.container.attrs["NetworkSettings"]["Networks"]["bridge"]["Gateway"]
        reached = control.exec(["python3", "-c", PROBE, gateway, str(listener.port)], timeout=20)
        assert reached.exit_code == 0 and reached.text().strip() == "pong", reached  # positive control
        accepted = listener.accepted

        isolated = make_sandbox(runtime=runtime, network="none")
        blocked = isolated.exec(["python3", "-c", PROBE, gateway, str(listener.port)], timeout=20)
        assert blocked.exit_code == 7, blocked
        assert listener.accepted == accepted
        interfaces = isolated.exec(["cat", "/proc/net/dev"]).text()
        assert "eth0" not in interfaces
    finally:
        listener.close()


def test_fork_bomb_is_stopped_and_host_stays_responsive(make_sandbox, runtime, client):
    sb = make_sandbox(runtime=runtime, pids_limit=64, memory_limit_mb=512)
    worst, peak_pids, refused = [0.0], [0], [0]
    stop = threading.Event()

    def probe_host() -> None:
        while not stop.is_set():
            t = time.monotonic()
            client.ping()
            worst[0] = max(worst[0], time.monotonic() - t)
            if runtime == "runc":
                try:
                    peak_pids[0] = max(peak_pids[0], int(host_cgroup(sb, "pids", "pids.current")))
                    refused[0] = max(refused[0], int(host_cgroup(sb, "pids", "pids.events").split()[-1]))
                except (OSError, ValueError):
                    pass  # the cgroup is gone once the sandbox is stopped
            time.sleep(0.1)

    prober = threading.Thread(target=probe_host, daemon=True)
    prober.start()
    try:
        try:
            res = sb.exec(["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 30"], timeout=6)
            assert res.timed_out
            broken = False
        except SandboxBroken:
            broken = True  # the sandbox was stopped to end the bomb: the agent's failure, reported as such
    finally:
        stop.set()
        prober.join()
    assert worst[0] < 3.0, f"the engine took {worst[0]:.1f}s to answer during the bomb"
    if runtime == "runc":
        # the limit held and refused forks. Every exec (the command, and each attempt of
        # the kill sweep) joins the cgroup by migration, which the pids controller does
        # not refuse, so a few over the limit can be seen while the sweep retries.
        assert refused[0] > 0 and 0 < peak_pids[0] <= 64 + 8
    else:
        assert broken or sb.exec(["echo", "ok"]).text() == "ok\n"
    if not broken:
        # SIGKILLed processes of a memory-limited cgroup can take a while to go on a busy host
        assert wait_until(lambda: not any("bomb" in p or "sleep 30" in p for p in processes(sb)), 30), processes(sb)


def test_disk_fill_stops_at_the_limit(make_sandbox, runtime):
    sb = make_sandbox(runtime=runtime, disk_limit_mb=32, tmp_limit_mb=16)
    res = sb.exec(["dd", "if=/dev/zero", "of=/workspace/fill", "bs=1M", "count=100"], timeout=60)
    assert res.exit_code != 0 and b"No space left on device" in res.stderr
    size = int(sb.exec(["python3", "-c", "import os; print(os.path.getsize('/workspace/fill'))"]).text())
    assert 20 * 2**20 < size <= 32 * 2**20
    assert sb.disk is not None and os.stat(sb.disk.path).st_blocks * 512 <= 33 * 2**20  # the host file is bounded too
    tmp = sb.exec(["dd", "if=/dev/zero", "of=/tmp/fill", "bs=1M", "count=100"], timeout=60)
    assert tmp.exit_code != 0 and b"No space left on device" in tmp.stderr


def test_timeout_kills_the_command_and_everything_it_started(contract_sandbox):
    sb = contract_sandbox
    t0 = time.monotonic()
    res = sb.exec(["bash", "-c", "sleep 301 & setsid sleep 302 & (nohup sleep 303 >/dev/null 2>&1 &); sleep 304"],
                  timeout=2)
    assert res.timed_out and time.monotonic() - t0 < 15
    assert wait_until(lambda: not any(p.startswith("sleep 30") for p in processes(sb)), 10), processes(sb)
    assert sb.exec(["echo", "still usable"]).text() == "still usable\n"


def test_failing_command_is_data_and_output_is_bounded(contract_sandbox):
    sb = contract_sandbox
    res = sb.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr, res.timed_out) == (3, b"out\n", b"err\n", False)
    big = sb.exec(["python3", "-c", f"import sys; sys.stdout.write('x' * {CAPTURE_BYTES + 12345})"], timeout=60)
    assert big.stdout_size == CAPTURE_BYTES + 12345 and len(big.stdout) == CAPTURE_BYTES


def test_oom_is_reported(make_sandbox, runtime):
    sb = make_sandbox(runtime=runtime, memory_limit_mb=256, memory_reservation_mb=64)
    hog = ["python3", "-c", "x = bytearray(900 * 1024 * 1024); print('survived')"]
    if runtime == "runc":
        res = sb.exec(hog, timeout=60)
        assert res.oom_killed and res.exit_code == 137 and b"survived" not in res.stdout
        assert sb.oom_kill_count() >= 1
        assert sb.is_running()  # PID 1 survived; the OOM was still detected from the cgroup
    else:
        with pytest.raises(SandboxBroken) as info:  # gVisor's kernel is the process the OOM killer takes
            sb.exec(hog, timeout=60)
        assert info.value.reason == "oom"


def test_files_round_trip_and_survive_stop(contract_sandbox):
    sb = contract_sandbox
    sb.write_file("/workspace/notes.txt", b"hello\n")
    assert sb.exec(["cat", "notes.txt"]).stdout == b"hello\n"  # commands run in the workspace
    owner = sb.exec(["python3", "-c", "import os; print(os.stat('notes.txt').st_uid, os.getuid())"])
    assert owner.text().split() == [sb.spec.user.split(":")[0]] * 2
    assert sb.exec(["sh", "-c", "mkdir -p made && echo new > made/by-a-command && rm notes.txt"]).exit_code == 0
    assert sb.read_file("/workspace/made/by-a-command") == b"new\n"  # what a command changed, the files show
    with pytest.raises(SandboxError):
        sb.read_file("/workspace/notes.txt")
    sb.write_file("/workspace/notes.txt", b"hello\n")
    sb.stop()
    assert not sb.is_running()
    assert sb.read_file("/workspace/notes.txt") == b"hello\n"
    names = tarfile.open(fileobj=io.BytesIO(b"".join(sb.copy_out("/workspace")))).getnames()
    assert {"workspace/notes.txt", "workspace/made/by-a-command"} <= set(names)


def test_files_outside_the_workspace_are_read_whole_or_not_at_all(contract_sandbox):
    sb = contract_sandbox
    data = bytes(range(256)) * 4000 + b"no newline at the end"
    sb.write_file("/tmp/blob", data)
    assert sb.read_file("/tmp/blob") == data
    sb.write_file("/tmp/empty", b"")
    assert sb.read_file("/tmp/empty") == b""
    with pytest.raises(SandboxError):
        sb.read_file("/tmp/absent")
    with pytest.raises(ValueError):
        sb.read_file("/tmp/blob", max_bytes=1000)


def test_reads_through_exec_are_read_again_when_the_engine_lost_output(make_sandbox, runtime):
    """Docker reads files outside the workspace through exec, checked against the file's length: output the
    engine lost is read again, and a read that never comes back whole is ``OutputLost``."""
    from dataclasses import replace

    from orchestrator.errors import OutputLost

    sb = make_sandbox(runtime=runtime)
    data = bytes(range(256)) * 4000 + b"no newline at the end"
    sb.write_file("/tmp/blob", data)
    real, calls = sb.exec, []

    def lossy(cmd, *args, **kw):  # the engine's race: the first answers come back empty or cut
        res = real(cmd, *args, **kw)
        calls.append(cmd)
        return replace(res, stdout=b"" if len(calls) == 1 else res.stdout[:-3]) if len(calls) < 3 else res

    sb.exec = lossy
    assert sb.read_file("/tmp/blob") == data and len(calls) == 3
    sb.exec = lambda cmd, *a, **kw: replace(real(cmd, *a, **kw), stdout=b"")
    with pytest.raises(OutputLost):
        sb.read_file("/tmp/blob")


def test_dead_sandbox_is_an_error_not_output(make_sandbox, runtime, client):
    sb = make_sandbox(runtime=runtime)
    client.api.kill(sb.container.id)
    with pytest.raises(SandboxBroken):
        sb.exec(["echo", "hi"])
