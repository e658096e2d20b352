"""An image removed from the engine mid-run, on the real engine (issue 25, item 3).

Two tasks on two images: ``textkit-slug-unicode`` on the project's ``python`` image, ``textkit-top-words`` on
``pyalt``, a recipe made here on ``python`` with a label of this test's own (so its image ID is this test's alone).
The image is saved (`trialbox images save`), the run starts (16 trials, 2 at once, 2 prepared ahead), and once
two trials are recorded the test removes ``pyalt`` from the engine by its ID (forced, as `docker rmi -f` does;
retried while a running container of it holds it). The trials that need it and had no container yet are refused
by name (``infra_error(image_missing)``, not retried), the others are recorded with their normal verdicts, the run
ends with exit 66 naming the image and how to restore it, ``lock --check`` names it, a resume while it is missing
is refused by name; then `trialbox images load` puts the same image ID back and `run` again finishes: every trial
recorded exactly once, nothing of the run left on the engine.

Only the image this test made is ever removed (checked by its label); never the shared base images."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import docker as docker_sdk
import docker.errors
import pytest

from orchestrator.images import build_images
from orchestrator.settings import load_settings
from orchestrator.store import RunPaths

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
MARK = "org.trialbox.test-image-removed"
A, B = "textkit-slug-unicode", "textkit-top-words"


def _rows(out) -> list[dict]:
    db = sqlite3.connect(out / "results.sqlite")
    try:
        return [json.loads(r[0]) for r in db.execute("SELECT result FROM trials")]
    finally:
        db.close()


def _cli(repo_root, *args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True, text=True,
                          cwd=repo_root, env=ENV, timeout=timeout)


def _remove_ours(engine, image_id: str, mark: str, timeout: float = 240) -> int:
    """Remove the test's own image by ID (forced: created containers of it do not hold it), retrying while a
    running container holds it; returns how many tries it took."""
    image = engine.images.get(image_id)
    assert image.labels.get(MARK) == mark, image.labels  # never anything but this test's image
    deadline, tries = time.monotonic() + timeout, 0
    while True:
        tries += 1
        try:
            engine.images.remove(image_id, force=True)
            return tries
        except docker.errors.APIError as exc:
            if exc.status_code != 409 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def pyalt(project, client, images):
    """A second image, ``images/pyalt`` on ``python`` with a label of this test's own; removed afterwards."""
    mark = uuid.uuid4().hex
    folder = project / "images" / "pyalt"
    folder.mkdir()
    (folder / "Dockerfile").write_text(f"ARG BASE\nFROM ${{BASE}}\nLABEL {MARK}={mark}\n")
    (folder / "environment.yaml").write_text("from: python\n")
    record = build_images(client, project / "images", load_settings(), ["pyalt"])["pyalt"]
    assert record.image_id != images["python"].image_id
    try:
        yield record, mark
    finally:
        try:
            if client.images.get(record.image_id).labels.get(MARK) == mark:
                client.images.remove(record.image_id, force=True)
        except docker.errors.ImageNotFound:
            pass


