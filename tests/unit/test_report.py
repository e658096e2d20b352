"""The report and the adoption rule on constructed results."""

from __future__ import annotations

import random

import pytest

from orchestrator.manifest import Manifest
from orchestrator.report import GATE, build_report
from orchestrator.store import RunPaths, Store
from orchestrator.result import TrialResult

TASKS = [f"t{i:02d}" for i in range(30)]


def manifest(**adoption) -> Manifest:
    return Manifest.model_validate({
        "experiment": {"name": "r", "seed": 3},
        "candidates": [{"name": "base", "agent": "nop"}, {"name": "new", "agent": "nop"}],
        "execution": {"trials_per_task": 3},
        "analysis": {"k": [1, 3], "primary_metric": "acceptance_rate", "exclusions": ["infra_error"],
                     "adoption": {"baseline": "base", "candidate": "new", **adoption}}})


MEASURED = {"sandbox": {"wall_s": 10.0, "cpu_s": 2.0, "memory_gib_s": 0.5, "reserved_cpu_s": 5.0,
                        "reserved_memory_gib_s": 2.5, "source": "cgroup", "spans": 1, "samples": 40},
            "grader": {"wall_s": 5.0, "cpu_s": 1.0, "memory_gib_s": 0.1, "reserved_cpu_s": 2.5,
                       "reserved_memory_gib_s": 1.25, "source": "cgroup", "spans": 1, "samples": 20},
            "tool_calls": {}}


def write_run(tmp_path, p_base, p_new, cost_new=0.1, blocking_fail=False, finished=None, infra=0, identical=False,
              usage=MEASURED):
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    rng = random.Random(1)
    rows, draws = [], {}
    for t in TASKS:
        for cand, p, cost in (("base", p_base, 0.1), ("new", p_new, cost_new)):
            for r in range(3):
                draw = rng.random()
                ok = (draws.setdefault((t, r), draw) if identical else draw) < p
                crit = [{"name": "secrets", "critical": True, "passed": not (blocking_fail and cand == "new" and t == "t00"),
                         "evidence": {}}]
                outcome = "accepted" if ok else "rejected"
                if infra and cand == "new" and r == 0 and t < f"t{infra:02d}":
                    outcome, ok = "infra_error", False
                rows.append({"id": f"{t}/{cand}/{r}", "task": t, "candidate": cand, "replicate": r, "attempt": 1,
                             "retries": 0, "cost_usd": cost, "duration_s": 10.0 + r, "usage": usage,
                             "verdict": {"outcome": outcome, "kind": "sandbox" if outcome == "infra_error" else None,
                                         "accepted": ok, "reasons": [], "criteria": crit, "grader_version": "g"}})
    for row in rows[: finished if finished is not None else len(rows)]:
        store.record(TrialResult.from_dict(row), [])
    store.close()
    return paths


def record_trial(store: Store, task: str, cand: str, r: int, accepted: bool, criteria: list[dict]) -> None:
    """One finished trial of ``cand`` on ``task`` (replicate ``r``), accepted or rejected, with ``criteria``."""
    store.record(TrialResult.from_dict({
        "id": f"{task}/{cand}/{r}", "task": task, "candidate": cand, "replicate": r, "attempt": 1, "retries": 0,
        "cost_usd": 0.1, "duration_s": 10.0, "usage": MEASURED,
        "verdict": {"outcome": "accepted" if accepted else "rejected", "kind": None, "accepted": accepted,
                    "reasons": [], "criteria": criteria, "grader_version": "g"}}), [])


def decide(tmp_path, m, **kw):
    paths = write_run(tmp_path, **kw)
    report = build_report(paths, m, {t: "easy" for t in TASKS}, {t: t for t in TASKS}, len(TASKS) * 6)
    return report, report["adoption"]


def test_adopt(tmp_path):
    report, a = decide(tmp_path, manifest(min_delta=0.1), p_base=0.3, p_new=0.9)
    assert a["decision"] == "ADOPT" and GATE[a["decision"]] == 0
    diff = report["comparisons"][0]["difference"]
    assert diff["interval"][0] > 0.1 and report["comparisons"][0]["paired_tasks"] == 30


