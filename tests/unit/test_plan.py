"""Planning: deterministic ids, every trial once, Williams counterbalancing."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.plan import plan, williams_rows


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_williams_rows_are_latin_and_balance_carry_over(n):
    rows = williams_rows(n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    for pos in range(n):
        assert Counter(r[pos] for r in rows) == Counter({c: len(rows) // n for c in range(n)})
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(set(pairs.values())) == 1 and len(pairs) == n * (n - 1)  # each ordered pair equally often


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("tasks, reps", [(["a"], 1), (["a", "b", "c"], 2), ([f"t{i}" for i in range(7)], 3)])
def test_positions_balanced_within_one(n, tasks, reps):
    cands = [f"c{i}" for i in range(n)]
    trials = plan(tasks, cands, reps, seed=5)
    assert len(trials) == len({t.trial_id for t in trials}) == len(tasks) * reps * n
    for c in cands:
        counts = Counter(t.position for t in trials if t.candidate == c)
        values = [counts.get(p, 0) for p in range(n)]
        assert max(values) - min(values) <= 1
    blocks = Counter(t.block for t in trials)
    assert set(blocks.values()) == {n}  # every candidate once per block


def test_a_tasks_replicates_do_not_all_run_in_one_order():
    for n_tasks, n_cands in ((4, 2), (6, 3), (8, 4)):
        tasks = [f"t{i}" for i in range(n_tasks)]
        trials = plan(tasks, [f"c{i}" for i in range(n_cands)], 2 * n_cands, seed=0)
        for t in tasks:
            orders = {tuple(x.candidate for x in trials if x.task == t and x.replicate == r) for r in range(2 * n_cands)}
            assert len(orders) > 1, (n_tasks, n_cands, t)


def test_deterministic_from_seed_and_periods_first():
    a = plan(["x", "y"], ["p", "q", "r"], 2, seed=1)
    assert a == plan(["x", "y"], ["p", "q", "r"], 2, seed=1)
    assert [t.replicate for t in a] == [0] * 6 + [1] * 6
    assert {t.trial_id for t in a} == {t.trial_id for t in plan(["x", "y"], ["p", "q", "r"], 2, seed=2)}
    seq = plan(["x"], ["p", "q"], 2, seed=1, order="sequential")
    assert [t.trial_id for t in seq] == ["x/p/0", "x/q/0", "x/p/1", "x/q/1"]
