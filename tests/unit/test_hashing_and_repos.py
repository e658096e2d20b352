"""Content hashes and history-free repositories (host git on trusted sources only)."""

from __future__ import annotations

import os
import subprocess
import tarfile

from orchestrator.hashing import tree_sha256
from orchestrator.loading import load_manifest
from orchestrator.repos import materialize
from orchestrator.taskload import load_tasks

FUTURE_FIX = "14acc6d2c212ccbdd5c3b97b3e5462db0ede0ed5"  # the ledger bundle's commit after the task's


def test_tree_hash_tracks_content_paths_and_exec_bit(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.py").write_text("x = 1\n")
    first = tree_sha256(tmp_path)
    assert tree_sha256(tmp_path) == first
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("junk")
    (tmp_path / "a" / "__pycache__").mkdir()
    assert tree_sha256(tmp_path) == first  # .git and caches are not content
    os.chmod(tmp_path / "a" / "f.py", 0o755)
    assert tree_sha256(tmp_path) != first
    os.chmod(tmp_path / "a" / "f.py", 0o644)
    (tmp_path / "a" / "f.py").rename(tmp_path / "a" / "g.py")
    assert tree_sha256(tmp_path) != first


def _tasks(repo_root):
    return {t.id: t for t in load_tasks(load_manifest(repo_root / "examples" / "smoke.yaml"))}


def _extract(repo, dest):
    with tarfile.open(repo.tar_path) as tf:
        tf.extractall(dest, filter="tar")
        owners = {(m.uid, m.gid) for m in tf.getmembers()}
    return owners


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True)


def test_materialized_commit_is_deterministic_and_alone(repo_root, tmp_path, monkeypatch):
    tasks = _tasks(repo_root)
    a = materialize(tasks["textkit-slug-unicode"], tmp_path / "cache-a")
    b = materialize(tasks["textkit-wrap-long-words"], tmp_path / "cache-b")  # same files, another cache
    assert a.commit == b.commit and a.source == b.source
    assert _extract(a, tmp_path / "w") == {(1000, 1000)}
    work = tmp_path / "w"
    assert _git(work, "log", "--all", "--format=%H").stdout.split() == [a.commit]
    assert _git(work, "status", "--porcelain").stdout == ""
    assert _git(work, "for-each-ref", "--format=%(refname)").stdout.split() == ["refs/heads/main"]
    assert _git(work, "remote").stdout == "" and not (work / ".git" / "logs").exists()
    assert not (work / ".git" / "hooks").exists()


def test_future_history_never_enters(repo_root, tmp_path):
    task = _tasks(repo_root)["ledger-negative-format"]
    repo = materialize(task, tmp_path / "cache")
    assert repo.source == f"git:{task.config.repo.commit}"
    work = tmp_path / "w"
    _extract(repo, work)
    assert len(_git(work, "log", "--all", "--oneline").stdout.splitlines()) == 1
    assert _git(work, "cat-file", "-e", FUTURE_FIX).returncode != 0
    assert _git(work, "cat-file", "-e", task.config.repo.commit).returncode != 0  # a fresh commit, not the original
    assert "abs(cents)" not in (work / "ledger" / "money.py").read_text()  # the task's tree, not the fix
    assert b"future fix" not in b"".join(p.read_bytes() for p in (work / ".git").rglob("*") if p.is_file())


def test_export_is_bounded_and_keeps_links_as_data():
    import io
    import tarfile as tf_mod

    from orchestrator.grading.tree import ExportLimits, read_tar

    buf = io.BytesIO()
    with tf_mod.open(fileobj=buf, mode="w") as tf:
        for name, data in (("workspace/a.py", b"x" * 10), ("workspace/.git/config", b"[core]"), ("workspace/b.py", b"y" * 10)):
            ti = tf_mod.TarInfo(name)
            ti.size, ti.mode = len(data), 0o4755
            tf.addfile(ti, io.BytesIO(data))
        link = tf_mod.TarInfo("workspace/up")
        link.type, link.linkname = tf_mod.SYMTYPE, "/etc/shadow"
        tf.addfile(link)
        hard = tf_mod.TarInfo("workspace/h")
        hard.type, hard.linkname = tf_mod.LNKTYPE, "workspace/a.py"
        tf.addfile(hard)
        evil = tf_mod.TarInfo("workspace/../../etc/x")
        evil.size = 1
        tf.addfile(evil, io.BytesIO(b"z"))
    buf.seek(0)
    tree = read_tar(buf, "workspace", ExportLimits())
    assert set(tree.files) == {"a.py", "b.py", "h"} and tree.symlinks == {"up": "/etc/shadow"}
    assert tree.files["h"] == tree.files["a.py"] and "h" in tree.executable  # a second name: a regular file
    assert "a.py" in tree.executable and any("setuid" in n for n in tree.skipped)
    buf.seek(0)
    small = read_tar(buf, "workspace", ExportLimits(max_bytes=15))
    assert small.truncated and set(small.files) == {"a.py"}


def _tar(members):
    import io
    import tarfile as tf_mod

    buf = io.BytesIO()
    with tf_mod.open(fileobj=buf, mode="w", format=tf_mod.GNU_FORMAT) as tf:
        for name, kind, value in members:
            ti = tf_mod.TarInfo(name)
            if kind == "f":
                ti.size = len(value)
                tf.addfile(ti, io.BytesIO(value))
                continue
            ti.type = {"d": tf_mod.DIRTYPE, "l": tf_mod.SYMTYPE, "h": tf_mod.LNKTYPE}[kind]
            ti.linkname = value
            tf.addfile(ti)
    buf.seek(0)
    return buf


def test_a_second_name_of_a_symlink_is_the_same_link():
    from orchestrator.grading.tree import ExportLimits, read_tar

    tree = read_tar(_tar([("./a", "l", "../out"), ("./b", "h", "./a")]), "", ExportLimits())
    assert tree.symlinks == {"a": "../out", "b": "../out"} and tree.complete and not tree.skipped


def test_folders_and_the_length_of_paths_count_against_the_bounds():
    from orchestrator.grading.tree import MAX_NAME_BYTES, MAX_PATH_BYTES, ExportLimits, read_tar

    dirs = read_tar(_tar([(f"./d{i}", "d", "") for i in range(10)]), "", ExportLimits(max_files=5))
    assert dirs.truncated and len(dirs.dirs) == 5  # empty folders are entries too
    deep = "/".join(["x" * 250] * (MAX_PATH_BYTES // 251 + 2))
    long = read_tar(_tar([("./ok.txt", "f", b"1"), ("./" + deep, "f", b"2")]), "", ExportLimits())
    assert long.truncated and set(long.files) == {"ok.txt"} and "paths of" in long.skipped[-1]
    assert MAX_NAME_BYTES >= 1000 * MAX_PATH_BYTES // 100  # room for any real repository's names


def test_the_paths_of_an_export_are_bounded_in_all(monkeypatch):
    import orchestrator.grading.tree as tree_mod

    monkeypatch.setattr(tree_mod, "MAX_NAME_BYTES", 10_000)
    many = [(f"./{'y' * 250}/{i:06d}", "f", b"") for i in range(60)]  # each path well within its own bound
    cut = tree_mod.read_tar(_tar(many), "", tree_mod.ExportLimits())
    assert cut.truncated and 30 <= len(cut.files) < 60 and "bytes of paths in all" in cut.skipped[-1]
    assert tree_mod.read_tar(_tar(many[:20]), "", tree_mod.ExportLimits()).complete