def test_reject_on_the_difference(tmp_path):
    _, a = decide(tmp_path, manifest(min_delta=0.0), p_base=0.9, p_new=0.3)
    assert a["decision"] == "REJECT" and GATE["REJECT"] == 1 and "below min_delta" in a["reasons"][0]


def test_inconclusive(tmp_path):
    report, a = decide(tmp_path, manifest(min_delta=0.0), p_base=0.5, p_new=0.5, identical=True)
    assert report["comparisons"][0]["difference"]["value"] == 0.0
    assert a["decision"] == "INCONCLUSIVE" and GATE["INCONCLUSIVE"] == 3


def test_blocking_criterion_rejects(tmp_path):
    _, a = decide(tmp_path, manifest(min_delta=0.1, blocking_criteria=["secrets"]), p_base=0.3, p_new=0.9,
                  blocking_fail=True)
    assert a["decision"] == "REJECT" and any("blocking criteria failed" in r for r in a["reasons"])


def test_cost_bound(tmp_path):
    _, a = decide(tmp_path, manifest(min_delta=0.1, max_cost_per_accepted_usd=0.5), p_base=0.3, p_new=0.9, cost_new=2.0)
    assert a["decision"] == "REJECT" and any("cost per accepted" in r for r in a["reasons"])
    _, b = decide(tmp_path / "b", manifest(min_delta=0.1, max_cost_per_accepted_usd=0.5), p_base=0.3, p_new=0.9,
                  cost_new=0.1)
    assert b["decision"] == "ADOPT"


def test_no_adoption_on_a_cost_that_is_only_a_lower_bound(tmp_path):
    """Containers nobody could measure make the cost a lower bound: the bound is never passed on it."""
    m = Manifest.model_validate({**manifest(min_delta=0.1, max_cost_per_accepted_usd=0.5).model_dump(mode="json"),
                                 "costs": {"version": "v", "cpu_hour_usd": 1.0}})
    _, measured = decide(tmp_path / "a", m, p_base=0.3, p_new=0.9)
    assert measured["decision"] == "ADOPT"
    blind = {"sandbox": {"wall_s": 10.0, "cpu_s": 0.0, "memory_gib_s": 0.0, "reserved_cpu_s": 5.0,
                         "reserved_memory_gib_s": 2.5, "source": "unmeasured", "spans": 1, "samples": 0,
                         "unmeasured_spans": 1}, "grader": MEASURED["grader"], "tool_calls": {}}
    report, a = decide(tmp_path / "b", m, p_base=0.3, p_new=0.9, usage=blind)
    assert a["decision"] == "INCONCLUSIVE" and any("could not be measured" in r for r in a["reasons"])
    assert any("could not be measured" in w for w in report["warnings"])
    unpriced = Manifest.model_validate(manifest(min_delta=0.1, max_cost_per_accepted_usd=0.5).model_dump(mode="json"))
    _, named = decide(tmp_path / "c", unpriced, p_base=0.3, p_new=0.9)  # no prices declared: zero by declaration
    assert named["decision"] == "ADOPT" and any("counted as $0" in r for r in named["reasons"])


def test_unfinished_run_is_provisional_and_decides_nothing(tmp_path):
    report, a = decide(tmp_path, manifest(min_delta=0.1), p_base=0.3, p_new=0.9, finished=100)
    assert report["run"]["provisional"] and a["decision"] == "NONE"


