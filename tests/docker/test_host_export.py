"""The final workspace archived on the host from the stopped sandbox's disk (``sandbox/hostdisk.py``): whole,
whatever the agent did to its names, modes and depth; bounded; never while the sandbox runs; and where the host
cannot mount the disk, the engine's archive as before."""

from __future__ import annotations

import time

from orchestrator.grading.export import export_workspace
from orchestrator.grading.tree import ExportLimits
from orchestrator.sandbox.hostdisk import DiskArchive

ODD = ("mkdir -p a .git && echo hi > a/x.txt && echo head > .git/HEAD && mkdir a/.git && echo kept > a/.git/k && "
       "ln -s /etc/passwd a/link && ln a/x.txt a/hard && mkfifo a/fifo && printf z > $'\\xff\\xfe.py' && "
       "printf n > $'new\\nline' && chmod 000 a/x.txt && mkdir shut && echo s > shut/s && chmod 000 shut; "
       "d=$(printf 'x%.0s' $(seq 200)); for i in $(seq 25); do mkdir \"$d$i\" && cd \"$d$i\"; done; echo deep > leaf")


def test_the_stopped_disk_is_archived_on_the_host_whole(make_sandbox):
    sb = make_sandbox()
    assert sb.archives_on_host
    assert sb.exec(["bash", "-c", ODD]).exit_code == 0
    assert sb.host_archive() is None  # never while it runs: something could still change the files
    sb.stop()
    tree = export_workspace(sb, "/workspace")
    assert not sb.is_running()  # nothing was started again to list or read
    assert tree.complete and not tree.problems, tree.problems
    assert tree.files["a/x.txt"] == b"hi\n" and tree.files["a/hard"] == b"hi\n"  # mode 000 read all the same
    assert tree.files["shut/s"] == b"s\n" and tree.files["a/.git/k"] == b"kept\n"
    assert not any(p == ".git" or p.startswith(".git/") for p in tree.files)  # the top-level .git never
    assert tree.symlinks["a/link"] == "/etc/passwd"  # a link is data, never followed on the host
    assert tree.files["\udcff\udcfe.py"] == b"z" and tree.files["new\nline"] == b"n"
    deep = [p for p in tree.files if p.endswith("/leaf")]
    assert len(deep) == 1 and len(deep[0].encode()) > 4096 and tree.files[deep[0]] == b"deep\n"
    assert any(s.startswith("a/fifo: special file") for s in tree.skipped)
    assert not any("not in the engine's archive" in s for s in tree.skipped)  # the engine's path was not taken


def test_a_sparse_file_past_the_bounds_cuts_the_export_off(make_sandbox):
    sb = make_sandbox()
    assert sb.exec(["bash", "-c", "echo a > a.txt && truncate -s 20G huge"]).exit_code == 0
    sb.stop()
    t0 = time.monotonic()
    tree = export_workspace(sb, "/workspace", limits=ExportLimits(max_bytes=64 << 20))
    assert time.monotonic() - t0 < 60
    assert tree.truncated and not tree.complete and "huge" not in tree.files


def test_a_disk_the_host_cannot_mount_is_archived_by_the_engine(make_sandbox, tmp_path):
    archive = DiskArchive("/dev/no-such-loop-device", tmp_path)
    assert list(archive.chunks()) == []
    archive.close()
    assert archive.unavailable and "could not mount" in archive.problems[0]
    assert not any(tmp_path.iterdir())  # its mount point removed

    sb = make_sandbox()
    assert sb.exec(["bash", "-c", "echo hi > kept.txt"]).exit_code == 0
    sb.stop()
    real, sb.disk = sb.disk, type(sb.disk)(sb.disk.path, "/dev/no-such-loop-device")  # the host's mount fails
    try:
        tree = export_workspace(sb, "/workspace")
    finally:
        sb.disk = real  # removed with the sandbox
    assert tree.complete and tree.files["kept.txt"] == b"hi\n"  # through the engine, checked against a listing
    assert not sb.is_running()


def test_a_second_name_of_a_symlink_and_a_socket_are_not_silently_lost(make_sandbox):
    sb = make_sandbox()
    assert sb.exec(["bash", "-c", "ln -s ../outside a_link && ln a_link zz && echo x > f && python3 -c \"import socket; "
                                  "socket.socket(socket.AF_UNIX).bind('sock')\""]).exit_code == 0
    sb.stop()
    tree = export_workspace(sb, "/workspace")
    assert tree.complete, tree.problems
    assert tree.symlinks == {"a_link": "../outside", "zz": "../outside"}  # a hard link to a link: the same link
    assert any(s.startswith("sock: special file") for s in tree.skipped)  # tar skips sockets: noted all the same


def test_a_tar_that_fails_after_a_clean_archive_makes_the_export_incomplete(make_sandbox, monkeypatch):
    import orchestrator.sandbox.hostdisk as hostdisk

    sb = make_sandbox()
    assert sb.exec(["bash", "-c", "echo x > f"]).exit_code == 0
    sb.stop()
    # the archive ends cleanly, then tar exits 2, as it does after skipping what it could not read
    monkeypatch.setattr(hostdisk, "SCRIPT", hostdisk.SCRIPT.replace("exec tar", "tar") + "; echo 'tar: ./g: Cannot open' >&2; exit 2")
    tree = export_workspace(sb, "/workspace")
    assert not tree.complete and any("exit 2" in p and "Cannot open" in p for p in tree.problems), tree.problems
