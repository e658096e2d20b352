"""trialbox view through its HTTP interface (Starlette's test client over the real application and real run
folders written by the store): what each page and each JSON answer holds, what it refuses, and that a trial's
text is escaped. The same pages in a real browser: tests/browser/test_viewer.py."""

from __future__ import annotations

import json
import random
import time

import pytest
from starlette.testclient import TestClient

from orchestrator.cli import main
from orchestrator.html import render
from orchestrator.store import Store
from orchestrator.viewer.app import make_app
from orchestrator.viewer.serve import named_runs

from ..viewer_run import HOSTILE, record_trial, write_run
from .test_report import decide, manifest


def client(runs, figures=lambda run, link: "<p id='figs'>figures</p>"):
    return TestClient(make_app(runs, figures=figures), base_url="http://127.0.0.1")


@pytest.fixture
def run(tmp_path):
    return write_run(tmp_path / "run", tasks=4, replicates=3, hostile_trial="task-0001/new/2")


def test_rows_carry_outcomes_failed_criteria_and_flags(run):
    c = client({"r": run.root})
    got = c.get("/api/runs/r/rows").json()
    rows = {r["id"]: r for r in got["rows"]}
    assert len(rows) == 24 and got["last"] == 24
    rejected = [r for r in rows.values() if r["outcome"] == "rejected"]
    assert rejected and all(r["failed"][:1] == ["fail_to_pass"] or "fail_to_pass" in r["failed"] for r in rejected)
    # a failed diagnostic criterion is a flag, not a reason
    tampered = [r for r in rows.values() if "tamper" in r["flags"]]
    assert tampered and all("evaluator_tampering_attempts" in r["failed"] and r["reasons"] in ([], ["fail_to_pass"])
                            for r in tampered)
    assert {r["group"] for r in rows.values()} <= {"accepted", "rejected", "infra"}
    infra = [r for r in rows.values() if r["outcome"] == "infra_error"]
    assert all(r["group"] == "infra" and r["kind"] == "sandbox" and "retried" in r["flags"] for r in infra)
    # incremental: nothing after the last row; a new trial alone after it
    assert c.get("/api/runs/r/rows?after=24").json() == {"rows": [], "last": 24}
    assert c.get("/api/runs/r/rows?after=x").status_code == 400


def test_progress_counts_and_follows_a_live_run(tmp_path):
    paths = write_run(tmp_path / "live", tasks=2, replicates=2, finished=5)
    c = client({"live": paths.root})
    p = c.get("/api/runs/live/progress").json()
    assert (p["done"], p["planned"], p["left"], p["running"], p["live"]) == (5, 8, 3, 0, False)
    assert p["accepted"] + p["rejected"] + p["infra"] == 5
    # a planned trial whose event log is being written counts as running
    started = paths.attempt("task-0001/base/1", 1).events
    started.parent.mkdir(parents=True)
    started.write_text("{}\n")
    p = c.get("/api/runs/live/progress").json()
    assert (p["running"], p["live"], p["running_ids"]) == (1, True, ["task-0001/base/1"])
    started.unlink()
    store = Store(paths)
    try:
        record_trial(paths, store, "task-0001", "base", 1, 5, random.Random(1), outcome="accepted")
    finally:
        store.close()
    new = c.get(f"/api/runs/live/rows?after={p['last_rowid']}").json()
    assert [r["id"] for r in new["rows"]] == ["task-0001/base/1"] and new["last"] == 6
    p = c.get("/api/runs/live/progress").json()
    assert (p["done"], p["left"], p["running"]) == (6, 2, 0)


def test_trial_page_holds_verdict_criteria_timeline_diff_and_log(run):
    c = client({"r": run.root})
    page = c.get("/runs/r/trial", params={"id": "task-0000/base/0"})
    assert page.status_code == 200
    html = page.text
    for needle in ("fail_to_pass", "pass_to_pass", "scope", "observed by trialbox", "reported by the model, not observed",
                   "proxy_refused", "log intact", 'class="gi"', "grading", "NetworkMode", "ATIF export",
                   "name=diff.patch", "collected 5 items", "<td>1.90</td>"):  # the model call's latency
        assert needle in html, needle
    assert "canaries.json" not in html
    assert c.get("/runs/r/trial", params={"id": "nope"}).status_code == 404


def test_agent_text_is_escaped_everywhere_it_is_shown(run):
    c = client({"r": run.root})
    for url, params in (("/runs/r/trial", {"id": "task-0001/new/2"}),
                        ("/runs/r/compare", {"task": "task-0001", "a": "base", "b": "new"})):
        html = c.get(url, params=params).text
        assert "<script>window.__pwned" not in html and "<img src=x" not in html and '<h1 id="forged"' not in html
        assert "&lt;script&gt;window.__pwned" in html
        assert "\u202e" not in html and "\\u202e" in html  # the bidi override is shown, never applied
    rows = c.get("/api/runs/r/rows").json()["rows"]
    assert any(HOSTILE[:20] in json.dumps(r) for r in rows) is False  # the rows carry no agent text at all


