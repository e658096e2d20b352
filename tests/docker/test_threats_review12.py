"""Twelfth review (after a9fdf24: a host uid of its own per sandbox), attacking that change and the reach between
trials as the agent under test would, with issue 23's rule in hand.

Each test is one attack with the verdict trialbox must give. A finding the reviewer saw fail on the engine is
``xfail(strict=True)`` with the finding in its reason; attacks that failed stay plain tests (the verdict they must
keep). The uid lease closes the *per-user* kernel counts (the eleventh review's finding 5); these attacks look for
what a distinct uid does not close, and for ways two live containers still get one uid.

Findings (runc, Docker 20.10.24, kernel 6.18; senders stand for a grader, which always runs under runc:
``runner.grader_spec`` names no runtime):

1. ``/proc/sys/fs/aio-nr`` is an exact, host-wide count that any unprivileged process changes with ``io_setup(n)``
   (+n, no noise): a receiver read 0, then 4321 while a sender held 4321. End to end: the code under test of an
   accepted honest trial sent the held-out tests' inputs from its grader, one byte per AIO context of 256 + b
   events, to a sandbox started beside it, which decoded them exactly ("Crème Brûlée|naïve café|Ünïcödé ✓ done",
   99 readings, about 6 s of sending).
2. ``/proc/sys/kernel/pty/nr`` likewise (opening ``/dev/ptmx``): 0, then 37 while a sender held 37.
3. Both are host-wide budgets one container can take whole: one ``io_setup(65536)`` left another container's
   ``io_setup(8)`` failing with EAGAIN; 3,071 ``/dev/ptmx`` opens left another's ``openpty`` failing with ENOSPC.
   A trial's code (in its grader, or its agent under runc) can so make concurrent trials fail: an honest grader whose
   tests use a pseudo-terminal or native AIO is rejected. (Held about a second here.)
4. Every loop device's backing file and I/O counters are readable in every runc container: the receiver found the
   sender's disk (loop0) by its name and read 16,400 more sectors written after the sender wrote 8 MiB; it also
   listed the disks of the other trials running on the host (a ``tasks check`` run by someone else:
   ``tb-taskcheck-…-g-grader-….img``), so trial, task, candidate and grader names are visible too.
5. The counters outlive the disk: a loop device keeps them when detached and attached to the next disk
   (``losetup --find``: the lowest free device). A sender set its device's read count to a residue of its choosing
   (O_DIRECT reads of one block) and was removed; the next sandbox, on the same loop0, read it back: offset 5 in the
   first round, and with that offset it decoded the second round's 201 exactly. A channel between containers that
   never run at once. (Not shown: which container is next on a device in a real run; with the local backend's
   made-ahead trials an agent's sandbox most often follows an agent's sandbox, and a grader a grader.)
6. ``DockerSandbox.remove`` releases the uid lease in ``finally``, also when the engine failed to remove the
   container: with one failed removal (injected: the engine's ``remove`` raising), the first sandbox was still
   running as 1800000 and the next one made also ran as 1800000 (also ``tests/unit/test_review12.py``).
7. Every grader bind-mounts the same host folder (``grading.runner.TOOLS``): a ``flock`` one container takes on
   ``/opt/trialbox-grader/run_tests.py`` (read-only is enough) is seen by another ("locked"), a channel between the
   graders of concurrent trials. The same on a file of the image (its own overlay per container): not seen.
8. Honest set-ups broken by the change: a host folder of uid 1000 closed to others (0700/0600), mounted read-only
   into a sandbox (as a script grader's tests, the oracle's solution folder or the grader tools are), was readable
   by the sandbox's user (uid 1000, its owner) before a9fdf24; now ``cat`` says "Permission denied" to 1800000. The
   README's stated limit names only the image's own files.

Attacks that failed: a runsc receiver (gVisor) could read none of ``aio-nr``, ``pty/nr``, ``/sys/block`` or
``/proc/diskstats``; a lock on a file of the image is not seen by another container.
"""

from __future__ import annotations

import time

import docker.errors
import pytest

from orchestrator.errors import SandboxError
from orchestrator.grading.runner import TOOLS, TOOLS_MOUNT
from tests.docker.test_threats import FIX, SUBMIT, setup, trial  # noqa: F401 - setup is a fixture
from tests.docker.test_threats_review7 import _append


