"""STS scores as mteb 2.26's ``AnySTSEvaluator`` computes them, from paired embeddings and gold scores.

Per pair ``i`` (embeddings ``a_i``, ``b_i``):

* ``cosine_i = 1 − paired_cosine_distance(a_i, b_i) = a_i·b_i / (‖a_i‖ ‖b_i‖)``
* ``manhattan_i = −Σ_d |a_id − b_id|``, ``euclidean_i = −‖a_i − b_i‖``
* ``similarity_i`` = the model's own pairwise similarity (cosine or dot, float32 torch)

Gold scores are normalised ``g_i = (x_i − min) / (max − min)``; each prediction list is scored by Pearson's r and
Spearman's ρ against ``g`` (:mod:`embedscope.metrics.correlation`, scipy's bits).

>>> import numpy as np
>>> e1 = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]); e2 = np.array([[1.0, 0.1], [1.0, 0.0], [1.0, 0.0]])
>>> sts_scores(e1, e2, [5.0, 2.5, 0.0])["cosine_spearman"]
1.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from embedscope.errors import DataFormatError
from embedscope.metrics.correlation import pearson, spearman
from embedscope.metrics.paired import (
    paired_cosine_distances,
    paired_euclidean_distances,
    paired_manhattan_distances,
    pairwise_similarity,
)

if TYPE_CHECKING:
    from embedscope.models.base import Similarity


def sts_predictions(e1: np.ndarray, e2: np.ndarray, similarity: Similarity = "cosine") -> dict[str, list[float]]:
    """Per-pair predictions as mteb makes them: ``cosine``, ``manhattan`` and ``euclidean`` (negated
    distances) and the model's own ``similarity``."""
    return {
        "cosine": (1 - paired_cosine_distances(e1, e2)).tolist(),
        "manhattan": (-paired_manhattan_distances(e1, e2)).tolist(),
        "euclidean": (-paired_euclidean_distances(e1, e2)).tolist(),
        "similarity": pairwise_similarity(e1, e2, similarity).tolist(),
    }


def normalized_gold(gold: Sequence[float], min_score: float = 0, max_score: float = 5) -> list[float]:
    """Gold scores mapped to [0, 1]: ``(x − min) / (max − min)``."""
    return [(x - min_score) / (max_score - min_score) for x in gold]


def correlation_scores(predictions: Mapping[str, Sequence[float]], normalized: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman of each prediction list against the gold, with mteb's keys and order (scipy's
    bits, see :mod:`embedscope.metrics.correlation`)."""
    if len(set(normalized)) < 2:
        raise DataFormatError(
            "every gold score of this STS split is the same; Spearman's and Pearson's correlations "
            "are undefined when the gold scores do not vary"
        )
    out: dict[str, float] = {}
    for name, predicted in predictions.items():
        prefix = "" if name == "similarity" else f"{name}_"
        out[f"{prefix}pearson"] = pearson(normalized, predicted)
        out[f"{prefix}spearman"] = spearman(normalized, predicted)
    order = (
        "pearson",
        "spearman",
        "cosine_pearson",
        "cosine_spearman",
        "manhattan_pearson",
        "manhattan_spearman",
        "euclidean_pearson",
        "euclidean_spearman",
    )
    return {k: out[k] for k in order}


def sts_scores(
    e1: np.ndarray,
    e2: np.ndarray,
    gold: Sequence[float],
    *,
    min_score: float = 0,
    max_score: float = 5,
    similarity: Similarity = "cosine",
) -> dict[str, float]:
    """MTEB's STS metrics for paired embeddings and raw gold scores."""
    return correlation_scores(sts_predictions(e1, e2, similarity), normalized_gold(gold, min_score, max_score))
