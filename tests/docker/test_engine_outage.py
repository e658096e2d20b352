"""An engine outage mid-run, on the real engine (issue 25, item 1): the Docker daemon is stopped after three trials
of a 12-trial run (6 oracle, 6 nop, 2 at once) and started again about ten seconds later by the project's own
start script (`scripts/ensure-docker.sh`), with a stale pid file left where the stopped daemon's was. The run
must pause instead of spending retries: every trial recorded once, the verdicts those of a run without the
fault (oracle accepted, nop rejected), no attempt started while the engine was out, every replaced attempt one
the outage ended, nothing of the run left on the engine.

Other people's Docker tests share this engine: each stop and start is logged to /tmp/engine-outage.log, and the
engine is started again whatever fails (``finally``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker as docker_sdk

from orchestrator.store import RunPaths

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
PID_FILE = Path("/var/run/docker.pid")
CONTAINERD_PID = Path("/var/run/docker/containerd/containerd.pid")
LOG = Path("/tmp/engine-outage.log")


def _log(line: str) -> None:
    with LOG.open("a") as fh:
        fh.write(f"{subprocess.run(['date', '-u'], capture_output=True, text=True).stdout.strip()} {line}\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _answers() -> bool:
    return subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                          timeout=30).returncode == 0


def stop_engine() -> int:
    """SIGTERM the daemon and wait until it has exited (its containers die with it: no live-restore)."""
    pid = int(PID_FILE.read_text().strip())
    try:
        containerd = int(CONTAINERD_PID.read_text().strip())
    except (OSError, ValueError):
        containerd = None
    _log("stopping engine for issue-25 test")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while (_pid_alive(pid) or (containerd and _pid_alive(containerd))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pid_alive(pid), "dockerd did not stop within 60 s"
    return pid


def start_engine(repo_root: Path) -> subprocess.CompletedProcess:
    """The project's own start logic; dockerd in a session of its own, so nothing of the test's takes it down."""
    res = subprocess.run(["bash", str(repo_root / "scripts/ensure-docker.sh")], capture_output=True, text=True,
                         timeout=180, start_new_session=True)
    if _answers():
        _log("engine back")
    return res


def running_trials(out: Path, timeout: float = 120) -> list[str]:
    """Wait until one of the run's containers (a sandbox or a grader) is running, so that the stop lands on a
    trial in flight (the third run of this test stopped the engine half a second after the two running trials
    had ended: nothing was in flight); returns their trials."""
    engine = docker_sdk.from_env()
    deadline = time.monotonic() + timeout
    key = (out / "run-key").read_text().strip()
    while time.monotonic() < deadline:
        running = engine.containers.list(filters={"label": f"org.trialbox.run={key}", "status": "running"})
        if running:
            return sorted({c.labels.get("org.trialbox.trial", "") for c in running})
        time.sleep(0.1)
    raise AssertionError(f"no container of the run was running within {timeout:.0f}s")


def _rows(out: Path) -> list[dict]:
    db = sqlite3.connect(out / "results.sqlite")
    try:
        return [json.loads(r[0]) for r in db.execute("SELECT result FROM trials")]
    finally:
        db.close()


def _wall(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def test_an_engine_outage_mid_run_is_waited_out_and_spends_no_retry(project, repo_root):
    manifest = project / "examples" / "outage.yaml"
    manifest.write_text("""experiment: {name: outage, seed: 3}
candidates:
  - {name: oracle, agent: oracle}
  - {name: nop, agent: nop}
