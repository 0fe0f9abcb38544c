"""Instruction-following metrics, as mteb 2.26 computes them (``mteb._evaluators.retrieval_metrics``).

- **p-MRR** (FollowIR): a document's rank in the original-instruction run ``og`` and in the changed-instruction run
  ``new`` (1-based; ties by doc id descending; absent: one past the end) give
  ``p = (1/og)/(1/new) − 1`` when it rose or stayed (``og ≥ new``, so ``p ≤ 0``), else ``p = 1 − (1/new)/(1/og)``;
  the task's p-MRR is the mean over queries of the mean over the documents the change made non-relevant.
- **level scores** (IFIR): mean ``ndcg@20`` of the queries whose id contains ``v1`` / ``v2`` / ``v3``.
- **robustness@10** (InstructIR): queries grouped by the id part before ``_``; mean over groups of the lowest
  ``ndcg@10``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embedscope.errors import DataFormatError
from embedscope.metrics.ranking import evaluate_ranking

__all__ = ["followir_scores", "level_scores", "p_mrr", "rank_in", "rank_score", "robustness_at_10"]


def rank_in(run: Mapping[str, float], doc_id: str) -> int:
    """1-based rank of ``doc_id`` in one query's run (score, then doc id, descending); absent: one past the end."""
    ordered = sorted(run.items(), key=lambda x: (x[1], x[0]), reverse=True)
    for i, (doc, _) in enumerate(ordered):
        if doc == doc_id:
            return i + 1
    return len(ordered) + 1


def rank_score(og_rank: int, new_rank: int) -> float:
    """FollowIR's per-document p-MRR."""
    if og_rank >= new_rank:
        return ((1 / og_rank) / (1 / new_rank)) - 1
    return 1 - ((1 / new_rank) / (1 / og_rank))


def p_mrr(
    original: Mapping[str, Mapping[str, float]],
    changed_run: Mapping[str, Mapping[str, float]],
    changed_qrels: Mapping[str, Sequence[str]],
) -> float:
    """mteb's ``calculate_pmrr``: mean over queries of the mean per-document p-MRR (pandas, as mteb)."""
    import pandas as pd

    rows = []
    for qid, docs in changed_qrels.items():
        if qid + "-og" not in original or qid + "-changed" not in changed_run:
            continue
        for doc in docs:
            rows.append(
                {
                    "qid": qid,
                    "p-MRR": rank_score(
                        rank_in(original[qid + "-og"], doc), rank_in(changed_run[qid + "-changed"], doc)
                    ),
                }
            )
    if not rows:
        raise DataFormatError("no query of qrel_diff has both a '-og' and a '-changed' query in the run")
    frame = pd.DataFrame(rows)
    return float(frame.groupby("qid").agg({"p-MRR": "mean"})["p-MRR"].mean())


def followir_scores(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    changed_qrels: Mapping[str, Sequence[str]],
    k_values: Sequence[int],
) -> dict[str, Any]:
    """mteb's ``evaluate_p_mrr_change``: ``p-MRR``, and the retrieval scores of the ``og`` and ``changed`` runs."""
    original = {q: d for q, d in run.items() if q.endswith("-og")}
    new = {q: d for q, d in run.items() if not q.endswith("-og")}
    out: dict[str, Any] = {"p-MRR": p_mrr(original, new, changed_qrels)}
    for name, group in (("og", original), ("changed", new)):
        judged = {q: d for q, d in qrels.items() if q.endswith("-og") == (name == "og")}
        out[name] = evaluate_ranking(judged, group, tuple(k_values)).to_mteb()
    return out


def level_scores(per_query: Mapping[str, Sequence[Any]], k: int = 20) -> dict[str, dict[str, float]]:
    """IFIR's mean ``ndcg@k`` per instruction level (query ids containing ``v1``, ``v2``, ``v3``)."""
    levels: dict[str, list[float]] = {"level_1": [], "level_2": [], "level_3": []}
    for qid, value in zip(per_query["id"], per_query[f"ndcg_at_{k}"]):
        for n in (1, 2, 3):
            if f"v{n}" in qid:
                levels[f"level_{n}"].append(value)
                break
    empty = [name for name, values in levels.items() if not values]
    if empty:
        raise DataFormatError(
            f"no query id marks {', '.join(empty)} (ids containing 'v1', 'v2', 'v3'); IFIR's "
            "level scores need all three"
        )
    return {"level_scores": {name: sum(values) / len(values) for name, values in levels.items()}}


def robustness_at_10(qrels: Mapping[str, Mapping[str, int]], per_query: Mapping[str, Sequence[Any]]) -> float:
    """InstructIR's robustness@10: mean over query groups (id before ``_``) of the lowest ``ndcg@10``."""
    ndcg = dict(zip(per_query["id"], per_query["ndcg_at_10"]))
    groups: dict[str, list[str]] = {}
    for qid in qrels:
        if qid in ndcg:  # (every judged query is, unless a --limits run dropped it)
            groups.setdefault(qid.split("_")[0], []).append(qid)
    lowest = [min(ndcg[q] for q in ids) for ids in groups.values()]
    return sum(lowest) / len(lowest)
