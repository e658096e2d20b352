"""The report: metrics per candidate, paired comparisons and the adoption decision.

``build_report`` turns a run folder (its ``TrialResult`` rows) into the results
document of DESIGN.md (``schemas/report.schema.json``); ``adoption`` decides,
``placement`` says where and under what load trials ran; ``summary.terminal``
prints the document for people and ``html.render`` draws it; ``GATE`` serves
``--gate``. Exclusions are only the outcome kinds
the manifest declared, reported with both denominators; infrastructure errors
are always shown. A report on an unfinished run is provisional and decides
nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from .ablation import ablation
from .commonground import common_ground
from .adoption import adoption
from .costs import TrialCost, locked_costs, trial_cost, unpriced_warning
from .manifest import Manifest
from .stats import (few_clusters_warning, interval_note, mean_interval, paired_difference, quantile, sample_size_hint)
from .pertask import cost_per_accepted, per_task_counts, per_task_values, rate_per_task, task_metric
from .placement import nodes_section, saturation
from .result import TrialResult
from .rewards import reward_metrics
from .shapecoverage import measured_at_shape, outside_band
from .stageclock import STAGES
from .store import RunPaths, Store
from .suspects import suspect_tasks

SCHEMA_VERSION = 1
GATE = {"ADOPT": 0, "REJECT": 1, "INCONCLUSIVE": 3, "NONE": 3}


def _metric(metric: str, k: int, per_task: dict[str, tuple[int, int]], cluster_of: dict[str, str],
            confidence: float, seed: int) -> dict[str, Any]:
    values = {t: task_metric(metric, n, c, k) for t, (n, c) in per_task.items()}
    defined = {t: v for t, v in values.items() if v is not None}
    if not defined:
        return {"value": None, "interval": None, "reason": f"fewer than {k} trial(s) on every task"}
    est = mean_interval(list(defined.values()), [cluster_of[t] for t in defined], confidence, seed=seed).to_dict()
    if len(defined) < len(values):
        est["tasks_without_k_trials"] = sorted(set(values) - set(defined))
    return est


LIKENESS = "near_identical_to_reference"
INTEGRITY_CRITERIA = ("grader_integrity", "evaluator_tampering_attempts")
"""Counted per candidate (``integrity``). ``grader_integrity`` failing means forged results (a tripwire reported
passed, channels that disagree) or a test run the code under test broke: either way the candidate's accepted
trials are suspect (``integrity_warnings``) and the adoption rule never adopts it. ``evaluator_tampering_attempts``
(the agent changed or planted test files, which trialbox restored) is counted beside it, a diagnostic."""


def integrity_warnings(report: dict[str, Any]) -> list[str]:
    """A warning per candidate whose ``grader_integrity`` failed in any trial. A forger that tells the tripwire
    apart is accepted (the README says how often a capable one does: an open hole), so the trials where it guessed
    wrong are the evidence that its accepted ones cannot be taken at face value."""
    out = []
    for name, c in report["candidates"].items():
        n = (c.get("integrity") or {}).get("grader_integrity", 0)
        if n:
            out.append(f"{name}: grader_integrity FAILED in {n} of {c['n_trials']} trial(s) (results forged, or a "
                       f"test run its code broke): a forger that guesses the tripwire right is accepted, so its "
                       f"{c['n_accepted']} accepted trial(s) cannot be taken at face value; read them (`trialbox show`)")
    return out


def _candidate(rows: list[TrialResult], m: Manifest, cluster_of: dict[str, str], difficulty: dict[str, str],
               costs: dict[str, TrialCost]) -> dict[str, Any]:
    """One candidate's figures; ``costs`` is every trial's whole cost by id (priced once, in ``build_report``)."""
    a = m.analysis
    exclusions = set(a.exclusions)
    kept = [r for r in rows if r.outcome.value not in exclusions]
    per_task = per_task_counts(rows, exclusions)
    accepted = [r for r in kept if r.accepted]
    failed = [r for r in kept if not r.accepted]
    out: dict[str, Any] = {
        "n_trials": len(rows), "n_trials_in_denominator": len(kept), "n_accepted": len(accepted),
        "acceptance_rate": rate_per_task(per_task),
        "acceptance_rate_pooled": len(accepted) / len(kept) if kept else None,
        "acceptance_rate_pooled_all_trials": len(accepted) / len(rows) if rows else None,
        "excluded": dict(sorted(_count(r.outcome.value for r in rows if r.outcome.value in exclusions).items())),
        "infra_errors": sum(r.outcome.value == "infra_error" for r in rows),
        "infra_errors_by_kind": dict(sorted(_count(str(r.verdict.kind) for r in rows
                                                   if r.outcome.value == "infra_error").items())),
        "outcomes": dict(sorted(_count(r.verdict.label for r in rows).items())),
    }
    for metric in ("pass_at_k", "pass_hat_k"):
        out[metric] = {str(k): _metric(metric, k, per_task, cluster_of, a.confidence, m.experiment.seed) for k in a.k}
    out["per_task"] = {t: {"trials": n, "accepted": c,  # the values the means above are taken over
                           **{metric: {str(k): task_metric(metric, n, c, k) for k in a.k}
                              for metric in ("pass_at_k", "pass_hat_k")}}
                       for t, (n, c) in sorted(per_task.items())}
    tasks = sorted(per_task)
    whole = TrialCost()
    for c in (costs[r.id] for r in rows):  # this candidate's trials only
        whole += c
    cost = cost_per_accepted(rows, tasks, per_task, cluster_of, costs, m)[0]
    out["cost_usd_total"] = round(whole.total, 10)
    out["cost"] = whole.to_dict()
    out["attempts_with_unknown_cost"] = sum(r.cost.unknown_attempts for r in rows)
    out["cost_per_accepted_usd"] = cost.to_dict()
    durations = [r.duration_s for r in rows if r.duration_s is not None]
    out["latency_p50_s"], out["latency_p95_s"] = quantile(durations, 0.5), quantile(durations, 0.95)
    out["stages"] = stage_summary(rows)
    out["time_to_abandon_p50_s"] = quantile([r.duration_s for r in failed if r.duration_s is not None], 0.5)
    out["interventions"] = sum(r.interventions for r in rows)
    out["coverage"] = 1 - sum(r.abstained for r in rows) / len(rows) if rows else None
    n = len(rows) or 1
    out["efficiency"] = {"tool_calls": sum(r.tool_calls for r in rows) / n,
                         "model_reported_tool_calls": sum(r.agent.reported_tool_calls for r in rows if r.agent) / n,
                         "model_calls": sum(r.model_calls for r in rows) / n,
                         **{f"{k}_tokens": sum(getattr(r.tokens, k) for r in rows) / n
                            for k in ("input", "output", "cache_read", "cache_write")}}
    out["rewards"] = reward_metrics(rows, exclusions, cluster_of, a.confidence)  # script graders' named numbers
    out["models_served"] = sorted({mdl for r in rows for mdl in r.models_served})
    refused: dict[str, int] = {}
    for r in rows:
        for reason, n in (r.agent.refused_requests if r.agent else {}).items():
            refused[reason] = refused.get(reason, 0) + n
    out["proxy"] = {"requests_refused": dict(sorted(refused.items())),
                    "model_reported_tool_calls": sum(r.agent.reported_tool_calls for r in rows if r.agent)}
    out["summaries"] = {"trials_with_one": sum(bool(r.agent and (r.agent.summary or "").strip()) for r in rows),
                        "trials": len(rows)}
    out["integrity"] = {name: sum(1 for r in rows for c in r.verdict.criteria if c.name == name and not c.passed)
                        for name in INTEGRITY_CRITERIA}
    # hacks counted both ways: an accepted trial that carries an integrity or tampering diagnostic (a critical
    # one never is accepted; ``evaluator_tampering_attempts`` is a diagnostic) counted as a failure, beside the
    # plain figure, with the share of accepted trials that carry one
    flagged = [r for r in accepted if any(c.name in INTEGRITY_CRITERIA and not c.passed for c in r.verdict.criteria)]
    strict = {t: (n, c - sum(r.task == t for r in flagged)) for t, (n, c) in per_task.items()}
    out["hacks_counted_as_failures"] = {
        "accepted_with_diagnostic": len(flagged),
        "share_of_accepted": len(flagged) / len(accepted) if accepted else None,
        "acceptance_rate": rate_per_task(strict),
        "pass_at_k": {str(k): _metric("pass_at_k", k, strict, cluster_of, a.confidence, m.experiment.seed)
                      for k in a.k[:1]},
        "trials": sorted(r.id for r in flagged)}
    # answers looked up: accepted trials whose diff is nearly the reference solution's (``grading.likeness``)
    measured = [r for r in accepted if any(c.name == LIKENESS for c in r.verdict.criteria)]
    near = [r for r in measured if any(c.name == LIKENESS and not c.passed for c in r.verdict.criteria)]
    out["near_identical"] = {"accepted_near_identical": len(near), "accepted_measured": len(measured),
                             "share_of_accepted": len(near) / len(measured) if measured else None,
                             "trials": sorted(r.id for r in near)}
    out["agent_owned_paths_excluded"] = sorted({p for r in rows for c in r.verdict.criteria
                                                if c.name == "agent_owned_paths" for p in c.evidence.get("excluded") or []})
    out["by_difficulty"] = {}
    for level in ("easy", "medium", "hard"):
        sub = [r for r in kept if difficulty.get(r.task) == level]
        if sub:
            sub_tasks = {t: v for t, v in per_task.items() if difficulty.get(t) == level}
            out["by_difficulty"][level] = {
                "n_trials": len(sub), "acceptance_rate": rate_per_task({t: per_task[t] for t in {r.task for r in sub}}),
                **{f"{metric}@{a.k[0]}": _metric(metric, a.k[0], sub_tasks, cluster_of, a.confidence, m.experiment.seed)
                   for metric in ("pass_at_k", "pass_hat_k")}}
    return out


def stage_summary(rows: list[TrialResult]) -> dict[str, dict[str, float | None]]:
    """Median and p95 seconds of each stage over the trials that recorded it, and the stage's share of the summed
    time of all of them (the agent's share against the harness's); results of earlier versions record none."""
    timed = [r.stage_seconds for r in rows if r.stage_seconds]
    total = sum(sum(s.values()) for s in timed) or None
    names = [s for s in STAGES if any(s in t for t in timed)] + sorted({k for t in timed for k in t} - set(STAGES))
    out: dict[str, dict[str, float | None]] = {}
    for name in names:
        values = [t[name] for t in timed if name in t]
        out[name] = {"trials": len(values), "median_s": quantile(values, 0.5), "p95_s": quantile(values, 0.95),
                     "share": round(sum(values) / total, 4) if total else None}
    return out


def _count(items) -> dict[str, int]:
    c: dict[str, int] = defaultdict(int)
    for i in items:
        c[i] += 1
    return c


def run_report(paths: RunPaths, loaded: Any, tasks: list[Any]) -> dict[str, Any]:
    """The report of a run folder under the manifest it ran (``loaded``) and its tasks, as ``trialbox report`` and
    ``trialbox view`` give it: the planned trials from ``plan.json`` (else every task × candidate × trial), each
    task's difficulty and cluster, the suspect evidence the manifest declares."""
    m = loaded.manifest
    planned = len(json.loads(paths.plan.read_text())["trials"]) if paths.plan.exists() \
        else len(tasks) * len(m.candidates) * m.execution.trials_per_task
    return build_report(paths, m, {t.id: t.config.difficulty for t in tasks}, {t.id: t.cluster for t in tasks}, planned,
                        [(e, loaded.resolve(Path(e))) for e in m.analysis.suspect_evidence])


