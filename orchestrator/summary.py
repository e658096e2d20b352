"""The results document for people at a terminal: one logical line per fact, each made ``printable`` (names,
reasons and warnings can quote what an agent or a node sent), and money with two significant digits."""

from __future__ import annotations

import math
from typing import Any

from .costs import KINDS
from .textsafe import printable


def money(x: float | None) -> str:
    """USD with at least two significant digits (machine costs of a short trial are fractions of a cent)."""
    if x is None:
        return "n/a"
    if x < 0:
        return "-" + money(-x)
    if x == 0 or abs(x) >= 0.01:
        return f"${x:.4f}"
    return f"${x:.{2 - math.floor(math.log10(abs(x)))}f}"


def terminal(report: dict[str, Any]) -> str:
    """The report for people: the run and its host, every candidate's figures, the comparisons, the decision."""
    lines = _run_lines(report)
    for name, c in report["candidates"].items():
        lines += _candidate_lines(name, c)
    lines += _comparison_lines(report)
    a = report["adoption"]
    lines.append(f"decision: {a['decision']}")
    lines += [f"    {r}" for r in a["reasons"]]
    return "\n".join(printable(line) for line in lines)  # one logical line each: nothing in a field forges a line


def grader_lines(graders: dict[str, Any]) -> list[str]:
    """The graders' strength as the run's lock recorded it: how many tasks were measured, and the weakest."""
    measured = {t: g for t, g in graders.items() if g.get("strength") is not None}
    if not measured:
        return [f"graders: strength not measured on any of the {len(graders)} task(s) (`tasks check --mutants`)"] \
            if graders else []
    weakest = sorted(measured.items(), key=lambda kv: (kv[1]["strength"], kv[0]))
    shown = ", ".join(f"{t} {g['strength']:.2f} ({len(g['survivors'])} survived)" for t, g in weakest[:5]
                      if g["strength"] < 1.0)
    return [f"graders: strength measured on {len(measured)} of {len(graders)} task(s)"
            + (f"; weakest: {shown}" if shown else "; every measured grader rejected every mutant")]


def _estimate(e: dict[str, Any]) -> str:
    return "n/a" if e["value"] is None else f"{e['value']:.3f}" + (
        f" [{e['interval'][0]:.3f}, {e['interval'][1]:.3f}]" if e.get("interval") else "")


def _run_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    stop = report["run"].get("stopped")
    if stop:  # first: every figure below lacks these trials
        cause = stop.get("cause")
        what, fix = {"engine_outage": ("an engine outage", "start the engine"),
                     "host_disk_full": ("a full host disk", "free space")}.get(cause, ("a configuration error",
                                                                                    "fix the setup"))
        lines.append(f"RUN STOPPED on {what}: {stop['reason']}")
        lines.append(f"    not in any figure: {len(stop['unrecorded'])} trial(s) that ended on it"
                     + (f" ({', '.join(stop['unrecorded'])})" if stop["unrecorded"] else "")
                     + f", {stop['not_started']} not started; {fix} and run the same command again")
    infra = report["run"].get("infra_errors")
    if infra and (infra["trials"] or infra["attempts_ended_by_engine_outage"]):  # first too: the figures lack them
        lines.append(f"infrastructure errors: {infra['trials']} trial(s)"
                     + (f" ({', '.join(f'{k} {n}' for k, n in infra['by_kind'].items())})" if infra["by_kind"] else "")
                     + f", {'ABOVE' if infra['above_allowed'] else 'within'} execution.max_infra_errors "
                     f"({infra['allowed']}); attempts an engine outage ended and that ran again: "
                     f"{infra['attempts_ended_by_engine_outage']}")
        lines += [f"    {e['trial']}: {e['kind']}: {e['reason']}" for e in infra["examples"]]
        if infra["trials"] > len(infra["examples"]):
            lines.append(f"    ... {infra['trials'] - len(infra['examples'])} more (`trialbox run --rerun-infra-errors` "
                         "on the run folder runs them again)")
    lines.append(f"run {report['run']['id']}: {report['run']['finished_trials']}/{report['run']['planned_trials']} trials"
                 + ("  (PROVISIONAL: unfinished)" if report["run"]["provisional"] else ""))
    if report["run"].get("stopped_by_cost_cap"):
        lines.append("the run stopped admitting trials when its cost reached max_run_cost_usd")
    sat = report.get("saturation") or {}
    if sat.get("trials_with_conditions"):
        lines.append(f"host: load max {sat['host_load_max']:.2f}, {sat['trials_cpu_throttled']} trial(s) CPU-throttled, "
                     f"engine latency p95 {sat['docker_api_latency_p95_s'] or 0:.3f}s, peak memory "
                     f"{sat['memory_peak_max_mb'] or 0} MiB")
    nodes = report.get("nodes") or {}
    if len(nodes.get("by_node") or {}) > 1 or nodes.get("lost_attempts"):
        lines.append(f"nodes: {len(nodes['by_node'])}, blocks split across nodes {len(nodes['split_blocks'])}/"
                     f"{nodes['blocks']}, attempts lost with a node {nodes['lost_attempts']}")
        for name, e in nodes["by_node"].items():
            per = ", ".join(f"{c} {v['accepted']}/{v['trials']}" for c, v in e["by_candidate"].items())
            lines.append(f"    {name} ({e['hardware'].get('cpus')} CPU {e['hardware'].get('cpu_model')}, "
                         f"{e['hardware'].get('memory_mb')} MiB): {e['accepted']}/{e['trials']} accepted; {per}")
    lines += [f"warning: {w}" for w in report["warnings"]]
    lines += grader_lines(report.get("graders") or {})
    iv = report.get("intervals")
    if iv and iv["clusters"] < 2:
        lines.append(f"intervals: none ({iv['clusters']} cluster(s): an interval needs at least 2)")
    elif iv:
        df = iv.get("degrees_of_freedom")
        lines.append(f"intervals: {report['confidence']:.0%}, cluster-robust CR2 with t on "
                     + (f"{df:.1f} (Bell-McCaffrey)" if df is not None else f"{max(iv['clusters'] - 1, 0)}")
                     + f" degrees of freedom; clusters: {iv.get('cluster_by', 'the declared clusters')}, "
                     f"{iv['clusters']} of them"
                     + (f", counting for {iv['effective_clusters']:.1f}" if iv.get("effective_clusters") else "")
                     + " (rates on the logit scale, cost per accepted run as a ratio on the log scale, ablation shares "
                     "by Fieller)")
        shape = iv.get("coverage_at_this_shape")
        if shape:
            lines.append("    coverage measured at this run's shape (its cluster sizes, trials per task and rate; "
                         "simulated): " + ", ".join(f"{k} {v['coverage']:.1%}" + (
                             f" (median width {v['median_width']:.3f})" if v.get("median_width") is not None else "")
                             for k, v in shape.items())
                         + ("; OUTSIDE 93-97%: " + ", ".join(iv["coverage_outside_93_97"])
                            if iv.get("coverage_outside_93_97") else ""))
    return lines