def _bg(sandbox, code: str, *args: str) -> None:
    """``code`` run by python3 in the background of ``sandbox`` (its pid in /tmp/pid)."""
    quoted = " ".join(f"'{a}'" for a in args)
    sandbox.exec(["sh", "-c", f"python3 -c \"$0\" {quoted} >/tmp/bg.log 2>&1 & echo $! > /tmp/pid", code], timeout=60)


def _wait_file(sandbox, path: str, tries: int = 100) -> str:
    for _ in range(tries):
        text = sandbox.exec(["sh", "-c", f"cat {path} 2>/dev/null"], timeout=30).text().strip()
        if text:
            return text
        time.sleep(0.1)
    return ""


def _stop_bg(sandbox) -> None:
    sandbox.exec(["sh", "-c", "kill -9 $(cat /tmp/pid) 2>/dev/null; true"], timeout=30)


def _read_int(sandbox, path: str) -> int | None:
    """The number in ``path`` as ``sandbox`` reads it (None: it cannot read one there, gVisor's /proc for one)."""
    text = sandbox.exec(["sh", "-c", f"cat {path} 2>/dev/null"], timeout=30).text().strip()
    return int(text) if text.isdigit() else None


def receivers(finding: str):
    """The receiver stands for an agent's sandbox (the manifest's runtime); the sender for a grader (runc at the review:
    ``runner.grader_spec`` names no runtime), or another runc trial. Seen at the review: a runc receiver read the
    count (``finding``), a runsc one cannot read it at all (gVisor's own /proc and /sys). Fixed since: a runc
    container has these files masked (``docker.HOST_COUNT_PATHS``)."""
    return pytest.mark.parametrize("receiver_runtime", ["runc", "runsc"])


def xfail(finding: str):
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=finding)


F1 = ("review 12 finding 1: the host's count of AIO events (/proc/sys/fs/aio-nr) is exact, host-wide and readable in "
      "every runc container: io_setup(n) in one is read as n in another (a uid of its own changes nothing)")
F2 = ("review 12 finding 2: the host's count of pseudo-terminals (/proc/sys/kernel/pty/nr) is exact, host-wide and "
      "readable in every runc container: opening /dev/ptmx k times in one is read as k in another")
F3 = ("review 12 finding 3: one container takes the whole host budget of AIO events (fs.aio-max-nr) or of "
      "pseudo-terminals (pty.max less the host's reserve); every other trial's io_setup or openpty then fails")
F4 = ("review 12 finding 4: every loop device's backing file (the other trials' sandbox and grader names) and its exact "
      "I/O counters (/proc/diskstats) are readable in every runc container")
F5 = ("review 12 finding 5: a loop device's I/O counters outlive its disk: the next container on that device reads a "
      "residue the previous one chose (a channel between containers that never run at once)")
F6 = ("review 12 finding 6: DockerSandbox.remove releases the uid lease in `finally`, also when the engine failed to "
      "remove the container: two live containers then run as one uid")
F7 = ("review 12 finding 7: every grader bind-mounts the same host folder (grader_tools): a lock one takes on a file of "
      "it is seen by every other grader at once")
F8 = ("review 12 finding 8: a host folder of uid 1000 closed to others, mounted read-only into a sandbox (a script "
      "grader's tests, the oracle's solution, the grader's tools) was readable by the sandbox's user before a9fdf24 "
      "and is not now")


# ---------------------------------------------------------------------------------------------------------------
# Host-wide exact counts: AIO events and pseudo-terminals.
# ---------------------------------------------------------------------------------------------------------------

HOLD_AIO = ("import ctypes, sys, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "ctx = ctypes.c_ulong(0)\n"
            "r = libc.syscall(206, int(sys.argv[1]), ctypes.byref(ctx))\n"  # io_setup (x86_64)
            "open('/tmp/held', 'w').write('%d %d' % (r, ctypes.get_errno()))\n"
            "time.sleep(60)\n")


@receivers(F1)
def test_one_trials_aio_contexts_are_not_read_by_another(make_sandbox, receiver_runtime):
    """``io_setup(n)`` adds exactly n to the host's ``aio-nr``, which every container reads: a sender holding 4,321
    events is read as 4,321 by a receiver beside it (a distinct uid changes nothing: the count is not per user)."""
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)
    before = _read_int(receiver, "/proc/sys/fs/aio-nr")
    _bg(sender, HOLD_AIO, "4321")
    held = _wait_file(sender, "/tmp/held")
    during = _read_int(receiver, "/proc/sys/fs/aio-nr")
    _stop_bg(sender)
    print(f"aio-nr in the receiver: {before} before, {during} while the sender held 4321 (io_setup: {held!r}); "
          f"uids: sender {sender.spec.user}, receiver {receiver.spec.user}")
    assert before is None or during == before, f"the receiver read {during - before} (the sender held 4321)"


