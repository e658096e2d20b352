"""Budgets: each limit stops with its own reason, on the host clock."""

from __future__ import annotations

import pytest

from orchestrator.agents.budget import AgentStop, Budget, BudgetLimits, StopReason


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_deadline_on_the_host_clock():
    clock = Clock()
    b = Budget(BudgetLimits(deadline_seconds=10), clock)
    clock.t += 9.5
    assert b.remaining() == pytest.approx(0.5)
    b.check_deadline()
    clock.t += 1
    with pytest.raises(AgentStop) as info:
        b.check_deadline()
    assert info.value.reason is StopReason.DEADLINE and b.remaining() == 0


def test_tool_calls_refuse_the_one_past_the_limit():
    b = Budget(BudgetLimits(max_tool_calls=2), Clock())
    b.charge_tool_call()
    b.charge_tool_call()
    with pytest.raises(AgentStop) as info:
        b.charge_tool_call()
    assert info.value.reason is StopReason.MAX_TOOL_CALLS and b.tool_calls == 2


def test_tokens_and_cost():
    b = Budget(BudgetLimits(max_total_tokens=1000, max_cost_usd=1.0), Clock())
    b.charge_model(400, 100, 50, 50, 0.2)
    b.check_after_model()
    b.check_model_budget()
    b.charge_model(400, 100, 0, 0, 0.2)
    with pytest.raises(AgentStop) as info:
        b.check_after_model()
    assert info.value.reason is StopReason.MAX_TOTAL_TOKENS and b.total_tokens == 1100
    c = Budget(BudgetLimits(max_cost_usd=0.5), Clock())
    c.charge_model(10, 10, 0, 0, 0.6)
    with pytest.raises(AgentStop) as info:
        c.check_after_model()
    assert info.value.reason is StopReason.MAX_COST_USD
    with pytest.raises(AgentStop):
        c.check_model_budget()
