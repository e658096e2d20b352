"""`trialbox run`, `show`, `regrade` and `tasks check` from the command line, offline."""

from __future__ import annotations

import json
import re
import uuid
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import docker.errors
import pytest
import yaml

from orchestrator.lock import harness_identity

from orchestrator.store import RunPaths

ENV = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}


def cli(*args, cwd, check=None, timeout=600, env=None):
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], capture_output=True, text=True, cwd=cwd,
                         env={**ENV, **(env or {})}, timeout=timeout)
    if check is not None:
        assert res.returncode == check, res.stdout + res.stderr
    return res


@pytest.fixture(scope="module")
def demo_run(project, repo_root):
    out = project / "runs" / "demo"
    for task in ("ledger-negative-format", "textkit-slug-unicode"):  # content no earlier check has seen
        with open(project / "tasks" / task / "task.yaml", "a") as fh:
            fh.write(f"# {uuid.uuid4().hex}\n")
    refused = cli("run", str(project / "examples/offline-demo.yaml"), "--scripted-model",
                  str(project / "examples/scripted-model.yaml"), "--out", str(out), cwd=repo_root, check=1)
    assert "never checked as they are now: ledger-negative-format, textkit-slug-unicode" in refused.stderr
    assert "trialbox tasks check" in refused.stderr and "Traceback" not in refused.stderr and not out.exists()
    checked = cli("tasks", "check", str(project / "examples/offline-demo.yaml"), cwd=repo_root, check=0)
    assert "task set ok: 2 of 2 task(s) ok" in checked.stdout
    res = cli("run", str(project / "examples/offline-demo.yaml"), "--scripted-model",
              str(project / "examples/scripted-model.yaml"), "--out", str(out), cwd=repo_root, check=0)
    assert json.loads((out / "lock.json").read_text())["task_checks"] == {"ledger-negative-format": "passed",
                                                                         "textkit-slug-unicode": "passed"}
    return out, res


def outcomes(run: Path) -> dict[str, str]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return {row[0]: row[1] for row in db.execute("SELECT id, outcome FROM trials")}
    finally:
        db.close()


def test_offline_run_with_every_kind_of_agent(demo_run):
    run, res = demo_run
    assert "Traceback" not in res.stderr
    got = outcomes(run)
    assert len(got) == 20 and len([line for line in res.stdout.splitlines() if line.startswith("[")]) == 20
    for r in (0, 1):
        assert got[f"textkit-slug-unicode/nop/{r}"] == "rejected"
        assert got[f"textkit-slug-unicode/oracle/{r}"] == "accepted"
        assert got[f"textkit-slug-unicode/scripted-fix/{r}"] == "accepted"
        assert got[f"textkit-slug-unicode/claude-scripted/{r}"] == "accepted"
        assert got[f"textkit-slug-unicode/claude-quick/{r}"] == "accepted"
        assert got[f"ledger-negative-format/oracle/{r}"] == "accepted"
        assert got[f"ledger-negative-format/claude-scripted/{r}"] == "accepted"
        assert got[f"ledger-negative-format/claude-quick/{r}"] == "rejected"
    assert (run / "manifest.yaml").exists() and json.loads((run / "lock.json").read_text())["lock_version"] == 1
    assert json.loads((run / "lock.json").read_text())["costs"]["version"] == "demo-infra-2026-12"
    db = sqlite3.connect(run / "results.sqlite")
    try:
        results = [json.loads(row[0]) for row in db.execute("SELECT result FROM trials")]
    finally:
        db.close()
    for r in results:  # every trial measured its sandbox and its grader container(s) from their cgroups
        sandbox, grader = r["usage"]["sandbox"], r["usage"]["grader"]
        assert sandbox["source"] == "cgroup" and sandbox["cpu_s"] > 0 and sandbox["memory_gib_s"] > 0, r["id"]
        assert grader["source"] == "cgroup" and grader["spans"] >= 1 and grader["cpu_s"] > 0, r["id"]
    assert any(r["usage"]["tool_calls"].get("bash") for r in results if r["candidate"] == "claude-scripted")
    # the trials after the first slots' worth were prepared while earlier ones ran (command agents too: their
    # model proxy made ahead), and came out as the others did
    ahead = {r["candidate"] for r in results if r["conditions"]["prepared_ahead"]}
    assert len(ahead) >= 3 and sum(r["conditions"]["prepared_ahead"] for r in results) >= 10, ahead


