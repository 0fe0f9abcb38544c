"""Pareto frontier and k-fold choice on hand-made and synthetic scores, against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from embedscope.compare.selection import fold_assignment, kfold_choice, pareto_front
from embedscope.errors import ConfigError


def test_pareto_on_hand_made_points():
    # (quality, cost): A dominates D (better and cheaper); B is cheapest; C is best; E ties A on both
    quality = [0.70, 0.50, 0.80, 0.60, 0.70]
    cost = [2.0, 1.0, 5.0, 3.0, 2.0]
    assert pareto_front(quality, cost) == [True, True, True, False, True]
    # higher is better (e.g. queries per second): C is best on both and dominates every other point
    assert pareto_front(quality, cost, lower_is_better=False) == [False, False, True, False, False]
    assert pareto_front([0.7, 0.8, 0.6], [9.0, 5.0, 7.0], lower_is_better=False) == [True, True, False]
    # an unknown cost is neither on the frontier nor dominates
    assert pareto_front([0.9, 0.5], [None, 1.0]) == [False, True]
    assert pareto_front([0.9, 0.5], [math.nan, 1.0]) == [False, True]


def test_pareto_matches_brute_force_on_random_points():
    rng = np.random.default_rng(3)
    for _ in range(50):
        q = rng.integers(0, 5, size=8).astype(float).tolist()  # ties on purpose
        c = rng.integers(0, 5, size=8).astype(float).tolist()
        expected = [
            not any(q[j] >= q[i] and c[j] <= c[i] and (q[j] > q[i] or c[j] < c[i]) for j in range(8) if j != i)
            for i in range(8)
        ]
        assert pareto_front(q, c) == expected


def test_folds_partition_the_items_evenly():
    fold_of = fold_assignment(23, 5, seed=1)
    counts = np.bincount(fold_of, minlength=5)
    assert counts.sum() == 23 and counts.max() - counts.min() <= 1
    assert (fold_assignment(23, 5, seed=1) == fold_of).all()
    with pytest.raises(ConfigError, match="--tune-folds 1"):
        fold_assignment(10, 1)
    with pytest.raises(ConfigError, match="--tune-folds 11"):
        fold_assignment(10, 11)


def test_kfold_choice_matches_brute_force():
    rng = np.random.default_rng(0)
    values = rng.random((4, 30))
    values[2] += 0.05  # a slightly better candidate
    choice = kfold_choice(values, folds=5, seed=9)
    fold_of = fold_assignment(30, 5, seed=9)
    total = 0.0
    for f in range(5):
        train = [float(np.mean([values[r, i] for i in range(30) if fold_of[i] != f])) for r in range(4)]
        best = train.index(max(train))
        assert choice.chosen[f] == best and choice.train_scores[f] == pytest.approx(train[best])
        held = [values[best, i] for i in range(30) if fold_of[i] == f]
        assert choice.fold_scores[f] == pytest.approx(np.mean(held))
        total += sum(held)
    assert choice.held_out_score == pytest.approx(total / 30)


def test_kfold_is_not_optimistic_on_noise():
    """Candidates that are pure noise: the in-sample best is biased upwards, the held-out score is not."""
    rng = np.random.default_rng(5)
    held, in_sample = [], []
    for seed in range(40):
        values = rng.normal(0.0, 1.0, size=(20, 40))
        held.append(kfold_choice(values, folds=4, seed=seed).held_out_score)
        in_sample.append(values.mean(axis=1).max())
    assert np.mean(in_sample) > 0.2 and abs(np.mean(held)) < 0.1


def test_ties_choose_the_first_candidate():
    values = np.ones((3, 6))
    assert kfold_choice(values, folds=3).chosen == [0, 0, 0]
    assert list(itertools.chain(kfold_choice(values, 2).fold_scores)) == [1.0, 1.0]