def test_every_page_forbids_inline_script_and_raw_files_are_inert_text(run):
    c = client({"r": run.root})
    for url in ("/", "/runs/r", "/runs/r/trial?id=task-0000/base/0", "/runs/r/compare?task=task-0000"):
        r = c.get(url)
        assert r.status_code == 200, url
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    raw = c.get("/runs/r/raw", params={"id": "task-0001/new/2", "attempt": 1, "name": "diff.patch"})
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/plain")
    assert raw.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert "<script>window.__pwned" in raw.text  # the file as it is, served as text
    for name in ("canaries.json", "../../../lock.json", "events.jsonl/../../../../lock.json"):
        assert c.get("/runs/r/raw", params={"id": "task-0000/base/0", "name": name}).status_code == 404, name
    assert c.get("/runs/r/raw", params={"id": "../../..", "name": "diff.patch"}).status_code == 404
    for trial_id, attempt in (("..", "1"), ("task-0000/base/0", "-1"), ("task-0000/base/0", "9" * 5000)):
        assert c.get("/runs/r/raw", params={"id": trial_id, "attempt": attempt, "name": "diff.patch"}).status_code \
            == 404, (trial_id, attempt[:10])
    for attempt in ("\u00b2", "9" * 5000):  # a superscript two is a digit to str.isdigit, not to int
        assert c.get("/runs/r/trial", params={"id": "task-0000/base/0", "attempt": attempt}).status_code == 200
    atif = c.get("/runs/r/atif", params={"id": "task-0000/base/0"})
    assert atif.status_code == 200 and atif.json()["schema_version"] == "ATIF-v1.4"


def test_a_host_header_naming_another_site_is_refused(run):
    c = client({"r": run.root})
    assert c.get("/", headers={"Host": "attacker.example"}).status_code == 400
    assert c.get("/", headers={"Host": "localhost:8770"}).status_code == 200
    assert c.post("/runs/r").status_code == 405  # read-only


def test_figures_are_computed_in_the_background_and_an_error_stays_in_its_panel(run):
    calls = []

    def slow(r, link):
        calls.append(r.name)
        time.sleep(0.3)
        return f"<a href='{link('task-0000', 'new')}'>x</a>"

    c = client({"r": run.root}, figures=slow)
    assert c.get("/runs/r/figures").status_code == 202
    for _ in range(50):
        got = c.get("/runs/r/figures")
        if got.status_code == 200:
            break
        time.sleep(0.1)
    assert got.status_code == 200 and "/runs/r/compare?task=task-0000&amp;a=new" in got.text.replace("&", "&amp;") \
        or "/runs/r/compare?task=task-0000&a=new" in got.text
    assert c.get("/runs/r/figures").status_code == 200 and calls == ["r"]  # unchanged rows: not computed again

    def broken(r, link):
        raise ValueError("the manifest is gone")

    c = client({"r": run.root}, figures=broken)
    for _ in range(50):
        got = c.get("/runs/r/figures")
        if got.status_code == 200:
            break
        time.sleep(0.1)
    assert "could not be computed: ValueError: the manifest is gone" in got.text
    assert c.get("/runs/r").status_code == 200


def test_the_run_page_lists_filters_and_the_matrix(run):
    html = client({"r": run.root}).get("/runs/r").text
    for f in ("f-outcome", "f-failed", "f-task", "f-candidate", "f-stop", "f-kind", "f-flag", 'id="matrix"',
              'data-run="r"', "/static/viewer.js"):
        assert f in html
    assert "<script>" not in html  # the page's one script is a file


def test_run_names_are_unique_and_a_folder_without_a_store_is_refused(tmp_path):
    a = write_run(tmp_path / "x" / "run", tasks=1, replicates=1, files=False)
    b = write_run(tmp_path / "y" / "run", tasks=1, replicates=1, files=False)
    assert list(named_runs([a.root, b.root])) == ["run", "run-2"]
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty")]) == 1


def test_the_static_report_links_each_task_to_the_viewer(tmp_path):
    report, _ = decide(tmp_path / "run", manifest(min_delta=0.1), p_base=0.3, p_new=0.9)
    page = render(report, lambda task, cand: f"http://127.0.0.1:8770/runs/run/compare?task={task}&a={cand}")
    assert 'href="http://127.0.0.1:8770/runs/run/compare?task=t00&amp;a=base"' in page
    assert "href=" not in render(report)


def test_the_figures_are_the_reports_own_for_the_runs_manifest(tmp_path):
    """The figures panel as served: ``report_html`` loads the manifest the run used (source.json) and its tasks,
    and renders the report's body with each task's cells linking to the comparison page."""
    from pathlib import Path

    from orchestrator.loading import load_manifest
    from orchestrator.store import RunPaths
    from orchestrator.taskload import load_tasks
    from orchestrator.viewer.app import report_html
    from orchestrator.viewer.data import RunData

    manifest_file = Path(__file__).resolve().parents[2] / "examples" / "offline-demo.yaml"
    loaded = load_manifest(manifest_file)
    tasks = [t.id for t in load_tasks(loaded)]
    paths = RunPaths(tmp_path / "demo")
    store = Store(paths)
    rng = random.Random(5)
    try:
        n = 0
        for task in tasks:
            for cand in [c.name for c in loaded.manifest.candidates]:
                for rep in range(2):
                    record_trial(paths, store, task, cand, rep, n, rng, files=False)
                    n += 1
    finally:
        store.close()
    paths.lock.write_text("{}")
    paths.source.write_text(json.dumps({"manifest": str(manifest_file)}))
    html = report_html(RunData("demo", paths.root), lambda task, cand: f"/runs/demo/compare?task={task}&a={cand}")
    assert 'class="decision' in html and html.count('class="plot"') == 6
    assert f'href="/runs/demo/compare?task={tasks[0]}&amp;a=' in html
