"""The run folder's file system full mid-run, on the real engine (issue 25, item 3).

The run folder (``--out``) is on a 256 MiB tmpfs of its own. A 12-trial run (6 oracle, 6 nop of
textkit-slug-unicode, 2 at once, 64 MiB workspace disks) starts; once three trials are recorded and a container of
the run is running, a filler file takes every free byte. Then:

1. the run stops: exit 74, the message names the folder, its free space and what to do; no trial starts after
   the fill; no record is half written (every verdict.json, retry-owed.json and stopped.json in the folder parses,
   no temporary file is left, the store passes its integrity check); no retry was spent and no infrastructure
   error recorded; nothing of the run is left on the engine;
2. with the filler replaced by one that leaves 100 MiB (less than the 64 + 64 MiB a trial needs), the run
   refuses to start a trial: exit 74 again, the folder and its free space named, nothing new in the folder;
3. with the filler gone, the same command finishes: 12/12 recorded exactly once, every oracle accepted and every
   nop rejected, none with an earlier attempt, nothing of the run left on the engine.

The tmpfs is unmounted whatever fails (``finally``)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker as docker_sdk

from orchestrator.store import RunPaths

from .test_engine_outage import ENV, running_trials

MiB = 1 << 20


def _free(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: Path, leave: int = 0) -> int:
    """A filler file in ``folder`` that leaves ``leave`` bytes free (0: until the file system refuses); its size."""
    filler = folder / f"filler-{time.monotonic_ns()}"
    with open(filler, "wb", buffering=0) as fh:
        while True:
            room = _free(folder) - leave
            if room <= 0:
                break
            try:
                fh.write(b"\0" * min(room, MiB))
            except OSError:
                if leave:
                    raise
                break
    return filler.stat().st_size


def _rows(out: Path) -> list[dict]:
    db = sqlite3.connect(out / "results.sqlite")
    try:
        return [json.loads(r[0]) for r in db.execute("SELECT result FROM trials")]
    finally:
        db.close()


def _records_whole(out: Path) -> dict[str, int]:
    """Every record file in the run folder parses and no temporary file is left; how many of each there are."""
    counts = {"verdict.json": 0, "retry-owed.json": 0, "stopped.json": 0}
    for path in out.rglob("*"):
        assert not path.name.endswith(".tmp"), f"a temporary file was left: {path}"
        if path.name in counts:
            json.loads(path.read_text())  # raises on a half-written record
            counts[path.name] += 1
    db = sqlite3.connect(out / "results.sqlite")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()
    return counts


def _attempts(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in (out / "trials").glob("*/a*")} if (out / "trials").exists() else set()


def _nothing_left(out: Path) -> None:
    engine = docker_sdk.from_env()
    key = RunPaths(out).key
    assert not engine.containers.list(all=True, filters={"label": f"org.trialbox.run={key}"})
    assert not engine.volumes.list(filters={"label": f"org.trialbox.run={key}"})


def test_a_full_run_folder_stops_the_run_and_the_same_command_finishes_it_once_space_is_freed(project, repo_root):
    manifest = project / "examples" / "diskfull.yaml"
    manifest.write_text("""experiment: {name: diskfull, seed: 7}
candidates:
  - {name: oracle, agent: oracle}
  - {name: nop, agent: nop}
