"""What the run loop decides about one finished attempt: what it costs against the run's cap (``charged``), the retry an
infrastructure error earns (``retry_of``, and ``resumed`` when a stopped run owes one), the record of an attempt
trialbox itself failed (``harness_failure``), and whether it shows its candidate set up wrong (``misconfigured_by``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .costs import trial_cost
from .agents.upstream import run_fault
from .events import read_events
from .manifest import CostsConfig
from .store import RunPaths
from .result import TrialResult
from .resultparts import PreviousAttempt
from .trial import TrialSpec


def charged(result: TrialResult, max_cost_usd: float, costs: CostsConfig | None = None) -> float:
    """What a result counts against the run's cost cap: its whole known cost (models, and with ``costs`` its
    priced tools, machines and human time), and ``max_cost_usd`` for every attempt whose spend was lost (so the
    cap is never passed because records went down with a node)."""
    known = trial_cost(result, costs).total if costs is not None else (result.cost.model_usd or 0.0)
    return known + max_cost_usd * result.cost.unknown_attempts


def retry_of(spec: TrialSpec, result: TrialResult) -> TrialSpec:
    """The next attempt of a trial that hit an infrastructure error (what it spent carried over)."""
    v, spent = result.verdict, result.cost.attempt_usd
    attempt = PreviousAttempt(spec.attempt, v.kind, "; ".join(v.reasons)[:500], result.node_name, spent,
                              result.usage, result.interventions)  # what it used
    return dataclasses.replace(spec, attempt=spec.attempt + 1, retries=spec.retries + 1,
                               prior_cost_usd=spec.prior_cost_usd + (spent or 0.0),
                               previous_attempts=spec.previous_attempts + (attempt,))


INFRA_RETRIES = 1
"""Retries an infrastructure error of a trial's own earns (attempts an engine outage ended do not count:
``outage.MAX_OUTAGE_ATTEMPTS`` bounds those)."""


def owes_retry(result: TrialResult) -> bool:
    """Whether an attempt that ended on an infrastructure error earns its trial another attempt: one ended by an
    engine outage does while the trial has had at most ``MAX_OUTAGE_ATTEMPTS`` of those; any other while the
    trial's own infrastructure errors (this one included) number at most ``INFRA_RETRIES``; and never once the
    trial has had ``1 + INFRA_RETRIES + MAX_OUTAGE_ATTEMPTS`` attempts. One refused because its image is not on
    the engine (``missingimages``) never does: the cause is still there; a later ``trialbox run`` on the folder
    runs it (``rerun_recorded``), and such refusals count against no trial's own retry."""
    from .missingimages import IMAGE_MISSING
    from .outage import MAX_OUTAGE_ATTEMPTS, OUTAGE_KIND, outage_attempts

    if not result.is_infra_error or result.verdict.kind == IMAGE_MISSING:
        return False
    if 1 + len(result.previous_attempts) >= 1 + INFRA_RETRIES + MAX_OUTAGE_ATTEMPTS:
        return False  # a bound on the whole chain, whatever the kinds: an error read as an outage's by its text (on
        # a backend that does not watch the engine, e.g. a Ray node whose engine stays down) must not loop forever
    outages = outage_attempts(result)
    if result.verdict.kind == OUTAGE_KIND:
        return outages <= MAX_OUTAGE_ATTEMPTS
    refused = sum(a.kind == IMAGE_MISSING for a in result.previous_attempts)
    own = 1 + len(result.previous_attempts) - outages - refused
    return own <= INFRA_RETRIES


def rerun_recorded(recorded: list[TrialResult], every: bool = False,
                   paths: RunPaths | None = None) -> dict[str, TrialResult]:
    """The recorded trials a resumed run runs again, by id: those recorded as infrastructure errors whose retry
    budget allows another attempt (``owes_retry``: for instance, retries a run of an earlier version spent
    during an engine outage); with ``every``, every infrastructure error; with ``paths``, also one whose next
    attempt owes a retry (an earlier session ran it again with ``--rerun-infra-errors`` and stopped between that
    attempt and its retry: the owed retry is a fact of the run, not of the option). Always one refused because an
    image it needs was not on the engine (``missingimages``): a run refuses to start while that image is still
    missing (its lock check), so here it is back."""
    from .missingimages import IMAGE_MISSING

    def owed_after(r: TrialResult) -> bool:
        return paths is not None and paths.attempt(r.id, r.attempt + 1).retry_owed.exists()

    return {r.id: r for r in recorded if r.is_infra_error
            and (every or r.verdict.kind == IMAGE_MISSING or owes_retry(r) or owed_after(r))}


