"""A trial's result, typed: the one thing a trial returns, the store records and the report reads.

``TrialResult`` is frozen and made of parts with their own types:

* ``verdict`` (``grading.verdict.Verdict``, with its typed ``Outcome``);
* ``agent`` (``AgentRun``): how the agent's run ended, what it did and spent in tokens; None when the attempt
  never reached its agent (its sandbox failed to start, its node was lost);
* ``cost`` (``CostAccount``): the model spend of this attempt and of the attempts it replaces, and whether any
  of it is unknown (a lower bound);
* ``usage`` (``AttemptUsage``): what its containers used, as physical quantities (``costs`` prices them);
* ``previous_attempts`` (``PreviousAttempt``): the attempts an infrastructure error ended before this one;
* ``conditions`` (``Conditions``): the host's load and the container's throttling while it ran.

A trial ends in one of three ways, each with its constructor:

* ``TrialResult.graded``: the agent stopped and the grader decided (accepted or not, an unprocessable output
  included);
* ``TrialResult.failed``: an infrastructure error stopped the attempt (the sandbox, its install step, the
  grader's container); what was spent stays spent;
* ``TrialResult.ended``: the attempt ended without a result of its own (trialbox crashed in it, its node or
  worker was lost); written by the run loop or the driver, its spend possibly unknown.

``to_dict`` is the stored document (``verdict.json``, the store's ``result`` column), the same flat layout
runs have always had; ``from_dict`` reads it back, documents of earlier versions included (a key they lack
takes its default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .grading.verdict import Verdict
from .resultparts import (AGENT_KEYS, AgentRun, AttemptUsage, Conditions, CostAccount, PreviousAttempt, Tokens,
                          verdict_from_dict)
from .stops import Outcome, StopReason
from .textsafe import recordable_data

if TYPE_CHECKING:
    from .trial import TrialSpec


@dataclass(frozen=True)
class TrialResult:
    """One trial's result (see the module's docstring); ``id`` names the trial, ``attempt`` the attempt."""

    id: str
    task: str
    candidate: str
    replicate: int
    attempt: int
    verdict: Verdict
    cost: CostAccount = CostAccount()
    retries: int = 0
    block: int | None = None
    image_id: str | None = None
    """The image the agent's sandbox ran from."""
    grader_image_id: str | None = None
    """The grader's image, when it is not the agent's (an agent layer: the grader runs from the environment)."""
    node: Mapping[str, Any] | None = None
    agent: AgentRun | None = None
    previous_attempts: tuple[PreviousAttempt, ...] = ()
    usage: AttemptUsage | None = None
    conditions: Conditions | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    events_anchor: str | None = None
    """The hash at the head of the attempt's event log (``show`` checks the log against it)."""
    setup_outputs: tuple[str, ...] = ()
    """What the task's install step made before the agent started (graded as the task's, not the agent's)."""
    sandbox: Mapping[str, Any] | None = None
    """The sandbox's host configuration as the engine reported it."""
    models_served: tuple[str, ...] = ()
    grader_sha256: str | None = None
    changed_paths: tuple[str, ...] | None = None
    workspace_digest: str | None = None
    events: int | None = None
    """How many events the attempt recorded (the store's copy; not in ``verdict.json``)."""
    stage_seconds: Mapping[str, float] | None = None
    """Where the attempt's time went, by stage (``stageclock.STAGES``); None in results of earlier versions."""

    # ---- the three ways a trial ends
    @classmethod
    def graded(cls, spec: "TrialSpec", verdict: Verdict, agent: AgentRun | None, attempt_usd: float | None,
               **recorded: Any) -> "TrialResult":
        """The agent stopped and the grader decided (an unprocessable output is the agent's: graded too)."""
        return cls._of(spec, verdict, CostAccount.of(spec, attempt_usd), agent=agent, **recorded)

    @classmethod
    def failed(cls, spec: "TrialSpec", verdict: Verdict, agent: AgentRun | None, attempt_usd: float,
               **recorded: Any) -> "TrialResult":
        """An infrastructure error stopped the attempt (``verdict`` is an ``infra_error``); what it spent stays."""
        assert verdict.outcome is Outcome.INFRA_ERROR
        return cls._of(spec, verdict, CostAccount.of(spec, attempt_usd), agent=agent, **recorded)

    @classmethod
    def ended(cls, spec: "TrialSpec", verdict: Verdict, attempt_usd: float | None,
              node: Mapping[str, Any] | None, note: str | None = None) -> "TrialResult":
        """The attempt ended without running to a verdict of its own (trialbox failed in it, its node was lost);
        ``attempt_usd`` None when its spend is unknown."""
        return cls._of(spec, verdict, CostAccount.of(spec, attempt_usd, note), node=node)

    @classmethod
    def _of(cls, spec: "TrialSpec", verdict: Verdict, cost: CostAccount, **recorded: Any) -> "TrialResult":
        return cls(spec.trial_id, spec.task.id, spec.candidate.name, spec.replicate, spec.attempt, verdict, cost,
                   spec.retries, spec.block, spec.image_id, spec.grader_image_id,
                   previous_attempts=tuple(spec.previous_attempts),
                   **recorded)

    # ---- what the readers ask
    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome

    @property
    def accepted(self) -> bool:
        return self.verdict.accepted

    @property
    def is_infra_error(self) -> bool:
        return self.verdict.outcome is Outcome.INFRA_ERROR

    @property
    def node_name(self) -> str | None:
        return (self.node or {}).get("name")

    @property
    def interventions(self) -> int:
        return self.agent.interventions if self.agent else 0

    @property
    def abstained(self) -> bool:
        return bool(self.agent and self.agent.abstained)

    @property
    def tool_calls(self) -> int:
        return self.agent.tool_calls if self.agent else 0

    @property
    def model_calls(self) -> int:
        return self.agent.model_calls if self.agent else 0

    @property
    def tokens(self) -> Tokens:
        return self.agent.tokens if self.agent else Tokens()

    def with_verdict(self, verdict: Verdict) -> "TrialResult":
        return dataclasses.replace(self, verdict=verdict)

    def with_events(self, count: int) -> "TrialResult":
        return dataclasses.replace(self, events=count)

    def recordable(self) -> "TrialResult":
        """The same result with every text the agent could have influenced made valid Unicode (escaped)."""
        return TrialResult.from_dict(self.to_dict())

    # ---- the stored document
    def to_dict(self) -> dict[str, Any]:
        a = self.agent
        doc: dict[str, Any] = {
            "id": self.id, "task": self.task, "candidate": self.candidate, "replicate": self.replicate,
            "attempt": self.attempt, "retries": self.retries, "block": self.block, "image_id": self.image_id,
            **({"grader_image_id": self.grader_image_id} if self.grader_image_id else {}),
            "node": dict(self.node) if self.node is not None else None,
            "started_at": self.started_at, "finished_at": self.finished_at, "duration_s": self.duration_s,
            "stop_reason": a.stop_reason.value if a and a.stop_reason else None}
        if a:
            doc.update(stop_detail=a.detail, summary=a.summary, abstained=a.abstained, tool_calls=a.tool_calls,
                       model_calls=a.model_calls, tokens=a.tokens.to_dict(), interventions=a.interventions,
                       model_reported_tool_calls=a.reported_tool_calls,
                       proxy_refused_requests=dict(sorted(a.refused_requests.items())))
        doc.update(self.cost.to_dict())
        doc.update(previous_attempts=[p.to_dict() for p in self.previous_attempts], events_anchor=self.events_anchor,
                   setup_outputs=list(self.setup_outputs), sandbox=dict(self.sandbox) if self.sandbox else None,
                   usage=self.usage.to_dict() if self.usage else None, models_served=list(self.models_served),
                   conditions=self.conditions.to_dict() if self.conditions else None)
        for name in ("grader_sha256", "workspace_digest"):
            if getattr(self, name) is not None:
                doc[name] = getattr(self, name)
        if self.changed_paths is not None:
            doc["changed_paths"] = list(self.changed_paths)
        if self.stage_seconds is not None:
            doc["stage_seconds"] = dict(self.stage_seconds)
        doc["verdict"] = self.verdict.to_dict()
        if self.events is not None:
            doc["events"] = self.events
        return recordable_data(doc)  # the agent's paths and texts as valid Unicode, escaped where they are not

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrialResult":
        agent = None
        if d.get("stop_reason") or any(k in d for k in AGENT_KEYS):
            agent = AgentRun(StopReason(d["stop_reason"]) if d.get("stop_reason") else None, str(d.get("stop_detail") or ""), d.get("summary"),
                             bool(d.get("abstained")), int(d.get("tool_calls") or 0), int(d.get("model_calls") or 0),
                             Tokens.from_dict(d.get("tokens")), int(d.get("interventions") or 0),
                             int(d.get("model_reported_tool_calls") or 0),
                             {str(k): int(v) for k, v in (d.get("proxy_refused_requests") or {}).items()})
        changed = d.get("changed_paths")
        return cls(
            str(d["id"]), str(d["task"]), str(d["candidate"]), int(d["replicate"]), int(d["attempt"]),
            verdict_from_dict(d["verdict"]), CostAccount.from_dict(d), int(d.get("retries") or 0), d.get("block"),
            d.get("image_id"), d.get("grader_image_id"), d.get("node"), agent,
            tuple(PreviousAttempt.from_dict(p) for p in d.get("previous_attempts") or []),
            AttemptUsage.from_dict(d.get("usage")), Conditions.from_dict(d.get("conditions")),
            d.get("started_at"), d.get("finished_at"), d.get("duration_s"), d.get("events_anchor"),
            tuple(d.get("setup_outputs") or ()), d.get("sandbox"), tuple(d.get("models_served") or ()),
            d.get("grader_sha256"), None if changed is None else tuple(changed), d.get("workspace_digest"),
            d.get("events"), _stages(d.get("stage_seconds")))


def _stages(raw: Any) -> dict[str, float] | None:
    if not isinstance(raw, Mapping):
        return None
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
