"""How often the graders themselves are wrong: ``trialbox calibrate --graders``, from what ``tasks check`` measured.

The judge is calibrated against human labels; a grader is calibrated against cases whose right answer is known
by construction:

- **false accept**: a mutant of the reference solution (``mutants``, ``tasks check --mutants``) is a wrong fix, so
  every mutant the grader accepted is a false accept, unless the mutant is equivalent (it computes the same thing
  and no test can tell), which only a person reading its diff can say: the rate is an upper bound of the grader's
  error on such one-line faults, and ``1 - rate`` is the task's strength;
- **false reject**: an alternative correct solution (``alternatives/*.patch`` in the grader folder) is right, so
  every one the grader refused is a false reject, unless the alternative itself is wrong.

Per task, each rate has its exact (Clopper-Pearson) interval over that task's cases. Pooled over the tasks, the
rate is the mean of the per-task rates (a task with many mutants weighs no more than one with few, as every figure
of the report) with the report's cluster-robust interval over the tasks' clusters (``stats.mean_interval``): mutants
of one task share its tests, so they are not independent cases. A task whose check measured nothing of a kind
(no ``--mutants``, no alternatives, nothing graded) is left out of that kind and named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .distributions import exact_binomial_interval
from .stats import mean_interval


def _rate(errors: int, cases: int, confidence: float) -> dict[str, Any]:
    iv = exact_binomial_interval(errors, cases, confidence)
    return {"errors": errors, "cases": cases, "rate": errors / cases, "interval": list(iv) if iv else None}


def _measured(record: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """(errors, cases) of each kind the record measured."""
    out: dict[str, tuple[int, int]] = {}
    strength = record.get("strength")
    if isinstance(strength, dict) and isinstance(strength.get("graded"), int) and strength["graded"] > 0:
        out["false_accept"] = (len(strength.get("survivors") or []), strength["graded"])
    alt = record.get("alternatives")
    if isinstance(alt, dict):
        accepted, rejected = len(alt.get("accepted") or []), len(alt.get("rejected") or [])
        if accepted + rejected:
            out["false_reject"] = (rejected, accepted + rejected)
    return out


def grader_rates(records: Mapping[str, Mapping[str, Any] | None], cluster_of: Mapping[str, str],
                 confidence: float = 0.95) -> dict[str, Any]:
    """Per task and pooled false-accept and false-reject rates of the graders, from each task's check record
    (``checkrecords.last_check``; None: never checked)."""
    tasks: dict[str, Any] = {}
    values: dict[str, tuple[list[float], list[str]]] = {"false_accept": ([], []), "false_reject": ([], [])}
    unmeasured: dict[str, list[str]] = {"false_accept": [], "false_reject": []}
    for task, record in sorted(records.items()):
        measured = _measured(record or {})
        tasks[task] = {kind: _rate(e, n, confidence) for kind, (e, n) in measured.items()}
        for kind in values:
            if kind in measured:
                e, n = measured[kind]
                values[kind][0].append(e / n)
                values[kind][1].append(cluster_of.get(task, task))
            else:
                unmeasured[kind].append(task)
    pooled = {}
    for kind, (rates, clusters) in values.items():
        est = mean_interval(rates, clusters, confidence).to_dict() if rates else \
            {"value": None, "interval": None, "reason": "no task measured"}
        pooled[kind] = {**est, "tasks": len(rates), "clusters": len(set(clusters)),
                        "errors": sum(tasks[t][kind]["errors"] for t in tasks if kind in tasks[t]),
                        "cases": sum(tasks[t][kind]["cases"] for t in tasks if kind in tasks[t])}
    return {"confidence": confidence, "tasks": tasks, "pooled": pooled, "unmeasured": unmeasured}


def rates_lines(rates: dict[str, Any]) -> list[str]:
    """``grader_rates`` for the terminal."""
    pct = lambda x: "n/a" if x is None else f"{x:.1%}"  # noqa: E731
    span = lambda iv: f" [{iv[0]:.1%}, {iv[1]:.1%}]" if iv else ""  # noqa: E731
    lines = []
    for task, kinds in rates["tasks"].items():
        parts = [f"{kind.replace('_', ' ')} {pct(r['rate'])}{span(r['interval'])} ({r['errors']} of {r['cases']})"
                 for kind, r in kinds.items()]
        lines.append(f"  {task:32s} " + ("; ".join(parts) if parts else "nothing measured"))
    for kind, p in rates["pooled"].items():
        what = "mutants accepted (wrong fixes let through, or equivalent mutants)" if kind == "false_accept" \
            else "alternative correct solutions refused"
        lines.append(f"pooled {kind.replace('_', ' ')} rate: {pct(p['value'])}{span(p.get('interval'))} over "
                     f"{p['tasks']} task(s) in {p['clusters']} cluster(s), {p['errors']} of {p['cases']} {what}"
                     + (f" ({p['reason']})" if p.get("reason") else ""))
        if rates["unmeasured"][kind]:
            lines.append(f"  not measured on {len(rates['unmeasured'][kind])} task(s): "
                         + ", ".join(rates["unmeasured"][kind][:10]) + (" …" if len(rates["unmeasured"][kind]) > 10
                                                                         else ""))
    return lines
