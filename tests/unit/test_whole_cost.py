"""The whole cost (models, tools, machines, people, retries) and ablations, on constructed results.

What a trial used is recorded as physical quantities; the report prices them with the manifest's ``costs``.
These tests build results by hand and check the arithmetic, the naming of every unpriced or unmeasured
quantity, and the ablation section's paired figures and Fieller interval.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from orchestrator.costs import trial_cost, unpriced_warning
from orchestrator.manifest import CostsConfig, Manifest
from orchestrator.loading import parse_manifest
from orchestrator.report import build_report
from orchestrator.summary import terminal
from orchestrator.sandbox.meter import Usage, cgroup_files
from orchestrator.stats import fieller_set, in_fieller_set, share_interval
from orchestrator.store import RunPaths, Store
from orchestrator.result import TrialResult


IDENTITY = {"id": "t/a/0", "task": "t", "candidate": "a", "replicate": 0, "attempt": 1,
            "verdict": {"outcome": "accepted", "kind": None, "accepted": True, "reasons": [], "criteria": []}}


def priced(fields, costs):
    """The whole cost of a result made of ``fields`` (its identity and verdict filled in)."""
    return trial_cost(TrialResult.from_dict({**IDENTITY, **fields}), costs)

def usage(cpu_s=0.0, mem=0.0, wall=10.0, tools=None, grader_cpu=0.0, grader_mem=0.0, source="cgroup"):
    unmeasured = source == "unmeasured"
    return {"sandbox": Usage(wall, 0.0 if unmeasured else cpu_s, 0.0 if unmeasured else mem, 0.5 * wall,
                             0.25 * wall, source, 1, 0 if unmeasured else 3, int(unmeasured)).to_dict(),
            "grader": Usage(wall, grader_cpu, grader_mem, 1.0 * wall, 0.5 * wall, "cgroup", 1, 3).to_dict(),
            "tool_calls": tools or {}}


PRICES = CostsConfig(version="infra-test", cpu_hour_usd=3.6, memory_gib_hour_usd=0.36, tool_call_usd={"bash": 0.01},
                     human_hour_usd=60.0, minutes_per_intervention=2.0)


def test_every_kind_is_priced_from_what_the_trial_used():
    result = {"cost_usd": 0.5, "interventions": 3,
              "usage": usage(cpu_s=1000.0, mem=3600.0, grader_cpu=800.0, grader_mem=1800.0, tools={"bash": 7, "read_file": 4})}
    c = priced(result, PRICES)
    assert c.by_kind["model"] == 0.5
    assert c.by_kind["cpu"] == pytest.approx(1800 / 3600 * 3.6)          # sandbox and grader CPU-seconds
    assert c.by_kind["memory"] == pytest.approx(5400 / 3600 * 0.36)      # GiB-seconds of both containers
    assert c.by_kind["tools"] == pytest.approx(7 * 0.01)                 # read_file carries no price of its own
    assert c.human_minutes == 6.0 and c.by_kind["human"] == pytest.approx(6 / 60 * 60.0)
    assert c.total == pytest.approx(sum(c.by_kind.values())) and not c.unpriced and c.unmeasured == 0


def test_the_reserved_basis_prices_what_was_held_not_what_was_used():
    result = {"cost_usd": 0.0, "usage": usage(cpu_s=1.0, mem=1.0, wall=3600.0)}
    c = priced(result, CostsConfig(version="v", cpu_hour_usd=1.0, memory_gib_hour_usd=1.0, basis="reserved"))
    assert c.cpu_hours == pytest.approx(0.5 + 1.0)          # 0.5 CPU reserved by the sandbox, 1.0 by the grader
    assert c.memory_gib_hours == pytest.approx(0.25 + 0.5)
    assert c.by_kind["cpu"] == pytest.approx(1.5) and c.by_kind["memory"] == pytest.approx(0.75)


def test_a_price_left_undeclared_is_a_zero_that_is_named():
    result = {"cost_usd": 0.2, "interventions": 2, "usage": usage(cpu_s=360.0, mem=720.0)}
    c = priced(result, CostsConfig())
    assert c.total == pytest.approx(0.2)
    assert set(c.unpriced) == {"cpu_hours", "memory_gib_hours", "interventions"}
    assert c.unpriced["cpu_hours"] == pytest.approx(0.1)
    sentence = unpriced_warning("cand", c.unpriced)
    for field in ("costs.cpu_hour_usd", "costs.memory_gib_hour_usd", "costs.minutes_per_intervention"):
        assert field in sentence
    assert "costs.minutes_per_intervention and costs.human_hour_usd not declared" in unpriced_warning(
        "cand", c.unpriced, CostsConfig())  # an intervention needs both to be priced: both are named
    minutes_only = priced(result, CostsConfig(version="v", minutes_per_intervention=5.0))
    assert minutes_only.human_minutes == 10.0 and minutes_only.unpriced["human_minutes"] == 10.0
    assert "costs.human_hour_usd" in unpriced_warning("cand", minutes_only.unpriced)


def test_retried_attempts_count_and_lost_usage_is_named():
    first = usage(cpu_s=3600.0, mem=0.0)
    result = {"cost_usd": 0.3, "usage": usage(cpu_s=3600.0), "interventions": 1,
              "previous_attempts": [{"attempt": 1, "usage": first, "interventions": 1}, {"attempt": 2, "usage": None}]}
    c = priced(result, PRICES)
    assert c.cpu_hours == pytest.approx(2.0)                 # both measured attempts
    assert c.interventions == 2 and c.unmeasured == 1        # the attempt lost with its node is named
    blind = {"cost_usd": 0.0, "usage": usage(source="unmeasured")}
    assert priced(blind, PRICES).unmeasured == 1


def test_usage_adds_up_and_an_unknown_span_is_counted_not_spread():
    a, b = Usage(1.0, 2.0, 3.0, 1.0, 1.0, "cgroup", 1, 2), Usage(1.0, 0.0, 0.0, 1.0, 1.0, "unmeasured", 1, 0, 1)
    total = a + b
    assert (total.cpu_s, total.memory_gib_s, total.unmeasured_spans, total.source) == (2.0, 3.0, 1, "cgroup+unmeasured")
    assert (a + a).cpu_s == 4.0 and Usage.from_dict((a + a).to_dict()) == a + a
    # a measured grader run beside an unmeasured baseline check: the measured 600 CPU-s still count
    grader = (Usage(60.0, 600.0, 60.0, 30.0, 15.0, "cgroup", 1, 240) + b).to_dict()
    c = priced({"cost_usd": 0.0, "usage": {"sandbox": {}, "grader": grader, "tool_calls": {}}}, PRICES)
    assert c.cpu_hours == pytest.approx(600 / 3600) and c.unmeasured == 1
    reserved = priced({"cost_usd": 0.0, "usage": {"sandbox": {}, "grader": grader, "tool_calls": {}}},
                          CostsConfig(version="v", cpu_hour_usd=1.0, basis="reserved"))
    assert reserved.unmeasured == 0 and reserved.cpu_hours == pytest.approx(31.0 / 3600)  # reservations are known


def test_cgroup_files_are_found_only_for_the_named_container(tmp_path):
    cid = "c0ffee" * 10
    proc, root = tmp_path / "proc", tmp_path / "cg"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(f"5:memory:/docker/{cid}\n4:cpu,cpuacct:/docker/{cid}\n0::/system.slice/x\n")
    (root / "cpu,cpuacct" / "docker" / cid).mkdir(parents=True)
    (root / "cpu,cpuacct" / "docker" / cid / "cpuacct.usage").write_text("2500000000\n")
    mem = root / "memory" / "docker" / cid
    mem.mkdir(parents=True)
    (mem / "memory.usage_in_bytes").write_text(str(300 << 20))
    (mem / "memory.stat").write_text(f"cache 1\ntotal_inactive_file {100 << 20}\n")
    files = cgroup_files(42, cid, root, proc)
    assert files is not None and files.read() == (2.5, float(200 << 20))   # inactive file cache left out
    assert cgroup_files(42, "another" * 9, root, proc) is None              # another host's pid: not trusted
    v2 = tmp_path / "cg2" / "system.slice" / f"docker-{cid}.scope"
    v2.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1\n")
    (v2 / "memory.current").write_text(str(64 << 20))
    (v2 / "memory.stat").write_text("inactive_file 0\n")
    (proc / "43").mkdir()
    (proc / "43" / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")
    files = cgroup_files(43, cid, tmp_path / "cg2", proc)
    assert files is not None and files.v2 and files.read() == (1.5, float(64 << 20))


def test_fieller_share_interval_bounded_and_unbounded():
    rng = np.random.default_rng(4)
    clusters = [str(i // 3) for i in range(60)]
    full = list(0.4 + rng.normal(0, 0.1, 60))
    ablated = list(0.2 + rng.normal(0, 0.1, 60))
    est = share_interval(ablated, full, clusters)
    assert est.interval is not None and est.interval[0] < 0.5 < est.interval[1] and 0.3 < est.value < 0.7
    coefficients = fieller_set(ablated, full, clusters)
    assert in_fieller_set(est.value, coefficients) and not in_fieller_set(5.0, coefficients)
    noise = list(rng.normal(0, 0.3, 60))  # the full design's improvement cannot be told from 0
    flat = share_interval(ablated, noise, clusters)
    assert flat.interval is None and "unbounded" in flat.reason


TASKS = [f"t{i:02d}" for i in range(24)]


def run_with_ablation(tmp_path, costs: dict, rates=(0.2, 0.8, 0.5)) -> tuple[dict, Manifest]:
    m = Manifest.model_validate({
        "experiment": {"name": "a", "seed": 2},
        "candidates": [{"name": "base", "agent": "nop"}, {"name": "full", "agent": "nop"},
                       {"name": "no-memory", "agent": "nop", "ablation_of": "full", "without": "memory"}],
        "execution": {"trials_per_task": 4},
        "analysis": {"k": [1], "primary_metric": "acceptance_rate"}, "costs": costs})
    paths = RunPaths(tmp_path / "run")
    store = Store(paths)
    paths.lock.write_text(json.dumps({"price_table_version": "2026-11-01"}))
    rng = random.Random(5)
    for t in TASKS:
        skill = rng.random() * 0.4
        for cand, p in zip(("base", "full", "no-memory"), rates):
            for r in range(4):
                ok = rng.random() < p + skill - 0.2
                store.record(TrialResult.from_dict({"id": f"{t}/{cand}/{r}", "task": t, "candidate": cand, "replicate": r, "attempt": 1,
                              "retries": 0, "cost_usd": 0.05, "duration_s": 5.0, "interventions": int(cand == "full"),
                              "usage": usage(cpu_s=36.0, mem=72.0, tools={"bash": 5}),
                              "verdict": {"outcome": "accepted" if ok else "rejected", "kind": None, "accepted": ok,
                                          "reasons": [], "criteria": [], "grader_version": "g"}}), [])
    store.close()
    return build_report(paths, m, {}, {t: t for t in TASKS}, len(TASKS) * 12), m


def test_report_splits_the_cost_and_shows_the_ablation(tmp_path):
    report, _ = run_with_ablation(tmp_path, {"version": "infra-1", "cpu_hour_usd": 1.0, "minutes_per_intervention": 3})
    full = report["candidates"]["full"]
    trials = 24 * 4
    assert full["cost"]["by_kind_usd"]["model"] == pytest.approx(0.05 * trials)
    assert full["cost"]["by_kind_usd"]["cpu"] == pytest.approx(trials * 36.0 / 3600)  # the grader's CPU is 0 here
    assert full["cost_usd_total"] == pytest.approx(0.05 * trials + trials * 0.01)
    assert full["cost"]["human_minutes"] == pytest.approx(3 * trials)
    accepted = full["n_accepted"]
    assert full["cost_per_accepted_usd"]["value"] == pytest.approx(full["cost_usd_total"] / accepted)
    assert set(full["cost"]["unpriced"]) == {"memory_gib_hours", "human_minutes"}
    assert any("costs.memory_gib_hour_usd not declared" in w for w in report["warnings"])
    assert report["costs"]["version"] == "infra-1" and report["costs"]["model_price_table_version"] == "2026-11-01"
    [ab] = report["ablations"]
    assert (ab["candidate"], ab["full"], ab["without"], ab["baseline"]) == ("no-memory", "full", "memory", "base")
    assert ab["paired_tasks"] == 24
    fi, ai, adds = (ab[k]["value"] for k in ("full_improvement", "ablated_improvement", "component_adds"))
    assert fi == pytest.approx(ai + adds) and fi > 0.3
    share = ab["share_persisting"]
    assert share["value"] == pytest.approx(ai / fi)
    assert share["interval"][0] < share["value"] < share["interval"][1]
    text = terminal(report)
    assert "ablation no-memory = full without memory" in text and "memory adds" in text
    assert "cost by kind: model $" in text and "human minutes" in text


def test_manifest_refuses_ablations_and_prices_it_cannot_use(tmp_path):
    for folder in ("tasks", "graders", "images"):
        (tmp_path / folder).mkdir()
    (tmp_path / "m.yaml").write_text(
        "experiment: {name: x}\n"
        "candidates:\n"
        "  - {name: base, agent: nop}\n  - {name: full, agent: nop}\n"
        "  - {name: a1, agent: nop, ablation_of: full}\n"
        "  - {name: a2, agent: nop, ablation_of: base, without: memory}\n"
        "  - {name: a3, agent: nop, ablation_of: ghost, without: memory}\n"
        "  - {name: a4, agent: nop, without: memory}\n"
        "costs: {cpu_hour_usd: 0.05, tool_call_usd: {frob: 0.1, bash: -1}, human_hour_usd: 60}\n")
    loaded, problems = parse_manifest(tmp_path / "m.yaml")
    found = {(p.field, p.message.split(":")[0]) for p in problems}
    assert loaded is None
    assert ("candidates[2].without", "required with ablation_of") in found
    assert any(f == "candidates[3].ablation_of" and "baseline" in msg for f, msg in found)
    assert any(f == "candidates[4].ablation_of" and "expected one of" in msg for f, msg in found)
    assert ("candidates[5].without", "only allowed with ablation_of") in found
    assert ("costs.version", "required once a price is declared") in found
    assert any(f == "costs.tool_call_usd.frob" for f, _ in found)
    assert any(f == "costs.tool_call_usd.bash" for f, _ in found)
    assert any(f == "costs.minutes_per_intervention" for f, _ in found)
    assert len(problems) == 8


def test_a_run_is_priced_as_it_was_locked_whatever_the_manifest_says_now(tmp_path):
    report, _ = run_with_ablation(tmp_path, {"version": "infra-1", "cpu_hour_usd": 1.0, "minutes_per_intervention": 3})
    paths = RunPaths(tmp_path / "run")
    paths.lock.write_text(json.dumps({"price_table_version": "2026-11-01",
                                      "costs": {"version": "infra-0", "cpu_hour_usd": 100.0}}))
    m = Manifest.model_validate({"experiment": {"name": "a"}, "candidates": [
        {"name": "base", "agent": "nop"}, {"name": "full", "agent": "nop"},
        {"name": "no-memory", "agent": "nop", "ablation_of": "full", "without": "memory"}],
        "execution": {"trials_per_task": 4}, "analysis": {"k": [1], "primary_metric": "acceptance_rate"},
        "costs": {"version": "infra-1", "cpu_hour_usd": 1.0}})
    again = build_report(paths, m, {}, {t: t for t in TASKS}, len(TASKS) * 12)
    cpu = again["candidates"]["full"]["cost"]["by_kind_usd"]["cpu"]
    assert cpu == pytest.approx(100 * report["candidates"]["full"]["cost"]["by_kind_usd"]["cpu"])
    assert again["costs"]["version"] == "infra-0"
    assert any("differs from the run's lock" in w for w in again["warnings"])


def test_no_share_is_reported_when_the_full_design_is_worse_than_the_baseline(tmp_path):
    rng = np.random.default_rng(8)
    clusters = [str(i // 3) for i in range(60)]
    worse = list(-0.4 + rng.normal(0, 0.1, 60))
    assert share_interval(list(-0.2 + rng.normal(0, 0.1, 60)), worse, clusters).interval is not None  # Fieller alone
    report, _ = run_with_ablation(tmp_path, {}, rates=(0.8, 0.2, 0.5))  # the full design is far worse
    [ab] = report["ablations"]
    assert ab["full_improvement"]["value"] < -0.3 and ab["full_improvement"]["interval"][1] < 0
    assert ab["share_persisting"]["value"] is None and "no improvement to share" in ab["share_persisting"]["reason"]
    assert ab["component_adds"]["value"] < 0  # what the component "adds" is still shown, negative as it is


def test_a_cgroup_folder_that_cannot_be_read_is_not_found_and_never_fails_the_trial(tmp_path, monkeypatch):
    from pathlib import Path

    cid = "ab" * 32
    (tmp_path / "proc" / "7").mkdir(parents=True)
    (tmp_path / "proc" / "7" / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", denied)
    assert cgroup_files(7, cid, tmp_path / "cg", tmp_path / "proc") is None


def test_a_span_recorded_as_null_by_an_earlier_version_counts_as_unmeasured():
    old = {"wall_s": 10.0, "cpu_s": None, "memory_gib_s": None, "reserved_cpu_s": 5.0, "reserved_memory_gib_s": 2.5,
           "source": "unmeasured", "spans": 1, "samples": 0}
    u = Usage.from_dict(old)
    assert (u.cpu_s, u.memory_gib_s, u.unmeasured_spans) == (0.0, 0.0, 1)
    c = priced({"cost_usd": 0.5, "usage": {"sandbox": old, "grader": {}, "tool_calls": {}}}, PRICES)
    assert c.unmeasured == 1 and c.by_kind["model"] == 0.5 and c.cpu_hours == 0.0
    reserved = priced({"cost_usd": 0.0, "usage": {"sandbox": old, "grader": {}, "tool_calls": {}}},
                      CostsConfig(version="v", cpu_hour_usd=1.0, basis="reserved"))
    assert reserved.unmeasured == 0 and reserved.cpu_hours == pytest.approx(5.0 / 3600)
