"""Trajectories out: a trial's host-recorded events as an ATIF trajectory (Harbor's Agent Trajectory Interchange
Format, v1.4: ``schemas/atif-v1.4.schema.json``), for the viewers and training pipelines that read it.

What trialbox recorded maps onto ATIF steps as follows:

* step 1 (``user``): the task's instruction;
* each model call (``model_call``): an ``agent`` step, its text as the message, the ``tool_use`` blocks it
  returned as ``tool_calls``, its usage as ``metrics`` (``prompt_tokens`` counts every input token, cached ones
  included, as ATIF defines it; ``cached_tokens`` the cache reads; Anthropic's cache writes in
  ``metrics.extra``) and its cost;
* the tool calls trialbox ran (``tool`` events, source ``harness``): the ``observation`` of the step whose call
  they answer; a tool call no model asked for (a script or the oracle) is a step of its own;
* a command agent's tools run unseen: its step's ``tool_calls`` are what its model *reported*
  (``model_tool_use``), marked ``extra.tool_calls_source: model_reported``, and they have no observation;
* the verdict is the trajectory's outcome, in ``extra.trialbox`` (outcome, accepted, reasons, grader version),
  with the trial's identity, its whole cost and the anchor of its hash-chained event log.

Nothing is invented: a field trialbox did not record is left out.
"""

from __future__ import annotations

from typing import Any

from .result import TrialResult

SCHEMA_VERSION = "ATIF-v1.4"


def _metrics(e: dict[str, Any]) -> dict[str, Any]:
    read, write = int(e.get("cache_read_tokens") or 0), int(e.get("cache_write_tokens") or 0)
    out: dict[str, Any] = {"prompt_tokens": int(e.get("input_tokens") or 0) + read + write,
                           "completion_tokens": int(e.get("output_tokens") or 0), "cached_tokens": read,
                           "cost_usd": float(e.get("cost_usd") or 0.0)}
    if write:
        out["extra"] = {"cache_creation_input_tokens": write}
    return out


def _agent_step(e: dict[str, Any], model: str | None) -> dict[str, Any]:
    content = e.get("content") or []
    step: dict[str, Any] = {
        "step_id": 0, "source": "agent", "timestamp": e.get("ended_at") or e.get("started_at"),
        "model_name": e.get("model_served") or model,
        "message": "".join(str(b.get("text", "")) for b in content if b.get("type") == "text"),
        "metrics": _metrics(e)}
    calls = [{"tool_call_id": str(b.get("id") or f"call_{e['seq']}_{i}"), "function_name": str(b.get("name")),
              "arguments": b.get("input") if isinstance(b.get("input"), dict) else {}}
             for i, b in enumerate(content) if b.get("type") == "tool_use"]
    if calls:
        step["tool_calls"] = calls
    step["extra"] = {"event_seq": e.get("seq"), "stop_reason": e.get("stop_reason")}
    return {k: v for k, v in step.items() if v is not None}


def _observe(step: dict[str, Any], call_id: str | None, e: dict[str, Any]) -> None:
    result: dict[str, Any] = {"content": str(e.get("output") or "")}
    if call_id is not None:
        result["source_call_id"] = call_id
    step.setdefault("observation", {"results": []})["results"].append(result)


def trajectory(result: TrialResult, events: list[dict[str, Any]], instruction: str, agent: dict[str, Any],
               run_key: str) -> dict[str, Any]:
    """The ATIF trajectory of one trial (``agent``: its name, version and model, as the report names them)."""
    first = next((e["started_at"] for e in events if e.get("started_at")), None)
    steps: list[dict[str, Any]] = [{"step_id": 1, "source": "user", "message": instruction,
                                    **({"timestamp": first} if first else {})}]
    pending: list[str] = []  # tool calls of the last model step that trialbox has yet to run
    for e in events:
        kind = e.get("kind")
        if kind == "model_call":
            steps.append(_agent_step(e, agent.get("model")))
            pending = [c["tool_call_id"] for c in steps[-1].get("tool_calls", [])]
        elif kind == "model_tool_use" and steps[-1]["source"] == "agent":
            step = steps[-1]
            step.setdefault("tool_calls", []).append({
                "tool_call_id": str(e.get("tool_use_id") or f"reported_{e['seq']}"),
                "function_name": str(e.get("tool")),
                "arguments": e.get("arguments") if isinstance(e.get("arguments"), dict) else {}})
            step["extra"]["tool_calls_source"] = "model_reported"
        elif kind == "tool" and e.get("source") == "harness":
            if pending and steps[-1]["source"] == "agent":
                _observe(steps[-1], pending.pop(0), e)
                continue
            call_id = f"call_{e['seq']}"
            step = {"step_id": 0, "source": "agent", "timestamp": e.get("started_at"), "message": "",
                    "tool_calls": [{"tool_call_id": call_id, "function_name": str(e.get("tool")),
                                    "arguments": e.get("arguments") if isinstance(e.get("arguments"), dict) else {}}],
                    "extra": {"event_seq": e.get("seq"), "tool_calls_source": "harness"}}
            _observe(step, call_id, e)
            steps.append({k: v for k, v in step.items() if v is not None})
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    metered = [s["metrics"] for s in steps if "metrics" in s]
    v = result.verdict
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": f"{run_key}/{result.id}/a{result.attempt}",
        "agent": {k: val for k, val in (("name", agent["name"]), ("version", agent["version"]),
                                        ("model_name", agent.get("model"))) if val is not None},
        "steps": steps,
        "final_metrics": {"total_prompt_tokens": sum(m["prompt_tokens"] for m in metered),
                          "total_completion_tokens": sum(m["completion_tokens"] for m in metered),
                          "total_cached_tokens": sum(m["cached_tokens"] for m in metered),
                          "total_cost_usd": round(sum(m["cost_usd"] for m in metered), 8),
                          "total_steps": len(steps)},
        "notes": "exported by trialbox from its host-recorded, hash-chained event log; a command agent's tool "
                 "calls are what its model reported (tool_calls_source), the harness did not see them run",
        "extra": {"trialbox": {"trial_id": result.id, "task": result.task, "candidate": result.candidate,
                               "attempt": result.attempt, "outcome": v.outcome.value, "kind": v.kind,
                               "accepted": v.accepted, "reasons": list(v.reasons), "grader_version": v.grader_version,
                               "model_cost_usd": result.cost.model_usd, "events_anchor": result.events_anchor}},
    }