HOLD_PTYS = ("import os, sys, time\n"
             "fds = [os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY) for _ in range(int(sys.argv[1]))]\n"
             "open('/tmp/held', 'w').write(str(len(fds)))\n"
             "time.sleep(60)\n")


@receivers(F2)
def test_one_trials_pseudo_terminals_are_not_read_by_another(make_sandbox, receiver_runtime):
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)
    before = _read_int(receiver, "/proc/sys/kernel/pty/nr")
    _bg(sender, HOLD_PTYS, "37")
    held = _wait_file(sender, "/tmp/held")
    during = _read_int(receiver, "/proc/sys/kernel/pty/nr")
    _stop_bg(sender)
    print(f"pty/nr in the receiver: {before} before, {during} while the sender held {held!r}")
    assert before is None or during == before, f"the receiver read {during - before} (the sender held {held})"


def test_every_host_count_reads_empty_in_a_runc_sandbox(make_sandbox):
    """Fixed after the review (findings 1, 2, 4 and 5, and the same class: open files, inodes, dentries, every
    mounted workspace disk's ext4 and journal figures): each of ``HOST_COUNT_PATHS`` reads as an empty file or an
    empty folder in a runc sandbox, while the host has them."""
    import os

    from orchestrator.sandbox.docker import HOST_COUNT_PATHS

    sandbox = make_sandbox()
    seen = sandbox.exec(["sh", "-c", "for p in \"$@\"; do printf '%s ' \"$p\"; if [ -d \"$p\" ]; then ls -A \"$p\" | "
                         "wc -l; else wc -c < \"$p\" 2>/dev/null || echo gone; fi; done", "sh", *HOST_COUNT_PATHS],
                        timeout=60).text().split()
    found = dict(zip(seen[::2], seen[1::2]))
    print("in the sandbox (entries or bytes):", found)
    assert set(found) == set(HOST_COUNT_PATHS)
    on_host = [p for p in HOST_COUNT_PATHS if os.path.exists(p) and (os.listdir(p) if os.path.isdir(p) else
                                                                      open(p, "rb").read())]
    assert len(on_host) >= 8, on_host  # the host has them, with content
    assert all(v in ("0", "gone") for v in found.values()), found


def test_the_engines_own_masked_paths_stay_masked(client, make_sandbox):
    """Giving ``MaskedPaths`` replaces the engine's list: ``ENGINE_MASKED_PATHS`` must hold every path this engine
    masks in a container made without one (``/proc/kcore``, ``/sys/firmware``, ...), and the sandbox has them all."""
    from orchestrator.sandbox.docker import ENGINE_MASKED_PATHS, MASKED_PATHS

    sandbox = make_sandbox()
    plain = client.containers.create(sandbox.spec.image_id, command=["true"], network_disabled=True)
    try:
        engine = plain.attrs["HostConfig"].get("MaskedPaths") or []
    finally:
        plain.remove(force=True)
    sandbox.container.reload()
    ours = sandbox.container.attrs["HostConfig"].get("MaskedPaths") or []
    print("the engine's defaults:", engine, "the sandbox's:", ours)
    assert engine and set(engine) <= set(ENGINE_MASKED_PATHS)
    assert set(ours) == set(MASKED_PATHS)
    import os

    if os.listdir("/sys/firmware"):  # the host has firmware tables; the sandbox sees an empty folder
        assert sandbox.exec(["sh", "-c", "ls -A /sys/firmware | wc -l"], timeout=30).text().strip() == "0"


TAKE_ALL_AIO = ("import ctypes, time\n"  # no reading of aio-nr (masked since): halving until nothing is left
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "n, held, ctxs = int(open('/proc/sys/fs/aio-max-nr').read()), 0, []\n"
                "while n >= 1:\n"
                "    ctx = ctypes.c_ulong(0)\n"
                "    if libc.syscall(206, n, ctypes.byref(ctx)) == 0:\n"
                "        held += n\n"
                "        ctxs.append(ctx)\n"
                "    else:\n"
                "        n //= 2\n"
                "open('/tmp/held', 'w').write('%d %d %d' % (held, len(ctxs), ctypes.get_errno()))\n"
                "time.sleep(20)\n")
