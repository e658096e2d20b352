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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .grading.criteria import Criterion
from .grading.verdict import Verdict
from .sandbox.meter import Usage
from .stops import AgentResult, Outcome, StopReason
from .textsafe import recordable_data

if TYPE_CHECKING:
    from .trial import TrialSpec


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Tokens":
        d = d or {}
        return cls(*(int(d.get(f.name) or 0) for f in dataclasses.fields(cls)))


@dataclass(frozen=True)
class AgentRun:
    """How the agent's run ended and what it did (its money is in the result's ``CostAccount``)."""

    stop_reason: StopReason | None
    """None in documents of earlier versions whose infrastructure error overwrote it."""
    detail: str = ""
    summary: str | None = None
    abstained: bool = False
    tool_calls: int = 0
    model_calls: int = 0
    tokens: Tokens = Tokens()
    interventions: int = 0

    @classmethod
    def of(cls, r: AgentResult) -> "AgentRun":
        return cls(r.stop_reason, r.detail, r.summary, r.abstained, r.tool_calls, r.model_calls,
                   Tokens(r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens), r.interventions)

    def agent_result(self, cost_usd: float) -> AgentResult:
        """The ``AgentResult`` grading reads (``regrade`` grades a stored trial from it)."""
        assert self.stop_reason is not None
        t = self.tokens
        return AgentResult(self.stop_reason, self.detail, self.summary, self.abstained, self.tool_calls,
                           self.model_calls, t.input, t.output, t.cache_read, t.cache_write, cost_usd,
                           self.interventions, 0.0)


@dataclass(frozen=True)
class AttemptUsage:
    """What an attempt used besides its model tokens: its sandbox's and its grader containers' CPU time and
    memory-time, and its calls of each tool of the contract."""

    sandbox: Usage = Usage()
    grader: Usage = Usage()
    tool_calls: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def measured(cls, sandbox: list[Usage], grader: list[Usage], events: list[dict[str, Any]]) -> "AttemptUsage":
        calls: dict[str, int] = {}
        for e in events:
            if e.get("kind") == "tool":
                name = str(e.get("tool") or e.get("name") or "")
                calls[name] = calls.get(name, 0) + 1
        return cls(sum(sandbox, Usage()), sum(grader, Usage()), dict(sorted(calls.items())))

    def to_dict(self) -> dict[str, Any]:
        return {"sandbox": self.sandbox.to_dict(), "grader": self.grader.to_dict(), "tool_calls": dict(self.tool_calls)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "AttemptUsage | None":
        if not d:
            return None
        return cls(Usage.from_dict(d.get("sandbox")), Usage.from_dict(d.get("grader")),
                   {str(k): int(v) for k, v in (d.get("tool_calls") or {}).items()})


@dataclass(frozen=True)
class PreviousAttempt:
    """An attempt an infrastructure error ended, kept with the trial that replaced it."""

    attempt: int
    kind: str | None = None
    detail: str = ""
    node: str | None = None
    cost_usd: float | None = None
    """Its model spend; None when it went down with its node."""
    usage: AttemptUsage | None = None
    """None when unknown (lost with its node): the report counts it as unmeasured."""
    interventions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "kind": self.kind, "detail": self.detail, "node": self.node,
                "cost_usd": self.cost_usd, "usage": self.usage.to_dict() if self.usage else None,
                "interventions": self.interventions}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PreviousAttempt":
        return cls(int(d.get("attempt") or 0), d.get("kind"), str(d.get("detail") or ""), d.get("node"),
                   d.get("cost_usd"), AttemptUsage.from_dict(d.get("usage")), int(d.get("interventions") or 0))