def build_report(paths: RunPaths, m: Manifest, difficulty: dict[str, str], cluster: dict[str, str],
                 planned: int, evidence: list[tuple[str, Path]] = ()) -> dict[str, Any]:
    """The results document. ``evidence``: the manifest's ``analysis.suspect_evidence`` runs, each as declared and
    as resolved (``suspects``)."""
    store = Store(paths)
    try:
        rows = store.trials()
    finally:
        store.close()
    lock_bytes = paths.lock.read_bytes()
    lock = _lock_document(lock_bytes)
    locked = locked_costs(lock)
    repriced = locked is not None and locked != m.costs
    if locked is not None:  # a run is priced as it was locked, whatever the manifest says now
        m = m.model_copy(update={"costs": locked})
    cluster_of = cluster if m.analysis.cluster_by == "cluster" else {t: t for t in cluster}
    found = suspect_tasks(rows, m.candidates, lock, evidence)
    suspects = found.tasks
    if m.analysis.exclude_suspect_tasks:  # declared before the run (the manifest's hash is in its lock)
        rows = [r for r in rows if r.task not in suspects]
    by_cand = {c.name: [r for r in rows if r.candidate == c.name] for c in m.candidates}
    costs = {r.id: trial_cost(r, m.costs) for r in rows}  # the whole cost: models, tools, machines, people
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run": {"id": paths.root.name, "lock_sha256": hashlib.sha256(lock_bytes).hexdigest(),
                "provisional": len(rows) < planned, "planned_trials": planned, "finished_trials": len(rows),
                "stopped_by_cost_cap": _stopped_by_cap(paths), "stopped": _stopped(paths),
                "infra_errors": _infra_errors(rows, m),
                "started_at": min((r.started_at or "" for r in rows), default=None),
                "finished_at": max((r.finished_at or "" for r in rows), default=None)},
        "confidence": m.analysis.confidence, "primary_metric": f"{m.analysis.primary_metric}@{m.analysis.k[0]}",
        "warnings": [w for w in [few_clusters_warning(list({cluster_of[t] for t in cluster_of}))] if w],
        "intervals": _intervals(rows, m, cluster_of),
        "saturation": saturation(rows),
        "nodes": nodes_section(rows, [c.name for c in m.candidates], m.execution.max_cost_usd),
        "candidates": {name: {"agent": _agent_identity(next(c for c in m.candidates if c.name == name)),
                              **_candidate(rs, m, cluster_of, difficulty, costs)} for name, rs in by_cand.items()},
        "costs": _costs_section(lock, m),
        "comparisons": [], "trials": [_trial(r, m, costs[r.id]) for r in rows],
        "suspect_tasks": {"tasks": suspects, "excluded": m.analysis.exclude_suspect_tasks,
                          "cleared_by_evidence": found.cleared, "evidence": [e.to_dict() for e in found.evidence]}}
    report["warnings"] += _node_warnings(report["nodes"])
    if suspects:
        report["warnings"].append(
            f"{len(suspects)} suspect task(s), solved by no candidate (oracle and nop aside)"
            + (f" here or in {sum(e.read for e in found.evidence)} evidence run(s)" if found.evidence else "")
            + f": {', '.join(suspects[:10])}"
            + (" …" if len(suspects) > 10 else "") + "; their graders may reject correct work (`tasks check "
            "--mutants` and alternatives/ tell more); " + ("left out of every figure, as the manifest declared"
                                                         if m.analysis.exclude_suspect_tasks else "counted in every "
                                                         "figure (analysis.exclude_suspect_tasks leaves them out, "
                                                         "declared before a run)"))
    for e in found.evidence:
        if not e.read:
            report["warnings"].append(f"suspect evidence {e.run} not read ({e.problem}): suspects computed without "
                                      "it, so a task it solved may be listed")
    if report["intervals"].get("coverage_outside_93_97"):
        report["warnings"].append("at this run's shape the 95% intervals were measured outside 93-97% coverage: "
                                  + ", ".join(report["intervals"]["coverage_outside_93_97"])
                                  + " (simulated; see intervals.coverage_at_this_shape)")
    _compare(report, by_cand, m, cluster_of, costs)
    report["ablations"] = [ablation(c, m.baseline, by_cand, m, cluster_of) for c in m.candidates if c.ablation_of]
    report["warnings"] += _cost_warnings(report, m, repriced)
    report["warnings"] = integrity_warnings(report) + report["warnings"]  # first: they question every figure
    report["graders"] = _graders(lock, sorted({r.task for r in rows} | set(suspects)), suspects)
    report["adoption"] = _adopt(report, by_cand, m, cluster_of, costs) if rows else \
        {"decision": "NONE", "reasons": ["no trial"]}
    return report