def test_exclusions_have_both_denominators_and_infra_errors_show(tmp_path):
    report, _ = decide(tmp_path, manifest(), p_base=0.5, p_new=0.5, infra=10)
    new = report["candidates"]["new"]
    assert new["n_trials"] == 90 and new["n_trials_in_denominator"] == 80 and new["excluded"] == {"infra_error": 10}
    assert new["infra_errors"] == 10
    assert new["acceptance_rate_pooled"] == pytest.approx(new["n_accepted"] / 80)
    assert new["acceptance_rate_pooled_all_trials"] == pytest.approx(new["n_accepted"] / 90)
    per_task = {}  # the headline rate is per task, then the mean, like every other figure
    for r in [r for r in Store(RunPaths(tmp_path / "run")).trials() if r.candidate == "new"]:
        if r.outcome.value != "infra_error":
            per_task.setdefault(r.task, []).append(r.accepted)
    assert new["acceptance_rate"] == pytest.approx(sum(sum(v) / len(v) for v in per_task.values()) / len(per_task))
    assert new["acceptance_rate"] != pytest.approx(new["acceptance_rate_pooled"])
    cost = new["cost_per_accepted_usd"]
    assert cost["value"] == pytest.approx(90 * 0.1 / new["n_accepted"])  # every trial's cost, retries and failures too


def test_reports_follow_the_shipped_json_schema(tmp_path, repo_root):
    import json

    import jsonschema

    schema = json.loads((repo_root / "schemas/report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for i, kw in enumerate([dict(p_base=0.3, p_new=0.9), dict(p_base=0.0, p_new=0.0), dict(p_base=0.5, p_new=0.5, infra=5),
                            dict(p_base=0.3, p_new=0.9, finished=50)]):
        report, _ = decide(tmp_path / str(i), manifest(min_delta=0.1), **kw)
        jsonschema.validate(json.loads(json.dumps(report)), schema, cls=jsonschema.Draft202012Validator)
    assert report["candidates"]["base"]["cost_per_accepted_usd"]["value"] is not None
    empty, _ = decide(tmp_path / "empty", manifest(), p_base=0.0, p_new=0.0)
    assert empty["candidates"]["new"]["cost_per_accepted_usd"]["reason"].startswith("no accepted trial")


def test_one_cluster_gives_no_interval_and_no_adoption(tmp_path):
    m = manifest(min_delta=0.1).model_copy(update={"analysis": manifest(min_delta=0.1).analysis.model_copy(
        update={"cluster_by": "cluster"})})
    paths = write_run(tmp_path, p_base=0.2, p_new=0.9)
    report = build_report(paths, m, {t: "easy" for t in TASKS}, {t: "one-repo" for t in TASKS}, len(TASKS) * 6)
    assert report["comparisons"][0]["difference"]["interval"] is None
    assert report["adoption"]["decision"] == "INCONCLUSIVE"
    assert any("1 cluster" in w for w in report["warnings"])


def test_excluded_trials_still_count_their_cost(tmp_path):
    report, _ = decide(tmp_path, manifest(), p_base=0.5, p_new=1.0, infra=30)  # t00..t29: replicate 0 of new is infra
    new = report["candidates"]["new"]
    assert new["cost_per_accepted_usd"]["value"] == pytest.approx(90 * 0.1 / new["n_accepted"])


def test_cost_bound_with_no_accepted_trial_rejects(tmp_path):
    _, a = decide(tmp_path, manifest(min_delta=-1.0, max_cost_per_accepted_usd=0.5), p_base=0.0, p_new=0.0)
    assert a["decision"] == "REJECT" and any("unbounded" in r for r in a["reasons"])


def test_no_decision_below_the_cluster_count_any_interval_holds_at(tmp_path):
    paths = write_run(tmp_path, p_base=0.3, p_new=0.9)
    few = {t: f"repo{i % 6}" for i, t in enumerate(TASKS)}  # 30 tasks from 6 repositories
    m = manifest(min_delta=0.1)
    m = m.model_copy(update={"analysis": m.analysis.model_copy(update={"cluster_by": "cluster"})})
    report = build_report(paths, m, {t: "easy" for t in TASKS}, few, len(TASKS) * 6)
    assert report["adoption"]["decision"] == "INCONCLUSIVE" and "only 6 cluster(s)" in report["adoption"]["reasons"][0]
    assert report["intervals"]["clusters"] == 6 and report["intervals"]["measured_coverage"] is None
    assert any("no interval method here was shown to hold" in w for w in report["warnings"])
    many = build_report(paths, manifest(min_delta=0.1), {t: "easy" for t in TASKS}, {t: t for t in TASKS}, len(TASKS) * 6)
    assert many["adoption"]["decision"] == "ADOPT"  # the same results, 30 independent tasks
    assert many["intervals"]["coverage_table_clusters"] == 20 and many["intervals"]["measured_coverage"]["pass@1"] > 0.93