def test_show_explains_each_verdict(demo_run, repo_root):
    run, _ = demo_run
    for trial in outcomes(run):
        out = cli("show", str(run), trial, cwd=repo_root, check=0).stdout
        assert out.startswith(f"trial {trial}: ") and "criteria:" in out and "events (" in out and "intact" in out
        assert "\n  cost: $" in out and ", cpu $" in out and "used without a price" not in out  # the whole cost
    claude = cli("show", str(run), "ledger-negative-format/claude-quick/0", cwd=repo_root, check=0).stdout
    assert "REJECTED — failed: fail_to_pass, abstention" in claude
    assert "[FAIL] abstention (critical)" in claude and "model      scripted-model-1" in claude
    missing = cli("show", str(run), "no/such/trial", cwd=repo_root, check=1)
    assert "no trial 'no/such/trial'" in missing.stderr and "Traceback" not in missing.stderr


def test_rerun_resumes_and_a_drifted_lock_is_refused(demo_run, project, repo_root):
    run, _ = demo_run
    again = cli("run", str(project / "examples/offline-demo.yaml"), "--scripted-model",
                str(project / "examples/scripted-model.yaml"), "--out", str(run), cwd=repo_root, check=0)
    assert "20 trial(s), 20 already done" in again.stdout and "[1/" not in again.stdout
    instruction = project / "tasks/textkit-slug-unicode/instruction.md"
    original = instruction.read_text()
    instruction.write_text(original + "\nAlso be quick.\n")
    try:
        drift = cli("run", str(project / "examples/offline-demo.yaml"), "--out", str(project / "runs/other"),
                    "--scripted-model", str(project / "examples/scripted-model.yaml"), cwd=repo_root, check=1)
        assert "tasks.textkit-slug-unicode.task_sha256: locked" in drift.stderr and "Traceback" not in drift.stderr
        assert not (project / "runs/other").exists()
    finally:
        instruction.write_text(original)


def test_regrade_uses_the_current_grader_without_rerunning_agents(demo_run, project, repo_root):
    run, _ = demo_run
    test = project / "graders/textkit-slug-unicode/tests/test_slug_unicode.py"
    original = test.read_text()
    test.write_text(original.replace('"unicode-done"', '"unicode-check-done"'))
    events_before = {p: p.stat().st_mtime for p in run.rglob("events.jsonl")}
    try:
        res = cli("regrade", str(run), "--manifest", str(project / "examples/offline-demo.yaml"), "--scripted-model",
                  str(project / "examples/scripted-model.yaml"), cwd=repo_root, check=0)
    finally:
        test.write_text(original)
    assert "7 verdict(s) changed" not in res.stdout  # sanity on the parse below
    changed = [line for line in res.stdout.splitlines() if "accepted -> rejected" in line]
    assert len(changed) == 8 and all("textkit-slug-unicode" in line for line in changed)
    assert {p: p.stat().st_mtime for p in run.rglob("events.jsonl")} == events_before  # no agent ran again
    db = sqlite3.connect(run / "results.sqlite")
    versions = {r[0] for r in db.execute("SELECT grader_version FROM verdicts WHERE trial_id LIKE 'textkit-slug-unicode/%'")}
    db.close()
    assert len(versions) == 2 and any("+" in v for v in versions)  # both verdicts kept, each with its grader
    back = cli("regrade", str(run), "--manifest", str(project / "examples/offline-demo.yaml"), "--scripted-model",
               str(project / "examples/scripted-model.yaml"), cwd=repo_root, check=0)  # the grader as it was
    assert len([line for line in back.stdout.splitlines() if "rejected -> accepted" in line]) == 8


