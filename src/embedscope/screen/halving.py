"""Successive halving's decisions, as pure functions of bootstrap replicates (``screen --proxy``).

Every candidate of a round is scored on the same proxy tasks, and each task's items are resampled with the same
seeds for every candidate (:func:`~embedscope.screen.run.mean_replicates`), so replicate ``r`` of two candidates
is a paired draw: ``leader[r] − other[r]`` is one bootstrap draw of their difference in mean main score. The
proxy's items are a sample of the full task's items, so this paired bootstrap is the sampling error of the
proxy's difference as an estimate of the full task's.

* **Dropped** (:func:`dropped`): a candidate whose difference to the leader has its ``confidence`` percentile
  interval entirely above 0: ``quantile(leader − other, (1 − c)/2) > 0``.
* **Tied** (:func:`equivalent`, :func:`tie_groups`): two one-sided tests at level ``alpha`` (TOST, Schuirmann 1987) by the bootstrap:
  the ``1 − 2·alpha`` percentile interval of the difference lies inside ``(−margin, margin)``. Overlapping
  intervals are not enough: equivalence must be shown.
* **The odds** (:func:`p_best_kept`): the share of replicates in which the best candidate of that replicate is
  one of those kept, the bootstrap's estimate of the probability that the winner on the full task is among them.

Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> noise = rng.normal(0, 0.01, 2000)
    >>> reps = {"a": 0.70 + noise, "b": 0.60 + noise, "c": 0.699 + noise + rng.normal(0, 0.001, 2000)}
    >>> dropped(reps, confidence=0.95), equivalent(reps["a"], reps["c"], margin=0.005, alpha=0.05)
    (['b'], True)
    >>> round(p_best_kept(reps, ["a", "c"]), 3)
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def leader(replicates: Mapping[str, np.ndarray]) -> str:
    """The candidate with the highest mean over its replicates (the first such in the mapping's order on a tie)."""
    names = list(replicates)
    return names[int(np.argmax([float(np.mean(replicates[n])) for n in names]))]


def difference_interval(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float]:
    """The ``confidence`` percentile interval of the paired difference ``a − b`` (numpy's linear quantiles)."""
    low, high = np.quantile(np.asarray(a) - np.asarray(b), [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def dropped(replicates: Mapping[str, np.ndarray], confidence: float) -> list[str]:
    """The candidates clearly below the leader: their difference's interval lies above 0 (in the mapping's order)."""
    best = leader(replicates)
    return [
        name
        for name, values in replicates.items()
        if name != best and difference_interval(replicates[best], values, confidence)[0] > 0
    ]


def equivalent(a: np.ndarray, b: np.ndarray, margin: float, alpha: float) -> bool:
    """TOST by the bootstrap: the ``1 − 2·alpha`` interval of ``a − b`` lies inside ``(−margin, margin)``."""
    low, high = difference_interval(a, b, 1 - 2 * alpha)
    return -margin < low and high < margin


def equivalence_margin(a: np.ndarray, b: np.ndarray, alpha: float) -> float:
    """The margin beyond which :func:`equivalent` holds: the larger bound, in absolute value, of the ``1 − 2·alpha``
    interval of ``a − b``; any ``--tie-margin`` above it ties the two.

    >>> rng = np.random.default_rng(0)
    >>> a, b = 0.8 + rng.normal(0, 0.004, 2000), 0.79 + rng.normal(0, 0.004, 2000)
    >>> m = equivalence_margin(a, b, 0.05)
    >>> round(m, 3), equivalent(a, b, m + 1e-9, 0.05), equivalent(a, b, m, 0.05)
    (0.019, True, False)
    """
    low, high = difference_interval(a, b, 1 - 2 * alpha)
    return max(abs(low), abs(high))


def tie_groups(replicates: Mapping[str, np.ndarray], margin: float, alpha: float) -> list[list[str]]:
    """The candidates in groups of equals, from the top: the leader and every candidate equivalent to it, then the
    best of the rest and those equivalent to it, and so on; each group's best first. A group of one means no tie.
    Two survivors a proxy cannot tell apart need one exact run between them, the leader's equals or not.

    >>> import numpy as np
    >>> noise = np.random.default_rng(0).normal(0, 0.001, 500)
    >>> tie_groups({"a": 0.9 + noise, "b": 0.8 + noise, "c": 0.8001 + noise}, margin=0.005, alpha=0.05)
    [['a'], ['c', 'b']]
    """
    left = dict(replicates)
    groups: list[list[str]] = []
    while left:
        best = leader(left)
        tied = [n for n, v in left.items() if n != best and equivalent(left[best], v, margin, alpha)]
        groups.append([best, *tied])
        left = {n: v for n, v in left.items() if n != best and n not in tied}
    return groups


def confirm_order(candidates: Sequence[str], estimates: Mapping[str, float], wins: Mapping[str, float]) -> list[str]:
    """The order to confirm ``candidates`` in: the largest share of replicates won (``wins``: each candidate's,
    with the candidates tied to it) per unit of estimated exact cost (``estimates``: seconds, or tokens for models
    behind an API) first, the cheaper first between equals. Confirmed greedily in this order, the stated
    probability grows fastest per unit spent, and a costly candidate that few replicates favour comes last (often
    not run at all).

    >>> confirm_order(["big", "small", "never"], {"big": 500.0, "small": 1.0, "never": 10.0}, {"big": 0.8, "small": 0.2})
    ['small', 'big', 'never']
    """

    def ratio(key: str) -> float:
        return wins.get(key, 0.0) / max(estimates.get(key, 0.0), 1e-9)

    return sorted(candidates, key=lambda k: (-ratio(k), estimates.get(k, 0.0)))


def p_best_kept(replicates: Mapping[str, np.ndarray], kept: Sequence[str]) -> float:
    """The share of replicates whose best candidate is one of ``kept`` (every candidate's replicates aligned)."""
    names = list(replicates)
    matrix = np.vstack([np.asarray(replicates[n], dtype=float) for n in names])
    best = np.argmax(matrix, axis=0)
    inside = np.isin(best, [names.index(k) for k in kept])
    return float(inside.mean())