def test_a_comparison_uses_only_tasks_both_candidates_can_be_measured_on(tmp_path):
    m = manifest(min_delta=0.1)
    m = m.model_copy(update={"analysis": m.analysis.model_copy(update={"primary_metric": "pass_hat_k", "k": [3]})})
    report, _ = decide(tmp_path, m, p_base=0.5, p_new=0.5, infra=10)  # "new" has 2 of 3 trials on t00–t09
    comp = report["comparisons"][0]
    assert comp["paired_tasks"] == 20 and set(comp["per_task"]) == {f"t{i:02d}" for i in range(10, 30)}
    left = comp["tasks_left_out"]
    assert left["baseline_only"] == [f"t{i:02d}" for i in range(10)] and not left["candidate_only"]
    assert "pass_hat_k@3" in left["why"]
    assert report["candidates"]["new"]["pass_hat_k"]["3"]["tasks_without_k_trials"] == [f"t{i:02d}" for i in range(10)]


def test_per_task_values_are_what_the_means_are_taken_over(tmp_path):
    report, _ = decide(tmp_path, manifest(min_delta=0.1), p_base=0.3, p_new=0.9)
    new = report["candidates"]["new"]
    for metric in ("pass_at_k", "pass_hat_k"):
        for k in ("1", "3"):
            values = [t[metric][k] for t in new["per_task"].values() if t[metric][k] is not None]
            assert new[metric][k]["value"] == pytest.approx(sum(values) / len(values))
    assert sum(t["accepted"] for t in new["per_task"].values()) == new["n_accepted"]
    assert sum(t["trials"] for t in new["per_task"].values()) == new["n_trials_in_denominator"]


def test_a_comparison_prints_both_sides_on_the_tasks_it_compares_and_checks_the_minimum_there(tmp_path):
    """Issue 26, item 4: the baseline ran 30 tasks from 12 repositories, the candidate finished only the first 10
    (from 8 of them). The run has 12 clusters, the comparison 8: no decision. Both sides' figures over the 10
    compared tasks subtract to the paired difference; the cost difference has an interval."""
    from orchestrator.summary import terminal

    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    rng = random.Random(4)
    repo = {t: f"repo{min(i, 7) if i < 10 else 8 + i % 4}" for i, t in enumerate(TASKS)}  # t00-t09: repos 0-7
    for t in TASKS:
        for cand, p, cost in (("base", 0.3, 0.1), ("new", 0.8, 0.15)):
            if cand == "new" and t >= "t10":
                continue
            for r in range(3):
                ok = rng.random() < p
                store.record(TrialResult.from_dict({
                    "id": f"{t}/{cand}/{r}", "task": t, "candidate": cand, "replicate": r, "attempt": 1, "retries": 0,
                    "cost_usd": cost * (1 + rng.random()), "duration_s": 10.0, "usage": MEASURED,
                    "verdict": {"outcome": "accepted" if ok else "rejected", "kind": None, "accepted": ok, "reasons": [],
                                "criteria": [], "grader_version": "g"}}), [])
    store.close()
    m = manifest(min_delta=0.1)
    m = m.model_copy(update={"analysis": m.analysis.model_copy(update={"cluster_by": "cluster"})})
    report = build_report(paths, m, {t: "easy" for t in TASKS}, repo, 30 * 3 + 10 * 3)
    comp = report["comparisons"][0]
    assert comp["paired_tasks"] == 10 and comp["paired_clusters"] == 8 and report["intervals"]["clusters"] == 12
    assert report["adoption"]["decision"] == "INCONCLUSIVE"
    assert "only 8 cluster(s) among the 10 compared task(s) (the run has 12)" in report["adoption"]["reasons"][0]
    base, new = comp["on_paired_tasks"]["baseline"], comp["on_paired_tasks"]["candidate"]
    assert new["metric"]["value"] - base["metric"]["value"] == pytest.approx(comp["difference"]["value"])
    # the baseline's headline figure is over its 30 tasks, not the 10 compared
    assert report["candidates"]["base"]["acceptance_rate"] != pytest.approx(base["metric"]["value"])
    cd = comp["cost_per_accepted_difference"]
    assert cd["value"] == pytest.approx(new["cost_per_accepted_usd"]["value"] - base["cost_per_accepted_usd"]["value"])
    assert cd["interval"][0] < cd["value"] < cd["interval"][1] and comp["cost_per_accepted_difference_usd"] == cd["value"]
    text = terminal(report)
    assert "on these 10 tasks (8 cluster(s)" in text and "each candidate's figures above are over all its own tasks" in text
    from orchestrator.html import render

    page = render(report)
    assert "Comparisons, on the tasks each compares" in page and "10 (8 clusters)" in page