def test_tasks_check_passes_on_the_samples_and_catches_a_broken_task(project, repo_root):
    ok = cli("tasks", "check", str(project / "examples/smoke.yaml"), "--replicates", "1", cwd=repo_root, check=0)
    assert "task set ok: 7 of 7 task(s) ok" in ok.stdout
    if not harness_identity()["commit"].endswith("+dirty"):  # a checkout with uncommitted changes never reuses
        again = cli("tasks", "check", str(project / "examples/smoke.yaml"), "--replicates", "1", cwd=repo_root, check=0)
        assert "task set ok: 7 of 7 task(s) ok" in again.stdout and "(7 reused from a recorded check)" in again.stdout
        assert again.stdout.count("the same inputs: reused; --again checks it again") == 7
        forced = cli("tasks", "check", str(project / "examples/smoke.yaml"), "--replicates", "1", "--again",
                     cwd=repo_root, check=0)
        assert "task set ok: 7 of 7 task(s) ok" in forced.stdout and "reused" not in forced.stdout
    broken = project.parent / "broken"
    shutil.copytree(project, broken)
    for lock in (broken / "examples").glob("*.lock.json"):
        lock.unlink()
    shutil.copy(broken / "graders/textkit-slug-unicode/tests/test_slug_unicode.py", broken / "tasks/_repos/textkit/tests/")
    (broken / "graders/textkit-wrap-long-words/solution.patch").write_text("")
    bad = cli("tasks", "check", str(broken / "examples/smoke.yaml"), "--replicates", "1", cwd=repo_root, check=1)
    assert "held-out tests/test_slug_unicode.py is in the repository" in bad.stdout
    assert "the oracle was not accepted (textkit-wrap-long-words/oracle/0" in bad.stdout


def test_a_killed_run_loses_no_finished_trial(project, repo_root):
    out = project / "runs" / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(project / "examples/smoke.yaml"), "--unchecked",
                             "--out", str(out)], cwd=repo_root, env=ENV, stdout=subprocess.PIPE, text=True)
    finished = 0
    deadline = time.monotonic() + 120
    while finished < 3 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        finished += line.startswith("[")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert finished == 3
    kept = outcomes(out)
    assert len(kept) >= 3 and all(v in ("accepted", "rejected") for v in kept.values())
    resumed = cli("run", str(project / "examples/smoke.yaml"), "--unchecked", "--out", str(out), cwd=repo_root, check=0)
    assert f"28 trial(s), {len(kept)} already done" in resumed.stdout
    finished_now = outcomes(out)
    assert len(finished_now) == 28 and all(finished_now[t] == v for t, v in kept.items())  # nothing lost or redone
    import docker as docker_sdk

    engine = docker_sdk.from_env()
    key = RunPaths(out).key
    assert key != out.name  # the run's own key labels its resources
    assert not engine.containers.list(all=True, filters={"label": f"org.trialbox.run={key}"})  # no orphan left
    assert not engine.volumes.list(filters={"label": f"org.trialbox.run={key}"})


def test_judge_is_recorded_and_calibrated(demo_run, repo_root, tmp_path):
    run, _ = demo_run
    shown = cli("show", str(run), "textkit-slug-unicode/oracle/0", cwd=repo_root, check=0).stdout
    assert "[PASS] semantic_judge:" in shown and '"prompt_sha256"' in shown and '"model_served": "scripted-model-1"' in shown
    assert "semantic_judge" not in cli("show", str(run), "ledger-negative-format/oracle/0", cwd=repo_root, check=0).stdout
    labels = tmp_path / "labels.yaml"
    labels.write_text("textkit-slug-unicode/oracle/0: pass\ntextkit-slug-unicode/oracle/1: pass\n"
                      "textkit-slug-unicode/nop/0: fail\ntextkit-slug-unicode/nop/1: fail\n")
    out = cli("calibrate", str(run), str(labels), cwd=repo_root, check=0).stdout
    assert "compared 4 trial(s): 2 labelled pass, 2 labelled fail" in out
    assert "false-positive rate: 100.0%" in out and "false-negative rate: 0.0%" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("textkit-slug-unicode/oracle/0: maybe\n")
    res = cli("calibrate", str(run), str(bad), cwd=repo_root, check=1)
    assert "expected a mapping of trial id to pass or fail" in res.stderr and "Traceback" not in res.stderr


