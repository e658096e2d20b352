"""Faults on the model's side through `trialbox run`, on the real engine (issue 24): a provider refusing the key or
serving another model stops the run with its cause and records no trial; overload beyond the agent's retries is
`infra_error(model_api)`; a missing key fails before any container."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}


def _run(manifest: Path, out: Path, repo_root: Path, script: dict | None = None, env=None):
    args = [sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--out", str(out)]
    if script is not None:
        path = manifest.with_name(out.name + "-model.json")
        path.write_text(json.dumps({"scripts": script}))
        args += ["--scripted-model", str(path)]
    return subprocess.run(args, capture_output=True, text=True, cwd=repo_root, env={**ENV, **(env or {})},
                          timeout=900)


def _manifest(project: Path, name: str, trials: int = 2, extra: str = "") -> Path:
    path = project / "examples" / f"{name}.yaml"
    path.write_text(f"""experiment: {{name: {name}}}
candidates:
  - {{name: claude, agent: claude, model_snapshot: scripted-model-1{extra}}}
execution: {{trials_per_task: {trials}, deadline_seconds: 120, concurrency: 1}}
tasks: {{path: ../tasks, graders: ../graders, images: ../images, select: [ledger-negative-format]}}
""")
    return path


def _rows(out: Path) -> list[tuple]:
    db = sqlite3.connect(out / "results.sqlite")
    try:
        return db.execute("SELECT id, attempt, outcome, outcome_kind FROM trials").fetchall()
    finally:
        db.close()


def test_an_upstream_401_stops_the_run_with_its_cause_and_no_rejected_trial(project, repo_root):
    manifest = _manifest(project, "key-refused")
    out = project / "runs" / "key-refused"
    refused = {"error": {"status": 401, "type": "authentication_error", "message": "invalid x-api-key"}}
    res = _run(manifest, out, repo_root, {"k401": [refused] * 4})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "HTTP 401 authentication_error: invalid x-api-key" in res.stderr and "Traceback" not in res.stderr
    assert "retrying it once" not in res.stdout  # no retry spent on a key that cannot work
    assert _rows(out) == []  # nothing recorded as the agent's
    stop = json.loads((out / "stopped.json").read_text())
    assert stop["unrecorded"] == ["ledger-negative-format/claude/0"] and stop["not_started"] == 1
    page = out / "report.html"
    report = subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(out), "--html", str(page)],
                            capture_output=True, text=True, cwd=repo_root, env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].startswith("RUN STOPPED on a configuration error: candidate claude: "
                                                    "the model provider refused the run's credentials")
    assert "ledger-negative-format/claude/0" in report.stdout.splitlines()[1]
    assert "RUN STOPPED on a configuration error:" in page.read_text()


def test_a_served_model_that_is_not_the_pinned_one_stops_the_run(project, repo_root):
    manifest = _manifest(project, "other-model")
    out = project / "runs" / "other-model"
    answer = {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "done"}}],
              "model": "scripted-model-2"}
    res = _run(manifest, out, repo_root, {"kother": [answer] * 4})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "'scripted-model-2'" in res.stderr and "model_aliases" in res.stderr
    assert _rows(out) == []
    aliased = _manifest(project, "other-model-aliased", trials=1, extra=", model_aliases: [scripted-model-2]")
    out = project / "runs" / "other-model-aliased"
    res = _run(aliased, out, repo_root, {"kother": [answer] * 4})
    assert res.returncode == 0, res.stdout + res.stderr
    [(_, _, outcome, _)] = _rows(out)
    assert outcome == "rejected"  # an untouched workspace: judged on what the agent did, the alias accepted


def test_overload_beyond_the_agents_retries_is_an_infrastructure_error_of_the_model_api(project, repo_root):
    manifest = _manifest(project, "overloaded", trials=1)
    out = project / "runs" / "overloaded"
    busy = {"error": {"status": 529, "type": "overloaded_error", "message": "busy", "retry_after": 0}}
    res = _run(manifest, out, repo_root, {"kbusy": [busy] * 12})  # both attempts fail for good
    # recorded, and the exit code says the run ended with an infrastructure error (execution.max_infra_errors: 0)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "1 trial(s) recorded as infrastructure errors (model_api 1)" in res.stderr
    assert "more than execution.max_infra_errors (0)" in res.stderr and "Traceback" not in res.stderr
    assert "infrastructure error in ledger-negative-format/claude/0 (model_api): retrying it once" in res.stdout
    [(_, attempt, outcome, kind)] = _rows(out)
    assert (attempt, outcome, kind) == (2, "infra_error", "model_api")
    verdict = json.loads(next(out.glob("trials/*/a2/verdict.json")).read_text())["verdict"]
    assert "HTTP 529" in verdict["reasons"][0]


def test_a_missing_key_fails_before_any_container(project, repo_root):
    manifest = _manifest(project, "no-key", trials=1)
    out = project / "runs" / "no-key"
    res = _run(manifest, out, repo_root, env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    assert res.returncode == 1 and "ANTHROPIC_API_KEY is not set" in res.stderr, res.stdout + res.stderr
    assert "candidate 'claude'" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()  # refused before the run folder: its containers are labelled from it, so none was made