def test_hacks_are_counted_both_ways(tmp_path):
    """An accepted trial carrying a tampering diagnostic (non-critical: it stays accepted) is counted as a failure
    in a second figure beside the plain one, with the share of accepted trials that carry one."""
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    for t in TASKS:
        for cand in ("base", "new"):
            for r in range(3):
                tampered = cand == "new" and t < "t05" and r == 0
                crit = [{"name": "fail_to_pass", "critical": True, "passed": True, "evidence": {}},
                        {"name": "evaluator_tampering_attempts", "critical": False, "passed": not tampered,
                         "evidence": {}}]
                record_trial(store, t, cand, r, True, crit)
    store.close()
    report = build_report(paths, manifest(), {t: "easy" for t in TASKS}, {t: t for t in TASKS}, len(TASKS) * 6)
    new, base = report["candidates"]["new"], report["candidates"]["base"]
    assert new["acceptance_rate"] == 1.0 and new["integrity"]["evaluator_tampering_attempts"] == 5
    hacks = new["hacks_counted_as_failures"]
    assert hacks["accepted_with_diagnostic"] == 5 and hacks["share_of_accepted"] == pytest.approx(5 / 90)
    assert hacks["acceptance_rate"] == pytest.approx((25 + 5 * 2 / 3) / 30)
    assert hacks["pass_at_k"]["1"]["value"] == pytest.approx(hacks["acceptance_rate"])
    assert hacks["trials"] == [f"t0{i}/new/0" for i in range(5)]
    assert base["hacks_counted_as_failures"]["acceptance_rate"] == 1.0
    from orchestrator.summary import terminal
    text = terminal(report)
    assert "with the 5 accepted trial(s) that carry an integrity or tampering diagnostic (6% of accepted)" in text


def test_the_share_of_accepted_trials_near_the_reference_solution(tmp_path):
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    for t in TASKS:
        for cand in ("base", "new"):
            for r in range(3):
                near = cand == "new" and t < "t03"
                crit = [{"name": "fail_to_pass", "critical": True, "passed": r < 2, "evidence": {}}]
                if t != "t29":  # a task whose reference solution is no patch: not measured
                    crit.append({"name": "near_identical_to_reference", "critical": False, "passed": not near,
                                 "evidence": {"similarity": 0.97 if near else 0.2, "threshold": 0.9}})
                record_trial(store, t, cand, r, r < 2, crit)
    store.close()
    report = build_report(paths, manifest(), {t: "easy" for t in TASKS}, {t: t for t in TASKS}, len(TASKS) * 6)
    near = report["candidates"]["new"]["near_identical"]
    assert near["accepted_near_identical"] == 6 and near["accepted_measured"] == 58
    assert near["share_of_accepted"] == 6 / 58 and near["trials"][0] == "t00/new/0"
    assert report["candidates"]["base"]["near_identical"]["accepted_near_identical"] == 0
    from orchestrator.summary import terminal
    assert "6 of 58 accepted trial(s) (10%) changed nearly what the reference solution changes" in terminal(report)


