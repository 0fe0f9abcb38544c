"""Bitext-mining scores as mteb 2.26's ``BitextMiningEvaluator._compute_metrics`` computes them.

Each first-column row ``i`` predicts the row ``p_i`` of the second column it is nearest to; its gold row is ``g_i``.
Over the classes ``c`` (second-column rows) with support ``n_c`` (scikit-learn, ``zero_division=0``):

* ``precision = Σ_c n_c TP_c / (TP_c + FP_c) / n``, ``recall = Σ_c n_c TP_c / (TP_c + FN_c) / n`` (weighted)
* ``f1 = Σ_c n_c f1_c / n`` with ``f1_c = 2 P_c R_c / (P_c + R_c)``
* ``accuracy = |{i : p_i = g_i}| / n``

>>> bitext_scores([(1, 0.9), (0, 0.8), (2, 0.7)], [(0, 0), (1, 1), (2, 2)])["accuracy"]
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Sequence


def bitext_scores(neighbours: Sequence[tuple[int, float]], gold: Sequence[Sequence[int]]) -> dict[str, float]:
    """mteb's ``_compute_metrics``: weighted precision / recall / F1 and accuracy of predicted vs gold rows."""
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    predictions = [j for j, _ in neighbours]
    labels = [gold[i][1] for i in range(len(neighbours))]
    return {
        "precision": float(precision_score(labels, predictions, zero_division=0, average="weighted")),
        "recall": float(recall_score(labels, predictions, zero_division=0, average="weighted")),
        "f1": float(f1_score(labels, predictions, zero_division=0, average="weighted")),
        "accuracy": float(accuracy_score(labels, predictions)),
    }
