"""Pearson's r and Spearman's ρ with the bits of ``scipy.stats`` (1.17), computed in numpy alone.

mteb scores STS with ``scipy.stats.pearsonr`` and ``spearmanr``. Importing ``scipy.stats`` costs
about 0.7 s, a quarter of a warm run, so the two statistics are computed here with the same numpy
operations in the same order; ``tests/metrics/test_correlation.py`` checks bit-equality with scipy
on random, tied and extreme inputs.

>>> round(pearson([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]), 12)
0.8
>>> round(spearman([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0]), 12)
0.8
>>> import math; math.isnan(pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _as_pair(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    dtype = np.result_type(a, b)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)  # scipy promotes integers (and lists of them) to float64
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    if a.shape != b.shape:
        raise ValueError("x and y must have the same length")
    if a.size < 2:
        raise ValueError("x and y must have length at least 2")
    return a, b


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson's r, as ``scipy.stats.pearsonr(x, y).statistic``; NaN when either input is constant.

    r = Σ (xᵢ − x̄)(yᵢ − ȳ) / (‖x − x̄‖ ‖y − ȳ‖), each norm taken after scaling by the largest
    deviation (as scipy does, against overflow), clipped to [−1, 1].
    """
    a, b = _as_pair(x, y)
    if (a == a[0]).all() or (b == b[0]).all():
        return float("nan")
    am = a - np.mean(a, axis=-1, keepdims=True)
    bm = b - np.mean(b, axis=-1, keepdims=True)
    amax = np.max(np.abs(am), axis=-1, keepdims=True)
    bmax = np.max(np.abs(bm), axis=-1, keepdims=True)
    norm_a = amax * np.linalg.norm(am / amax, axis=-1, keepdims=True)
    norm_b = bmax * np.linalg.norm(bm / bmax, axis=-1, keepdims=True)
    r = np.clip(
        np.vecdot(am / norm_a, bm / norm_b, axis=-1),  # type: ignore[call-overload]  # numpy stubs: vecdot takes axis
        -1.0,
        1.0,
    )
    if a.size == 2:
        r = np.round(r)
    return float(r)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of a 1-D array, ties sharing their mean rank (``scipy.stats.rankdata``).

    >>> average_ranks(np.array([3.0, 1.0, 3.0])).tolist()
    [2.5, 1.0, 2.5]
    """
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], values.size]
    mean_rank = (starts + ends + 1) / 2.0  # the mean of the 1-based positions start+1 .. end
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's ρ, as ``scipy.stats.spearmanr(x, y).statistic``: ``np.corrcoef`` of the average
    ranks; NaN when either input is constant."""
    a, b = _as_pair(x, y)
    if (a == a[0]).all() or (b == b[0]).all():
        return float("nan")
    ranked = np.column_stack((average_ranks(a), average_ranks(b)))
    return float(np.corrcoef(ranked, rowvar=False)[1, 0])
