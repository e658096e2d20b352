"""Where and under what load trials ran: results by node, split blocks, unevenly spread candidates, lost attempts,
and the host's saturation, from what each trial recorded.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .stats import quantile
from .result import TrialResult


def saturation(rows: list[TrialResult]) -> dict[str, Any]:
    """How loaded the host was while trials ran (from each trial's recorded conditions)."""
    cond = [r.conditions.to_dict() if r.conditions else {} for r in rows]
    loads = [c[k] for c in cond for k in ("load_at_start", "load_at_end") if c.get(k) is not None]
    throttled = [c for c in cond if (c.get("cpu_throttled_periods") or 0) > 0]
    docker_lat = [c["docker_api_latency_s"] for c in cond if c.get("docker_api_latency_s") is not None]
    peaks = [c["memory_peak_bytes"] for c in cond if c.get("memory_peak_bytes")]
    return {"host_load_max": max(loads, default=None), "host_load_p50": quantile(loads, 0.5),
            "trials_cpu_throttled": len(throttled), "trials_with_conditions": len([c for c in cond if c]),
            "docker_api_latency_p95_s": quantile(docker_lat, 0.95),
            "memory_peak_max_mb": round(max(peaks) / 2**20, 1) if peaks else None}


UNEVEN_SHARE = 0.05
"""A candidate whose share of trials on some node differs from the candidates' mean share by more than this
is flagged: its trials did not share hardware with the others' as the blocks intended."""


def nodes_section(rows: list[TrialResult], candidates: list[str], max_cost_usd: float) -> dict[str, Any]:
    """Results by node, blocks split across nodes, unevenly spread candidates, attempts lost with a node."""
    by_node: dict[str, dict[str, Any]] = {}
    for r in rows:
        node = r.node or {}
        name = node.get("name") or "unknown"
        entry = by_node.setdefault(name, {
            "hardware": {k: node.get(k) for k in ("hostname", "cpu_model", "cpus", "memory_mb", "kernel")}
            | {"docker": (node.get("docker") or {}).get("version")},
            "trials": 0, "accepted": 0, "by_candidate": {c: {"trials": 0, "accepted": 0} for c in candidates}})
        accepted = int(r.accepted)
        entry["trials"] += 1
        entry["accepted"] += accepted
        if r.candidate in entry["by_candidate"]:
            entry["by_candidate"][r.candidate]["trials"] += 1
            entry["by_candidate"][r.candidate]["accepted"] += accepted
    blocks: dict[int, set[str]] = defaultdict(set)    # nodes of the recorded trials
    attempts: dict[int, set[str]] = defaultdict(set)  # ... and of every attempt, lost ones included
    for r in rows:
        if r.block is not None:
            blocks[r.block].add(r.node_name or "unknown")
            attempts[r.block] |= blocks[r.block] | {a.node for a in r.previous_attempts if a.node}
    shares = {c: {n: e["by_candidate"][c]["trials"] / total for n, e in by_node.items()}
              for c in candidates if (total := sum(e["by_candidate"][c]["trials"] for e in by_node.values()))}
    uneven = []
    for c, share in shares.items():
        gaps = {n: share[n] - sum(s[n] for s in shares.values()) / len(shares) for n in by_node}
        if any(abs(g) > UNEVEN_SHARE for g in gaps.values()):
            uneven.append({"candidate": c, "share_by_node": {n: round(v, 4) for n, v in sorted(share.items())}})
    lost_kinds = ("node_lost", "worker_lost")
    lost = sum(a.kind in lost_kinds for r in rows for a in r.previous_attempts) \
        + sum(r.verdict.kind in lost_kinds for r in rows)
    unknown = sum(r.cost.unknown_attempts for r in rows)
    machines: dict[str, set] = defaultdict(set)  # one name should be one machine
    for r in rows:
        node = r.node or {}
        machines[node.get("name") or "unknown"].add(tuple(node.get(k) for k in ("hostname", "cpu_model", "cpus",
                                                                                  "memory_mb", "kernel")))
    return {"by_node": dict(sorted(by_node.items())), "blocks": len(blocks),
            "split_blocks": sorted(b for b, names in attempts.items() if len(names) > 1),
            "blocks_with_pairs_apart": sorted(b for b, names in blocks.items() if len(names) > 1),
            "uneven_candidates": uneven, "lost_attempts": lost,
            "names_covering_several_machines": sorted(n for n, m in machines.items() if len(m) > 1),
            "attempts_with_unknown_cost": unknown,
            "unknown_cost_at_most_usd": round(unknown * max_cost_usd, 6)}
