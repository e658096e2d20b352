"""``trialbox show``: a trial's verdict, its criteria with evidence, and its event timeline.

Nearly everything shown was influenced by the agent (commands, outputs, summaries, paths, stop details, model
text, evidence). The output is built as a list of logical lines and each passes through ``printable`` just
before the join: a newline inside a field cannot make a line of its own, and no control, escape sequence or
invisible formatting character reaches the terminal.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import TrialboxError
from .events import read_events, verify_events
from .result import TrialResult
from .store import RunPaths, Store
from .textsafe import printable


SHOWN_TESTS = 20
"""Tests that did not pass, named under a criterion (the rest are counted; every one is in verdict.json)."""


def _evidence(evidence: dict[str, Any]) -> str:
    """A criterion's evidence on one line, what explains a failure first: the tests that did not pass (and how
    many did), then the collection errors, then the rest; cut at 600 characters, saying where the whole is."""
    shown = {k: v for k, v in evidence.items() if v not in ([], {}, None, "")}
    first: dict[str, Any] = {}
    outcomes = shown.pop("outcomes", None)
    if isinstance(outcomes, dict):
        bad = [(k, v) for k, v in outcomes.items() if v != "passed"]
        if bad:
            first["not_passed"] = dict(bad[:SHOWN_TESTS])
            if len(bad) > SHOWN_TESTS:
                first["not_passed_more"] = len(bad) - SHOWN_TESTS
        first["passed"] = len(outcomes) - len(bad)
    if "collect_errors" in shown:
        first["collect_errors"] = shown.pop("collect_errors")
    sealed = shown.pop("sealed", None)
    if isinstance(sealed, dict):  # what the host decided: the values that did not meet their literal first
        wrong = [f"{m.get('assertion', '').splitlines()[0] if m.get('assertion') else '?'} got {m.get('got')}"
                 for s in sealed.values() if isinstance(s, dict) for m in s.get("mismatched") or []]
        missing = sum(len(s.get("missing") or []) for s in sealed.values() if isinstance(s, dict))
        if wrong:
            first["sealed_not_met"] = wrong[:SHOWN_TESTS]
        if missing:
            first["sealed_not_sent"] = missing
    text = json.dumps({**first, **shown}, default=str, ensure_ascii=False)
    return text if len(text) < 600 else text[:600] + " … (the whole evidence is in the trial's verdict.json)"


def _event_line(e: dict[str, Any]) -> str:
    kind = e["kind"]
    if kind == "tool":
        args = e.get("arguments") or {}
        what = args.get("command") or args.get("path") or args.get("summary") or args.get("question") or ""
        extra = f" exit={e['exit_code']}" if e.get("exit_code") is not None else ""
        extra += " TIMED-OUT" if e.get("timed_out") else ""
        extra += f" error={e['error_kind']}" if e.get("error_kind") else ""
        return f"{e['tool']:10s} {str(what)[:90]!r}{extra} ({e.get('duration_s', 0):.2f}s)"
    if kind == "model_call":
        said = " ".join(str(b.get("text", "")) for b in e.get("content") or [] if isinstance(b, dict)
                        and b.get("type") == "text").strip()
        return (f"model      {e.get('model_served')} in={e.get('input_tokens')} out={e.get('output_tokens')} "
                f"cache_r={e.get('cache_read_tokens')} cache_w={e.get('cache_write_tokens')} ${e.get('cost_usd', 0):.5f} "
                f"stop={e.get('stop_reason')} retries={e.get('retries')}" + (f" said {said[:120]!r}" if said else ""))
    if kind == "tool_started":  # no result was ever recorded for it: the harness stopped during the call
        args = e.get("arguments") or {}
        return f"{e.get('tool', ''):10s} {str(args)[:90]!r} STARTED, NO RESULT RECORDED"
    if kind == "model_tool_use":
        return f"reported   {e.get('tool')} {str(e.get('arguments'))[:90]!r} (model-reported, not observed)"
    if kind == "stop":
        return f"STOP       {e.get('reason')} {e.get('detail') or ''}"
    return f"{kind:10s} " + _evidence({k: v for k, v in e.items() if k not in ("seq", "kind", "hash", "prev_hash", "source")})


def _cost_line(paths: RunPaths, row: TrialResult) -> str:
    """The trial's whole cost by kind, priced as the report prices it (the run's lock holds its ``costs``)."""
    from .costs import KINDS, locked_costs, trial_cost
    from .manifest import CostsConfig
    from .summary import money

    try:
        lock = json.loads(paths.lock.read_text())
    except (OSError, ValueError):
        lock = {}
    costs = locked_costs(lock) or CostsConfig()
    c = trial_cost(row, costs)
    split = ", ".join(f"{k} {money(c.by_kind[k])}" for k in KINDS)
    unpriced = f"; used without a price: {', '.join(sorted(c.unpriced))}" if c.unpriced else ""
    return f"{money(c.total)} ({split}){unpriced}"


def show_trial(paths: RunPaths, trial_id: str) -> str:
    store = Store(paths)
    try:
        row = store.trial(trial_id)
    finally:
        store.close()
    if row is None:
        try:
            stop = json.loads(paths.stopped.read_text())
        except (OSError, ValueError):
            stop = {}
        if trial_id in (stop.get("unrecorded") or []):
            raise TrialboxError(f"{paths.root}: trial {trial_id!r} is not recorded: the run stopped on a "
                                f"configuration error it ended on ({stop.get('reason')}); its folder under trials/ "
                                f"holds its events (see {paths.stopped.name})")
        raise TrialboxError(f"{paths.root}: no trial {trial_id!r}")
    v, a = row.verdict, row.agent
    lines = [f"trial {trial_id}: {v.label.upper()}" + (f" — failed: {', '.join(v.reasons)}" if v.reasons else ""),
             f"  stop: {a.stop_reason.value if a and a.stop_reason else None} {a.detail if a else ''}".rstrip(),
             f"  summary: {a.summary if a else None!r}   {row.duration_s}s   grader {v.grader_version}",
             f"  cost: {_cost_line(paths, row)}"]
    if row.model_calls or row.models_served or (a and (a.reported_tool_calls or a.refused_requests)):
        refused = ", ".join(f"{k} {n}" for k, n in sorted((a.refused_requests if a else {}).items())) or "nothing"
        lines.append(f"  model side: served {', '.join(row.models_served) or 'nothing'}; {row.model_calls} model "
                     f"call(s), {row.tool_calls} tool call(s) run by trialbox, "
                     f"{a.reported_tool_calls if a else 0} reported by the model; proxy refused {refused}")
    if v.partial:
        lines.append("  partial: " + ", ".join(f"{k} {x:.0%}" for k, x in v.partial.items()))
    lines.append("criteria:")
    for c in v.criteria:
        mark = "PASS" if c.passed else "FAIL"
        lines.append(f"  [{mark}] {c.name}{' (critical)' if c.critical else ''}: {_evidence(c.evidence)}")
    events_file = paths.attempt(trial_id, row.attempt).events
    if events_file.exists():
        check = verify_events(events_file, expected_head=row.events_anchor)
        events = read_events(events_file)
        ended = {e.get("started_seq") for e in events if e["kind"] == "tool"}
        shown = [e for e in events  # a call that returned is shown once, by its result
                 if e["kind"] not in ("log_opened", "log_closed") and not (e["kind"] == "tool_started" and e["seq"] in ended)]
        hidden = check.count - len(shown)
        lines.append(f"events ({check.count}, {'intact' if check.ok else 'TAMPERED: ' + '; '.join(check.problems)}"
                     + (f"; {hidden} not shown: the log's opening and closing, and the start of each call shown by "
                        "its result" if hidden > 0 else "") + "):")
        lines += [f"  {e['seq']:3d} {_event_line(e)}" for e in shown]
    return "\n".join(printable(line) for line in lines)