def _scripted_manifest(exclude: bool) -> Manifest:
    return Manifest.model_validate({
        "experiment": {"name": "r", "seed": 3},
        "candidates": [{"name": "base", "agent": "script", "script": "s.yaml"},
                       {"name": "new", "agent": "script", "script": "s.yaml"}, {"name": "oracle", "agent": "oracle"}],
        "execution": {"trials_per_task": 3},
        "analysis": {"k": [1], "primary_metric": "acceptance_rate", "exclude_suspect_tasks": exclude}})


def test_suspect_tasks_are_listed_and_left_out_only_as_declared(tmp_path):
    """A task no candidate solved (the oracle aside) is suspect: listed with a warning, and left out of the figures
    only when the manifest declared it before the run."""
    for exclude in (False, True):
        paths = RunPaths(tmp_path / str(exclude) / "run")
        store = Store(paths)
        paths.lock.write_text("{}")
        for t in TASKS:
            for cand in ("base", "new", "oracle"):
                ok = cand == "oracle" or t >= "t03"  # t00-t02: nobody but the oracle
                record_trial(store, t, cand, 0, ok, [])
        store.close()
        report = build_report(paths, _scripted_manifest(exclude), {t: "easy" for t in TASKS}, {t: t for t in TASKS},
                              len(TASKS) * 3)
        assert report["suspect_tasks"] == {"tasks": ["t00", "t01", "t02"], "excluded": exclude,
                                           "cleared_by_evidence": [], "evidence": []}
        assert any(w.startswith("3 suspect task(s), solved by no candidate (oracle and nop aside): t00, t01, t02")
                   for w in report["warnings"])
        rate = report["candidates"]["new"]["acceptance_rate"]
        assert rate == (1.0 if exclude else pytest.approx(27 / 30))


def _evidence_run(root, lock: dict, solved: dict[str, list[str]]):
    """A finished earlier run at ``root``: its lock, its manifest copy (candidates base and oracle), and one
    accepted trial per (candidate, task) in ``solved``."""
    import json

    paths = RunPaths(root)
    store = Store(paths)
    paths.lock.write_text(json.dumps(lock))
    paths.manifest.write_text("candidates:\n  - {name: base, agent: script, script: s.yaml}\n"
                              "  - {name: oracle, agent: oracle}\n")
    for cand, tasks in solved.items():
        for t in tasks:
            record_trial(store, t, cand, 0, True, [])
    store.close()
    return root


def test_a_task_solved_in_a_declared_earlier_run_under_the_same_grader_is_not_suspect(tmp_path):
    """Suspects across runs: an evidence run's solve clears a task only when a solver (not oracle, not nop) solved
    it with the same task and grader folders; an unreadable evidence run is named, and clears nothing."""
    import json

    lock = {"tasks": {t: {"task_sha256": f"task-{t}"} for t in TASKS}, "graders": {t: f"grader-{t}" for t in TASKS}}
    other = json.loads(json.dumps(lock))
    other["graders"]["t01"] = "grader-t01-before-a-fix"
    same = _evidence_run(tmp_path / "earlier", lock, {"base": ["t00", "t05"], "oracle": ["t02"]})
    changed = _evidence_run(tmp_path / "older", other, {"base": ["t01"]})
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text(json.dumps(lock))
    for t in TASKS:
        for cand in ("base", "new", "oracle"):
            record_trial(store, t, cand, 0, cand == "oracle" or t >= "t03", [])
    store.close()
    evidence = [("earlier", same), ("older", changed), ("gone", tmp_path / "gone")]
    for exclude in (False, True):
        report = build_report(paths, _scripted_manifest(exclude), {t: "easy" for t in TASKS}, {t: t for t in TASKS},
                              len(TASKS) * 3, evidence)
        found = report["suspect_tasks"]
        assert found["tasks"] == ["t01", "t02"]  # t01: solved only under another grader; t02: only by the oracle
        assert found["cleared_by_evidence"] == ["t00"]
        assert [(e["run"], e["read"], e["solved"], e["not_counted_other_grader"]) for e in found["evidence"]] == [
            ("earlier", True, ["t00"], []), ("older", True, [], ["t01"]), ("gone", False, [], [])]
        assert "not a run folder" in found["evidence"][2]["problem"]
        assert any(w.startswith("2 suspect task(s), solved by no candidate (oracle and nop aside) here or in 2 "
                                "evidence run(s): t01, t02") for w in report["warnings"])
        assert any(w.startswith("suspect evidence gone not read (") for w in report["warnings"])
        rate = report["candidates"]["new"]["acceptance_rate"]
        assert rate == pytest.approx(27 / 28 if exclude else 27 / 30)  # t00 (cleared) stays counted either way


