"""Budgets enforced by the harness on the host, and the typed reasons an agent stops.

Limits are control-flow: the first breach raises ``AgentStop`` carrying its
``StopReason``; the runner records it and the final filesystem is kept for
grading all the same. Time is the host's monotonic clock, model time included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import AgentStop
from ..stops import StopReason


@dataclass(frozen=True)
class BudgetLimits:
    """Per-trial limits, from the manifest's ``execution`` section."""

    deadline_seconds: float = 1800
    max_tool_calls: int = 200
    max_total_tokens: int = 1_000_000
    max_cost_usd: float = 10.0


class Budget:
    """What one trial has spent, checked against its limits (thread-safe enough: one agent per budget)."""

    def __init__(self, limits: BudgetLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.started = clock()
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.cost_usd = 0.0
        self.reported_tool_calls = 0
        self.refused_requests: dict[str, int] = {}
        """Requests the model proxy refused, by reason."""
        """Tool calls the model reported, as the proxy saw them (a command agent's tools run unseen)."""
        self.model_calls = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.limits.deadline_seconds - self.elapsed())

    def check_deadline(self) -> None:
        if self.remaining() <= 0:
            raise AgentStop(StopReason.DEADLINE, f"{self.limits.deadline_seconds}s on the host clock")

    def check_model_budget(self) -> None:
        """Before a model call: refuse when tokens or cost are already spent."""
        self.check_deadline()
        if self.total_tokens >= self.limits.max_total_tokens:
            raise AgentStop(StopReason.MAX_TOTAL_TOKENS, f"{self.total_tokens} ≥ {self.limits.max_total_tokens} tokens")
        if self.cost_usd >= self.limits.max_cost_usd:
            raise AgentStop(StopReason.MAX_COST_USD, f"${self.cost_usd:.4f} ≥ ${self.limits.max_cost_usd}")

    def charge_tool_call(self) -> None:
        """Before a tool call: count it, refusing the one past the limit."""
        self.check_deadline()
        if self.tool_calls >= self.limits.max_tool_calls:
            raise AgentStop(StopReason.MAX_TOOL_CALLS, f"limit of {self.limits.max_tool_calls} tool calls reached")
        self.tool_calls += 1

    def charge_model(self, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int, cost: float) -> None:
        """After a model call: add what it used (then the next check refuses if over)."""
        self.model_calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cache_read_tokens += cache_read
        self.cache_write_tokens += cache_write
        self.cost_usd += cost

    def check_after_model(self) -> None:
        """After a model call: stop when this call pushed tokens or cost over the limit."""
        if self.total_tokens > self.limits.max_total_tokens:
            raise AgentStop(StopReason.MAX_TOTAL_TOKENS, f"{self.total_tokens} > {self.limits.max_total_tokens} tokens")
        if self.cost_usd > self.limits.max_cost_usd:
            raise AgentStop(StopReason.MAX_COST_USD, f"${self.cost_usd:.4f} > ${self.limits.max_cost_usd}")