TRY_AIO = ("import ctypes\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "ctx = ctypes.c_ulong(0)\n"
           "r = libc.syscall(206, 8, ctypes.byref(ctx))\n"
           "print(r, ctypes.get_errno())\n")


@xfail(F3)
def test_one_trial_cannot_take_every_aio_context_of_the_host(make_sandbox):
    """Denial of service to every other trial (and the host): ``fs.aio-max-nr`` is one host-wide budget, and one
    unprivileged ``io_setup`` can take all of it (held a few seconds only)."""
    hog, other = make_sandbox(), make_sandbox()
    assert other.exec(["python3", "-c", TRY_AIO], timeout=30).text().split()[0] == "0"  # works alone
    _bg(hog, TAKE_ALL_AIO)
    try:
        held = _wait_file(hog, "/tmp/held")
        got = other.exec(["python3", "-c", TRY_AIO], timeout=30).text().split()
    finally:
        _stop_bg(hog)
    print(f"the hog took (events, contexts, last errno) {held!r}; the other's io_setup(8) then gave (result, errno) {got}")
    assert got[0] == "0", f"another trial's io_setup failed while one sandbox held the host's AIO budget: {got}"


TAKE_ALL_PTYS = ("import os, resource, time\n"
                 "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                 "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
                 "fds, err = [], ''\n"
                 "while len(fds) < 8192:\n"
                 "    try:\n"
                 "        fds.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))\n"
                 "    except OSError as exc:\n"
                 "        err = repr(exc)\n"
                 "        break\n"
                 "open('/tmp/held', 'w').write('%d %s' % (len(fds), err))\n"
                 "time.sleep(20)\n")
TRY_PTY = ("import os\n"
           "try:\n"
           "    os.openpty()\n"
           "    print('ok')\n"
           "except OSError as exc:\n"
           "    print('failed', repr(exc))\n")


@xfail(F3)
def test_one_trial_cannot_take_every_pseudo_terminal_of_the_host(make_sandbox):
    """Denial of service to every other trial: containers share ``kernel.pty.max`` less the host's reserve (3,072 of
    4,096 here), and one process can open that many ``/dev/ptmx`` (held a few seconds only). An honest grader
    whose tests use a pseudo-terminal (``pty``, ``pexpect``) beside it then fails."""
    hog, other = make_sandbox(), make_sandbox()
    assert other.exec(["python3", "-c", TRY_PTY], timeout=30).text().strip() == "ok"  # works alone
    _bg(hog, TAKE_ALL_PTYS)
    try:
        held = _wait_file(hog, "/tmp/held")
        got = other.exec(["python3", "-c", TRY_PTY], timeout=30).text().strip()
    finally:
        _stop_bg(hog)
    print(f"the hog opened {held!r}; the other's openpty then: {got}")
    assert got == "ok", f"another trial could not open a pseudo-terminal while one sandbox held them: {got}"


# ---------------------------------------------------------------------------------------------------------------
# Another trial's workspace disk: its name and its I/O.
# ---------------------------------------------------------------------------------------------------------------

FIND_DISK = ("import glob, sys\n"
             "names, dev, written = [], None, None\n"
             "for f in sorted(glob.glob('/sys/block/loop*/loop/backing_file')):\n"
             "    try:\n"
             "        back = open(f).read().strip()\n"
             "    except OSError:\n"
             "        continue\n"
             "    names.append(back.rsplit('/', 1)[-1])\n"
             "    if back.endswith('/' + sys.argv[1] + '.img'):\n"
             "        dev = f.split('/')[3]\n"
             "try:\n"
             "    for line in open('/proc/diskstats'):\n"
             "        p = line.split()\n"
             "        if dev is not None and p[2] == dev:\n"
             "            written = int(p[9])\n"
             "except OSError:\n"
             "    pass\n"
             "print(dev, written, len(names), ' '.join(names[:12]))\n")


