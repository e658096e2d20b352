"""Thirteenth review (after 2450ea4: host-wide counts masked), looking for what the masking misses: host-wide values
that code in one container moves by an amount of its choosing and code in another reads.

The reviewer could not use the engine (its rules gave it none at the time) and rebuilt the sandbox's settings by
hand on this host's kernel (new net, ipc, pid, uts and mount namespaces, a uid of its own, no capabilities, no new
privileges; not the engine's seccomp profile). Its findings, each seen for two chosen amounts N:

1. ``/proc/locks`` lists every open-file-description lock of the host with the byte range its taker chose: data,
   not only a count (N = 23 and 71 locks read as 24 and 72 lines). **Fixed**: masked (``HOST_COUNT_PATHS``).
2. ``/proc/net/sockstat`` counts the host's sockets (TCP ``alloc``: N plain ``socket()`` calls read exactly) and
   ``/proc/net/softnet_stat`` its packets; the engine's mount over ``/proc/net/...`` does not hold, so they cannot be
   masked. Open.
3. ``/proc/vmstat`` (also ``/proc/zoneinfo`` and the node's ``vmstat``) has exact counts of locked pages
   (``nr_mlock``: N mlocked pages), pinned pages (``nr_foll_pin_acquired``: N O_DIRECT reads) and huge-page faults
   (``thp_fault_alloc``: 0 since boot, then N). Masking ``/proc/vmstat`` breaks tools (psutil's swap figures warn).
   Open.
4. ``Committed_AS`` in ``/proc/meminfo`` moves by exactly N MiB when N MiB are mapped and never touched (no memory
   used, nothing charged to the container). Open.
5. The host disk's own ``stat`` under ``/sys/devices/pci…`` (outside the masked block folders): N uncached reads of
   a shared file read as N. Open (the path is the machine's; not tried on the engine).
6. Identifiers drawn from host-wide counters reach a container through its own objects, which no mask hides:
   socket cookies (``SO_COOKIE``), eventfd ids, memfd and pipe inode numbers, inotify rename cookies; and the page
   cache of a file every container shares (an image layer) can be probed with ``RWF_NOWAIT``. Open.

What did not leak: SysV IPC and POSIX queues (per namespace), POSIX and flock locks (hidden across pid namespaces),
``/proc/sys`` beyond what is masked, ``/proc/key-users`` (``add_key`` is refused by the engine's seccomp profile).

The class is the kernel's shared state. Masking files closes the exact counters found so far, not the class:
``runtime: runsc`` (gVisor, its own kernel for the container) closes it, and since this review a run under runsc
grades under runsc too (``GraderLimits.for_environment``; under runc it stays open). The tests below are the reviewer's attacks on the engine, as the lead wrote them
from its report: the one fixed passes, the open ones are xfail, not strict where host noise can blur a count.
"""

from __future__ import annotations

import pytest

from tests.docker.test_threats import setup  # noqa: F401 - a fixture
from tests.docker.test_threats_review12 import _bg, _stop_bg, _wait_file

LOCKS = ("import fcntl, os, struct, sys, time\n"
         "fd = os.open('/tmp/locked', os.O_RDWR | os.O_CREAT, 0o600)\n"
         "os.ftruncate(fd, 1 << 24)\n"
         "F_OFD_SETLK = 37\n"
         "for i in range(int(sys.argv[1])):\n"
         "    fcntl.fcntl(fd, F_OFD_SETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 1000000 + 2 * i, 1, 0))\n"
         "open('/tmp/held', 'w').write('held')\n"
         "time.sleep(60)\n")


def _lines(sandbox, path: str) -> int | None:
    res = sandbox.exec(["sh", "-c", f"wc -l < {path}"], timeout=30)
    text = res.text().strip()
    return int(text) if res.exit_code == 0 and text.isdigit() else None


@pytest.mark.parametrize("receiver_runtime", ["runc", "runsc"])
def test_one_trials_file_locks_are_not_listed_in_another(make_sandbox, receiver_runtime):
    """Finding 1, fixed: the sender's 23 open-file-description locks (at offsets it chose) are not in the
    receiver's ``/proc/locks``."""
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)
    before = _lines(receiver, "/proc/locks")
    _bg(sender, LOCKS, "23")
    held = _wait_file(sender, "/tmp/held")
    during = _lines(receiver, "/proc/locks")
    seen = receiver.exec(["sh", "-c", "grep -c 10000 /proc/locks || true"], timeout=30).text().strip()
    _stop_bg(sender)
    print(f"/proc/locks in the receiver: {before} lines before, {during} while the sender held 23 ({held!r}); "
          f"lines with the sender's offsets: {seen}")
    assert held == "held"
    assert before == during and seen in ("", "0"), "the receiver read the sender's locks"


MLOCK = ("import ctypes, mmap, sys, time\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "n = int(sys.argv[1])\n"
         "m = mmap.mmap(-1, n * 4096)\n"
         "addr = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
         "r = libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(n * 4096))\n"
         "open('/tmp/held', 'w').write('%d %d' % (r, ctypes.get_errno()))\n"
         "time.sleep(60)\n")


def _field(sandbox, path: str, name: str) -> int | None:
    text = sandbox.exec(["sh", "-c", f"grep -m1 '^{name}' {path} 2>/dev/null"], timeout=30).text().split()
    return int(text[1]) if len(text) >= 2 and text[1].isdigit() else None


