"""The driver killed twice in a row at points across a trial's stages, on the real engine (issue 25, item 3).

Each case runs the same small run (one task, oracle and nop, two replicates each, two at once) three times on one
folder: the first session SIGKILLed when it passes point A (``TRIALBOX_CRASH_AT``, orchestrator/crashpoint.py:
no clean-up, no ``finally``, as ``kill -9`` or a power cut), the second when it passes point B, the third to its
end. The points cover every stage's end (``stageclock.STAGES``) and the run loop's commit of a record; with two
trials at once the other trial is somewhere else each time. What must hold, whatever the points:

- every trial recorded exactly once, the verdicts those of a run without the fault (oracle accepted, nop
  rejected on fail_to_pass), and a trial recorded before a kill kept as it was;
- a killed driver spends no trial's retry: the attempts it cut short run again as they were (attempt 1);
- no half-written record: every verdict.json left in the folder parses;
- nothing of the run left on the host: containers, volumes, workspace disks, loop devices."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import docker as docker_sdk
import pytest

from orchestrator.settings import load_settings
from orchestrator.stageclock import STAGES
from orchestrator.store import RunPaths

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TRIALBOX_CRASH"))}

# (first kill, second kill): every stage's end and the record's commit, each once; ":n" is the n-th pass of the
# point in that session (export and grading are marked more than once per trial)
PAIRS = [("prepare", "sandbox:2"), ("setup", "agent:2"), ("stop:2", "export:3"), ("cleanup", "grader_start:2"),
         ("grading:3", "grader_cleanup"), ("record:2", "recorded:2")]


def test_the_pairs_cover_every_stage_and_the_commit():
    points = {p.split(":")[0] for pair in PAIRS for p in pair}
    assert points == set(STAGES) | {"recorded"}


def _rows(out: Path) -> dict[str, dict]:
    if not (out / "results.sqlite").exists():
        return {}
    db = sqlite3.connect(out / "results.sqlite")
    try:
        return {d["id"]: d for d in (json.loads(r[0]) for r in db.execute("SELECT result FROM trials"))}
    finally:
        db.close()


def _run(manifest: Path, out: Path, repo_root: Path, crash_at: str | None) -> subprocess.CompletedProcess:
    env = {**ENV, **({"TRIALBOX_CRASH_AT": crash_at} if crash_at else {})}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--out",
                           str(out)], cwd=repo_root, env=env, capture_output=True, text=True, timeout=900)


def _left_on_host(key: str) -> list[str]:
    engine = docker_sdk.from_env()
    try:
        left = [f"container {c.name}" for c in engine.containers.list(all=True, filters={"label": f"org.trialbox.run={key}"})]
        left += [f"volume {v.name}" for v in engine.volumes.list(filters={"label": f"org.trialbox.run={key}"})]
    finally:
        engine.close()
    disks = load_settings().disks_dir
    left += [f"disk {p.name}" for p in disks.glob(f"*{key}*")] if disks.is_dir() else []
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE"],
                           capture_output=True, text=True).stdout
    left += [f"loop device {line}" for line in loops.splitlines() if key in line]
    return left


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("first,second", PAIRS, ids=[f"{a}-then-{b}" for a, b in PAIRS])
def test_a_driver_killed_twice_loses_nothing_and_counts_nothing_twice(project, repo_root, tmp_path, first, second):
    manifest = tmp_path / "crash.yaml"
    manifest.write_text(f"""experiment: {{name: crash, seed: 5}}
candidates:
  - {{name: oracle, agent: oracle}}
  - {{name: nop, agent: nop}}