def test_swebench_samples_import_and_check(repo_root, tmp_path, images):
    sw = repo_root / "examples/swebench"
    out = tmp_path / "tasks"
    res = cli("tasks", "import-swebench", str(sw / "instances.jsonl"), "--repos", str(sw / "repos"), "--specs",
              str(sw / "specs.yaml"), "--out", str(out), cwd=repo_root, check=0)
    assert "imported 2 instance(s)" in res.stdout
    shutil.copytree(repo_root / "images", tmp_path / "images")
    (tmp_path / "m.yaml").write_text("experiment: {name: imported}\ncandidates: [{name: nop, agent: nop}]\n"
                                     "execution: {trials_per_task: 1}\n")
    cli("validate", str(tmp_path / "m.yaml"), cwd=repo_root, check=0)
    check = cli("tasks", "check", str(tmp_path / "m.yaml"), "--replicates", "1", cwd=repo_root, check=0)
    assert "task set ok: 2 of 2 task(s) ok" in check.stdout


def test_suspect_evidence_that_is_no_run_folder_is_refused_before_the_run(project, repo_root):
    """``analysis.suspect_evidence`` is declared before the run: a folder that is not a run is an error naming the
    field, before anything is written, not a report's warning later."""
    text = (project / "examples/offline-demo.yaml").read_text()
    assert "\nanalysis:\n" in text
    manifest = project / "examples/evidence-missing.yaml"
    manifest.write_text(text.replace("\nanalysis:\n", "\nanalysis:\n  suspect_evidence: [../runs/never-ran]\n", 1))
    out = project / "runs" / "evidence-missing"
    res = cli("run", str(manifest), "--scripted-model", str(project / "examples/scripted-model.yaml"), "--out",
              str(out), "--unchecked", cwd=repo_root, check=1)
    assert "analysis.suspect_evidence[0]: ../runs/never-ran: not a run folder (no results.sqlite)" in res.stderr
    assert "Traceback" not in res.stderr and not out.exists()


def test_report_json_schema_gate_and_html(demo_run, repo_root, tmp_path):
    import jsonschema

    run, _ = demo_run
    page = tmp_path / "report.html"
    res = cli("report", str(run), "--json", "--gate", "--html", str(page), cwd=repo_root)
    report = json.loads(res.stdout)
    schema = json.loads((repo_root / "schemas/report.schema.json").read_text())
    jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)
    assert report["adoption"]["decision"] == "INCONCLUSIVE" and res.returncode == 3
    assert report["candidates"]["oracle"]["n_accepted"] == 4 and report["candidates"]["nop"]["n_accepted"] == 0
    assert report["candidates"]["claude-scripted"]["cost_usd_total"] > 0
    # answers looked up: the oracle's diff is the reference solution's, the scripted fix's is its own
    near = {name: c["near_identical"] for name, c in report["candidates"].items()}
    assert near["oracle"]["accepted_near_identical"] == near["oracle"]["accepted_measured"] == 4, near["oracle"]
    assert near["scripted-fix"]["accepted_measured"] >= 1 and near["scripted-fix"]["accepted_near_identical"] == 0
    assert "4 of 4 accepted trial(s) (100%) changed nearly what the reference solution changes" in \
        cli("report", str(run), cwd=repo_root, check=0).stdout
    # the whole cost, split by kind: every container measured and priced, nothing left unpriced
    for name, c in report["candidates"].items():
        cost = c["cost"]
        assert cost["used"]["cpu_hours"] > 0 and cost["used"]["memory_gib_hours"] > 0, name
        assert cost["by_kind_usd"]["cpu"] > 0 and cost["by_kind_usd"]["memory"] > 0, name
        assert cost["unpriced"] == {} and cost["unmeasured_attempts"] == 0, name
        assert c["cost_usd_total"] == pytest.approx(sum(cost["by_kind_usd"].values()), abs=1e-5)
    assert report["candidates"]["nop"]["cost"]["by_kind_usd"]["model"] == 0
    assert report["candidates"]["claude-scripted"]["cost"]["by_kind_usd"]["model"] > 0
    assert report["costs"]["version"] == "demo-infra-2026-12" and report["costs"]["model_price_table_version"]
    for t in report["trials"]:
        assert t["cost_usd"] > (t["model_cost_usd"] or 0)  # machines cost something for every trial
    # one ablation: the full design fixes both tasks, the ablation only the one the baseline fixes too
    [ab] = report["ablations"]
    assert (ab["candidate"], ab["full"], ab["baseline"], ab["paired_tasks"]) == ("claude-quick", "claude-scripted",
                                                                              "scripted-fix", 2)
    assert ab["full_improvement"]["value"] == 0.5 and ab["component_adds"]["value"] == 0.5
    assert ab["share_persisting"]["value"] == 0.0
    assert page.read_text().count('class="plot"') == 6
    text = cli("report", str(run), cwd=repo_root, check=0).stdout
    assert "decision: INCONCLUSIVE" in text and "pass^1" in text
    assert "cost by kind: model $" in text and "ablation claude-quick = claude-scripted without exploring" in text


