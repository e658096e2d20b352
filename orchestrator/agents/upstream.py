"""Faults on the model's side, told apart from the agent's: what an upstream error means for the trial and the run.

Both model paths (the built-in agent's own client and the proxy a command agent
talks through) record every error answer of the provider as a
``model_upstream_error`` event (``status``: the HTTP status or ``connection``,
``error_type`` and ``message`` from the provider's error body, ``request_id``),
and every answer naming another model than the pinned one (and none of the
manifest's declared ``model_aliases``) as ``model_mismatch``. From those events:

* ``run_fault``: a fault of the run's configuration, the same for every trial
  (the provider refused the key or its permissions, HTTP 401/403; it served
  another model). The run stops before more trials start; the trial is listed
  as stopped, never recorded as the agent's result.
* ``trial_fault``: the model side failed this trial: the agent never got one
  answer and at least one request failed on the provider's side, or the last
  exchange was a provider failure (rate limit, overload, 5xx, no connection)
  with no answer after it. The trial is ``infra_error(model_api)`` with the
  statuses as evidence, whatever the grader would say of the workspace (a
  retry is drawn for every trial so cut short, accepted or not: retrying only
  the failures would bias the rate upwards).

A 4xx other than 401/403 (a prompt too long, a malformed request) is the agent
design's own failure. A trial whose agent asked nothing of the model is judged
on what it did: that is the agent's doing, not the provider's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

AUTH = frozenset({401, 403})
"""The provider refused the key or what it may do: the operator's configuration, the same for every trial."""
RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""The provider was unavailable for a while: rate limits, overload, server errors."""
UPSTREAM_ERROR = "model_upstream_error"
MISMATCH = "model_mismatch"
MESSAGE_CHARS = 300


def error_fields(status: int | str, body: bytes | str | None) -> dict[str, Any]:
    """The fields of a ``model_upstream_error`` event from a provider's error answer (Anthropic's
    ``{"error": {"type", "message"}}`` or OpenAI's ``{"error": {"type"|"code", "message"}}``); a body that says
    nothing readable leaves them empty (the status still says what happened)."""
    error_type, message = None, None
    try:
        doc = json.loads(body or b"{}")
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            error_type = err.get("type") or err.get("code")
            message = err.get("message")
    except (ValueError, RecursionError):
        pass
    return {"status": status, "error_type": str(error_type)[:100] if error_type else None,
            "message": str(message)[:MESSAGE_CHARS] if message else None}


def describe(event: dict[str, Any]) -> str:
    """One upstream error as a person reads it: ``HTTP 401 authentication_error: invalid x-api-key``."""
    status = event.get("status")
    text = "no connection to the provider" if status == "connection" else f"HTTP {status}"
    if event.get("error_type"):
        text += f" {event['error_type']}"
    if event.get("message"):
        text += f": {event['message']}"
    return text


def is_served_as(pinned: str | None, served: str | None, aliases: Iterable[str] = ()) -> bool:
    """Whether an answer naming ``served`` answers for the ``pinned`` model (no name in the answer says nothing)."""
    return not pinned or not served or served == pinned or served in set(aliases)


def run_fault(events: list[dict[str, Any]]) -> str | None:
    """Why this attempt shows the run's configuration wrong on the model's side, or None."""
    for e in events:
        if e.get("kind") == UPSTREAM_ERROR and e.get("status") in AUTH:
            return (f"the model provider refused the run's credentials ({describe(e)}): check the API key "
                    "(an ANTHROPIC_API_KEY or OPENAI_API_KEY already in the shell is the one presented) and what it "
                    "may use, then run the same command again")
        if e.get("kind") == MISMATCH:
            return (f"the model provider answered with model {e.get('served')!r}, but the candidate's "
                    f"model_snapshot is {e.get('pinned')!r}: pin the model that answers, or declare the name it "
                    "answers with in the candidate's model_aliases, then run the same command again")
    return None


def trial_fault(events: list[dict[str, Any]]) -> str | None:
    """Why the model side failed this trial (the statuses it answered with), or None when it did not."""
    exchanges = [e for e in events if e.get("kind") in ("model_call", UPSTREAM_ERROR)]
    failures = [e for e in exchanges if e.get("kind") == UPSTREAM_ERROR
                and (e.get("status") in RETRYABLE or e.get("status") == "connection")]
    if not failures:
        return None
    answered = sum(e.get("kind") == "model_call" for e in exchanges)
    statuses = ", ".join(sorted({describe({"status": e.get("status"), "error_type": e.get("error_type")})
                                 for e in failures}))
    if not answered:
        return f"the agent never got a model answer: {len(failures)} request(s) failed on the provider's side ({statuses})"
    last = exchanges[-1]
    if last in failures:
        return (f"the provider failed the agent's last model request{'s' if len(failures) > 1 else ''} and answered "
                f"nothing after ({describe(last)}; {len(failures)} failure(s) in the trial: {statuses})")
    return None


MAX_TEXT_CHARS = 1_000_000
"""What one answer's text (its ``text`` and ``thinking`` blocks) may hold in the events; beyond it the rest is cut
and ``text_truncated`` says how much there was, which fails ``secrets`` as a bound reached (not looked at)."""


def bounded_text(blocks: list[dict[str, Any]], limit: int = MAX_TEXT_CHARS) -> tuple[list[dict[str, Any]], int]:
    """``blocks`` with at most ``limit`` characters in their ``text`` and ``thinking`` blocks together (other
    blocks as they are), and the whole count of those characters when it was more (else 0)."""
    def said(b: dict[str, Any]) -> str | None:
        value = b.get(b.get("type")) if b.get("type") in ("text", "thinking") else None
        return value if isinstance(value, str) else None

    total = sum(len(said(b) or "") for b in blocks)
    if total <= limit:
        return blocks, 0
    out, left = [], limit
    for b in blocks:
        value = said(b)
        if value is not None:
            b = {**b, b["type"]: value[:max(left, 0)]}
            left -= len(value)
        out.append(b)
    return out, total
