"""The adoption decision: the rule the manifest declared before the run, applied to the report's figures.

ADOPT only when every declared bound is passed by its interval (the difference's lower bound above ``min_delta``,
the cost per accepted run's upper bound below its bound, on a cost that is not a lower bound) and no blocking
criterion failed in any trial; REJECT when an interval lies wholly on the wrong side or a blocking criterion
failed; INCONCLUSIVE otherwise, and on fewer than ``MIN_CLUSTERS`` clusters among the compared tasks (those both
candidates have the trials the metric needs, not the run's); NONE with no rule or on a
provisional report. Every decision carries its reasons.
"""

from __future__ import annotations

from typing import Any

from .manifest import Manifest
from .stats import MIN_CLUSTERS
from .result import TrialResult


def adoption(report: dict[str, Any], by_cand: dict[str, list[TrialResult]], m: Manifest, cluster_of: dict[str, str]) -> dict[str, Any]:
    rule = m.analysis.adoption
    if rule is None:
        return {"decision": "NONE", "reasons": ["no adoption rule was declared"]}
    if report["run"]["provisional"]:
        return {"decision": "NONE", "reasons": ["the run is unfinished: the report is provisional and decides nothing"]}
    comp = next(c for c in report["comparisons"] if c["candidate"] == rule.candidate and c["baseline"] == rule.baseline)
    diff, reasons = comp["difference"], []
    clusters = comp.get("paired_clusters", report["intervals"]["clusters"])  # what is compared, not the run
    if clusters < MIN_CLUSTERS:
        whole = report["intervals"]["clusters"]
        return {"decision": "INCONCLUSIVE",
                "reasons": [f"only {clusters} cluster(s) among the {comp['paired_tasks']} compared task(s)"
                            + (f" (the run has {whole})" if whole != clusters else "")
                            + f": no interval was shown to hold its coverage below {MIN_CLUSTERS}, so no decision "
                            "is made on them"]}
    blocked = sorted({c.name for r in by_cand[rule.candidate] for c in r.verdict.criteria
                      if c.name in rule.blocking_criteria and not c.passed})
    cost = report["candidates"][rule.candidate]["cost_per_accepted_usd"]
    bound = rule.max_cost_per_accepted_usd
    reject, adopt = [], []
    if diff["interval"] is None:
        reasons.append("the difference has no interval")
    elif diff["interval"][1] < rule.min_delta:
        reject.append(f"the difference's interval {_iv(diff['interval'])} lies below min_delta {rule.min_delta}")
    elif diff["interval"][0] > rule.min_delta:
        adopt.append(f"the difference's interval {_iv(diff['interval'])} lies above min_delta {rule.min_delta}")
    else:
        reasons.append(f"the difference's interval {_iv(diff['interval'])} contains min_delta {rule.min_delta}")
    if bound is not None:
        if cost["value"] is None:
            reject.append("no accepted trial: the cost per accepted run is unbounded")
        elif cost["interval"] is None:
            reasons.append("the cost per accepted run has no interval")
        elif cost["interval"][0] > bound:
            reject.append(f"the cost per accepted interval {_iv(cost['interval'])} lies above {bound}")
        elif cost["interval"][1] < bound and (short := _cost_is_lower_bound(report["candidates"][rule.candidate])):
            reasons.append(f"the cost per accepted interval {_iv(cost['interval'])} lies below {bound}, but it is a lower "
                           f"bound: {short}")
        elif cost["interval"][1] < bound:
            unpriced = report["candidates"][rule.candidate]["cost"]["unpriced"]
            adopt.append(f"the cost per accepted interval {_iv(cost['interval'])} lies below {bound}" + (
                f" (with {', '.join(sorted(unpriced))} counted as $0: no price was declared)" if unpriced else ""))
        else:
            reasons.append(f"the cost per accepted interval {_iv(cost['interval'])} contains {bound}")
    if blocked:
        reject.append(f"blocking criteria failed in some trial: {blocked}")
    forged = (report["candidates"][rule.candidate].get("integrity") or {}).get("grader_integrity", 0)
    if forged:  # whatever the rule declares: accepted trials beside forged or broken test runs are suspect
        reject.append(f"grader_integrity failed in {forged} trial(s) of {rule.candidate} (results forged, or a test run "
                      "its code broke): its accepted trials cannot be taken at face value")
    if reject:
        return {"decision": "REJECT", "reasons": reject + reasons}
    needed = 1 + (bound is not None)
    if len(adopt) == needed:
        return {"decision": "ADOPT", "reasons": adopt}
    return {"decision": "INCONCLUSIVE", "reasons": reasons + adopt}


def _cost_is_lower_bound(c: dict[str, Any]) -> str | None:
    """Why a candidate's cost is only a lower bound of what was spent (spend lost with a node, containers that
    could not be measured), or None: the cost bound is never passed on such a figure. A quantity the manifest
    left unpriced is not among them: it is zero by the manifest's own declaration, and named beside."""
    why = []
    if c["attempts_with_unknown_cost"]:
        why.append(f"{c['attempts_with_unknown_cost']} attempt(s)' spend was lost with their node")
    if c["cost"]["unmeasured_attempts"]:
        why.append(f"{c['cost']['unmeasured_attempts']} container run(s) could not be measured")
    return "; ".join(why) or None


def _iv(interval: list[float] | tuple[float, float]) -> str:
    """An interval in a reason, to four significant digits (the report's JSON keeps every digit)."""
    return f"[{interval[0]:.4g}, {interval[1]:.4g}]"
