"""Ranking metrics: embedscope's evaluate_ranking against pytrec_eval, same data.

10,000 queries × 1,000 retrieved docs from a 100,000-doc corpus; scores rounded to 4 decimals
(so ties occur); 1–5 graded judgments (0–3) per query, most of them inside the run.
pytrec_eval computes ndcg_cut / map_cut / recall / P at k = 1,3,5,10,20,100,1000 from the run
dict; embedscope computes those plus success, MTEB's MRR and its confidence scores, starting
from a RankedRun (the form the retrieval stage hands over), and separately from the dict.
Prints the times, the ratio and the largest per-query difference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _util import median_time  # noqa: E402

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P"}


def make_data(n_queries=10_000, depth=1_000, n_docs=100_000, seed=0):
    """A RankedRun and qrels; rows hold distinct docs in random (unsorted) order."""
    from embedscope.types import RankedRun

    rng = np.random.default_rng(seed)
    doc_ids = tuple(f"doc{i}" for i in range(n_docs))
    query_ids = tuple(f"q{i}" for i in range(n_queries))
    doc_index = np.argsort(rng.random((n_queries, n_docs // 20)), axis=1)[:, :depth] * 20
    doc_index += rng.integers(0, 20, size=(n_queries, 1))
    scores = np.round(rng.normal(size=(n_queries, depth)), 4)
    run = RankedRun(query_ids, doc_ids, doc_index.astype(np.int64), scores)
    qrels = {}
    for i, qid in enumerate(query_ids):
        n = int(rng.integers(1, 6))
        inside = doc_index[i, rng.integers(0, depth, size=n)]
        outside = rng.integers(0, n_docs, size=n)
        picked = np.where(rng.random(n) < 0.8, inside, outside)
        qrels[qid] = {doc_ids[d]: int(r) for d, r in zip(picked, rng.integers(0, 4, size=n))}
    return run, qrels


def main() -> None:
    import pytrec_eval

    from embedscope.metrics import evaluate_ranking

    run, qrels = make_data()
    run_dict = run.to_dict()
    measures = {f"{m}.{','.join(map(str, K_VALUES))}" for m in TREC_NAMES.values()}

    def theirs():
        return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run_dict)

    t_theirs, expected = median_time(theirs, repeats=3, warmup=0)
    t_ours, ranking = median_time(lambda: evaluate_ranking(qrels, run, K_VALUES), repeats=5, warmup=1)
    t_dict, from_dict = median_time(lambda: evaluate_ranking(qrels, run_dict, K_VALUES), repeats=3, warmup=0)
    t_mteb, _ = median_time(ranking.to_mteb, repeats=3, warmup=1)

    worst = 0.0
    for metric, trec in TREC_NAMES.items():
        for k in K_VALUES:
            ref = np.array([expected[q][f"{trec}_{k}"] for q in ranking.query_ids])
            worst = max(worst, float(np.abs(ranking.per_query[f"{metric}_at_{k}"] - ref).max()))
            worst = max(worst, float(np.abs(from_dict.per_query[f"{metric}_at_{k}"] - ref).max()))
    print(f"data: {len(run.query_ids)} queries x {run.depth} docs, {sum(map(len, qrels.values()))} judgments")
    print(
        f"metrics: pytrec_eval {t_theirs:.3f} s, embedscope (RankedRun) {t_ours:.3f} s, "
        f"ratio (pytrec/embedscope) {t_theirs / t_ours:.1f}x"
    )
    print(f"metrics: embedscope from dict {t_dict:.3f} s, ratio (pytrec/embedscope) {t_theirs / t_dict:.1f}x")
    print(f"metrics: to_mteb() (means + nAUC) {t_mteb:.3f} s")
    print(f"max abs diff vs pytrec_eval (per query, all metrics and k): {worst:.3g}")


if __name__ == "__main__":
    main()
