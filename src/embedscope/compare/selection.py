"""Choosing among setups: the Pareto frontier of quality against a cost, and choosing a setup without optimism by
k-fold over items (queries).

>>> pareto_front([0.5, 0.6, 0.4], [1.0, 2.0, 3.0])
[True, True, False]
>>> choice = kfold_choice(np.array([[1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]]), folds=2, seed=0)
>>> len(choice.chosen), 0.0 <= choice.held_out_score <= 1.0
(2, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from embedscope.errors import ConfigError


def pareto_front(quality: Sequence[float], cost: Sequence[float | None], lower_is_better: bool = True) -> list[bool]:
    """Whether each point is on the Pareto frontier of ``quality`` (higher is better) against ``cost`` (lower is
    better, or higher with ``lower_is_better=False``): no other point is at least as good on both and strictly
    better on one. A point with no cost (None or nan) is not on it, and does not dominate others."""
    sign = 1.0 if lower_is_better else -1.0
    known = [c is not None and math.isfinite(c) and math.isfinite(q) for q, c in zip(quality, cost)]
    out = []
    for i, (q, c) in enumerate(zip(quality, cost)):
        if not known[i]:
            out.append(False)
            continue
        ci = sign * float(c)  # type: ignore[arg-type]
        dominated = any(
            known[j]
            and quality[j] >= q
            and sign * float(cost[j]) <= ci  # type: ignore[arg-type]
            and (quality[j] > q or sign * float(cost[j]) < ci)  # type: ignore[arg-type]
            for j in range(len(quality))
            if j != i
        )
        out.append(not dominated)
    return out


@dataclass(frozen=True)
class FoldChoice:
    """What k-fold selection chose: per fold, the candidate chosen on the other folds' items, its training mean and
    its mean on the held-out fold; the held-out score is the mean over every item of the value of the candidate
    chosen for that item's fold."""

    fold_of: np.ndarray  # fold number of each item
    chosen: list[int]
    train_scores: list[float]
    fold_scores: list[float]
    held_out_score: float


def fold_assignment(n: int, folds: int, seed: int = 42) -> np.ndarray:
    """Each of ``n`` items' fold: a permutation from ``numpy.random.default_rng(seed)``, dealt round-robin (fold
    sizes differ by at most one)."""
    if not 2 <= folds <= n:
        raise ConfigError(f"--tune-folds {folds}: give from 2 to the number of items ({n})")
    order = np.random.default_rng(seed).permutation(n)
    fold_of = np.empty(n, dtype=np.int64)
    fold_of[order] = np.arange(n) % folds
    return fold_of


def kfold_choice(values: np.ndarray, folds: int, seed: int = 42) -> FoldChoice:
    """Choose a candidate (row of ``values``, ``[candidates, items]``) by its mean on the items outside each fold
    (ties: the first row), and score the choice on the fold: ``held-out = (1/n) Σ_i values[c(f(i)), i]`` with
    ``c(f) = argmax_r mean_{j ∉ f} values[r, j]``."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1:
        raise ValueError(f"values must be [candidates, items], got shape {values.shape}")
    fold_of = fold_assignment(values.shape[1], folds, seed)
    chosen, train, held = [], [], []
    picked = np.empty(values.shape[1], dtype=np.float64)
    for f in range(folds):
        inside = fold_of == f
        means = values[:, ~inside].mean(axis=1)
        best = int(np.argmax(means))
        chosen.append(best)
        train.append(float(means[best]))
        held.append(float(values[best, inside].mean()))
        picked[inside] = values[best, inside]
    return FoldChoice(fold_of, chosen, train, held, float(picked.mean()))
