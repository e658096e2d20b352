"""The agent interface and the runner that turns any stop into a typed ``AgentResult``.

An agent gets an ``AgentContext`` (instruction, toolbox, budget, event log) and
drives the sandbox only through the toolbox. ``run_agent`` never raises for
the agent's failure: budgets, the deadline, a broken sandbox, a model that
keeps failing, all become a ``StopReason`` recorded as the log's ``stop`` event.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

from ..errors import AgentStop, SandboxBroken, TrialboxError
from ..events import EventLog
from ..hostspace import host_full
from ..log import get_logger
from ..stops import AgentResult, StopReason
from .budget import Budget
from .toolbox import ToolBox

log = get_logger("agent")


@dataclass
class AgentContext:
    instruction: str
    toolbox: ToolBox
    budget: Budget
    events: EventLog
    max_steps: int = 40
    canaries: list[str] = field(default_factory=list)
    """Secrets planted for this trial (the model proxy refuses to send them out)."""
    trial_id: str = ""
    """Sent to model servers as ``x-trialbox-trial`` (the scripted server routes by it)."""


class Agent(abc.ABC):
    """One agent design; ``run`` returns when it is done (or raises ``AgentStop``)."""

    name: str = "agent"

    @abc.abstractmethod
    def run(self, ctx: AgentContext) -> None:
        """Work on the task through ``ctx.toolbox`` until submitting or stopping."""


def run_agent(agent: Agent, ctx: AgentContext) -> AgentResult:
    """Run ``agent`` to its end and classify the stop; records a ``stop`` event."""
    t0 = time.monotonic()
    reason, detail = StopReason.ENDED_WITHOUT_SUBMIT, "the agent ended without calling submit"
    try:
        agent.run(ctx)
    except AgentStop as stop:
        reason, detail = stop.reason, stop.detail
    except SandboxBroken as exc:
        reason, detail = StopReason.SANDBOX_BROKEN, exc.message
    except TrialboxError as exc:
        if host_full(exc):
            raise  # the host's file system is full: never the agent's error (``hostspace``)
        reason, detail = StopReason.AGENT_ERROR, exc.message
    except RecursionError as exc:  # the agent's data (a model's answer, its tool arguments) nests deeper than any
        # walk of it can go (the client's JSON decoder, a serialiser): the agent's failure, never the harness's
        reason, detail = StopReason.AGENT_ERROR, f"the agent's data nests too deeply to be handled ({exc})"[:500]
    sub = ctx.toolbox.submission
    if sub is not None and reason in (StopReason.ENDED_WITHOUT_SUBMIT,):
        reason, detail = (StopReason.ABSTAINED if sub.abstain else StopReason.SUBMITTED), ""
    ctx.events.append("stop", reason=reason.value, detail=detail)
    log.info("agent stopped", agent=agent.name, reason=reason.value)
    b = ctx.budget
    return AgentResult(reason, detail, sub.summary if sub else None, bool(sub and sub.abstain), b.tool_calls,
                       b.model_calls, b.input_tokens, b.output_tokens, b.cache_read_tokens, b.cache_write_tokens,
                       round(b.cost_usd, 6), ctx.toolbox.interventions, time.monotonic() - t0, b.reported_tool_calls,
                       dict(b.refused_requests))