@dataclass(frozen=True)
class CostAccount:
    """A trial's model spend in USD across its attempts (``costs`` adds tools, machines and people)."""

    model_usd: float | None = 0.0
    """Every attempt's model spend: this one's and the retried ones' (stored as ``cost_usd``)."""
    attempt_usd: float | None = 0.0
    """This attempt's alone; None when unknown (its events were on a lost node)."""
    retried_usd: float = 0.0
    """What the attempts this one replaced spent (known part)."""
    unknown_attempts: int = 0
    """Attempts whose spend is unknown: ``model_usd`` is then a lower bound."""
    note: str | None = None

    @property
    def lower_bound(self) -> bool:
        return self.unknown_attempts > 0

    @classmethod
    def of(cls, spec: "TrialSpec", attempt_usd: float | None, note: str | None = None) -> "CostAccount":
        unknown = sum(a.cost_usd is None for a in spec.previous_attempts) + (attempt_usd is None)
        return cls(round(spec.prior_cost_usd + (attempt_usd or 0.0), 8), attempt_usd, spec.prior_cost_usd,
                   unknown, note)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cost_usd": self.model_usd, "attempt_cost_usd": self.attempt_usd}
        if self.retried_usd:
            out["cost_of_retried_attempts_usd"] = self.retried_usd
        if self.unknown_attempts:
            out.update(cost_is_lower_bound=True, attempts_with_unknown_cost=self.unknown_attempts)
        if self.note:
            out["cost_note"] = self.note
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CostAccount":
        total = d.get("cost_usd")
        retried = float(d.get("cost_of_retried_attempts_usd") or 0.0)
        # documents written before attempt_cost_usd existed: their cost_usd is the attempt's plus what came before
        attempt = d["attempt_cost_usd"] if "attempt_cost_usd" in d else \
            (None if total is None else round(total - retried, 8))
        return cls(total, attempt, retried, int(d.get("attempts_with_unknown_cost") or 0), d.get("cost_note"))


@dataclass(frozen=True)
class Conditions:
    """The conditions a trial ran under: the host's load, the engine's latency, the model API's, and its
    sandbox's CPU throttling and peak memory (None: unknown)."""

    load_at_start: float | None = None
    docker_api_latency_s: float | None = None
    load_at_end: float | None = None
    model_api_latency_s: float | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_ns: int | None = None
    memory_peak_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Conditions | None":
        if not d:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


AGENT_KEYS = ("stop_detail", "summary", "abstained", "tool_calls", "model_calls", "tokens", "interventions")
"""The stored document's fields of ``AgentRun`` (beside ``stop_reason``)."""


def verdict_from_dict(d: Mapping[str, Any]) -> Verdict:
    """A stored verdict, typed again."""
    return Verdict(Outcome(d["outcome"]), d.get("kind"), bool(d["accepted"]), list(d.get("reasons") or []),
                   [Criterion(c["name"], bool(c["critical"]), bool(c["passed"]), dict(c.get("evidence") or {}))
                    for c in d.get("criteria") or []],
                   dict(d.get("partial") or {}), d.get("grader_version") or "unknown")


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
                   spec.retries, spec.block, spec.image_id, previous_attempts=tuple(spec.previous_attempts),
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
            "node": dict(self.node) if self.node is not None else None,
            "started_at": self.started_at, "finished_at": self.finished_at, "duration_s": self.duration_s,
            "stop_reason": a.stop_reason.value if a and a.stop_reason else None}
        if a:
            doc.update(stop_detail=a.detail, summary=a.summary, abstained=a.abstained, tool_calls=a.tool_calls,
                       model_calls=a.model_calls, tokens=a.tokens.to_dict(), interventions=a.interventions)
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
                             Tokens.from_dict(d.get("tokens")), int(d.get("interventions") or 0))
        changed = d.get("changed_paths")
        return cls(
            str(d["id"]), str(d["task"]), str(d["candidate"]), int(d["replicate"]), int(d["attempt"]),
            verdict_from_dict(d["verdict"]), CostAccount.from_dict(d), int(d.get("retries") or 0), d.get("block"),
            d.get("image_id"), d.get("node"), agent,
            tuple(PreviousAttempt.from_dict(p) for p in d.get("previous_attempts") or []),
            AttemptUsage.from_dict(d.get("usage")), Conditions.from_dict(d.get("conditions")),
            d.get("started_at"), d.get("finished_at"), d.get("duration_s"), d.get("events_anchor"),
            tuple(d.get("setup_outputs") or ()), d.get("sandbox"), tuple(d.get("models_served") or ()),
            d.get("grader_sha256"), None if changed is None else tuple(changed), d.get("workspace_digest"),
            d.get("events"))
