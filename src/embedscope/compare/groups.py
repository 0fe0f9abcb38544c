"""Query groups (run option ``group_by``): each group's main score with its bootstrap CI, and paired tests per group.

A retrieval run with ``group_by: FIELD`` gives each scored query its value of the queries' metadata ``FIELD`` (as
text: its *group*, the per-item rows' ``group`` column). Per split, the result holds each group's main score (the
mean of its queries' per-item values), the bootstrap percentile CI of :func:`~embedscope.compare.core.score_interval`
(same rounds, seed and confidence) and its query count, as ``scores[split][i]["groups"] = {FIELD: {VALUE: {...}}}``;
a group of fewer than two queries has its mean and no CI (``ci_low``/``ci_high`` None). ``compare`` tests each group
of two results that share the field on its paired items (:func:`~embedscope.compare.core.paired_test`), with the
p-values adjusted across the task's groups (Holm by default; :func:`~embedscope.compare.core.compare_groups`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embedscope.compare.core import CompareOptions, score_interval
from embedscope.compare.items import TaskItems


def group_scores(
    groups: Sequence[str], values: Sequence[float], options: CompareOptions = CompareOptions()
) -> dict[str, dict[str, Any]]:
    """Each group's ``main_score`` (the mean of its values), ``ci_low``/``ci_high`` (:func:`score_interval` over its
    values; None with fewer than two) and ``n``, groups in sorted order.

    >>> scores = group_scores(["en", "de", "en"], [1.0, 0.0, 0.5], CompareOptions(rounds=100))
    >>> scores["de"], scores["en"]["main_score"], scores["en"]["n"]
    ({'main_score': 0.0, 'ci_low': None, 'ci_high': None, 'n': 1}, 0.75, 2)
    """
    column = np.asarray(values, dtype=np.float64)
    out: dict[str, dict[str, Any]] = {}
    for group in sorted(set(groups)):
        mine = column[[i for i, g in enumerate(groups) if g == group]]
        items = TaskItems("", "", "", float(mine.mean()), "mean", values=mine)
        low, high = score_interval(items, options)
        out[group] = {
            "main_score": float(mine.mean()),
            "ci_low": None if math.isnan(low) else low,
            "ci_high": None if math.isnan(high) else high,
            "n": len(mine),
        }
    return out


def split_groups(field: str, columns: Mapping[str, Sequence[Any]], metric: str) -> dict[str, Any]:
    """A split's ``groups`` entry from its per-item ``columns`` (``group`` and the main ``metric``): ``{field: {value:
    {main_score, ci_low, ci_high, n}}}``; {} when the columns lack either."""
    if "group" not in columns or metric not in columns:
        return {}
    return {field: group_scores([str(g) for g in columns["group"]], columns[metric])}