def test_an_image_removed_mid_run_refuses_its_trials_by_name_and_a_resume_finishes(project, repo_root, pyalt,
                                                                                   tmp_path):
    record, mark = pyalt
    task_yaml = project / "tasks" / B / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("image: python", "image: pyalt"))
    manifest = project / "examples" / "image-removed.yaml"
    manifest.write_text(f"""experiment: {{name: image-removed, seed: 11}}
candidates:
  - {{name: oracle, agent: oracle}}
  - {{name: nop, agent: nop}}
environment: {{cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 256}}
execution: {{trials_per_task: 4, deadline_seconds: 300, concurrency: 2}}
tasks: {{path: ../tasks, graders: ../graders, images: ../images, select: [{A}, {B}]}}
""")
    saved = tmp_path / "pyalt.tar"
    save = _cli(repo_root, "images", "save", "pyalt", "--images", str(project / "images"), "--out", str(saved))
    assert save.returncode == 0, save.stdout + save.stderr
    out = project / "runs" / "image-removed"
    engine = docker_sdk.from_env()

    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked",
                             "--out", str(out)], cwd=repo_root, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    two_done = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if sum(x.startswith("[") for x in lines) >= 2:
                two_done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert two_done.wait(600), "\n".join(lines)
        t0 = time.monotonic()
        tries = _remove_ours(engine, record.image_id, mark)
        removed_after = sum(x.startswith("[") for x in lines)
        removal_s = time.monotonic() - t0
        with pytest.raises(docker.errors.ImageNotFound):
            engine.images.get(record.image_id)
        rc = proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    text, err = "\n".join(lines), proc.stderr.read()
    print(f"removed {record.image_id} after {removed_after} trial(s) recorded ({tries} tries, {removal_s:.1f}s)\n"
          f"{text}\n{err[-3000:]}")

    # the run ends naming the image, its pinned ID and tag, and how to restore it; exit 66 whatever
    # max_infra_errors allows
    assert rc == 66, text + err
    assert "Traceback" not in err
    assert "the engine no longer has 1 image(s)" in err and record.image_id in err
    assert f"images.pyalt ({record.tag})" in err
    for how in ("trialbox images load", "make images", "trialbox images build --manifest", "trialbox lock --check"):
        assert how in err, how
    assert "retrying it once" not in text  # a refusal is not retried while the image is missing

    rows = {r["id"]: r for r in _rows(out)}
    assert len(rows) == 16  # every trial recorded once: refused or with its verdict
    refused = sorted(i for i, r in rows.items() if r["verdict"]["outcome"] == "infra_error")
    assert refused, text  # the trials of B that had no container yet when the image went
    for i, r in rows.items():
        v = r["verdict"]
        if i in refused:
            assert r["task"] == B and v["kind"] == "image_missing", (i, v)
            assert record.image_id in v["reasons"][0] and "images.pyalt" in v["reasons"][0], v
            assert r["attempt"] == 1 and not r.get("previous_attempts"), r  # never retried
            assert any(i in line and "infra_error(image_missing)" in line for line in lines), i  # its progress line
        else:  # the trials that did not need it, and those of B that ran before it went: as without the fault
            expected = "accepted" if r["candidate"] == "oracle" else "rejected"
            assert v["outcome"] == expected, (i, json.dumps(v, indent=1))
    assert {r["task"] for i, r in rows.items() if i not in refused} >= {A}
    assert all(rows[i]["task"] == B for i in refused)
    assert sum(r["task"] == A and r["verdict"]["outcome"] != "infra_error" for r in rows.values()) == 8

    # the lock check names it; a resume while it is missing is refused by name and runs nothing
    check = _cli(repo_root, "lock", "--check", str(manifest))
    assert check.returncode == 1 and f"images.pyalt.image_id: locked {record.image_id}, now missing" in check.stderr, \
        check.stdout + check.stderr
    early = _cli(repo_root, "run", str(manifest), "--unchecked", "--out", str(out))
    assert early.returncode == 1 and "images.pyalt.image_id" in early.stderr, early.stdout + early.stderr
    assert {i: r["attempt"] for i, r in ((r["id"], r) for r in _rows(out))} == {i: r["attempt"] for i, r in rows.items()}

    # the same image back (same ID), then `run` again finishes the run
    load = _cli(repo_root, "images", "load", str(saved))
    assert load.returncode == 0 and "(verified)" in load.stdout, load.stdout + load.stderr
    assert engine.images.get(record.image_id).id == record.image_id
    check = _cli(repo_root, "lock", "--check", str(manifest))
    assert check.returncode == 0, check.stdout + check.stderr
    again = _cli(repo_root, "run", str(manifest), "--unchecked", "--out", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"running again {len(refused)} trial(s)" in again.stdout, again.stdout
    print(again.stdout)
    final = _rows(out)
    ids = [r["id"] for r in final]
    assert len(ids) == 16 and len(set(ids)) == 16  # every trial recorded exactly once
    for r in final:
        expected = "accepted" if r["candidate"] == "oracle" else "rejected"
        assert r["verdict"]["outcome"] == expected, (r["id"], r["verdict"])
        if r["id"] in refused:
            assert r["attempt"] == 2 and [a["kind"] for a in r["previous_attempts"]] == ["image_missing"]
    db = sqlite3.connect(out / "results.sqlite")
    try:
        history = sorted(row[0] for row in db.execute("SELECT trial_id FROM superseded"))
    finally:
        db.close()
    assert history == refused  # the refusals kept as history

    key = RunPaths(out).key
    assert not engine.containers.list(all=True, filters={"label": f"org.trialbox.run={key}"})
    assert not engine.volumes.list(filters={"label": f"org.trialbox.run={key}"})
