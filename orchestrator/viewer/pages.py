"""What the trial page and the comparison page hold, as plain values for their templates.

Every string here that a trial could influence is still raw text: the templates escape it (Jinja2's autoescape).
Text shown in blocks (the diff, the grader's log, an event's details) first goes through ``block_text``: each
line keeps its spaces and tabs, and every control or invisible formatting character (bidi overrides, zero-width
marks, escape sequences) becomes its visible escape, as ``printable`` does on the terminal. The diff is
highlighted by Pygments, whose HTML escapes what it is given.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

from ..textsafe import printable
from .data import RAW_FILES, RunData

HIGHLIGHT_CHARS = 400_000
"""Characters of a diff highlighted; past them it is shown plain (the whole of it is the raw link)."""

EVENT_DETAIL_CHARS = 20_000
"""Characters of one event's details shown on the page (the whole event is in events.jsonl)."""

HIDDEN_KEYS = ("seq", "kind", "hash", "prev_hash", "source")

SOURCES = {"harness": "observed by trialbox", "model_reported": "reported by the model, not observed",
           "unmeasured": "not measured"}


def block_text(text: str) -> str:
    """Lines of text for a ``<pre>``: spaces and tabs kept, every other invisible or control character shown."""
    return "\n".join("\t".join(printable(part, space_runs=False) for part in line.split("\t"))
                     for line in text.split("\n"))


def highlighted_diff(diff: str) -> Markup:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    shown = block_text(diff)
    head, rest = shown[:HIGHLIGHT_CHARS], shown[HIGHLIGHT_CHARS:]
    html = highlight(head, DiffLexer(), HtmlFormatter(nowrap=True))
    if rest:
        html += Markup.escape(rest)
    return Markup(html)


def _pretty(value: Any, limit: int = EVENT_DETAIL_CHARS) -> str:
    text = json.dumps(value, indent=1, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[:limit] + f"\n… ({len(text) - limit} more characters in the raw file)"
    return block_text(text)


def event_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timeline: each event's line (as ``show`` writes it), its source, its figures and its details."""
    from ..show import _event_line

    ended = {e.get("started_seq") for e in events if e.get("kind") == "tool"}
    out = []
    for e in events:
        kind = e.get("kind")
        if kind in ("log_opened", "log_closed") or (kind == "tool_started" and e.get("seq") in ended):
            continue
        try:
            line = _event_line(e)
        except (KeyError, TypeError, ValueError):
            line = str(kind)
        source = str(e.get("source") or "")
        out.append({"seq": e.get("seq"), "kind": str(kind), "source": source,
                    "source_text": SOURCES.get(source, source or "unknown"), "line": printable(line),
                    "duration": e.get("duration_s") if e.get("duration_s") is not None else e.get("latency_s"),
                    "cost": e.get("cost_usd"),
                    "tokens": (e.get("input_tokens"), e.get("output_tokens")) if kind == "model_call" else None,
                    "error": bool(e.get("error_kind") or e.get("timed_out") or kind in ("proxy_refused", "model_refused")),
                    "details": _pretty({k: v for k, v in e.items() if k not in HIDDEN_KEYS})})
    return out


def trial_page(run: RunData, trial_id: str, attempt: str | None = None) -> dict[str, Any] | None:
    """The trial page's values, or None when the run has no such trial."""
    from ..events import read_events, verify_events
    from ..show import _cost_line
    from ..result import TrialResult

    doc = run.trial_document(trial_id)
    if doc is None:
        return None
    result = TrialResult.from_dict(doc)
    n = result.attempt
    if attempt is not None and re.fullmatch(r"[0-9]{1,6}", attempt) and \
            run.paths.attempt(trial_id, int(attempt)).folder.is_dir():
        n = int(attempt)
    folder = run.paths.attempt(trial_id, n)
    verdict = doc.get("verdict") or {}
    criteria = [{"name": c.get("name"), "critical": c.get("critical"), "passed": c.get("passed"),
                 "evidence": _pretty(c.get("evidence"))} for c in verdict.get("criteria") or []]
    criteria.sort(key=lambda c: (bool(c["passed"]), not c["critical"], str(c["name"])))
    events, integrity = [], None
    if folder.events.exists():
        check = verify_events(folder.events, expected_head=result.events_anchor if n == result.attempt else None)
        integrity = "intact" if check.ok else "TAMPERED: " + "; ".join(check.problems)
        events = event_rows(read_events(folder.events))
    diff, diff_cut = run.text(trial_id, n, "diff.patch")
    log, log_cut = run.text(trial_id, n, "grader.log")
    try:
        cost = _cost_line(run.paths, result)
    except Exception as exc:  # a lock that does not read: the cost line says so, the page stands
        cost = f"not priced ({type(exc).__name__})"
    stages = sorted((doc.get("stage_seconds") or {}).items(), key=lambda kv: -float(kv[1] or 0))
    attempts = sorted(int(p.name[1:]) for p in folder.folder.parent.glob("a*") if p.name[1:].isdigit())
    return {
        "trial_id": trial_id, "doc": doc, "verdict": verdict, "criteria": criteria, "attempt": n,
        "attempts": attempts, "events": events, "integrity": integrity,
        "diff": highlighted_diff(diff) if diff else None, "diff_cut": diff_cut,
        "log": block_text(log) if log is not None else None, "log_cut": log_cut, "cost": cost, "stages": stages,
        "limits": _pretty(doc.get("sandbox") or {}), "usage": _pretty(doc.get("usage") or {}),
        "conditions": _pretty(doc.get("conditions") or {}),
        "files": [name for name in RAW_FILES if run.attempt_file(trial_id, n, name) is not None],
        "summary": doc.get("summary"), "stop": doc.get("stop_reason"), "stop_detail": doc.get("stop_detail"),
    }


def compare_page(run: RunData, task: str, candidate: str) -> dict[str, Any]:
    """One side of the comparison: the candidate's trials of ``task``, each with its outcome, diff and timeline."""
    from ..events import read_events
    from ..result import TrialResult

    trials = []
    for doc in run.task_trials(task, candidate):
        result = TrialResult.from_dict(doc)
        folder = run.paths.attempt(result.id, result.attempt)
        diff, cut = run.text(result.id, result.attempt, "diff.patch")
        events = event_rows(read_events(folder.events)) if folder.events.exists() else []
        v = doc.get("verdict") or {}
        trials.append({"id": result.id, "replicate": result.replicate, "outcome": v.get("outcome"),
                       "reasons": v.get("reasons") or [], "cost": doc.get("cost_usd"), "duration": doc.get("duration_s"),
                       "diff": highlighted_diff(diff) if diff else None, "diff_cut": cut, "events": events})
    return {"candidate": candidate, "trials": trials}
