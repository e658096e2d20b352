"""How a trial ends: the typed reason its agent stopped, what it spent, and the verdict's outcome.

Neutral ground: the agents produce these, grading reads and decides them, the
manifest names outcomes in ``analysis.exclusions``; so they live where all of
them import them without importing each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class StopReason(str, enum.Enum):
    """Why an agent stopped."""

    SUBMITTED = "submitted"
    ABSTAINED = "abstained"
    DEADLINE = "deadline"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOTAL_TOKENS = "max_total_tokens"
    MAX_COST_USD = "max_cost_usd"
    SANDBOX_BROKEN = "sandbox_broken"
    MODEL_ERROR = "model_error"
    ENDED_WITHOUT_SUBMIT = "ended_without_submit"
    AGENT_ERROR = "agent_error"
    INFRA_ERROR = "infra_error"
    """The engine failed under the agent (not the agent's doing)."""

    @property
    def is_budget(self) -> bool:
        return self in (StopReason.MAX_TOOL_CALLS, StopReason.MAX_TOTAL_TOKENS, StopReason.MAX_COST_USD)


@dataclass(frozen=True)
class AgentResult:
    """How an agent run ended and what it spent."""

    stop_reason: StopReason
    detail: str
    summary: str | None
    abstained: bool
    tool_calls: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    interventions: int
    duration_s: float
    reported_tool_calls: int = 0
    """Tool calls the model reported (a command agent's own tools run unseen: these are its only account)."""
    refused_requests: dict[str, int] = field(default_factory=dict)
    """Requests the model proxy refused, by reason (a command agent's)."""


class Outcome(str, enum.Enum):
    """A verdict's outcome (DESIGN.md "Verdicts"); only ``ACCEPTED`` is acceptance."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    """A critical criterion failed (the failed ones are the verdict's reasons)."""
    AGENT_TIMEOUT = "agent_timeout"
    BUDGET_EXHAUSTED = "budget_exhausted"
    AGENT_RESOURCE_EXHAUSTED = "agent_resource_exhausted"
    """The agent's processes ran out of memory (kind ``oom``)."""
    SANDBOX_BROKEN_BY_AGENT = "sandbox_broken_by_agent"
    INFRA_ERROR = "infra_error"
    """Never the agent's failure, never folded into a score (its kind says what failed)."""


OUTCOMES = frozenset(o.value for o in Outcome)