environment: {cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 256}
execution: {trials_per_task: 6, deadline_seconds: 300, concurrency: 2, engine_outage_wait_s: 300}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [textkit-slug-unicode]}
""")
    out = project / "runs" / "outage"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked",
                             "--out", str(out)], cwd=repo_root, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    finished = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if sum(x.startswith("[") for x in lines) >= 3:
                finished.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stopped_at = back_at = None
    restart = None
    try:
        assert finished.wait(300), "\n".join(lines)
        in_flight = running_trials(out)
        stopped_at = time.time()
        dead = stop_engine()
        stopped_for = time.time()
        assert not _answers()
        # a daemon killed rather than stopped leaves its pid file: the start logic must not trip on it
        PID_FILE.write_text(f"{dead}\n")
        time.sleep(max(0.0, 10 - (time.time() - stopped_at)))
        restart = start_engine(repo_root)
        back_at = time.time()
        assert _answers(), restart.stdout + restart.stderr
        assert "removing stale pid file /var/run/docker.pid" in restart.stdout, restart.stdout + restart.stderr
        rc = proc.wait(timeout=900)
    finally:
        if not _answers():  # whatever failed above, the engine is left running
            start_engine(repo_root)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    text = "\n".join(lines)
    err = proc.stderr.read()
    assert rc == 0, text + err
    print(f"engine stopped at {stopped_at:.1f} with {in_flight} in flight (gone {stopped_for - stopped_at:.1f}s "
          f"later), answering again at {back_at:.1f} ({back_at - stopped_at:.1f}s out)\n{text}")

    assert "engine outage: the Docker engine does not answer" in text
    assert "engine outage over" in text
    assert "retrying it once" not in text  # no trial's own retry spent

    rows = _rows(out)
    ids = [r["id"] for r in rows]
    assert len(ids) == 12 and len(set(ids)) == 12  # every trial recorded exactly once
    for r in rows:  # the verdicts of a run without the fault
        expected = "accepted" if r["candidate"] == "oracle" else "rejected"
        assert r["verdict"]["outcome"] == expected, (r["id"], json.dumps(r["verdict"], indent=1), err[-4000:])
        # every attempt it replaced is one the outage ended, never a retry of its own
        assert all(a["kind"] == "engine_outage" for a in r.get("previous_attempts") or []), r["previous_attempts"]
    replaced = {r["id"] for r in rows if r.get("previous_attempts")}
    assert replaced, in_flight  # the outage ended the trials in flight: they ran again after it

    # no attempt started while the engine was out: every attempt's own record, the replaced ones' included
    paths = RunPaths(out)
    starts = []
    for r in rows:
        for n in range(1, r["attempt"] + 1):
            verdict = paths.attempt(r["id"], n).verdict
            if verdict.exists():
                doc = json.loads(verdict.read_text())
                if doc.get("started_at"):
                    starts.append((r["id"], n, _wall(doc["started_at"])))
    inside = [s for s in starts if stopped_at + 1 < s[2] < back_at - 1]
    assert not inside, inside

    engine = docker_sdk.from_env()
    key = paths.key
    assert not engine.containers.list(all=True, filters={"label": f"org.trialbox.run={key}"})
    assert not engine.volumes.list(filters={"label": f"org.trialbox.run={key}"})
    assert not (out / "stopped.json").exists()

    report = subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(out)], capture_output=True,
                            text=True, cwd=repo_root, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].startswith("infrastructure errors: 0 trial(s)"), report.stdout


def test_resume_runs_again_the_infrastructure_errors_whose_retry_was_not_spent(project, repo_root):
    """Item 2 on the real engine, without stopping it: a finished run's store is given what an earlier version
    recorded after an outage (a retry spent within the outage's seconds) and an infrastructure error of a
    trial's own (its retry spent on it); `run` again runs the first again and keeps the second (exit 4 with
    execution.max_infra_errors 0, the report's first lines naming it); `--rerun-infra-errors` runs it too."""
    manifest = project / "examples" / "resume-infra.yaml"
    manifest.write_text("""experiment: {name: resume-infra, seed: 5}
candidates:
  - {name: oracle, agent: oracle}
  - {name: nop, agent: nop}
environment: {cpu_limit: 1.0, cpu_reservation: 0.5, memory_limit_mb: 1024, memory_reservation_mb: 384, disk_limit_mb: 256}
execution: {trials_per_task: 2, deadline_seconds: 300, concurrency: 2}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [textkit-slug-unicode]}
""")
    out = project / "runs" / "resume-infra"

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--out",
                               str(out), *extra], capture_output=True, text=True, cwd=repo_root, env=ENV, timeout=900)

    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    outage_trial, own_trial = "textkit-slug-unicode/oracle/0", "textkit-slug-unicode/nop/1"
    db = sqlite3.connect(out / "results.sqlite")
    try:
        for trial, kind, detail, earlier in (
                (outage_trial, "sandbox", "engine refused: database not open",
                 "no Docker engine answers (is dockerd running? `make setup` starts one)"),
                (own_trial, "grader_start", "the grader could not start", "the grader could not start")):
            doc = json.loads(db.execute("SELECT result FROM trials WHERE id = ?", (trial,)).fetchone()[0])
            doc.update(attempt=2, retries=1, verdict={"outcome": "infra_error", "kind": kind, "accepted": False,
                                                      "reasons": [detail], "criteria": [], "grader_version": "t"},
                       previous_attempts=[{"attempt": 1, "kind": kind, "detail": earlier, "node": None,
                                           "cost_usd": 0.0, "usage": None, "interventions": 0}])
            db.execute("UPDATE trials SET attempt=2, retries=1, outcome='infra_error', outcome_kind=?, accepted=0, "
                       "result=? WHERE id=?", (kind, json.dumps(doc), trial))
        db.commit()
    finally:
        db.close()

    again = run()
    assert again.returncode == 4, again.stdout + again.stderr
    assert f"running again 1 trial(s) recorded as infrastructure errors with their retry not spent: {outage_trial}" \
        in again.stdout
    assert f"spent their retry and are kept as they are ({own_trial}); `trialbox run --rerun-infra-errors`" \
        in again.stdout
    assert "1 trial(s) recorded as infrastructure errors (grader_start 1)" in again.stderr
    assert "more than execution.max_infra_errors (0)" in again.stderr and "Traceback" not in again.stderr
    rows = {r["id"]: r for r in _rows(out)}
    assert len(rows) == 4 and rows[outage_trial]["verdict"]["outcome"] == "accepted"
    assert rows[outage_trial]["attempt"] == 3 and [a["attempt"] for a in rows[outage_trial]["previous_attempts"]] == [1, 2]
    report = subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(out)], capture_output=True,
                            text=True, cwd=repo_root, env=ENV, timeout=300)
    first_lines = report.stdout.splitlines()
    assert first_lines[0].startswith("infrastructure errors: 1 trial(s) (grader_start 1), ABOVE "
                                     "execution.max_infra_errors (0)"), report.stdout
    assert first_lines[1].strip() == f"{own_trial}: grader_start: the grader could not start"

    every = run("--rerun-infra-errors")
    assert every.returncode == 0, every.stdout + every.stderr
    assert f"running again 1 trial(s) every infrastructure error (--rerun-infra-errors): {own_trial}" in every.stdout
    rows = {r["id"]: r for r in _rows(out)}
    assert len(rows) == 4
    for r in rows.values():
        assert r["verdict"]["outcome"] == ("accepted" if r["candidate"] == "oracle" else "rejected"), r["verdict"]
    db = sqlite3.connect(out / "results.sqlite")
    try:
        history = sorted(db.execute("SELECT trial_id, attempt, outcome FROM superseded").fetchall())
        assert db.execute("SELECT count(*) FROM trials").fetchone()[0] == 4
    finally:
        db.close()
    assert history == [(own_trial, 2, "infra_error"), (outage_trial, 2, "infra_error")]
    engine = docker_sdk.from_env()
    assert not engine.containers.list(all=True, filters={"label": f"org.trialbox.run={RunPaths(out).key}"})
