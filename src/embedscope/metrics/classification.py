"""Classification metrics of hard predictions, as mteb 2.26's classification evaluators compute them.

Single label (``AbsTaskClassification``), per experiment, from ``y_true`` and the logistic regression's ``y_pred``
(scikit-learn's functions; macro = unweighted mean over classes, weighted = weighted by class support):

* ``accuracy = |{i : ŷ_i = y_i}| / n``
* ``precision_c = TP_c / (TP_c + FP_c)``, ``recall_c = TP_c / (TP_c + FN_c)``,
  ``f1_c = 2 precision_c recall_c / (precision_c + recall_c)``: ``precision``/``recall``/``f1`` (macro) and
  ``*_weighted``
* ``ap`` / ``ap_weighted``: ``average_precision_score`` of the hard predictions, only for binary eval labels; the
  positive class is 1 where 1 is a label (scikit-learn's default, so mteb's numbers), else the label that sorts last
  (``"pos"`` of ``"neg"``/``"pos"``), scored ``1[ŷ = positive]`` when the labels are not numbers

Multi-label (``AbsTaskMultilabelClassification``), from binarised label matrices ``Y`` and ``Ŷ``:

* ``accuracy`` = subset accuracy, ``|{i : Ŷ_i = Y_i}| / n``
* ``lrap`` = ``label_ranking_average_precision_score(Y, Ŷ)``; ``f1`` = macro F1 over labels
* ``hamming`` = ``mean_i |Y_i ∩ Ŷ_i| / |Y_i ∪ Ŷ_i|`` (1 for a row where both are empty)

Experiments are averaged with :func:`average_experiments`.

>>> prediction_scores([0, 1, 1, 0], [0, 1, 0, 0])["accuracy"]
0.75
>>> prediction_scores(["neg", "pos", "pos"], ["neg", "pos", "neg"])["ap"] == prediction_scores([0, 1, 1], [0, 1, 0])["ap"]
True
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

Label = Hashable


def prediction_scores(y_test: Sequence[Label], y_pred: Sequence[Label] | np.ndarray) -> dict[str, float | None]:
    """mteb's per-experiment metrics of hard predictions (``ap`` only for binary eval labels). A class never
    predicted (or never true) counts 0 in the macro means: ``zero_division=0``, the value scikit-learn's default
    ``"warn"`` gives, without a warning per experiment."""
    from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

    scores: dict[str, float | None] = {
        "accuracy": float(accuracy_score(y_test, y_pred)),
        "f1": float(f1_score(y_test, y_pred, average="macro", zero_division=0)),
        "f1_weighted": float(f1_score(y_test, y_pred, average="weighted", zero_division=0)),
        "precision": float(precision_score(y_test, y_pred, average="macro", zero_division=0)),
        "precision_weighted": float(precision_score(y_test, y_pred, average="weighted", zero_division=0)),
        "recall": float(recall_score(y_test, y_pred, average="macro", zero_division=0)),
        "recall_weighted": float(recall_score(y_test, y_pred, average="weighted", zero_division=0)),
        "ap": None,
        "ap_weighted": None,
    }
    labels: np.ndarray = np.unique(y_test)  # type: ignore[arg-type]  # numpy stubs: any label sequence works
    if len(labels) == 2:
        positive = 1 if 1 in labels.tolist() else labels[-1]
        predicted = np.asarray(y_pred)
        if not np.issubdtype(predicted.dtype, np.number):  # string labels: a hard score per prediction
            predicted = (predicted == positive).astype(float)
        for key, average in (("ap", "macro"), ("ap_weighted", "weighted")):
            scores[key] = float(average_precision_score(y_test, predicted, average=average, pos_label=positive))
    return scores


def average_experiments(per_experiment: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each metric over experiments (``nan`` when a metric is None throughout), plus the list."""
    averaged: dict[str, Any] = {"scores_per_experiment": per_experiment}
    for key in per_experiment[0]:
        values = [s[key] for s in per_experiment if s[key] is not None]
        averaged[key] = float(np.mean(values)) if values else float("nan")
    return averaged


def hamming_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Label-based accuracy: mean over rows of |true ∩ predicted| / |true ∪ predicted| (1 when both empty).

    >>> hamming_score(np.array([[1, 0, 1], [0, 0, 0]]), np.array([[1, 1, 0], [0, 0, 0]]))
    0.6666666666666666
    """
    t = np.asarray(y_true).astype(bool)
    p = np.asarray(y_pred).astype(bool)
    inter = (t & p).sum(axis=1)
    union = (t | p).sum(axis=1)
    return float(np.where(union == 0, 1.0, inter / np.maximum(union, 1)).mean())


def multilabel_prediction_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """``accuracy`` (subset), ``lrap``, macro ``f1`` and ``hamming`` of binarised multi-label predictions."""
    from sklearn.metrics import accuracy_score, f1_score, label_ranking_average_precision_score

    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "lrap": float(label_ranking_average_precision_score(y_true, y_pred)),
        "f1": float(f1_score(y_true, y_pred, average="macro")),
        "hamming": hamming_score(y_true, y_pred),
    }