environment: {{cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 256}}
execution: {{trials_per_task: 2, deadline_seconds: 300, concurrency: 2}}
tasks: {{path: {project}/tasks, graders: {project}/graders, images: {project}/images, select: [textkit-slug-unicode]}}
""")
    out = tmp_path / "run"
    kept: dict[str, dict] = {}
    for point in (first, second):
        res = _run(manifest, out, repo_root, point)
        # the point was reached and the driver died there, with no word of its own
        assert res.returncode == -signal.SIGKILL, (point, res.returncode, res.stdout[-2000:], res.stderr[-2000:])
        now = _rows(out)
        for tid, row in kept.items():  # what an earlier session recorded stays as it was
            assert now[tid]["verdict"] == row["verdict"] and now[tid]["attempt"] == row["attempt"], tid
        if kept:
            assert f"{len(kept)} already done" in res.stdout, res.stdout
        kept = now
    done = _run(manifest, out, repo_root, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"4 trial(s), {len(kept)} already done" in done.stdout, done.stdout

    rows = _rows(out)
    assert sorted(rows) == [f"textkit-slug-unicode/{c}/{r}" for c in ("nop", "oracle") for r in (0, 1)]
    db = sqlite3.connect(out / "results.sqlite")
    try:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 4  # one row each
    finally:
        db.close()
    for tid, row in rows.items():
        if tid in kept:
            assert row["verdict"] == kept[tid]["verdict"], tid
        if row["candidate"] == "oracle":
            assert row["verdict"]["outcome"] == "accepted", (tid, row["verdict"])
        else:
            assert (row["verdict"]["outcome"], row["verdict"]["reasons"]) == ("rejected", ["fail_to_pass"]), row["verdict"]
        # a killed driver is no infrastructure error of the trial: the cut attempt ran again as it was
        assert row["attempt"] == 1 and row["retries"] == 0 and not row.get("previous_attempts"), row
    for verdict in out.rglob("verdict.json"):  # nothing half-written left behind
        json.loads(verdict.read_text())
    assert not (out / "stopped.json").exists()
    assert _left_on_host(RunPaths(out).key) == []


# --------------------------------------------------------------------------- a grader killed for memory
HOG = '_HOG = b"x" * (3 << 30)  # three GiB written: past the 2 GiB limit of the grader container\n'


@pytest.mark.timeout(1200)
def test_a_grader_killed_for_memory_is_the_graders_fault_unless_only_the_agents_code_does_it(project, repo_root,
                                                                                             tmp_path):
    """A grader container killed for memory on the untouched repository too (here the held-out tests themselves
    fill it) is the grader's fault: ``infra_error(grader_broken)``, said so, retried once, never the agent's
    rejection. The same kill with the agent's code only (the untouched repository grades fine) is the agent's:
    otherwise code that fills memory in the grader would buy a free retry and leave the denominator."""
    import shutil

    root = tmp_path / "project"
    for folder in ("tasks", "graders", "images"):
        shutil.copytree(project / folder, root / folder, symlinks=True)
    shutil.copytree(root / "tasks/textkit-slug-unicode", root / "tasks/textkit-grader-oom")
    task_yaml = root / "tasks/textkit-grader-oom/task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("id: textkit-slug-unicode", "id: textkit-grader-oom"))
    shutil.copytree(root / "graders/textkit-slug-unicode", root / "graders/textkit-grader-oom")
    held_out = root / "graders/textkit-grader-oom/tests/test_slug_unicode.py"
    held_out.write_text(HOG + held_out.read_text())
    (tmp_path / "hog.yaml").write_text(json.dumps({"steps": [
        {"bash": {"command": f"printf '%s' '{HOG.strip()}' >> textkit/__init__.py && echo >> textkit/__init__.py"}},
        {"submit": {"summary": "done"}}]}))
    manifest = tmp_path / "oom.yaml"
    manifest.write_text(f"""experiment: {{name: grader-oom, seed: 5}}
candidates:
  - {{name: oracle, agent: oracle}}
  - {{name: hog, agent: script, script: {tmp_path / "hog.yaml"}}}
environment: {{cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 256}}
execution: {{trials_per_task: 1, deadline_seconds: 300, concurrency: 2}}
tasks: {{path: {root}/tasks, graders: {root}/graders, images: {root}/images, select: [textkit-grader-oom, textkit-slug-unicode]}}
""")
    out = tmp_path / "run"
    res = _run(manifest, out, repo_root, None)
    # two infrastructure errors, above the default threshold of none: the run says so in its exit code
    assert res.returncode == 4, res.stdout[-3000:] + res.stderr[-3000:]
    assert "infrastructure error in textkit-grader-oom/oracle/0 (grader_broken): retrying it once" in res.stdout
    rows = _rows(out)
    assert len(rows) == 4
    for candidate in ("oracle", "hog"):
        broken = rows[f"textkit-grader-oom/{candidate}/0"]
        assert (broken["verdict"]["outcome"], broken["verdict"]["kind"]) == ("infra_error", "grader_broken")
        assert "killed for memory" in " ".join(broken["verdict"]["reasons"]), broken["verdict"]
        assert broken["retries"] == 1 and broken["previous_attempts"][0]["kind"] == "grader_broken"
    assert rows["textkit-slug-unicode/oracle/0"]["verdict"]["outcome"] == "accepted"
    agents = rows["textkit-slug-unicode/hog/0"]
    assert agents["verdict"]["outcome"] == "rejected" and agents["retries"] == 0, agents["verdict"]
    crits = {c["name"]: c for c in agents["verdict"]["criteria"]}
    assert crits["fail_to_pass"]["evidence"].get("oom") is True, crits["fail_to_pass"]
    report = subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(out)], capture_output=True,
                            text=True, cwd=repo_root, env=ENV, timeout=300)
    assert report.stdout.splitlines()[0].startswith("infrastructure errors: 2 trial(s) (grader_broken 2)"), report.stdout
    assert _left_on_host(RunPaths(out).key) == []