def _candidate_lines(name: str, c: dict[str, Any]) -> list[str]:
    fmt = _estimate
    lines: list[str] = []
    agent = c.get("agent") or {}
    who = f" ({agent['preset']} {agent['version']}, {agent['api']} API)" if agent.get("preset") else ""
    lines.append(f"{name}{who}: {c['n_accepted']}/{c['n_trials_in_denominator']} accepted"
                 + (f" (of {c['n_trials']} trials; excluded {c['excluded']})" if c["excluded"] else "")
                 + f", infra errors {c['infra_errors']}"
                 + (f" ({', '.join(f'{k} {n}' for k, n in c['infra_errors_by_kind'].items())})"
                    if c.get("infra_errors_by_kind") else ""))
    for k, e in c["pass_at_k"].items():
        lines.append(f"    pass@{k} {fmt(e)}   pass^{k} {fmt(c['pass_hat_k'][k])}")
    hacks = c.get("hacks_counted_as_failures") or {}
    if hacks.get("accepted_with_diagnostic"):
        (k, e), = hacks["pass_at_k"].items()
        lines.append(f"    with the {hacks['accepted_with_diagnostic']} accepted trial(s) that carry an integrity or "
                     f"tampering diagnostic ({hacks['share_of_accepted']:.0%} of accepted) counted as failures: "
                     f"pass@{k} {fmt(e)}")
    near = c.get("near_identical") or {}
    if near.get("accepted_near_identical"):
        lines.append(f"    {near['accepted_near_identical']} of {near['accepted_measured']} accepted trial(s) "
                     f"({near['share_of_accepted']:.0%}) changed nearly what the reference solution changes "
                     f"(an answer looked up, or a fix the task forces: read them)")
    per = c["cost_per_accepted_usd"]
    per_text = "n/a" if per["value"] is None else money(per["value"]) + (
        f" [{money(per['interval'][0])}, {money(per['interval'][1])}]" if per.get("interval") else "")
    lines.append(f"    cost {money(c['cost_usd_total'])}, per accepted run {per_text}"
                 f"; latency p50 {c['latency_p50_s'] or 0:.1f}s p95 {c['latency_p95_s'] or 0:.1f}s")
    stages = c.get("stages") or {}
    if stages:
        lines.append("    time by stage (median, p95, share): " + ", ".join(
            f"{name} {v['median_s']:.2f}s/{v['p95_s']:.2f}s/{v['share']:.0%}" for name, v in stages.items()
            if v["median_s"] is not None and v["share"] is not None))
    lines += model_side_lines(c)
    for metric, e in (c.get("rewards") or {}).items():  # a script grader's named numbers, beside acceptance
        lines.append(f"    reward {metric}: {_estimate(e)} over {e['tasks']} task(s), {e['trials']} trial(s)"
                     + (f"; {e['trials_without_it']} trial(s) without it" if e["trials_without_it"] else ""))
    split = c.get("cost") or {}
    if split:
        used = split["used"]
        lines.append("    cost by kind: " + ", ".join(f"{k} {money(split['by_kind_usd'][k])}" for k in KINDS)
                     + f" ({used['cpu_hours']:.3g} CPU-h, {used['memory_gib_hours']:.3g} GiB-h, "
                       f"{used['interventions']} intervention(s) = " + (
                           "minutes not declared)" if "interventions" in split["unpriced"]
                           else f"{split['human_minutes']:g} human minutes)"))
    return lines


