"""Summarization scores as mteb 2.26's ``SummarizationEvaluator`` (and its deprecated v1) computes them.

Row ``r`` has gold relevance scores ``x_r`` (one per machine summary), normalised ``g_r = (x_r − min) / (max − min)``,
and per prediction function ``f`` (``cosine``, ``dot``, the model's ``similarity``) the scores ``s_r^f``. Over the
kept rows ``R``:

* ``{f}_pearson = mean_{r in R} pearsonr(g_r, s_r^f)``, ``{f}_spearman = mean_{r in R} spearmanr(g_r, s_r^f)``
  (no prefix for the model's similarity)

``protocol="v1"`` averages each row's (statistic, p-value) pair instead, the bug of mteb issue #1156.

>>> cols = {"gold": [[0.0, 0.5, 1.0]], "cosine": [[0.1, 0.2, 0.3]], "dot": [[3.0, 2.0, 1.0]],
...         "similarity": [[0.1, 0.2, 0.3]]}
>>> summarization_scores(cols)["dot_spearman"]
-1.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

Protocol = Literal["v2", "v1"]


def normalized_relevance(relevance: Sequence[Sequence[float]], min_score: float, max_score: float) -> list[list[float]]:
    """Each row's scores mapped to [0, 1] with numpy, as mteb does."""
    return [((np.array(x) - min_score) / (max_score - min_score)).tolist() for x in relevance]


def summarization_scores(columns: dict[str, list[list[float]]], protocol: Protocol = "v2") -> dict[str, float]:
    """Mean per-row Pearson / Spearman of gold against each prediction, mteb's keys and order."""
    from scipy.stats import pearsonr, spearmanr

    def mean(fn: Any, name: str) -> float:
        if protocol == "v1":  # mteb's deprecated evaluator averages (statistic, p-value) pairs
            return float(np.mean([fn(g, p) for g, p in zip(columns["gold"], columns[name])]))
        return float(np.mean([float(fn(g, p).statistic) for g, p in zip(columns["gold"], columns[name])]))

    return {
        "pearson": mean(pearsonr, "similarity"),
        "spearman": mean(spearmanr, "similarity"),
        "cosine_spearman": mean(spearmanr, "cosine"),
        "cosine_pearson": mean(pearsonr, "cosine"),
        "dot_pearson": mean(pearsonr, "dot"),
        "dot_spearman": mean(spearmanr, "dot"),
    }
