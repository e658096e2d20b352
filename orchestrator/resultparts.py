"""The typed parts a ``result.TrialResult`` is made of: how the agent's run ended (``AgentRun``, its ``Tokens``), what
its containers used (``AttemptUsage``), the attempts it replaced (``PreviousAttempt``), its model spend
(``CostAccount``) and the conditions it ran under (``Conditions``); each with the piece of the stored document it
writes and reads back.
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
    reported_tool_calls: int = 0
    """Tool calls the model reported (for a command agent, the only account of its tools: not observed)."""
    refused_requests: Mapping[str, int] = field(default_factory=dict)
    """Requests the model proxy refused, by reason (a command agent's)."""

    @classmethod
    def of(cls, r: AgentResult) -> "AgentRun":
        return cls(r.stop_reason, r.detail, r.summary, r.abstained, r.tool_calls, r.model_calls,
                   Tokens(r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens), r.interventions,
                   r.reported_tool_calls, dict(r.refused_requests))

    def agent_result(self, cost_usd: float) -> AgentResult:
        """The ``AgentResult`` grading reads (``regrade`` grades a stored trial from it)."""
        assert self.stop_reason is not None
        t = self.tokens
        return AgentResult(self.stop_reason, self.detail, self.summary, self.abstained, self.tool_calls,
                           self.model_calls, t.input, t.output, t.cache_read, t.cache_write, cost_usd,
                           self.interventions, 0.0, self.reported_tool_calls,
                           dict(self.refused_requests))


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
    prepared_ahead: bool | None = None
    """Whether the trial's sandbox and grader were made while earlier trials ran (``ahead``), not on its path."""
    processing_repeated: str | None = None
    """The error of a first export or grading of what the agent left, which was then done once more on the same
    input (an error that does not come again is trialbox's, not the agent's): None when nothing was repeated."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Conditions | None":
        if not d:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


AGENT_KEYS = ("stop_detail", "summary", "abstained", "tool_calls", "model_calls", "tokens", "interventions",
              "model_reported_tool_calls", "proxy_refused_requests")
"""The stored document's fields of ``AgentRun`` (beside ``stop_reason``)."""


def verdict_from_dict(d: Mapping[str, Any]) -> Verdict:
    """A stored verdict, typed again."""
    return Verdict(Outcome(d["outcome"]), d.get("kind"), bool(d["accepted"]), list(d.get("reasons") or []),
                   [Criterion(c["name"], bool(c["critical"]), bool(c["passed"]), dict(c.get("evidence") or {}))
                    for c in d.get("criteria") or []],
                   dict(d.get("partial") or {}), d.get("grader_version") or "unknown")
