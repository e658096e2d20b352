"""Images, history-free repositories in a container, pinning, runtimes, gc and the lock, on the real engine."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.tracked import copy_tracked

from orchestrator.agents.prices import load_prices
from orchestrator.engine import LABEL_PREFIX, MANAGED_LABEL
from orchestrator.errors import ImageNotFound, RuntimeUnavailable, SandboxError
from orchestrator.images import build_images
from orchestrator.loading import load_manifest
from orchestrator.repos import materialize
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox, owner_label
from orchestrator.sandbox.gc import collect_garbage
from orchestrator.settings import load_settings
from orchestrator.taskload import load_tasks

from .conftest import unique_name

FUTURE_FIX = "14acc6d2c212ccbdd5c3b97b3e5462db0ede0ed5"


def test_second_build_rebuilds_nothing(client, images, repo_root):
    before = {name: rec.image_id for name, rec in images.items()}
    again = build_images(client, repo_root / "images", load_settings())
    assert {name: rec.image_id for name, rec in again.items()} == before
    for rec in again.values():
        assert rec.image_id.startswith("sha256:")
        labels = client.images.get(rec.image_id).labels
        assert labels[f"{LABEL_PREFIX}.recipe"] == rec.recipe_sha256


def test_build_ca_is_not_baked_into_the_image(client, python_image):
    out = client.containers.run(python_image, ["sh", "-c", "find / -xdev -name 'trialbox-build-ca.crt' -o -name 'build-ca.crt' 2>/dev/null; python3 -c 'import pytest_timeout'; echo ok"],
                                remove=True, network_mode="none")
    assert out.decode().strip() == "ok"


@pytest.mark.parametrize("how", ["seeded", "copied"])
@pytest.mark.parametrize("task_id", ["ledger-negative-format", "textkit-top-words"])
def test_repository_enters_without_history(make_sandbox, repo_root, task_id, how):
    task = {t.id: t for t in load_tasks(load_manifest(repo_root / "examples" / "smoke.yaml"))}[task_id]
    repo = materialize(task, load_settings().repos_dir)
    if how == "seeded":
        sb = make_sandbox(workspace_seed=str(repo.tar_path), disk_limit_mb=48)
    else:
        sb = make_sandbox()
        uid = int(sb.spec.user.split(":")[0])  # the sandbox's own (``hostuids``): the tar re-owned to it
        out = io.BytesIO()
        with tarfile.open(repo.tar_path) as src, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for member in src:
                member.uid = member.gid = uid
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        sb.copy_in(out.getvalue(), "/workspace")
    owners = sb.exec(["python3", "-c", "import os; print({os.stat(os.path.join(d, n)).st_uid for d, ds, fs in os.walk('.') for n in ds + fs})"])
    assert owners.text().strip() == "{%s}" % sb.spec.user.split(":")[0]  # the sandbox's own uid (``hostuids``)
    git = lambda *a: sb.exec(["git", *a])  # noqa: E731
    assert git("log", "--all", "--format=%H").text().split() == [repo.commit]
    assert git("rev-list", "--all", "--reflog").text().split() == [repo.commit]
    assert git("for-each-ref").text().count("\n") == 1
    assert git("remote").text() == "" and git("tag").text() == "" and git("stash", "list").text() == ""
    assert git("status", "--porcelain").text() == ""
    assert git("cat-file", "-e", FUTURE_FIX).exit_code != 0
    assert sb.exec(["sh", "-c", "grep -r 'must not see' .git; ls .git/hooks 2>/dev/null | wc -l"]).text().strip() == "0"
    fill = sb.exec(["dd", "if=/dev/zero", "of=/workspace/fill", "bs=1M", "count=100"], timeout=60)
    assert b"No space left on device" in fill.stderr  # the seeded disk keeps its bound


def test_only_pinned_image_ids_and_nothing_is_pulled(client):
    with pytest.raises(SandboxError, match="pinned by image ID"):
        DockerSandbox(SandboxSpec(image_id="trialbox/python:latest", name=unique_name()), client)
    missing = "sha256:" + "0" * 64
    sb = DockerSandbox(SandboxSpec(image_id=missing, name=unique_name()), client)
    with pytest.raises(ImageNotFound, match="never pulls"):
        with sb:
            pass
    assert not client.containers.list(all=True, filters={"name": sb.spec.name})


def test_unknown_runtime_is_a_clear_error(client, python_image):
    sb = DockerSandbox(SandboxSpec(image_id=python_image, name=unique_name(), runtime="kata-nowhere"), client)
    with pytest.raises(RuntimeUnavailable, match="not registered with the Docker engine"):
        with sb:
            pass
    assert not client.containers.list(all=True, filters={"name": sb.spec.name})
    assert not client.volumes.list(filters={"name": sb.spec.name})


CRASHING_OWNER = """
import os, sys
from orchestrator.engine import connect
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox
sb = DockerSandbox(SandboxSpec(image_id=sys.argv[1], name=sys.argv[2], disk_limit_mb=32,
                               labels={"org.trialbox.run": "crash-test"}), connect())