def test_suspect_evidence_is_read_without_writing_to_the_earlier_run(tmp_path):
    """The evidence run's database is opened read-only: a report leaves its folder byte for byte as it was."""
    import json

    from orchestrator.suspects import read_evidence

    lock = {"tasks": {"t00": {"task_sha256": "a"}}, "graders": {"t00": "g"}}
    root = _evidence_run(tmp_path / "earlier", lock, {"base": ["t00"]})
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    (root / "results.sqlite").chmod(0o444)
    got = read_evidence("earlier", root, lock, {"t00"})
    assert got.read and got.solved == {"t00"}
    assert {p.name: p.read_bytes() for p in root.iterdir()} == before
    bad = tmp_path / "bad"
    _evidence_run(bad, lock, {})
    (bad / "lock.json").write_text("[1]")
    assert read_evidence("bad", bad, lock, {"t00"}).problem.endswith("(ValueError: not a JSON object)")
    assert json.loads((root / "lock.json").read_text()) == lock


def test_a_minimum_grader_strength_decides_on_the_strong_graders_tasks_only(tmp_path):
    import json

    paths = write_run(tmp_path, p_base=0.3, p_new=0.9)
    strengths = {t: {"strength": 1.0 if t < "t15" else 0.5, "graded": 6, "survivors": [] if t < "t15" else ["m01"],
                     "checked_at": "2026-12-07T00:00:00Z", "record": "x.json"} for t in TASKS}
    strengths["t03"] = None  # never measured: left out too
    paths.lock.write_text(json.dumps({"grader_strength": strengths}))
    m = manifest(min_delta=0.1, min_grader_strength=0.8)
    report = build_report(paths, m, {t: "easy" for t in TASKS}, {t: t for t in TASKS}, len(TASKS) * 6)
    decision = report["adoption"]
    counted = [t for t in TASKS if t < "t15" and t != "t03"]
    assert decision["tasks_counted"] == counted
    assert decision["reasons"][0].startswith("counted only the 14 task(s) whose grader strength is at least 0.8 "
                                             "(min_grader_strength); 16 left out: t03, t15")
    assert report["graders"]["t20"] == {"strength": 0.5, "mutants_graded": 6, "survivors": ["m01"], "suspect": False}
    assert report["graders"]["t03"]["strength"] is None
    assert report["comparisons"][0]["paired_tasks"] == 30  # every other figure keeps every task
    plain = build_report(paths, manifest(min_delta=0.1), {t: "easy" for t in TASKS}, {t: t for t in TASKS},
                         len(TASKS) * 6)["adoption"]
    assert "tasks_counted" not in plain and not plain["reasons"][0].startswith("counted only")


def test_the_terminal_names_the_weakest_graders_and_says_when_none_was_measured():
    from orchestrator.summary import grader_lines

    assert grader_lines({}) == []
    assert grader_lines({"a": {"strength": None, "survivors": []}}) == \
        ["graders: strength not measured on any of the 1 task(s) (`tasks check --mutants`)"]
    lines = grader_lines({"a": {"strength": 1.0, "survivors": []}, "b": {"strength": 0.5, "survivors": ["m1", "m2"]},
                          "c": {"strength": None, "survivors": []}, "d": {"strength": 0.8, "survivors": ["m3"]}})
    assert lines == ["graders: strength measured on 3 of 4 task(s); weakest: b 0.50 (2 survived), d 0.80 (1 survived)"]
    assert grader_lines({"a": {"strength": 1.0, "survivors": []}})[0].endswith("every measured grader rejected every mutant")