def open_under_runc(finding: str):
    """runc receivers read the figure (``finding``, not strict: host noise can blur a count); runsc receivers have
    no such file (gVisor's own /proc), measured."""
    return pytest.mark.parametrize("receiver_runtime", [
        pytest.param("runc", marks=pytest.mark.xfail(strict=False, raises=AssertionError, reason=finding)), "runsc"])


@open_under_runc("review 13 finding 3: /proc/vmstat's nr_mlock counts the host's locked pages exactly")
def test_one_trials_locked_pages_are_not_counted_in_another(make_sandbox, receiver_runtime):
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)
    before = _field(receiver, "/proc/vmstat", "nr_mlock")
    _bg(sender, MLOCK, "13")
    held = _wait_file(sender, "/tmp/held")
    import time
    time.sleep(2.5)  # the per-CPU counters reach /proc/vmstat within a second or two
    during = _field(receiver, "/proc/vmstat", "nr_mlock")
    _stop_bg(sender)
    print(f"nr_mlock in the receiver: {before} before, {during} while the sender locked 13 pages (mlock: {held!r})")
    assert held.split()[0] == "0", f"the sender could not lock 13 pages: {held}"
    assert before is None or during is None or during - before != 13, "the receiver read the sender's 13 pages"


SOCKETS = ("import socket, sys, time\n"
           "held = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(int(sys.argv[1]))]\n"
           "open('/tmp/held', 'w').write(str(len(held)))\n"
           "time.sleep(60)\n")


@open_under_runc("review 13 finding 2: /proc/net/sockstat counts the host's TCP sockets and cannot be masked")
def test_one_trials_sockets_are_not_counted_in_another(make_sandbox, receiver_runtime):
    sender, receiver = make_sandbox(), make_sandbox(runtime=receiver_runtime)

    def alloc() -> int | None:
        words = receiver.exec(["sh", "-c", "grep '^TCP:' /proc/net/sockstat 2>/dev/null"], timeout=30).text().split()
        return int(words[words.index("alloc") + 1]) if "alloc" in words else None

    before = alloc()
    _bg(sender, SOCKETS, "37")
    held = _wait_file(sender, "/tmp/held")
    during = alloc()
    _stop_bg(sender)
    print(f"TCP alloc in the receiver's /proc/net/sockstat: {before} before, {during} while the sender held {held}")
    assert held == "37"
    assert before is None or during is None or during - before != 37, "the receiver counted the sender's sockets"


def _runsc_trial(setup, client, tmp_path, steps):
    """A trial of ``textkit-slug-unicode`` with ``environment.runtime: runsc``, graded as a run grades it."""
    import uuid

    import yaml

    from orchestrator.agents import BudgetLimits
    from orchestrator.grading.runner import GraderLimits
    from orchestrator.manifest import ScriptCandidate
    from orchestrator.sandbox.docker import docker_host
    from orchestrator.store import RunPaths
    from orchestrator.trial import TrialSpec, run_trial

    loaded, tasks, image_id = setup
    script = tmp_path / f"script-{uuid.uuid4().hex[:6]}.yaml"
    script.write_text(yaml.safe_dump({"steps": steps}))
    env = loaded.manifest.environment.model_copy(update={"runtime": "runsc"})
    spec = TrialSpec(f"textkit-slug-unicode/gvisor/{uuid.uuid4().hex[:6]}", "threats", tasks["textkit-slug-unicode"],
                     ScriptCandidate(name="gvisor", agent="script", script=script), 0, image_id, env,
                     BudgetLimits(deadline_seconds=180))
    return run_trial(spec, loaded, docker_host(client), RunPaths(tmp_path / "run"),
                     grader_limits=GraderLimits.for_environment(env)).to_dict()


def test_with_runsc_the_grader_runs_under_runsc_too(setup, client, tmp_path):
    """The structural answer to this review on the grader's side: a run whose environment names ``runsc`` grades
    under ``runsc`` as well (``GraderLimits.for_environment``), and grading still tells a fix from no fix. Found on
    the way: gVisor as Debian 12 ships refuses coreutils' ``statx``, and the grader's checks as root had read every
    trusted file's owner through ``stat`` (every fix rejected on ``grader_integrity``); they fall back to ``find``."""
    from orchestrator.grading.runner import GraderLimits
    from orchestrator.grading.specs import grader_spec

    from tests.docker.test_threats import FIX, SUBMIT

    loaded, tasks, image_id = setup
    env = loaded.manifest.environment.model_copy(update={"runtime": "runsc"})
    assert grader_spec(image_id, tasks["textkit-slug-unicode"], GraderLimits.for_environment(env),
                       "tb-x").runtime == "runsc"
    fixed = _runsc_trial(setup, client, tmp_path, FIX + SUBMIT)
    untouched = _runsc_trial(setup, client, tmp_path, SUBMIT)
    print("under runsc:", fixed["verdict"]["outcome"], fixed["verdict"]["reasons"], "/",
          untouched["verdict"]["outcome"], untouched["verdict"]["reasons"])
    assert fixed["verdict"]["outcome"] == "accepted", fixed["verdict"]["reasons"]
    assert untouched["verdict"]["outcome"] == "rejected", untouched["verdict"]["reasons"]
    assert "grader_integrity" not in untouched["verdict"]["reasons"], untouched["verdict"]["reasons"]
