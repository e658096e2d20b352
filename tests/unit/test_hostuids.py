"""A host uid of its own per sandbox (``sandbox.hostuids``): leases unique across threads and processes, given back
on release and on a process's death; the image's account files with the leased uid in place of 1000."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox.hostuids import account_mounts, lease_uid, remapped, uid_range


@pytest.fixture
def small_range(monkeypatch):
    monkeypatch.setenv("TRIALBOX_SANDBOX_UIDS", "1900000-1900031")


def test_leases_taken_at_once_by_many_threads_are_all_different(tmp_path, small_range):
    leases, errors = [], []
    barrier = threading.Barrier(24)

    def take() -> None:
        barrier.wait()
        try:
            leases.append(lease_uid(tmp_path))
        except SandboxError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=take) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    uids = sorted(lease.uid for lease in leases)
    assert uids == list(range(1900000, 1900024))  # the lowest free ones, each once
    leases[5].release()
    leases[5].release()  # idempotent
    again = lease_uid(tmp_path)
    assert again.uid == leases[5].uid  # the lowest free uid is taken again
    for lease in [*leases, again]:
        lease.release()


def test_a_full_range_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIALBOX_SANDBOX_UIDS", "1900000-1900001")
    held = [lease_uid(tmp_path), lease_uid(tmp_path)]
    with pytest.raises(SandboxError, match="1900000-1900001 is held by a live sandbox"):
        lease_uid(tmp_path)
    held[0].release()
    assert lease_uid(tmp_path).uid == 1900000


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_a_uid_held_by_another_process_is_skipped_until_that_process_dies(tmp_path, small_range):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "1900000")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lease = lease_uid(tmp_path)
        assert lease.uid == 1900001
    finally:
        holder.kill()
        holder.wait()
    after = lease_uid(tmp_path)
    assert after.uid == 1900000  # the kernel dropped the dead process's lock
    lease.release()
    after.release()


@pytest.mark.parametrize("raw", ["1000-2000", "abc", "1900010-1900000", "1900000", "5000-" + str(2 ** 31)])
def test_a_malformed_range_is_one_clear_error(monkeypatch, raw):
    monkeypatch.setenv("TRIALBOX_SANDBOX_UIDS", raw)
    with pytest.raises(SandboxError, match="TRIALBOX_SANDBOX_UIDS"):
        uid_range()


def test_the_default_range_is_above_debians_users_and_within_the_plain_tar_format():
    first, last = uid_range()
    assert 65535 < first <= last < 0o7777777


PASSWD = (b"root:x:0:0:root:/root:/bin/bash\n"
          b"# a comment naming 1000:1000\n"
          b"agent:x:1000:1000::/home/agent:/bin/bash\n"
          b"other:x:10000:1000::/home/other:/bin/sh\n"
          b"broken:1000\n"
          b"+::::::\n")
GROUP = b"root:x:0:\nagent:x:1000:\nusers:x:100:agent\nbig:x:10001000:\n"


def test_only_the_uid_and_gid_fields_of_the_images_user_change():
    assert remapped(PASSWD, 1800007, "passwd") == (b"root:x:0:0:root:/root:/bin/bash\n"
                                                   b"# a comment naming 1000:1000\n"
                                                   b"agent:x:1800007:1800007::/home/agent:/bin/bash\n"
                                                   b"other:x:10000:1800007::/home/other:/bin/sh\n"
                                                   b"broken:1000\n"
                                                   b"+::::::\n")
    assert remapped(GROUP, 1800007, "group") == (b"root:x:0:\nagent:x:1800007:\nusers:x:100:agent\n"
                                                 b"big:x:10001000:\n")


def test_account_files_are_mounted_only_where_they_name_the_images_user(tmp_path):
    mounts = account_mounts({"passwd": PASSWD, "group": b"root:x:0:\n"}, 1800003, tmp_path)
    assert [target for _, target in mounts] == ["/etc/passwd"]  # the group file names no gid 1000: the image's
    source = tmp_path.joinpath(mounts[0][0])
    assert b"agent:x:1800003:1800003:" in source.read_bytes() and oct(source.stat().st_mode & 0o777) == "0o644"
    assert account_mounts({"passwd": PASSWD, "group": None}, 1800003, tmp_path) == mounts  # content-addressed
    assert account_mounts({"passwd": None, "group": None}, 1800003, tmp_path) == ()