sb.start()
print("started", flush=True)
os.kill(os.getpid(), 9)  # a crash: no finally, no cleanup
"""


def test_gc_removes_only_labelled_leftovers_of_dead_owners(client, python_image, repo_root):
    crashed = unique_name("tbcrash")
    proc = subprocess.run([sys.executable, "-c", CRASHING_OWNER, python_image, crashed], cwd=repo_root,
                          capture_output=True, text=True)
    assert proc.returncode == -9 and "started" in proc.stdout
    disk = load_settings().disks_dir / f"{crashed}.img"
    assert client.containers.get(crashed) and disk.exists()

    # owner files without their disk (a process killed between naming itself and making it): a dead owner's is
    # removed, a live owner's (it may be making the disk now) is kept
    import socket

    dead_owner = load_settings().disks_dir / f"{unique_name('tbnamed')}.owner"
    dead_owner.write_text(f"{socket.gethostname()}:{2 ** 22 + 7}:0")  # no such process
    live_owner = load_settings().disks_dir / f"{unique_name('tbnaming')}.owner"
    live_owner.write_text(owner_label())
    stranger = client.containers.create(python_image, ["sleep", "60"], name=unique_name("stranger"),
                                        labels={"org.example": "not ours"})
    fake_managed = client.containers.create(python_image, ["sleep", "60"], name=unique_name("alive"),
                                            labels={MANAGED_LABEL: "true", f"{LABEL_PREFIX}.owner": owner_label()})
    try:
        result = collect_garbage(client, load_settings())
        assert crashed in result.containers and f"{crashed}-workspace" in result.volumes
        assert f"{crashed}.img" in result.disks and not disk.exists()
        assert dead_owner.name in result.disks and not dead_owner.exists() and live_owner.exists()
        names = {c.name for c in client.containers.list(all=True)}
        assert crashed not in names
        assert stranger.name in names and fake_managed.name in names  # unlabelled, and a live owner's
        losetup = subprocess.run(["losetup", "--list", "--noheadings", "--output", "BACK-FILE"],
                                 capture_output=True, text=True).stdout
        assert crashed not in losetup
    finally:
        live_owner.unlink(missing_ok=True)
        stranger.remove(force=True)
        fake_managed.remove(force=True)


def _copy_project(repo_root: Path, dest: Path) -> Path:
    for folder in ("tasks", "graders", "images", "examples"):  # tracked files only: never a leftover lock or run
        copy_tracked(repo_root, folder, dest / folder)
    return dest / "examples" / "compare-prompts.yaml"


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_lock_records_identifiers_and_check_names_every_drift(images, repo_root, tmp_path):
    manifest = _copy_project(repo_root, tmp_path)
    assert _cli("lock", str(manifest), cwd=repo_root).returncode == 0
    lock = json.loads(manifest.with_name("compare-prompts.lock.json").read_text())
    assert lock["images"]["python"]["image_id"] == images["python"].image_id
    assert lock["docker"]["version"] and lock["trialbox"]["version"]
    assert set(lock["tasks"]) == {p.name for p in (tmp_path / "tasks").iterdir() if (p / "task.yaml").exists()}
    assert all(len(t["repo_commit"]) == 40 for t in lock["tasks"].values())
    assert set(lock["prompts"]) == {"terse", "test-first"}
    assert lock["price_table_version"] == load_prices().version == "2026-12-01" and lock["tool_contract_revision"] == "v1"
    ok = _cli("lock", "--check", str(manifest), cwd=repo_root)
    assert ok.returncode == 0, ok.stderr

    (tmp_path / "tasks/textkit-top-words/instruction.md").write_text("Changed.\n")
    (tmp_path / "tasks/_repos/textkit/textkit/wrap.py").write_text("# changed\n")
    (tmp_path / "graders/ledger-thousands/tests/test_money_thousands.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "examples/prompts/terse.md").write_text("Be brief.\n")
    (tmp_path / "images/python/Dockerfile").write_text((tmp_path / "images/python/Dockerfile").read_text() + "# drift\n")
    text = manifest.read_text().replace("cpu_limit: 1.0", "cpu_limit: 2.0")
    manifest.write_text(text)
    drift = _cli("lock", "--check", str(manifest), cwd=repo_root)
    assert drift.returncode == 1 and "Traceback" not in drift.stderr
    for name in ("tasks.textkit-top-words.task_sha256", "tasks.textkit-top-words.repo_commit",
                 "graders.ledger-thousands", "prompts.terse", "images.python.image_id",
                 "environment.cpu_limit", "manifest_sha256", "dataset_revision", "grader_commit"):
        assert f"  {name}: locked " in drift.stderr, name
    assert "environment.cpu_limit: locked 1.0, now 2.0" in drift.stderr


def test_lock_refuses_stated_identifiers_that_do_not_match(images, repo_root, tmp_path):
    manifest = _copy_project(repo_root, tmp_path)
    text = manifest.read_text().replace("  seed: 20261129", "  seed: 20261129\n  dataset_revision: deadbeef")
    text = text.replace("    system_prompt: prompts/terse.md", "    system_prompt: prompts/terse.md\n    system_prompt_sha256: " + "a" * 64)
    manifest.write_text(text)
    res = _cli("lock", str(manifest), cwd=repo_root)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"{manifest}: experiment.dataset_revision: stated deadbeef, resolved " in res.stderr
    assert f"{manifest}: candidates[0].system_prompt_sha256: stated {'a' * 64}" in res.stderr
    assert not manifest.with_name("compare-prompts.lock.json").exists()


@pytest.mark.parametrize("name", ["smoke.yaml", "script-demo.yaml", "compare-prompts.yaml", "offline-demo.yaml"])
def test_every_example_validates_and_locks(images, repo_root, tmp_path, name):
    manifest = _copy_project(repo_root, tmp_path).with_name(name)
    assert _cli("validate", str(manifest), cwd=repo_root).returncode == 0
    assert _cli("lock", str(manifest), cwd=repo_root).returncode == 0
    assert _cli("lock", "--check", str(manifest), cwd=repo_root).returncode == 0


def test_lock_with_an_unbuilt_image_is_one_clear_line(images, repo_root, tmp_path):
    manifest = _copy_project(repo_root, tmp_path)
    dockerfile = tmp_path / "images/python/Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# a new recipe, never built\n")
    res = _cli("lock", str(manifest), cwd=repo_root)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{manifest}: images.python: image 'python' for its current recipe")
    assert lines[0].endswith("is not built: run `trialbox images build --manifest MANIFEST`")


def test_images_save_and_load_keep_their_ids(images, repo_root, tmp_path):
    out = tmp_path / "images.tar"
    saved = _cli("images", "save", "python", "--out", str(out), "--images", str(repo_root / "images"), cwd=repo_root)
    assert saved.returncode == 0, saved.stderr
    assert json.loads((tmp_path / "images.tar.json").read_text())["images"] == {"python": images["python"].image_id}
    loaded = _cli("images", "load", str(out), cwd=repo_root)
    assert loaded.returncode == 0 and f"{images['python'].image_id} (verified)" in loaded.stdout
    (tmp_path / "images.tar.json").write_text(json.dumps({"images": {"python": "sha256:" + "1" * 64}}))
    wrong = _cli("images", "load", str(out), cwd=repo_root)
    assert wrong.returncode == 1 and "do not match what was saved" in wrong.stderr and "Traceback" not in wrong.stderr
