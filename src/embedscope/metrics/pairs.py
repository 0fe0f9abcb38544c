"""Pair-classification scores as mteb 2.26's ``PairClassificationEvaluator`` computes them.

Per pair ``i`` (embeddings ``a_i``, ``b_i``), one score per function (:data:`SCORE_FUNCTIONS`):
``cosine_i = a_i·b_i / (‖a_i‖ ‖b_i‖)``, ``dot_i = a_i·b_i``, the model's ``similarity_i``, and the distances
``manhattan_i = Σ_d |a_id − b_id|`` and ``euclidean_i = ‖a_i − b_i‖`` (lower = more similar).

Per function, with the pairs sorted most similar first and a cut allowed only between distinct scores
(rows above the cut predicted positive):

* ``accuracy = max_cut (TP + TN) / n``
* ``f1 = max_cut 2 P R / (P + R)`` with ``P = TP / (TP + FP)``, ``R = TP / (TP + FN)`` (its ``precision`` and
  ``recall`` reported with it)
* ``ap`` = ``sklearn.metrics.average_precision_score`` of the (sign-adjusted) scores

plus ``max_{metric}`` over the functions.

>>> best_accuracy_threshold([0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0])
(1.0, 0.55)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from embedscope.metrics.paired import (
    paired_cosine_distances,
    paired_euclidean_distances,
    paired_manhattan_distances,
    pairwise_similarity,
)

if TYPE_CHECKING:
    from embedscope.models.base import Similarity

SCORE_FUNCTIONS = ("similarity", "cosine", "manhattan", "euclidean", "dot")
"""Score functions in mteb's order (it fixes the key order of the result)."""

METRICS = ("accuracy", "f1", "precision", "recall", "ap")


def _sorted_rows(scores: Sequence[float], labels: Sequence[int], high_score_more_similar: bool):
    """Scores and labels sorted most-similar first, and which positions may carry a threshold."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    order = np.argsort(-s if high_score_more_similar else s, kind="stable")
    s, y = s[order], y[order]
    splittable = s[:-1] != s[1:]  # position i may be cut between rows i and i + 1
    return s, y, splittable


def best_accuracy_threshold(
    scores: Sequence[float], labels: Sequence[int], high_score_more_similar: bool = True
) -> tuple[float, float]:
    """``(accuracy, threshold)``: the best accuracy over cuts between distinct sorted scores.

    Rows above the cut are predicted positive. As mteb: accuracy starts at 0, a later cut must be
    strictly better, the threshold is the midpoint of the two scores around the cut (−1 if none).
    """
    s, y, splittable = _sorted_rows(scores, labels, high_score_more_similar)
    n = len(y)
    if n < 2:
        return 0.0, -1.0
    positives_so_far = np.cumsum(y == 1)[:-1]
    remaining_negatives = int(np.sum(y == 0)) - np.cumsum(y == 0)[:-1]
    acc = (positives_so_far + remaining_negatives) / n
    acc = np.where(splittable, acc, -np.inf)
    i = int(np.argmax(acc))
    if not acc[i] > 0:
        return 0.0, -1.0
    return float(acc[i]), float((s[i] + s[i + 1]) / 2)


def best_f1_threshold(
    scores: Sequence[float], labels: Sequence[int], high_score_more_similar: bool = True
) -> tuple[float, float, float, float]:
    """``(f1, precision, recall, threshold)`` at the cut with the best F1 (mteb's scan; 0s if none)."""
    s, y, splittable = _sorted_rows(scores, labels, high_score_more_similar)
    n = len(y)
    if n < 2:
        return 0.0, 0.0, 0.0, 0.0
    ncorrect = np.cumsum(y == 1)[:-1]
    total_positive = int(np.sum(y == 1))
    ok = splittable & (ncorrect > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = ncorrect / np.arange(1, n)
        recall = ncorrect / total_positive
        f1 = 2 * precision * recall / (precision + recall)
    f1 = np.where(ok, f1, -np.inf)
    i = int(np.argmax(f1))
    if not f1[i] > 0:
        return 0.0, 0.0, 0.0, 0.0
    return float(f1[i]), float(precision[i]), float(recall[i]), float((s[i] + s[i + 1]) / 2)


def threshold_metrics(
    scores: Sequence[float], labels: Sequence[int], high_score_more_similar: bool = True
) -> dict[str, float]:
    """mteb's ``_compute_metrics_values``: best accuracy, best F1 (+ its precision, recall), AP."""
    from sklearn.metrics import average_precision_score

    acc, _ = best_accuracy_threshold(scores, labels, high_score_more_similar)
    f1, precision, recall, _ = best_f1_threshold(scores, labels, high_score_more_similar)
    sign = 1 if high_score_more_similar else -1
    ap = average_precision_score(np.asarray(labels, dtype=np.int64), np.array(scores) * sign)
    return {
        "accuracy": float(acc),
        "f1": float(f1),
        "precision": float(precision),
        "recall": float(recall),
        "ap": float(ap),
    }


def pair_scores(e1: np.ndarray, e2: np.ndarray, similarity: Similarity = "cosine") -> dict[str, list[float]]:
    """Per-pair scores keyed by :data:`SCORE_FUNCTIONS`, computed as mteb computes them.

    ``manhattan`` and ``euclidean`` are distances (lower = more similar, see :data:`HIGHER_IS_SIMILAR`).
    """
    a, b = np.asarray(e1), np.asarray(e2)
    return {
        "similarity": pairwise_similarity(a, b, similarity).tolist(),
        "cosine": (1 - paired_cosine_distances(a, b)).tolist(),
        "manhattan": paired_manhattan_distances(a, b).tolist(),
        "euclidean": paired_euclidean_distances(a, b).tolist(),
        "dot": np.asarray([np.dot(a[i], b[i]) for i in range(len(a))]).tolist(),
    }


HIGHER_IS_SIMILAR = {"similarity": True, "cosine": True, "manhattan": False, "euclidean": False, "dot": True}


def pair_classification_scores(
    e1: np.ndarray, e2: np.ndarray, labels: Sequence[int], similarity: Similarity = "cosine"
) -> dict[str, float]:
    """MTEB's pair-classification score dict for paired embeddings and 0/1 labels (same keys, same order)."""
    return pair_scores_summary(pair_scores(e1, e2, similarity), labels)


def pair_scores_summary(per_function: Mapping[str, Sequence[float]], labels: Sequence[int]) -> dict[str, float]:
    """The score dict from per-pair scores (:func:`pair_scores`) and 0/1 labels: each function's metrics, and max."""
    out: dict[str, float] = {}
    best: dict[str, list[float]] = {m: [] for m in METRICS}
    for name in SCORE_FUNCTIONS:
        for metric, value in threshold_metrics(per_function[name], labels, HIGHER_IS_SIMILAR[name]).items():
            out[f"{name}_{metric}"] = value
            best[metric].append(value)
    out.update({f"max_{metric}": max(values) for metric, values in best.items()})
    return out