def test_every_reward_metric_is_a_figure_with_its_interval_and_its_missing_trials_counted(tmp_path):
    """A script grader's named numbers: each metric per candidate, the mean over tasks of per-task means, with an
    interval; a trial that wrote no reward is counted as without it, never as 0; excluded outcomes stay out."""
    from orchestrator.rewards import reward_metrics
    from orchestrator.summary import terminal

    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text("{}")
    for i, t in enumerate(TASKS[:10]):
        for r in range(2):
            metrics = None if (t == "t00" and r == 1) else {"reward": float(i % 2), "performance": 0.1 * i + 0.05 * r}
            crit = [{"name": "reward", "critical": True, "passed": bool(metrics and metrics["reward"] >= 1),
                     "evidence": {"metrics": metrics, "acceptance": []}}]
            record_trial(store, t, "new", r, bool(metrics and metrics["reward"] >= 1), crit)
            record_trial(store, t, "base", r, False, [])
    store.close()
    m = Manifest.model_validate({"experiment": {"name": "r", "seed": 3},
                                 "candidates": [{"name": "base", "agent": "nop"}, {"name": "new", "agent": "nop"}],
                                 "execution": {"trials_per_task": 2}, "analysis": {"k": [1]}})
    report = build_report(paths, m, {t: "easy" for t in TASKS[:10]}, {t: t for t in TASKS[:10]}, 40)
    got = report["candidates"]["new"]["rewards"]
    assert sorted(got) == ["performance", "reward"] and report["candidates"]["base"]["rewards"] == {}
    perf = got["performance"]
    assert (perf["tasks"], perf["trials"], perf["trials_without_it"]) == (10, 19, 1)
    per_task = [0.0] + [0.1 * i + 0.025 for i in range(1, 10)]  # t00 has only its first trial
    assert perf["value"] == pytest.approx(sum(per_task) / 10)
    assert perf["interval"][0] < perf["value"] < perf["interval"][1] and perf["bounded_0_1"]
    assert got["reward"]["value"] == pytest.approx(0.5)
    assert f"    reward performance: {perf['value']:.3f} [" in terminal(report)
    assert "19 trial(s); 1 trial(s) without it" in terminal(report)
    rows = Store(paths).trials()
    assert reward_metrics(rows, {"rejected"}, {t: t for t in TASKS}, 0.95)["reward"]["trials"] == 10


def test_the_html_page_has_the_per_task_table_and_the_figures_that_depend_on_the_graders(tmp_path):
    """The static page gains a row per task (each candidate's accepted/trials, the grader's strength, survivors,
    suspect) and the figures the graders shape; every name in it is escaped."""
    import json

    from orchestrator.html import render

    paths = write_run(tmp_path, p_base=0.3, p_new=0.9)
    strengths = {t: {"strength": 0.5, "graded": 4, "survivors": ["m<01>"], "checked_at": "x", "record": "r"}
                 for t in TASKS[:2]}
    paths.lock.write_text(json.dumps({"grader_strength": strengths}))
    report = build_report(paths, manifest(min_delta=0.1), {t: "easy" for t in TASKS}, {t: t for t in TASKS},
                          len(TASKS) * 6)
    page = render(report)
    assert "<h2>Per task</h2>" in page and "<h2>What the figures owe the graders</h2>" in page
    row = page.split("<td>t00</td>", 1)[1].split("</tr>", 1)[0]
    base, new = report["candidates"]["base"]["per_task"]["t00"], report["candidates"]["new"]["per_task"]["t00"]
    assert row.startswith(f"<td>{base['accepted']}/{base['trials']}</td><td>{new['accepted']}/{new['trials']}</td>")
    assert "<td>0.50 of 4</td><td>m&lt;01&gt;</td>" in row and "m<01>" not in page
    assert page.split("<td>t05</td>", 1)[1].split("</tr>", 1)[0].count("not measured") == 1