@receivers(F4)
def test_one_trials_disk_is_neither_named_nor_metered_in_another(make_sandbox, receiver_runtime):
    """Every loop device's backing file (``/var/lib/trialbox/disks/<sandbox name>.img``: run, task, candidate,
    replicate, grader) and its exact I/O counters are readable in every container: a grader's code can write k
    sectors to its own workspace and an agent beside it reads k (no other process writes that disk)."""
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)

    def look() -> list[str]:
        return receiver.exec(["python3", "-c", FIND_DISK, sender.spec.name], timeout=60).text().split()

    first = look()
    sender.exec(["sh", "-c", "dd if=/dev/zero of=/workspace/blob bs=1M count=8 conv=fsync 2>/dev/null; sync"],
                timeout=60)
    second = look()
    print(f"the receiver sees the sender's disk as {first[0]}; sectors written {first[1]} then {second[1]} "
          f"after the sender wrote 8 MiB; backing files seen ({first[2]}): {' '.join(first[3:])}")
    assert first[0] == "None", f"the receiver found the sender's disk ({first[0]}) by its name"
    assert first[1] == second[1], "the receiver reads the sender's disk writes"


# ---------------------------------------------------------------------------------------------------------------
# The folder every grader mounts: one inode, one lock.
# ---------------------------------------------------------------------------------------------------------------

LOCK = ("import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "open('/tmp/held', 'w').write('held')\n"
        "time.sleep(30)\n")
PROBE_LOCK = ("import fcntl, os, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
              "try:\n"
              "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
              "    print('free')\n"
              "except BlockingIOError:\n"
              "    print('locked')\n")


def test_graders_get_the_tools_and_tests_as_copies_of_their_own():
    """Fixed after the review (finding 7): the grader's tools (and a script grader's tests) are ``copied_mounts``, a
    copy per container, never one host folder bind-mounted into all."""
    import types

    from orchestrator.grading.runner import GraderLimits
    from orchestrator.grading.specs import grader_spec

    task = types.SimpleNamespace(grader=types.SimpleNamespace(kind="pytest"),
                                 runtime=types.SimpleNamespace(sandbox_env=lambda: {}))
    spec = grader_spec("sha256:" + "0" * 64, task, GraderLimits(), "tb-review12")
    assert (str(TOOLS), TOOLS_MOUNT) in spec.copied_mounts and not spec.mounts


@pytest.mark.parametrize("path, shared", [
    pytest.param(f"{TOOLS_MOUNT}/run_tests.py", True, marks=xfail(F7), id="one-folder-bind-mounted-into-both"),
    pytest.param(f"{TOOLS_MOUNT}/run_tests.py", False, id="grader-tools-as-graders-get-them"),
    pytest.param("/usr/lib/python3.11/os.py", False, id="image-file")])
def test_one_graders_lock_is_not_seen_by_another(make_sandbox, path, shared):
    """Two containers with the grader tools folder: bind-mounted, one host folder for both (as graders had it when
    the review found this), or as ``specs.grader_spec`` gives it now (a copy each); a lock one takes on a file of
    it (read-only is enough for ``flock``). The same on a file of the image (its own overlay in each container)
    for comparison."""
    mounts = ((str(TOOLS), TOOLS_MOUNT),)
    how = {"mounts": mounts} if shared else {"copied_mounts": mounts}
    sender, receiver = make_sandbox(**how), make_sandbox(**how)
    free = receiver.exec(["python3", "-c", PROBE_LOCK, path], timeout=30).text().strip()
    _bg(sender, LOCK, path)
    held = _wait_file(sender, "/tmp/held")
    during = receiver.exec(["python3", "-c", PROBE_LOCK, path], timeout=30).text().strip()
    _stop_bg(sender)
    print(f"{path}: the receiver found it {free} before, {during} while the sender held a lock ({held!r})")
    assert free == "free" and during == "free", (free, during)


# ---------------------------------------------------------------------------------------------------------------
# A lease given back while its container may still run.
# ---------------------------------------------------------------------------------------------------------------

class _RemoveFails:
    """A container whose ``remove`` fails once at the engine (a timeout, a busy daemon), everything else its own."""

    def __init__(self, real) -> None:
        self._real = real

    def remove(self, **kw):
        raise docker.errors.APIError("engine timed out removing the container (injected)")

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_a_sandbox_whose_removal_failed_keeps_its_uid(make_sandbox):
    first = make_sandbox()
    uid_first = first.exec(["id", "-u"], timeout=30).text().strip()
    real = first.container
    first.container = _RemoveFails(real)
    try:
        with pytest.raises(SandboxError):
            first.remove()
    finally:
        first.container = real
    second = make_sandbox()
    uid_second = second.exec(["id", "-u"], timeout=30).text().strip()
    real.reload()
    running = real.status
    print(f"the first sandbox ({uid_first}) is {running} after its failed removal; the next one runs as {uid_second}")
    assert not (running == "running" and uid_first == uid_second), \
        f"two live containers run as uid {uid_first}: a lease was given back before its container was gone"