environment: {cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 64}
execution: {trials_per_task: 6, deadline_seconds: 300, concurrency: 2}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [textkit-slug-unicode]}
""")
    mount = project / "runs" / "small-fs"
    mount.mkdir(parents=True)
    out = mount / "run"
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--out", str(out)]
    proc = None
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], check=True)
    try:
        # 1. the disk fills mid-run
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=repo_root, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        lines: list[str] = []
        three = threading.Event()

        def read() -> None:
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if sum(x.startswith("[") for x in lines) >= 3:
                    three.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert three.wait(300), "\n".join(lines)
        in_flight = running_trials(out)
        done_at_fill = sum(x.startswith("[") for x in lines)
        free_before = _free(mount)
        filled_at = time.time()
        filler = fill(mount)
        time.sleep(0.5)  # a trial admitted while the filler grew has made its folder by now
        at_fill = _attempts(out)
        rc = proc.wait(timeout=600)
        reader.join(10)
        err = proc.stderr.read()
        text = "\n".join(lines)
        print(f"first session: filled {filler / MiB:.1f} MiB ({free_before / MiB:.1f} MiB were free) "
              f"{filled_at - t0:.1f}s after the start, {done_at_fill} recorded, {in_flight} in flight; "
              f"exit {rc} {time.time() - filled_at:.1f}s after the fill\n{text}\n{err}")
        assert rc == 74, text + err
        assert "Traceback" not in err, err
        assert "error: the run stopped: a host file system it writes to is (nearly) full" in err, err
        assert f"the run folder {out}: " in err and "MiB free" in err, err
        assert "Free space there" in err and "run the same command again" in err, err
        assert "stopping: a host file system is (nearly) full" in text, text
        assert "retrying it once" not in text  # no retry spent on the host's fault
        counts = _records_whole(out)
        rows = _rows(out)
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)) and done_at_fill <= len(ids) < 12, ids
        assert not [r for r in rows if r["verdict"]["outcome"] == "infra_error"], rows
        for r in rows:
            assert r["verdict"]["outcome"] == ("accepted" if r["candidate"] == "oracle" else "rejected"), r["verdict"]
        # no trial started after the fill: the attempt folders are those there were then
        first_attempts = _attempts(out)
        assert first_attempts == at_fill, (sorted(first_attempts), sorted(at_fill))
        assert all(a.endswith("/a1") for a in first_attempts), first_attempts
        _nothing_left(out)
        print(f"after the first session: {len(rows)} recorded, {len(first_attempts)} attempt folders, "
              f"record files {counts}")

        # 2. nearly full: less than a trial needs, so none starts
        for f in mount.glob("filler-*"):
            f.unlink()
        fill(mount, leave=100 * MiB)
        second = subprocess.run(cmd, cwd=repo_root, env=ENV, capture_output=True, text=True, timeout=600)
        print(f"second session (100 MiB free): exit {second.returncode}\n{second.stdout}\n{second.stderr}")
        assert second.returncode == 74, second.stdout + second.stderr
        assert "Traceback" not in second.stderr
        found = re.search(rf"the run folder {re.escape(str(out))} has (\d+) MiB free on its file system, less than "
                          r"the 128 MiB a trial needs there before it starts", second.stderr)
        assert found and 90 <= int(found.group(1)) <= 100, second.stderr
        assert len(_rows(out)) == len(rows) and _attempts(out) == first_attempts  # nothing started
        assert "0 running" in second.stdout
        _records_whole(out)

        # 3. space freed: the same command finishes the run
        for f in mount.glob("filler-*"):
            f.unlink()
        t3 = time.time()
        third = subprocess.run(cmd, cwd=repo_root, env=ENV, capture_output=True, text=True, timeout=900)
        print(f"third session (space freed): exit {third.returncode} in {time.time() - t3:.1f}s\n{third.stdout}\n"
              f"{third.stderr}")
        assert third.returncode == 0, third.stdout + third.stderr
        assert "retrying it once" not in third.stdout
        final = _rows(out)
        ids = [r["id"] for r in final]
        assert len(ids) == 12 and len(set(ids)) == 12  # every trial recorded exactly once
        for r in final:  # the verdicts of a run without the fault, and no attempt spent on it
            assert r["verdict"]["outcome"] == ("accepted" if r["candidate"] == "oracle" else "rejected"), r["verdict"]
            assert r["attempt"] == 1 and not r.get("previous_attempts"), (r["id"], r["attempt"], r["previous_attempts"])
        before = {r["id"]: r for r in rows}
        for r in final:  # a trial recorded before the fault is kept as it was
            if r["id"] in before:
                assert r == before[r["id"]]
        assert _records_whole(out)["verdict.json"] == 12
        assert not (out / "stopped.json").exists()
        _nothing_left(out)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        res = subprocess.run(["umount", str(mount)], capture_output=True, text=True)
        if res.returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_nearly_full_state_folder_lets_no_trial_start_and_the_run_goes_on_once_it_has_room(project, repo_root):
    """The state folder (``TRIALBOX_STATE_DIR``: the workspace disks) on a 100 MiB tmpfs, less than the 64 + 64
    MiB a trial needs there: no trial starts (exit 74, the folder named); with the usual state folder the same
    command runs the 4 trials."""
    manifest = project / "examples" / "statefull.yaml"
    manifest.write_text("""experiment: {name: statefull, seed: 8}
candidates:
  - {name: oracle, agent: oracle}
  - {name: nop, agent: nop}
environment: {cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 64}
execution: {trials_per_task: 2, deadline_seconds: 300, concurrency: 2}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [textkit-slug-unicode]}
""")
    state = project / "state-fs"
    state.mkdir()
    out = project / "runs" / "statefull"
    cmd = [sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--out", str(out)]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", str(state)], check=True)
    try:
        first = subprocess.run(cmd, cwd=repo_root, env={**ENV, "TRIALBOX_STATE_DIR": str(state)},
                               capture_output=True, text=True, timeout=600)
        print(f"state folder on 100 MiB: exit {first.returncode}\n{first.stdout}\n{first.stderr}")
        assert first.returncode == 74, first.stdout + first.stderr
        assert "Traceback" not in first.stderr
        assert re.search(rf"the state folder {re.escape(str(state))} has \d+ MiB free on its file system, less "
                         r"than the 128 MiB a trial needs there before it starts", first.stderr), first.stderr
        assert _attempts(out) == set() and _rows(out) == []
        _records_whole(out)
    finally:
        res = subprocess.run(["umount", str(state)], capture_output=True, text=True)
        if res.returncode != 0:
            subprocess.run(["umount", "-l", str(state)], capture_output=True)
    again = subprocess.run(cmd, cwd=repo_root, env=ENV, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _rows(out)
    assert len(rows) == 4 and len({r["id"] for r in rows}) == 4
    for r in rows:
        assert r["verdict"]["outcome"] == ("accepted" if r["candidate"] == "oracle" else "rejected"), r["verdict"]
        assert r["attempt"] == 1
    _nothing_left(out)
