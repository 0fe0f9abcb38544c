"""Legacy (mteb 1.x ``RerankingEvaluator``) reranking scores, from each query's candidate scores and relevance flags.

Per query ``q`` with candidate scores ``s`` (float32) and relevance flags ``y``:

* ``map_q = average_precision_score(y, s)`` (scikit-learn: ``Σ_n (R_n − R_{n−1}) P_n`` over score thresholds)
* ``mrr_q = 1 / rank`` of the first relevant candidate in ``torch.argsort(−s)`` if within the first ``k``, else 0
* confidence ``max`` / ``std`` / ``diff1`` of ``s`` (:func:`embedscope.metrics.nauc.confidence_scores`)

Reported: ``map`` and ``mrr`` (means over queries) and ``nAUC_{map,mrr}_{max,std,diff1}``
(:func:`embedscope.metrics.nauc.legacy_nauc`). The v2 protocol scores with :mod:`embedscope.metrics.ranking`.

>>> mrr_at_k([False, True, False], [2, 1, 0])
0.5
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from embedscope.metrics.nauc import CONFIDENCE_FUNCTIONS, confidence_scores, legacy_nauc


def mrr_at_k(is_relevant: Sequence[bool], ranking: Sequence[int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant index among the first ``k`` of ``ranking`` (0 if none)."""
    for rank, i in enumerate(list(ranking)[:k]):
        if is_relevant[i]:
            return 1 / (rank + 1)
    return 0


def reranking_v1_per_query(
    sample_scores: Sequence[Sequence[float]], relevance: Sequence[Sequence[bool]], mrr_k: int = 10
) -> tuple[dict[str, list[float]], list[dict[str, float]]]:
    """Each query's ``map`` (average precision) and ``mrr`` (MRR@``mrr_k``), and its confidence scores."""
    import torch
    from sklearn.metrics import average_precision_score

    aps, mrrs, conf = [], [], []
    for scores, relevant in zip(sample_scores, relevance):
        t = torch.as_tensor(np.asarray(scores, dtype=np.float32))
        mrrs.append(mrr_at_k(relevant, torch.argsort(-t).tolist(), mrr_k))
        aps.append(average_precision_score(list(relevant), t.tolist()))
        conf.append(confidence_scores(t.tolist()))
    return {"map": aps, "mrr": mrrs}, conf


def reranking_v1_scores(
    sample_scores: Sequence[Sequence[float]], relevance: Sequence[Sequence[bool]], mrr_k: int = 10
) -> dict[str, float]:
    """Legacy keys from each query's candidate scores and relevance flags (queries already filtered)."""
    return reranking_v1_summary(*reranking_v1_per_query(sample_scores, relevance, mrr_k))


def reranking_v1_summary(per_query: Mapping[str, list[float]], conf: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Legacy keys from per-query ``map``/``mrr`` and confidence scores: means and nAUCs."""
    aps, mrrs = per_query["map"], per_query["mrr"]
    out: dict[str, float] = {"map": float(np.mean(aps)), "mrr": float(np.mean(mrrs))}
    for name, values in (("map", np.array(aps)), ("mrr", np.array(mrrs))):
        for fct in CONFIDENCE_FUNCTIONS:
            out[f"nAUC_{name}_{fct}"] = legacy_nauc(np.array([c[fct] for c in conf]), values)
    return out