def test_reproduce_matches_and_refuses_drift(demo_run, project, repo_root):
    run, _ = demo_run
    again = cli("reproduce", str(run), "--scripted-model", str(project / "examples/scripted-model.yaml"),
                "--out", str(project / "runs/again"), cwd=repo_root, check=0)
    assert f"every verdict matches {run}" in again.stdout
    rubric = project / "graders/textkit-slug-unicode/rubric.md"
    original = rubric.read_text()
    rubric.write_text(original + "\nBe lenient.\n")
    try:
        drift = cli("reproduce", str(run), "--scripted-model", str(project / "examples/scripted-model.yaml"),
                    "--out", str(project / "runs/drifted"), cwd=repo_root, check=1)
    finally:
        rubric.write_text(original)
    assert "graders.textkit-slug-unicode: locked" in drift.stderr and "Traceback" not in drift.stderr
    assert not (project / "runs/drifted").exists()


def test_run_cost_cap_stops_admitting_trials(project, repo_root):
    manifest = project / "examples/capped.yaml"
    text = (project / "examples/offline-demo.yaml").read_text()
    text = text.replace("name: offline-demo", "name: capped").replace("  max_cost_usd: 1.0", "  max_cost_usd: 1.0\n  max_run_cost_usd: 0.01")
    manifest.write_text(text.replace("  select: [\"textkit-slug-unicode\", \"ledger-negative-format\"]",
                                     "  select: [\"textkit-slug-unicode\"]"))
    out = project / "runs/capped"
    res = cli("run", str(manifest), "--unchecked", "--scripted-model", str(project / "examples/scripted-model.yaml"), "--out", str(out),
              cwd=repo_root, check=0)
    assert "worst-case cost: 4 of 10 trial(s) call a model, x $1.0 = $4.00; run cap: $0.01" in res.stdout  # nop, oracle, script: free
    assert "stopped admitting trials: the run cost reached its cap of $0.01" in res.stdout
    finished = outcomes(out)
    assert 0 < len(finished) < 10
    report = json.loads(cli("report", str(out), "--json", cwd=repo_root, check=0).stdout)
    assert report["run"]["stopped_by_cost_cap"] and report["run"]["provisional"]
    assert report["adoption"]["decision"] == "NONE"
    assert report["candidates"]["claude-scripted"]["models_served"] == ["scripted-model-1"]
    assert report["saturation"]["trials_with_conditions"] == len(finished)


def test_infrastructure_retry_replaces_its_trial_and_keeps_its_cost(project, repo_root):
    manifest = project / "examples/retry.yaml"
    manifest.write_text("""experiment: {name: retry}
candidates:
  - {name: claude, agent: claude, model_snapshot: scripted-model-1}
execution: {trials_per_task: 1, deadline_seconds: 120}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [ledger-negative-format]}
""")
    err = {"error": {"status": 500, "type": "api_error", "message": "down", "retry_after": 0}}
    script = project / "examples/retry-model.yaml"
    script.write_text(json.dumps({"scripts": {"retry-key#ledger-negative-format": [
        {"content": [{"type": "tool_use", "name": "bash", "input": {"command": "ls"}}],
         "usage": {"input_tokens": 10000, "output_tokens": 100}},
        *[err] * 6,  # the first attempt's model API fails for good: infra_error(model_api)
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "done"}}],
         "usage": {"input_tokens": 1000, "output_tokens": 10}}]}}))
    out = project / "runs/retry"
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(manifest), "--unchecked", "--scripted-model", str(script),
                          "--out", str(out)], capture_output=True, text=True, cwd=repo_root,
                         env={**ENV, "ANTHROPIC_API_KEY": "retry-key"}, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "infrastructure error in ledger-negative-format/claude/0 (model_api): retrying it once" in res.stdout
    db = sqlite3.connect(out / "results.sqlite")
    rows = db.execute("SELECT id, attempt, retries, cost_usd, outcome FROM trials").fetchall()
    db.close()
    first = (10000 * 3 + 100 * 15) / 1e6
    second = (1000 * 3 + 10 * 15) / 1e6
    assert len(rows) == 1 and rows[0][:3] == ("ledger-negative-format/claude/0", 2, 1)  # replaced, not added
    assert rows[0][3] == pytest.approx(first + second) and rows[0][4] == "rejected"  # both attempts' cost counted