def _graders(lock: dict[str, Any], tasks: list[str], suspects: list[str]) -> dict[str, Any]:
    """Per task: its grader's strength as the run's lock recorded it (``checkrecords.grader_strengths``: None when
    never measured), the mutants that survived, and whether the task is suspect."""
    recorded = lock.get("grader_strength") if isinstance(lock.get("grader_strength"), dict) else {}
    out = {}
    for t in tasks:
        s = recorded.get(t) if isinstance(recorded.get(t), dict) else None
        out[t] = {"strength": s.get("strength") if s else None, "mutants_graded": s.get("graded") if s else None,
                  "survivors": list(s.get("survivors") or []) if s else [], "suspect": t in suspects}
    return out


def _adopt(report: dict[str, Any], by_cand: dict[str, list[TrialResult]], m: Manifest, cluster_of: dict[str, str],
           costs: dict[str, TrialCost]) -> dict[str, Any]:
    """The adoption rule; with ``min_grader_strength``, on the tasks whose grader is at least that strong only
    (the primary metric's difference and the blocking criteria; the cost bound stays on every task)."""
    rule = m.analysis.adoption
    floor = rule.min_grader_strength if rule is not None else None
    if floor is None:
        return adoption(report, by_cand, m, cluster_of)
    strong = {t for t, g in report["graders"].items() if g["strength"] is not None and g["strength"] >= floor}
    kept = {name: [r for r in rs if r.task in strong] for name, rs in by_cand.items()}
    sub: dict[str, Any] = {"comparisons": [], "primary_metric": report["primary_metric"]}
    _compare(sub, kept, m, cluster_of, costs)
    decided = adoption({**report, "comparisons": sub["comparisons"]}, kept, m, cluster_of)
    left = sorted(set(report["graders"]) - strong)
    decided["reasons"] = [f"counted only the {len(strong)} task(s) whose grader strength is at least {floor} "
                          f"(min_grader_strength); {len(left)} left out"
                          + (f": {', '.join(left[:10])}" + (" …" if len(left) > 10 else "") if left else "")] \
        + list(decided.get("reasons") or [])
    decided["tasks_counted"] = sorted(strong)
    return decided