def model_side(c: dict[str, Any]) -> str | None:
    """A candidate's model side on one line: the models that answered, model calls and model-reported tool calls
    per trial, what the proxy refused, and how many trials left a submit summary; None for an agent without a
    model (nop, oracle, script)."""
    eff, proxy, said = c.get("efficiency") or {}, c.get("proxy") or {}, c.get("summaries") or {}
    served = c.get("models_served") or []
    refused = proxy.get("requests_refused") or {}
    if not served and not refused and not eff.get("model_calls"):
        return None
    return (f"model side: served {', '.join(served) or 'nothing'}; per trial {eff.get('model_calls', 0):.1f} model "
            f"call(s), {eff.get('tool_calls', 0):.1f} tool call(s) run by trialbox, "
            f"{eff.get('model_reported_tool_calls', 0):.1f} reported by the model; proxy refused "
            + (", ".join(f"{k} {n}" for k, n in refused.items()) or "nothing")
            + (f"; a submit summary in {said['trials_with_one']}/{said['trials']} trial(s)" if said else ""))


def model_side_lines(c: dict[str, Any]) -> list[str]:
    line = model_side(c)
    return [f"    {line}"] if line else []


def _money_estimate(e: dict[str, Any] | None) -> str:
    if not e or e.get("value") is None:
        return "n/a" + (f" ({e['reason']})" if e and e.get("reason") else "")
    return money(e["value"]) + (f" [{money(e['interval'][0])}, {money(e['interval'][1])}]" if e.get("interval") else "")


def _comparison_lines(report: dict[str, Any]) -> list[str]:
    fmt = _estimate
    lines: list[str] = []
    for comp in report["comparisons"]:
        lines.append(f"{comp['candidate']} − {comp['baseline']} ({comp['metric']}, {comp['paired_tasks']} paired tasks): "
                     f"{fmt(comp['difference'])}" + (f"; sample-size hint {comp['sample_size_hint']} tasks"
                                                     if comp.get("sample_size_hint") else ""))
        ground = comp.get("on_paired_tasks") or {}
        if ground.get("baseline") and ground.get("candidate"):
            b, c = ground["baseline"], ground["candidate"]
            lines.append(f"    on these {comp['paired_tasks']} tasks ({comp['paired_clusters']} cluster(s), "
                         f"{comp['paired_effective_clusters']} effective; each candidate's figures above are over all "
                         f"its own tasks): {comp['metric']} {comp['baseline']} {fmt(b['metric'])}, {comp['candidate']} "
                         f"{fmt(c['metric'])}; cost per accepted run {comp['baseline']} "
                         f"{_money_estimate(b['cost_per_accepted_usd'])}, {comp['candidate']} "
                         f"{_money_estimate(c['cost_per_accepted_usd'])}, difference "
                         f"{_money_estimate(comp['cost_per_accepted_difference'])}")
        left = comp.get("tasks_left_out") or {}
        out = sum(len(left.get(k) or []) for k in ("baseline_only", "candidate_only", "neither"))
        if out:
            lines.append(f"    {out} task(s) left out: {left['why']} (only the baseline: {len(left['baseline_only'])}, "
                         f"only the candidate: {len(left['candidate_only'])}, neither: {len(left['neither'])})")
    for ab in report.get("ablations") or []:
        lines.append(f"ablation {ab['candidate']} = {ab['full']} without {ab['without']} ({ab['metric']}, "
                     f"{ab['paired_tasks']} tasks with all three): {ab['full']} − {ab['baseline']} "
                     f"{fmt(ab['full_improvement'])}, {ab['candidate']} − {ab['baseline']} {fmt(ab['ablated_improvement'])}")
        share = ab["share_persisting"]
        lines.append(f"    {ab['without']} adds {fmt(ab['component_adds'])}; share of the improvement that persists "
                     f"without it {fmt(share)}" + (f" ({share['reason']})" if share.get("reason") else ""))
    return lines


