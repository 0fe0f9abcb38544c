"""How closely a candidate model (quantized, exported …) reproduces a reference, item by item.

- Rankings: overlap of each query's top 10 (stored in the per-item files): mean Jaccard and mean
  rank-biased overlap (RBO, p = 0.9).
- STS and pair classification: Spearman's ρ between the two models' similarity lists and the number of
  discordant pairs of pairs (the two models order them oppositely).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embedscope.compare.items import TaskItems, paired_items

RBO_P = 0.9
BLOCK_ELEMENTS = 1 << 22


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """``|A ∩ B| / |A ∪ B|`` of two id lists as sets (1 when both are empty).

    >>> jaccard(["d1", "d2", "d3"], ["d2", "d3", "d4"])
    0.5
    """
    sa, sb = set(a), set(b)
    return 1.0 if not sa | sb else len(sa & sb) / len(sa | sb)


def rbo(a: Sequence[str], b: Sequence[str], p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat and Zobel 2010, eq. 32) of two rankings cut to the
    shorter one's depth ``k``: ``RBO = X_k/k · p^k + (1 − p)/p · Σ_{d=1..k} X_d/d · p^d``, where ``X_d`` is the
    size of the overlap of the two top ``d``s. 1 for identical rankings, 0 for disjoint ones.

    >>> rbo(["a", "b", "c"], ["a", "b", "c"])
    1.0
    >>> round(rbo(["a", "b"], ["b", "a"]), 4)  # X_1 = 0, X_2 = 2: 0.81 + 0.1/0.9 · 0.81
    0.9
    """
    k = min(len(a), len(b))
    if k == 0:
        return 1.0 if len(a) == len(b) else 0.0
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    overlap, total = 0, 0.0
    for d in range(1, k + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            overlap += 1
        else:
            overlap += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += overlap / d * p**d
    return float(overlap / k * p**k + (1 - p) / p * total)


def discordant_pairs(x: np.ndarray, y: np.ndarray) -> int:
    """Number of index pairs ``i < j`` with ``(x_i − x_j)(y_i − y_j) < 0`` (ties are not discordant)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = len(x)
    count = 0
    step = max(1, BLOCK_ELEMENTS // max(n, 1))
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        product = np.sign(x[rows, None] - x[None, :]) * np.sign(y[rows, None] - y[None, :])
        count += int(np.count_nonzero(product < 0))
    return count // 2


def similarity_column(items: TaskItems) -> str:
    """The prediction column the main metric is computed on (``cosine_spearman`` → ``cosine``; else ``similarity``)."""
    for name in items.columns:
        if name != "gold" and items.metric.startswith(f"{name}_"):
            return name
    return "similarity"


def agreement(reference: TaskItems, candidate: TaskItems) -> dict[str, Any]:
    """Agreement of ``candidate`` with ``reference`` on one task, over the items both have ({} if none apply)."""
    from scipy.stats import spearmanr

    ia, ib = paired_items(reference, candidate)
    if not len(ia):
        return {}
    if reference.top and candidate.top and reference.kind == candidate.kind == "mean":
        pairs = [(reference.top[i], candidate.top[j]) for i, j in zip(ia, ib)]
        return {
            "top10_jaccard": float(np.mean([jaccard(a, b) for a, b in pairs])),
            "top10_rbo": float(np.mean([rbo(a, b) for a, b in pairs])),
            "queries": len(pairs),
        }
    if reference.kind == candidate.kind == "pairs":
        column = similarity_column(reference)
        if column not in reference.columns or column not in candidate.columns:
            return {}
        x, y = reference.columns[column][ia], candidate.columns[column][ib]
        n = len(x)
        discordant = discordant_pairs(x, y)
        return {
            "similarity_spearman": float(spearmanr(x, y)[0]),
            "discordant_pairs": discordant,
            "discordant_fraction": discordant / (n * (n - 1) / 2) if n > 1 else 0.0,
            "pairs": n,
        }
    return {}