def _intervals(rows: list[TrialResult], m: Manifest, cluster_of: dict[str, str]) -> dict[str, Any]:
    """``stats.interval_note`` for the run's clusters, what they are (``analysis.cluster_by``), and the coverage its
    intervals reach at the run's own shape (``shapecoverage``): its cluster sizes over the tasks that ran, its
    median trials per task, its acceptance rate."""
    ran = sorted({r.task for r in rows} & set(cluster_of)) or sorted(cluster_of)
    labels = [cluster_of[t] for t in ran]
    note = interval_note(len(set(labels)), labels)
    note["cluster_by"] = ("each task's declared cluster (its repository where it names none)"
                          if m.analysis.cluster_by == "cluster" else "each task on its own")
    per = _count((r.task, r.candidate) for r in rows)
    trials = sorted(per.values())[len(per) // 2] if per else m.execution.trials_per_task
    rate = sum(r.verdict.accepted for r in rows) / len(rows) if rows else 0.5
    sizes = tuple(_count(labels).values())
    measured = measured_at_shape(sizes, trials, rate, m.analysis.confidence) if len(sizes) > 1 else None
    note["coverage_at_this_shape"] = measured
    note["coverage_outside_93_97"] = outside_band(measured)
    return note


def _infra_errors(rows: list[TrialResult], m: Manifest) -> dict[str, Any]:
    """How many trials are recorded as infrastructure errors (their final attempt), of which kinds and why, against
    ``execution.max_infra_errors``; and how many attempts an engine outage ended (retried, in no figure)."""
    from .outage import OUTAGE_KIND

    infra = [r for r in rows if r.is_infra_error]
    allowed = m.execution.max_infra_errors
    return {"trials": len(infra), "allowed": allowed, "above_allowed": len(infra) > allowed,
            "by_kind": dict(sorted(_count(str(r.verdict.kind) for r in infra).items())),
            "examples": [{"trial": r.id, "kind": r.verdict.kind, "reason": "; ".join(map(str, r.verdict.reasons))[:300]}
                         for r in infra[:5]],
            "attempts_ended_by_engine_outage": sum(a.kind == OUTAGE_KIND for r in rows for a in r.previous_attempts)}


def _stopped(paths: RunPaths) -> dict[str, Any] | None:
    """Why the run's last session stopped on a configuration error or an engine outage (``job._run_queue``
    writes it), or None."""
    try:
        doc = json.loads(paths.stopped.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return {"reason": str(doc.get("reason") or ""), "unrecorded": [str(t) for t in doc.get("unrecorded") or []],
            "not_started": int(doc.get("not_started") or 0), "cause": str(doc.get("cause") or "configuration")}


def _node_warnings(nodes: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if nodes["attempts_with_unknown_cost"]:
        out.append(
            f"{nodes['attempts_with_unknown_cost']} attempt(s) were lost with their node and their spend with them: "
            f"every cost is a lower bound (missing about ${nodes['unknown_cost_at_most_usd']:.2f} at most: "
            "max_cost_usd each, plus the call that crossed it)")
    if nodes["split_blocks"]:
        out.append(
            f"{len(nodes['split_blocks'])} of {nodes['blocks']} block(s) split: some attempt ran on another node "
            f"than the rest; in {len(nodes['blocks_with_pairs_apart'])} the recorded paired trials ran on different "
            "nodes")
    for name in nodes["names_covering_several_machines"]:
        out.append(f"node name {name!r} was used by machines with different hardware: results by "
                                  "node and split blocks cannot tell them apart")
    for u in nodes["uneven_candidates"]:
        out.append(f"candidate {u['candidate']} was spread over the nodes unlike the others: "
                                  f"{u['share_by_node']}")
    return out


def _compare(report: dict[str, Any], by_cand: dict[str, list[TrialResult]], m: Manifest,
             cluster_of: dict[str, str], costs: dict[str, TrialCost]) -> None:
    """Each candidate against the baseline, paired per task, on the tasks both have the trials the metric needs;
    both sides' figures and the cost difference are taken over those same tasks (``commonground``)."""
    baseline = m.baseline
    base = per_task_values(by_cand[baseline], m)
    for c in m.candidates:
        if c.name == baseline:
            continue
        cand = per_task_values(by_cand[c.name], m)
        tasks = sorted(set(base) & set(cand))  # only tasks where both have the trials the metric needs
        diff = paired_difference([cand[t] for t in tasks], [base[t] for t in tasks], [cluster_of[t] for t in tasks],
                                 m.analysis.confidence, seed=m.experiment.seed)
        ground = common_ground((by_cand[baseline], base), (by_cand[c.name], cand), tasks, m, cluster_of, costs)
        report["comparisons"].append({
            "baseline": baseline, "candidate": c.name, "metric": report["primary_metric"], "paired_tasks": len(tasks),
            "paired_clusters": ground["clusters"], "paired_effective_clusters": ground["effective_clusters"],
            "difference": diff.to_dict() if tasks else {"value": None, "interval": None, "reason": "no task in common"},
            "on_paired_tasks": {"baseline": ground["baseline"], "candidate": ground["candidate"]},
            "cost_per_accepted_difference": ground["cost_per_accepted_difference"],
            "cost_per_accepted_difference_usd": ground["cost_per_accepted_difference"]["value"],
            "per_task": {t: cand[t] - base[t] for t in tasks},
            "tasks_left_out": {
                "baseline_only": sorted(set(base) - set(cand)), "candidate_only": sorted(set(cand) - set(base)),
                "neither": sorted(set(cluster_of) - set(base) - set(cand)),
                "why": f"a task counts only where both candidates have the trials {report['primary_metric']} needs"},
            "sample_size_hint": (sample_size_hint([cand[t] - base[t] for t in tasks], m.analysis.min_effect,
                                                  m.analysis.confidence) if m.analysis.min_effect else None)})


def _cost_warnings(report: dict[str, Any], m: Manifest, repriced: bool) -> list[str]:
    out: list[str] = []
    if repriced:
        out.append("the manifest's costs section differs from the run's lock: every cost here is "
                                  f"priced with the lock's (version {m.costs.version})")
    if m.costs.tool_call_usd and any(c.agent == "command" for c in m.candidates):
        out.append("tool prices apply to calls of trialbox's tool contract; a command agent's own "
                                  "tools run inside its container unseen, so its priced tools count as $0 (their "
                                  "compute is in its CPU and memory)")
    for name, c in report["candidates"].items():
        if (w := unpriced_warning(name, c["cost"]["unpriced"], m.costs)) is not None:
            out.append(w)
        if c["cost"]["unmeasured_attempts"]:
            out.append(
                f"{name}: the CPU time and memory-time of {c['cost']['unmeasured_attempts']} container run(s) could not "
                "be measured (a node lost, or neither the cgroup nor the engine answered): counted as $0")
    return out


def _agent_identity(c: Any) -> dict[str, Any]:
    """What a candidate runs: its agent kind, the preset and its pinned version, the model API and the model."""
    preset = getattr(c, "preset", None)
    version = None
    if preset is not None:
        from .agents.presets import load_preset

        version = load_preset(preset)["version"]
    api = getattr(c, "api", None) if c.agent == "command" else ("anthropic" if c.agent == "claude" else None)
    return {"kind": c.agent, "preset": preset, "version": version, "api": api,
            "model": getattr(c, "model_snapshot", None)}


def _lock_document(data: bytes) -> dict[str, Any]:
    try:
        lock = json.loads(data)
    except ValueError:
        return {}
    return lock if isinstance(lock, dict) else {}


def _costs_section(lock: dict[str, Any], m: Manifest) -> dict[str, Any]:
    """The prices every cost of the report comes from (the model table's version from the run's lock)."""
    return {"model_price_table_version": lock.get("price_table_version"), **m.costs.model_dump(mode="json"),
            "numerator": "every attempt of every trial: model calls, priced tool calls, sandbox and grader CPU and "
                         "memory, human minutes; infrastructure retries included"}


def _stopped_by_cap(paths: RunPaths) -> bool:
    run_file = paths.run_record
    return bool(json.loads(run_file.read_text()).get("stopped_by_cost_cap")) if run_file.exists() else False


def _trial(r: TrialResult, m: Manifest, cost: TrialCost) -> dict[str, Any]:
    return {"id": r.id, "task": r.task, "candidate": r.candidate, "replicate": r.replicate,
            "retries": r.retries, "outcome": r.verdict.label, "reasons": r.verdict.reasons,
            "cost_usd": round(cost.total, 8), "model_cost_usd": r.cost.model_usd,
            "duration_s": r.duration_s, "excluded": r.outcome.value in m.analysis.exclusions,
            "node": r.node_name, "block": r.block}


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str)