SLUG_FIXER = '''#!/usr/bin/env python3
"""A command agent installed by an agent layer: it fixes textkit's slug without a model."""
from pathlib import Path
p = Path("textkit/slug.py")
s = p.read_text().replace("import re\\n", "import re\\nimport unicodedata\\n", 1)
s = s.replace("    words = _NON_WORD.split(text.lower())",
              "    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode()\\n"
              "    words = _NON_WORD.split(text.lower())", 1)
p.write_text(s)
print("fixed the slug")
'''


def test_a_command_agent_runs_from_its_layer_and_the_grader_without_it(project, repo_root, client):
    layer = project / "agents" / "slug-fixer"
    layer.mkdir(parents=True)
    (layer / "slug-fixer").write_text(SLUG_FIXER)
    (layer / "Dockerfile").write_text(f"# {uuid.uuid4().hex}: content no earlier run built\nARG BASE\nFROM ${{BASE}}\n"
                                      "COPY slug-fixer /usr/local/bin/slug-fixer\nRUN chmod 0755 /usr/local/bin/slug-fixer\n")
    manifest = project / "examples/layered.yaml"
    manifest.write_text("""experiment: {name: layered}
candidates:
  - {name: nop, agent: nop}
  - {name: fixer, agent: command, command: slug-fixer, model_snapshot: scripted-model-1,
     agent_image: ../agents/slug-fixer}
environment: {network_policy: model-api-only}
execution: {trials_per_task: 1, deadline_seconds: 120}
tasks: {path: ../tasks, graders: ../graders, images: ../images, select: [textkit-slug-unicode]}
""")
    out = project / "runs/layered"
    key = {"ANTHROPIC_API_KEY": "layer-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # the fixer calls no model
    unbuilt = cli("run", str(manifest), "--unchecked", "--out", str(out), cwd=repo_root, check=1, env=key)
    assert "agent_images.fixer.python" in unbuilt.stderr and "trialbox images build --manifest" in unbuilt.stderr
    assert "Traceback" not in unbuilt.stderr and not out.exists()
    built = cli("images", "build", "--manifest", str(manifest), cwd=repo_root, check=0)
    assert "fixer on python:" in built.stdout
    cli("run", str(manifest), "--unchecked", "--out", str(out), cwd=repo_root, check=0, env=key)
    lock = json.loads((out / "lock.json").read_text())
    environment, agent = lock["images"]["python"]["image_id"], lock["agent_images"]["fixer"]["python"]["image_id"]
    assert agent != environment
    db = sqlite3.connect(out / "results.sqlite")
    results = {r[0]: json.loads(r[1]) for r in db.execute("SELECT candidate, result FROM trials")}
    db.close()
    fixer = results["fixer"]
    assert fixer["verdict"]["outcome"] == "accepted", fixer["verdict"]
    assert (fixer["image_id"], fixer["grader_image_id"]) == (agent, environment)  # the grader ran without the agent
    assert results["nop"]["image_id"] == environment and "grader_image_id" not in results["nop"]
    present = client.containers.run(agent, ["test", "-x", "/usr/local/bin/slug-fixer"], network_mode="none", remove=True)
    assert present == b""
    with pytest.raises(docker.errors.ContainerError):  # the environment itself has no trace of the agent
        client.containers.run(environment, ["test", "-x", "/usr/local/bin/slug-fixer"], network_mode="none", remove=True)


@pytest.mark.agents
def test_claude_code_and_codex_compared_from_one_manifest(project, repo_root):
    manifest, script = project / "examples/compare-agents.yaml", project / "examples/compare-agents-model.yaml"
    cli("images", "build", "--manifest", str(manifest), cwd=repo_root, check=0, timeout=1200)
    out = project / "runs/compare-agents"
    res = cli("run", str(manifest), "--unchecked", "--scripted-model", str(script), "--out", str(out), cwd=repo_root,
              check=0)
    assert "Traceback" not in res.stderr
    report = json.loads(cli("report", str(out), "--json", cwd=repo_root, check=0).stdout)
    summary = cli("report", str(out), cwd=repo_root, check=0).stdout
    assert "claude-code (claude-code 2.1.332, anthropic API): 2/2 accepted" in summary
    # Codex CLI with its plugin sync and analytics off (the preset) reaches nothing but the proxy: accepted alike
    assert "codex (codex 0.171.0, openai API): 2/2 accepted" in summary
    for name, tool in (("claude-code", "Bash"), ("codex", "exec_command")):
        c = report["candidates"][name]
        assert (c["n_accepted"], c["n_trials"]) == (2, 2), c["outcomes"]
        assert c["cost_usd_total"] > 0 and c["cost"]["by_kind_usd"]["model"] > 0
        assert c["proxy"] == {"requests_refused": {}, "model_reported_tool_calls": 2}  # one tool call per trial
        assert c["agent"]["preset"] == name and c["agent"]["version"] in ("2.1.332", "0.171.0")
    from orchestrator.events import read_events

    for name, api in (("claude-code", "anthropic"), ("codex", "openai")):  # each on its own API, same controls
        events = read_events(RunPaths(out).attempt(f"textkit-slug-unicode/{name}/0", 1).events)
        calls = [e for e in events if e["kind"] == "model_call"]
        assert calls and {e["api"] for e in calls} == {api} and all(e["cost_usd"] > 0 for e in calls)


def test_trajectories_export_as_atif_and_validate(demo_run, repo_root, tmp_path):
    import jsonschema

    run, _ = demo_run
    out = tmp_path / "atif"
    res = cli("export", str(run), "--format", "atif", "--out", str(out), cwd=repo_root, check=0)
    files = sorted(out.glob("*.json"))
    db = sqlite3.connect(run / "results.sqlite")
    trials = db.execute("SELECT count(*) FROM trials").fetchone()[0]
    db.close()
    assert f"{trials} trajectory(ies)" in res.stdout and len(files) == trials
    schema = json.loads((repo_root / "schemas/atif-v1.4.schema.json").read_text())
    docs = [json.loads(f.read_text()) for f in files]
    for doc in docs:
        jsonschema.validate(doc, schema)
    claude = [d for d in docs if d["extra"]["trialbox"]["candidate"] == "claude-scripted"]
    assert claude and all(any("metrics" in s for s in d["steps"]) for d in claude)  # its model calls, with usage
    scripted = [d for d in docs if d["extra"]["trialbox"]["candidate"] == "scripted-fix"]
    assert scripted and all(s.get("extra", {}).get("tool_calls_source") == "harness" for d in scripted
                            for s in d["steps"][1:])


def test_on_a_terminal_the_run_shows_a_live_panel_and_its_log_goes_to_the_run_folder(demo_run, project, repo_root):
    """`trialbox run` on a pseudo-terminal: a panel of the counts (accepted, rejected and infrastructure errors
    apart), a line per trial, and no log line among them (the log is the run folder's trialbox.log)."""
    import pty
    import select

    manifest = yaml.safe_load((project / "examples/offline-demo.yaml").read_text())
    manifest["candidates"] = [{"name": "nop", "agent": "nop"}, {"name": "oracle", "agent": "oracle"}]
    manifest.pop("judge", None)
    manifest["execution"]["trials_per_task"] = 1
    manifest["tasks"]["select"] = ["textkit-slug-unicode"]
    manifest["analysis"] = {"k": [1]}
    path = project / "examples" / "live.yaml"
    path.write_text(yaml.safe_dump(manifest))
    out = project / "runs" / "live"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(out)],
                            cwd=repo_root, env={**ENV, "COLUMNS": "160", "TERM": "xterm"}, stdin=follower,
                            stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.wait(timeout=60) == 0, b"".join(chunks)[-3000:]
    text = b"".join(chunks).decode(errors="replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "trialbox run" in plain and "accepted / rejected / infra errors" in plain and "1 / 1 / 0" in plain
    assert "textkit-slug-unicode/oracle/0" in plain and "textkit-slug-unicode/nop/0" in plain
    assert '{"' not in plain  # no JSON log line among the display's lines
    assert (out / "trialbox.log").exists()