def resumed(spec: TrialSpec, paths: RunPaths, record: TrialResult | None = None) -> TrialSpec:
    """A trial to run on resume: its retry when an attempt already failed on infrastructure.

    The run loop marks a retry it owes (``a<n>/retry-owed.json``, the failed attempt's record); the
    attempt's cost carries over, so stopping a run between an attempt and its retry neither loses
    that attempt nor gives the trial a fresh one; a chain of owed retries (an engine outage ended the retry
    too) is followed to its end. An attempt that merely stopped with the run (Ctrl-C) owes nothing: it runs
    again as it was. ``record``: the trial's stored result when it runs again after it (``rerun_recorded``):
    the next attempt follows it, that record kept among its previous attempts."""
    if record is not None:
        spec = retry_of(dataclasses.replace(spec, attempt=record.attempt, retries=record.retries,
                                            prior_cost_usd=record.cost.retried_usd,
                                            previous_attempts=tuple(record.previous_attempts)), record)
    while True:
        try:
            doc = json.loads(paths.attempt(spec.trial_id, spec.attempt).retry_owed.read_text())
        except (OSError, ValueError):  # absent or unreadable: nothing owed
            return spec
        verdict = doc.get("verdict") if isinstance(doc, dict) else None
        if not isinstance(verdict, dict) or verdict.get("outcome") != "infra_error" or doc.get("attempt") != spec.attempt:
            return spec
        spec = retry_of(spec, TrialResult.from_dict(doc))  # a record the loop wrote: one it cannot read is a defect


def misconfigured_by(paths: RunPaths, spec: TrialSpec) -> str | None:
    """Why a finished attempt shows the run set up wrong, or None: the provider refused the run's credentials
    (HTTP 401/403) or answered with another model than the pinned one (``upstream.run_fault``); or the agent asked
    the proxy for another model than the candidate's pinned one and never for the pinned one (every call refused).
    Each would make every trial fail for a mistake in the setup, not for what the agent did. The run then starts
    no new trial and ends with this reason (exit 1); the attempt is not recorded but listed as stopped
    (``stopped.json``), so it runs again when the run does, once the setup is fixed. An agent that provokes this
    on purpose gains nothing: the run cannot finish, and a report on it is provisional and decides nothing."""
    events_file = paths.attempt(spec.trial_id, spec.attempt).events
    if not events_file.exists():
        return None
    try:
        events = read_events(events_file)
    except (OSError, ValueError):
        return None
    fault = run_fault(events)
    if fault is not None:
        return f"candidate {spec.candidate.name}: {fault} ({spec.trial_id})"
    asked = next((e.get("detail") for e in events if e.get("kind") == "model_refused"
                  and e.get("reason") == "model_not_pinned"), None)
    if asked is None or any(e.get("kind") == "model_call" for e in events):
        return None  # a call of the pinned model went through: the setup works, the rest is the agent's doing
    return (f"candidate {spec.candidate.name}: its agent asked the model proxy for model {asked!r}, but the "
            f"candidate's model_snapshot is {getattr(spec.candidate, 'model_snapshot', None)!r}, so every call was "
            f"refused ({spec.trial_id}); make the agent use the pinned model (its command's model option), then "
            "run the same command again")


def harness_failure(spec: TrialSpec, exc: BaseException, paths: RunPaths,
                     node: dict[str, Any] | None = None) -> TrialResult:
    """The record of an attempt that trialbox itself failed; written to the attempt's folder."""
    from .grading.verdict import infra_verdict
    from .trial import ended_attempt, spend_in

    folder = paths.trial(spec.trial_id, spec.attempt)
    # the events the attempt wrote before failing; or what the backend knows when they did not come back
    spent = exc.spend if hasattr(exc, "spend") else spend_in(folder)
    return ended_attempt(spec, infra_verdict("harness", repr(exc)[:500]), spent, node, folder)
