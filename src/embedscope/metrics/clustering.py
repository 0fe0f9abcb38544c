"""Clustering scores as mteb 2.26's clustering evaluators compute them, from gold labels and a k-means assignment.

For gold classes ``C`` and clusters ``K`` over the same items (entropies ``H``, mutual information ``I``):

* ``v_measure = 2 h c / (h + c)`` with homogeneity ``h = 1 − H(C|K) / H(C)`` and completeness
  ``c = 1 − H(K|C) / H(K)`` (``sklearn.metrics.cluster.v_measure_score``)
* ``ami = (I(C, K) − E[I]) / (mean(H(C), H(K)) − E[I])``, adjusted for chance, arithmetic mean
  (``sklearn.metrics.cluster.adjusted_mutual_info_score``)

The v2 protocol scores many bootstrap samples per hierarchy level and reports the mean and population standard
deviation over all of them (:func:`bootstrap_summary`); the legacy protocol one V-measure per set
(:func:`legacy_summary`).

>>> clustering_metrics([0, 0, 1, 1], [1, 1, 0, 0])
{'v_measure': 1.0, 'ami': 1.0}
>>> legacy_summary([0.5, 1.0])["v_measure_std"]
0.25
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

CLUSTERING_METRICS: tuple[str, ...] = ("v_measure", "ami")
"""The v2 protocol's metrics, in mteb's order (it fixes the key order of the result)."""


def clustering_metrics(labels: Sequence[Any] | np.ndarray, assignment: Sequence[int] | np.ndarray) -> dict[str, float]:
    """``v_measure`` and ``ami`` of one clustering against the gold labels (formulas: module docstring)."""
    from sklearn.metrics.cluster import adjusted_mutual_info_score, v_measure_score

    return {
        "v_measure": float(v_measure_score(labels, assignment)),
        "ami": float(adjusted_mutual_info_score(labels, assignment)),
    }


def bootstrap_summary(scores: Mapping[str, Mapping[str, list[float]]]) -> dict[str, Any]:
    """``{metric: {"Level i": [score per bootstrap]}}`` → per-level lists, mean and population std over all."""
    result: dict[str, Any] = {}
    for metric, by_level in scores.items():
        flat = list(itertools.chain.from_iterable(by_level.values()))
        result["v_measures" if metric == "v_measure" else f"{metric}_scores"] = dict(by_level)
        result[metric] = float(np.mean(flat))
        result[f"{metric}_std"] = float(np.std(flat))
    return result


def legacy_summary(v_measures: list[float]) -> dict[str, Any]:
    """Mean and population std over sets, plus the per-set list."""
    return {
        "v_measure": float(np.mean(v_measures)),
        "v_measure_std": float(np.std(v_measures)),
        "v_measures": v_measures,
    }
