"""The whole cost of a trial: models, priced tools, infrastructure, human time, and every retried attempt.

A trial's result records what it *used*: its model spend in USD (priced when
the call was made, from the versioned table ``agents/prices.yaml``), and, in
``usage``, physical quantities: its sandbox's and grader containers' CPU time
and memory-time (``sandbox.meter``), its calls of each tool of the contract,
and its interventions. Attempts an infrastructure error ended before it are
kept in ``previous_attempts`` with what they used: a retry's cost is the run's.

``trial_cost`` prices those quantities with the manifest's ``costs`` section
(recorded in the lock), by kind:

* ``model``: the model spend of every attempt;
* ``tools``: calls × ``tool_call_usd`` of each priced tool (a tool of the
  contract without a price runs in the sandbox: what it costs is the
  sandbox's CPU and memory, already counted);
* ``cpu``: CPU-hours × ``cpu_hour_usd`` (``basis: reserved``: reserved CPUs ×
  wall hours);
* ``memory``: GiB-hours × ``memory_gib_hour_usd`` (or reserved GiB × hours);
* ``human``: interventions × ``minutes_per_intervention`` / 60 ×
  ``human_hour_usd``; the minutes are reported beside the money.

A quantity used without a declared price counts as zero *and is named*
(``unpriced``), and an attempt whose usage could not be measured (its node
lost, no cgroup and no engine statistics) is counted in ``unmeasured``: no
zero in the numerator is silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .manifest import CostsConfig
from .result import TrialResult

KINDS = ("model", "tools", "cpu", "memory", "human")


@dataclass
class TrialCost:
    """One trial's cost by kind, what it used, and what was used without a price or could not be measured."""

    by_kind: dict[str, float] = field(default_factory=lambda: {k: 0.0 for k in KINDS})
    cpu_hours: float = 0.0
    memory_gib_hours: float = 0.0
    tool_calls: dict[str, int] = field(default_factory=dict)
    interventions: int = 0
    human_minutes: float = 0.0
    unpriced: dict[str, float] = field(default_factory=dict)
    """Quantity used with no declared price, by name (``cpu_hours``, ``memory_gib_hours``, ``interventions``,
    ``human_minutes``)."""
    unmeasured: int = 0
    """Container spans (or whole attempts, lost with their node) whose CPU time and memory-time are unknown:
    counted as 0 and named; the measured spans beside them still count."""

    @property
    def total(self) -> float:
        return sum(self.by_kind.values())

    def __iadd__(self, other: "TrialCost") -> "TrialCost":
        for k in KINDS:
            self.by_kind[k] += other.by_kind[k]
        self.cpu_hours += other.cpu_hours
        self.memory_gib_hours += other.memory_gib_hours
        for name, n in other.tool_calls.items():
            self.tool_calls[name] = self.tool_calls.get(name, 0) + n
        self.interventions += other.interventions
        self.human_minutes += other.human_minutes
        for name, q in other.unpriced.items():
            self.unpriced[name] = self.unpriced.get(name, 0.0) + q
        self.unmeasured += other.unmeasured
        return self

    def to_dict(self) -> dict[str, Any]:
        r = lambda v: round(v, 10)  # noqa: E731 - a short trial's memory costs a millionth of a cent: keep it
        return {"total_usd": r(self.total), "by_kind_usd": {k: r(v) for k, v in self.by_kind.items()},
                "used": {"cpu_hours": r(self.cpu_hours), "memory_gib_hours": r(self.memory_gib_hours),
                         "tool_calls": dict(sorted(self.tool_calls.items())), "interventions": self.interventions},
                "human_minutes": round(self.human_minutes, 3),
                "unpriced": {k: r(v) for k, v in sorted(self.unpriced.items())},
                "unmeasured_attempts": self.unmeasured}


def trial_cost(result: TrialResult, costs: CostsConfig) -> TrialCost:
    """The whole cost of one trial under ``costs`` (see the module's docstring)."""
    out = TrialCost()
    out.by_kind["model"] = float(result.cost.model_usd or 0.0)  # every attempt's model spend already
    reserved = costs.basis == "reserved"
    out.interventions = result.interventions + sum(a.interventions for a in result.previous_attempts)
    for usage in [a.usage for a in result.previous_attempts] + [result.usage]:  # None: unknown, lost with its node
        if usage is None:
            out.unmeasured += 1
            continue
        for u in (usage.sandbox, usage.grader):
            if u.spans == 0:
                continue  # no container of this role ran in this attempt
            if not reserved:  # what a span used is unknown when nothing answered for it; its reservation is not
                out.unmeasured += u.unmeasured_spans
            # the measured spans count, whatever else is unknown
            out.cpu_hours += (u.reserved_cpu_s if reserved else u.cpu_s) / 3600.0
            out.memory_gib_hours += (u.reserved_memory_gib_s if reserved else u.memory_gib_s) / 3600.0
        for name, n in usage.tool_calls.items():
            out.tool_calls[name] = out.tool_calls.get(name, 0) + int(n)
    for quantity, price, kind in ((out.cpu_hours, costs.cpu_hour_usd, "cpu"),
                                  (out.memory_gib_hours, costs.memory_gib_hour_usd, "memory")):
        if price is None:
            if quantity > 0:
                out.unpriced[f"{kind}_hours" if kind == "cpu" else "memory_gib_hours"] = quantity
        else:
            out.by_kind[kind] = quantity * price
    for name, n in out.tool_calls.items():  # a tool without a price runs in the sandbox: its cost is the CPU's
        out.by_kind["tools"] += n * costs.tool_call_usd.get(name, 0.0)
    if out.interventions:
        if costs.minutes_per_intervention is None:
            out.unpriced["interventions"] = float(out.interventions)
        else:
            out.human_minutes = out.interventions * costs.minutes_per_intervention
            if costs.human_hour_usd is None:
                out.unpriced["human_minutes"] = out.human_minutes
            else:
                out.by_kind["human"] = out.human_minutes / 60.0 * costs.human_hour_usd
    return out


def locked_costs(lock: dict[str, Any]) -> CostsConfig | None:
    """The ``costs`` section a run's lock recorded (None for a run locked before costs were, or unreadable)."""
    section = lock.get("costs") if isinstance(lock, dict) else None
    try:
        return CostsConfig.model_validate(section) if isinstance(section, dict) else None
    except ValueError:
        return None


UNPRICED_FIELD = {"cpu_hours": "costs.cpu_hour_usd", "memory_gib_hours": "costs.memory_gib_hour_usd",
                  "interventions": "costs.minutes_per_intervention", "human_minutes": "costs.human_hour_usd"}


def unpriced_warning(candidate: str, unpriced: dict[str, float], costs: CostsConfig | None = None) -> str | None:
    """The report's sentence naming every quantity a candidate used without a declared price, and every field
    that would price it (interventions need both their minutes and the hourly rate)."""
    if not unpriced:
        return None
    parts = []
    for name, q in sorted(unpriced.items()):
        fields = UNPRICED_FIELD[name]
        if name == "interventions" and (costs is None or costs.human_hour_usd is None):
            fields += " and costs.human_hour_usd"
        parts.append(f"{q:.4g} {name.replace('_', ' ')} ({fields} not declared)")
    return f"{candidate}: counted as $0 for want of a price: " + ", ".join(parts)
