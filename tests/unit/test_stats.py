"""Estimators against independent references, and interval coverage by simulation."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from orchestrator.stats import (mean_interval, paired_difference, pass_at_k, pass_hat_k, ratio_interval,
                                sample_size_hint)


def test_hand_worked_case():
    assert pass_at_k(10, 7, 3) == pytest.approx(0.9917, abs=5e-5)
    assert pass_hat_k(10, 7, 3) == pytest.approx(0.2917, abs=5e-5)
    assert pass_hat_k(5, 2, 3) == 0.0 and pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(2, 1, 3) is None and pass_hat_k(2, 1, 3) is None  # fewer trials than k: undefined


def test_brute_force_enumeration_of_k_subsets():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 8)
        outcomes = [rng.random() < 0.5 for _ in range(n)]
        c = sum(outcomes)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
            assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def _coverage(clustered: bool, reps: int = 2000, tasks: int = 100, trials: int = 5, seed: int = 11) -> float:
    rng = np.random.default_rng(seed)
    covered = 0
    for rep in range(reps):
        if clustered:  # 50 repositories of 2 tasks sharing a repository effect
            repo_effect = rng.normal(0, 1.0, size=tasks // 2).repeat(2)
            clusters = [str(i // 2) for i in range(tasks)]
        else:
            repo_effect = np.zeros(tasks)
            clusters = [str(i) for i in range(tasks)]
        p = 1 / (1 + np.exp(-(rng.normal(0, 1.0, size=tasks) + repo_effect)))
        accepted = rng.binomial(trials, p)
        per_task = accepted / trials
        truth = 0.5  # the logistic of a symmetric zero-mean effect has mean 1/2
        est = mean_interval(per_task, clusters, 0.95, resamples=1000, seed=rep)
        covered += est.interval[0] <= truth <= est.interval[1]
    return covered / reps


@pytest.mark.parametrize("clustered", [False, True])
def test_intervals_cover_the_truth(clustered):
    assert 0.93 <= _coverage(clustered) <= 0.97


def test_cost_per_accepted_counts_every_trial_and_empty_resamples():
    costs = [1.0, 1.0, 2.0, 4.0]
    accepted = [1, 0, 1, 0]
    est = ratio_interval(costs, accepted, ["a", "a", "b", "b"], resamples=500, seed=1)
    assert est.value == pytest.approx(8.0 / 2)  # all trials' cost over accepted ones
    assert est.interval[0] <= est.value <= est.interval[1]
    none = ratio_interval(costs, [0, 0, 0, 0], ["a", "b", "c", "d"])
    assert none.value is None and "undefined" in none.reason
    sparse = ratio_interval([1.0] * 10, [1] + [0] * 9, [str(i) for i in range(10)], resamples=1000, seed=3)
    assert 200 < sparse.resamples_without_denominator < 500  # about (9/10)^10 of resamples have no accepted trial


def test_paired_difference_and_sample_size():
    base = [0.2, 0.4, 0.6, 0.8]
    cand = [0.3, 0.5, 0.7, 0.9]
    d = paired_difference(cand, base, ["a", "b", "c", "d"], resamples=500)
    # every task agrees: no spread is seen, which is not no uncertainty (issue 26: [0.1, 0.1] claimed certainty)
    assert d.value == pytest.approx(0.1) and d.interval[0] < 0.1 < d.interval[1]
    seven = paired_difference([1.0] * 7, [0.0] * 7, [str(i) for i in range(7)])
    assert seven.value == 1.0 and seven.interval[0] < 0.9 and seven.interval[1] == 1.0  # a rates' difference: <= 1
    # every task agrees on no difference: still an interval around 0 (the offline demo's two tasks gave [0, 0])
    zero = paired_difference([0.5, 1.0], [0.5, 1.0], ["a", "b"])
    assert zero.value == 0.0 and -1.0 <= zero.interval[0] < 0 < zero.interval[1] <= 1.0
    wide = paired_difference([1.0, 0.0], [0.0, 0.0], ["a", "b"])  # two clusters: t on 1 degree of freedom
    assert wide.interval == (-1.0, 1.0)
    assert sample_size_hint([0.1, -0.1, 0.2, 0.0], min_effect=0.05) > sample_size_hint([0.1, -0.1, 0.2, 0.0], min_effect=0.2)


def test_a_cost_per_accepted_difference_is_the_difference_of_the_two_ratios_with_an_interval_around_it():
    from orchestrator.stats import ratio_difference_interval

    rng = np.random.default_rng(5)
    clusters = [f"r{i % 12}" for i in range(40)]
    cost_b = rng.lognormal(0, 0.5, 40) * 3
    cost_c = cost_b * 1.4  # the candidate costs more on every task
    acc_b = rng.integers(0, 4, 40)
    acc_c = np.minimum(acc_b + 1, 3)
    est = ratio_difference_interval(cost_c, acc_c, cost_b, acc_b, clusters)
    assert est.value == pytest.approx(cost_c.sum() / acc_c.sum() - cost_b.sum() / acc_b.sum())
    lo, hi = est.interval
    assert lo < est.value < hi and hi - est.value == pytest.approx(est.value - lo)
    # pairing: a cost every task shares counts once; the same costs unpaired (the baseline's tasks shuffled) are wider
    shuffled = rng.permutation(40)
    unpaired = ratio_difference_interval(cost_c, acc_c, cost_b[shuffled], acc_b[shuffled], clusters)
    assert unpaired.interval[1] - unpaired.interval[0] > hi - lo
    none = ratio_difference_interval(cost_c, acc_c, cost_b, np.zeros(40), clusters)
    assert none.value is None and none.interval is None and "no accepted trial" in none.reason
    one = ratio_difference_interval(cost_c, acc_c, cost_b, acc_b, ["r"] * 40)
    assert one.value == pytest.approx(est.value) and one.interval is None