# ---------------------------------------------------------------------------------------------------------------
# End to end: the held-out tests' inputs from a grader to a sandbox beside it, through aio-nr.
# ---------------------------------------------------------------------------------------------------------------

SEND_HELD_OUT_AIO = r"""
import sys as _sys
if _sys.argv and _sys.argv[0].endswith("run_tests.py") and any("test_slug.py" in a for a in _sys.argv):
    import ast as _ast, ctypes as _ct, time as _time
    _libc = _ct.CDLL(None, use_errno=True)
    _src = open("/workspace/tests/test_slug_unicode.py", encoding="utf-8").read()
    _inputs = [n.args[0].value for n in _ast.walk(_ast.parse(_src)) if isinstance(n, _ast.Call)
               and getattr(n.func, "id", "") == "slugify" and n.args and isinstance(n.args[0], _ast.Constant)]
    for _b in "|".join(_inputs).encode():
        _ctx = _ct.c_ulong(0)
        if _libc.syscall(206, 256 + _b, _ct.byref(_ctx)) == 0:
            _time.sleep(0.08)
            _libc.syscall(207, _ctx)
        _time.sleep(0.05)
"""
"""One AIO context of 256 + b events per byte b, held 80 ms, 50 ms apart."""

SAMPLE_AIO = ("import os, time\n"
              "end = time.monotonic() + float(os.environ.get('SAMPLE_S', '150'))\n"
              "out = open('/tmp/samples', 'w', buffering=1)\n"
              "last = None\n"
              "while time.monotonic() < end:\n"
              "    v = int(open('/proc/sys/fs/aio-nr').read())\n"
              "    if v != last:\n"
              "        out.write('%d\\n' % v)\n"
              "        last = v\n"
              "    time.sleep(0.005)\n")


def _decode_aio(values: list[int]) -> bytes:
    if not values:
        return b""
    base = min(values)
    return bytes(v - base - 256 for v in values if 256 <= v - base < 512)


def test_the_held_out_tests_do_not_reach_a_sandbox_beside_the_grader_through_aio(setup, client, tmp_path,
                                                                                 make_sandbox):
    receiver = make_sandbox()
    receiver.exec(["sh", "-c", "python3 -c \"$0\" >/dev/null 2>&1 &", SAMPLE_AIO], timeout=60)
    time.sleep(1)
    verdict, _, _ = trial(setup, client, tmp_path, FIX + _append("textkit/slug.py", SEND_HELD_OUT_AIO) + SUBMIT)
    values = [int(x) for x in receiver.exec(["cat", "/tmp/samples"], timeout=60).text().split() if x.isdigit()]
    got = _decode_aio(values)
    print("grader to sandbox through aio-nr:", verdict["outcome"], verdict["reasons"], len(values), "readings;",
          "received:", got.decode("utf-8", "replace"))
    assert "naïve café".encode() not in got and "Ünïcödé".encode() not in got, got


# ---------------------------------------------------------------------------------------------------------------
# A loop device outlives its trial: its I/O counters are cumulative since the host's boot, and the next workspace
# disk attached to it (``losetup --find``: the lowest free device, so most often the one just freed) starts with
# them. A container that sets its device's count of reads to a residue of its choosing (O_DIRECT reads of one block,
# one request each) leaves that residue to the next container made on the host: a channel that needs no two trials
# to run at once (a grader to the next trial's agent, with ``concurrency: 1``).
# ---------------------------------------------------------------------------------------------------------------

MY_DISK = ("import glob, sys\n"
           "def device(name):\n"
           "    for f in glob.glob('/sys/block/loop*/loop/backing_file'):\n"
           "        try:\n"
           "            if open(f).read().strip().endswith('/' + name + '.img'):\n"
           "                return f.split('/')[3]\n"
           "        except OSError:\n"
           "            pass\n"
           "def reads(dev):\n"
           "    if dev is None:\n"
           "        return 0\n"
           "    for line in open('/proc/diskstats'):\n"
           "        p = line.split()\n"
           "        if p[2] == dev:\n"
           "            return int(p[3])\n")
