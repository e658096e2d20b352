"""Planning: the ordered list of trials, a pure, seeded function.

Trial ids are ``(task, candidate, replicate)`` and deterministic, so resuming
and de-duplicating are trivial. With ``order: counterbalanced`` trials are
grouped in blocks, one per (period, task) where the period is the replicate:
every candidate runs once per block, one right after another, so paired
trials share the machine's conditions of that moment. Within blocks the
candidates' order follows a Williams design: across blocks each candidate runs
in each position equally often (within one, when the blocks do not fill whole
squares), and for an even number of candidates each one precedes every other
equally often, so carry-over effects (a warm cache, a busy disk) cancel out.
The candidate labels are shuffled once by ``experiment.seed`` and the
arrangement is recorded. Blocks run period by period: all tasks' first
replicate before any second one, each period starting one task further on. ``sequential`` keeps manifest order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


def williams_rows(n: int) -> list[list[int]]:
    """Rows of a Williams design for ``n`` treatments (n rows if n is even, 2n if odd)."""
    if n == 1:
        return [[0]]
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2:
        rows += [list(reversed(r)) for r in rows]
    return rows


@dataclass(frozen=True)
class PlannedTrial:
    trial_id: str
    task: str
    candidate: str
    replicate: int
    block: int
    position: int


def trial_id(task: str, candidate: str, replicate: int) -> str:
    """A trial's id: ``<task>/<candidate>/<replicate>`` (the only place it is spelled)."""
    return f"{task}/{candidate}/{replicate}"


def plan(tasks: Sequence[str], candidates: Sequence[str], replicates: int, seed: int,
         order: str = "counterbalanced") -> list[PlannedTrial]:
    """Every (task, candidate, replicate) once, in the order they should run."""
    out: list[PlannedTrial] = []
    if order == "sequential" or len(candidates) < 2:
        for t in tasks:
            for r in range(replicates):
                for i, c in enumerate(candidates):
                    out.append(PlannedTrial(trial_id(t, c, r), t, c, r, len(out) // len(candidates), i))
        return out
    labels = list(candidates)
    random.Random(seed).shuffle(labels)
    rows = williams_rows(len(labels))
    block = 0
    for r in range(replicates):
        # each period starts one task further on, so a task's replicates do not all get the same
        # row (which would confound the order with the task when the task count is a multiple of
        # the number of rows); rows follow the block count, which keeps positions balanced
        for ti in range(len(tasks)):
            t = tasks[(ti + r) % len(tasks)]
            for position, index in enumerate(rows[block % len(rows)]):
                c = labels[index]
                out.append(PlannedTrial(trial_id(t, c, r), t, c, r, block, position))
            block += 1
    return out


def arrangement(candidates: Sequence[str], seed: int) -> dict:
    """What was used to order the trials, for the run folder."""
    labels = list(candidates)
    random.Random(seed).shuffle(labels)
    return {"seed": seed, "labels": labels, "williams_rows": williams_rows(len(labels))}