LEAVE_RESIDUE = MY_DISK + (
    "import mmap, os\n"
    "dev = device(sys.argv[1])\n"
    "with open('/workspace/f', 'wb') as fh:\n"
    "    fh.write(b'x' * 4096); fh.flush(); os.fsync(fh.fileno())\n"
    "fd = os.open('/workspace/f', os.O_RDONLY | os.O_DIRECT)\n"
    "buf = mmap.mmap(-1, 4096)\n"
    "for _ in range(3):\n"
    "    need = (int(sys.argv[2]) - reads(dev)) % 256\n"
    "    for _ in range(need):\n"
    "        os.preadv(fd, [buf], 0)\n"
    "print(dev, reads(dev))\n")
READ_MINE = MY_DISK + "dev = device(sys.argv[1])\nprint(dev, reads(dev))\n"


def test_a_workspace_disk_does_not_carry_an_earlier_containers_io(make_sandbox):
    """Found as F5; fixed since by masking (``docker.HOST_COUNT_PATHS``): no container finds its own loop device by
    its backing file, nor any device's counters, so none reads what an earlier one left (the decoding below stays,
    for an engine that would not mask)."""
    rounds = []
    for message in (37, 201):
        sender = make_sandbox()
        dev_s, left = sender.exec(["python3", "-c", LEAVE_RESIDUE, sender.spec.name, str(message)],
                                  timeout=120).text().split()
        sender.remove()
        receiver = make_sandbox()
        dev_r, found = receiver.exec(["python3", "-c", READ_MINE, receiver.spec.name], timeout=60).text().split()
        receiver.remove()
        rounds.append((message, dev_s, int(left), dev_r, int(found)))
    print("rounds (message, sender's device, its reads, receiver's device, reads it found):", rounds)
    (m1, d1, l1, r1, f1), (m2, d2, l2, r2, f2) = rounds
    assert d1 == r1 == d2 == r2 == "None", "a container found its loop device (and with it the device's counters)"
    offset = (f1 - m1) % 256  # what the receiver's own start adds, learnt once
    decoded = (f2 - offset) % 256
    print(f"the second receiver decodes {decoded} with the first round's offset {offset} (the sender left {m2})")
    assert not (d2 == r2 and decoded == m2), "a container read the residue an earlier one left on its loop device"


# ---------------------------------------------------------------------------------------------------------------
# Honest work: what still assumed uid 1000. Folders of the host bind-mounted read-only into sandboxes and graders
# (the grader's tools, a script grader's tests, the oracle's solution folder) are read by the sandbox's user. Where
# such a folder belongs to the host's uid 1000 (the first user of a workstation, who checked the repository out) and
# is closed to others (umask 077), the sandbox's user read it as its owner before a9fdf24, and cannot now.
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("copied", [pytest.param(False, marks=xfail(F8), id="bind-mounted"),
                                    pytest.param(True, id="copied-as-graders-get-them")])
def test_a_host_folder_of_uid_1000_mounted_into_a_sandbox_stays_readable(make_sandbox, tmp_path, copied):
    """Bind-mounted: the finding, as a property of bind mounts (trialbox no longer bind-mounts a folder of the
    user's: the oracle's solution folder, a grader's tools and a script grader's tests are all ``copied_mounts``
    since the review; only folders trialbox makes itself, such as the model proxy's socket folder, are bind-mounted).
    Copied: readable."""
    import os

    folder = tmp_path / "task-tests"
    folder.mkdir()
    (folder / "test.sh").write_text("echo reward 1\n")
    for path, mode in ((folder, 0o700), (folder / "test.sh", 0o600)):
        os.chown(path, 1000, 1000)
        path.chmod(mode)
    mounts = ((str(folder), "/opt/task-tests"),)
    sandbox = make_sandbox(**({"copied_mounts": mounts} if copied else {"mounts": mounts}))
    res = sandbox.exec(["sh", "-c", "id -u; cat /opt/task-tests/test.sh"], timeout=30)
    print("reading a mounted folder of the host's uid 1000 (mode 0700):", res.exit_code, res.text().strip(),
          res.stderr.decode(errors="replace").strip())
    assert res.exit_code == 0, "a folder of uid 1000 mounted into the sandbox is no longer readable by its user"
