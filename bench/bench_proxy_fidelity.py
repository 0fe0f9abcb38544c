"""How faithfully a retrieval proxy ranks candidates, recipe by recipe, over many seeds.

A screen decides on each candidate's score on a proxy of the task. This bench measures, on the full BBCNewsRetrieval
(the largest retrieval task built from real data here), how often that proxy puts the candidates in their exact order:

* each dense candidate (the shipped models) encodes the full corpus and queries once, in the full run's batches;
  a proxy drawn as whole batches of that run (the screen's recipe) gets exactly those vectors, so its scores follow
  from them, by the exact search a screen runs, without encoding again; bm25 searches each proxy's own corpus (its
  statistics change with the corpus);
* for ``--draws`` seeds and each recipe (the screen's batches or the document recipe; BM25 hard negatives or none),
  nDCG@10 of every candidate on the proxy, by pytrec_eval;
* printed per recipe: the mean documents kept (the cost), Kendall's τ-b between the proxy's ranking and the exact one
  (mean, and the share of seeds at ≥ 0.8), the same for the ranking as a screen that confirms none states it
  (neighbours whose paired bootstrap interval holds 0 share a place; how many pairs it orders, and how many of those
  against the exact order), per pair of candidates adjacent in the exact order how often the proxy
  orders them the same way, and how often it orders as exact the pairs the full task itself separates (a paired
  t-test and a permutation test over its queries both below 0.05): τ counts every pair, also those whose exact
  order the full task cannot show.

The anchor is the exact ranking, measured in the same run from the same vectors over the whole corpus (its scores are
``embedscope evaluate``'s: printed side by side with ``--check``, which runs it for every candidate).

    .venv/bin/python bench/bench_proxy_fidelity.py [--size 0.05 0.1] [--draws 50] [--check]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from typing import Any, NamedTuple

import numpy as np
import pytrec_eval
from scipy.stats import kendalltau, ttest_rel

import embedscope
from embedscope.compare.core import CompareOptions
from embedscope.compare.items import TaskItems
from embedscope.compare.stats import permutation_test
from embedscope.data.builtin import bbc_news_retrieval
from embedscope.models.specs import load_encoder
from embedscope.retrieval.bm25 import BM25Retriever
from embedscope.retrieval.dense import top_k_search
from embedscope.screen.passes import MeanScore, score_replicates
from embedscope.screen.rounds import ProxyRound, stated_places
from embedscope.settings import RunSettings
from embedscope.tasks.proxy import ProxySpec, retrieval_proxy
from embedscope.types import RetrievalData


class Vectors(NamedTuple):
    queries: np.ndarray
    documents: np.ndarray
    similarity: Any


TOP_K = 100
DENSE = ["minilm", "minilm-int8", "paraphrase-minilm-l3", "static-64"]
RECIPES = {
    "batches, BM25 hard negatives (the screen's)": {"batch_size": 32},
    "batches, no hard negatives": {"batch_size": 32, "hard_negatives": 0},
    "documents, BM25 hard negatives": {},
    "documents, no hard negatives": {"hard_negatives": 0},
}


def full_vectors(model: str, data: RetrievalData) -> Vectors:
    """The model's query and document vectors of the full task, as its full run encodes them, and its similarity."""
    encoder = load_encoder(model)
    queries = encoder.encode(list(data.queries.texts), role="query", batch_size=32, show_progress=False)
    documents = encoder.encode(list(data.corpus.texts), role="document", batch_size=32, show_progress=False)
    return Vectors(np.asarray(queries, dtype=np.float32), np.asarray(documents, dtype=np.float32), encoder.similarity)


def ndcg(run: dict[str, dict[str, float]], qrels: Any) -> dict[str, float]:
    """nDCG@10 of each judged query, by pytrec_eval."""
    judged = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    values = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(run)
    return {q: values[q]["ndcg_cut_10"] for q in judged}


def dense_run(data: RetrievalData, full: RetrievalData, vectors: Vectors) -> dict:
    """Each query's top 100 of ``data`` (a reduction of ``full``) by embedscope's exact search (the screen's), from
    the full task's vectors."""
    q_row = {q: i for i, q in enumerate(full.queries.ids)}
    d_row = {d: i for i, d in enumerate(full.corpus.ids)}
    queries = vectors.queries[[q_row[q] for q in data.queries.ids]]
    documents = vectors.documents[[d_row[d] for d in data.corpus.ids]]
    index, scores = top_k_search(queries, [documents], top_k=TOP_K, similarity=vectors.similarity)
    return {
        q: {data.corpus.ids[i]: float(s) for i, s in zip(index[n], scores[n]) if i >= 0}
        for n, q in enumerate(data.queries.ids)
    }


def bm25_run(data: RetrievalData) -> dict:
    """bm25's top 100 over ``data``'s own corpus."""
    run = BM25Retriever().retrieve(data.queries, data.corpus, RunSettings(top_k=TOP_K).search_options())
    return {
        q: {run.doc_ids[i]: float(s) for i, s in zip(run.doc_index[n], run.scores[n]) if i >= 0}
        for n, q in enumerate(run.query_ids)
    }


def per_query(data: RetrievalData, full: RetrievalData, vectors: dict[str, Vectors]) -> dict[str, dict[str, float]]:
    """Every candidate's nDCG@10 of each query of ``data``."""
    out = {m: ndcg(dense_run(data, full, v), data.qrels) for m, v in vectors.items()}
    out["bm25"] = ndcg(bm25_run(data), data.qrels)
    return out


def separated(values: dict[str, dict[str, float]], alpha: float = 0.05) -> dict[tuple[str, str], float]:
    """The pairs (better first) whose exact difference the full task itself shows, paired over its queries: scipy's
    paired t-test and embedscope's permutation test both below ``alpha``; their larger p-value."""
    out = {}
    for a, b in itertools.combinations(values, 2):
        if np.mean(list(values[a].values())) < np.mean(list(values[b].values())):
            a, b = b, a
        x, y = [values[a][q] for q in values[a]], [values[b][q] for q in values[a]]
        p = max(float(ttest_rel(x, y).pvalue), permutation_test(x, y))
        if p < alpha:
            out[(a, b)] = p
    return out


def as_stated(values: dict[str, dict[str, float]], size: float) -> tuple[list[str], list[int]]:
    """The proxy's ranking and the places a screen states for it when it confirms none
    (:func:`~embedscope.screen.rounds.stated_places`): neighbours whose paired bootstrap interval of their difference
    holds 0 share a place. The replicates are the screen's: its resamples of the queries (its seed and rounds)."""
    options = CompareOptions()
    queries = tuple(sorted(next(iter(values.values()))))
    reps = {}
    for m, v in values.items():
        column = np.array([v[q] for q in queries])
        items = TaskItems("BBCNewsRetrieval", "Retrieval", "ndcg_at_10", float(column.mean()), "mean", queries, column)
        reps[m] = score_replicates(items, options, options.seed)  # a one-task screen's: mean_replicates' seed
    scores = {m: MeanScore(float(np.mean(list(v.values()))), 0.0, 1.0, {}) for m, v in values.items()}
    ranking = sorted(scores, key=lambda m: -scores[m].mean)
    one = ProxyRound(size, scores, {}, [], {}, 1.0, replicates=reps)
    return ranking, stated_places(ranking, [one], [], options.confidence)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, nargs="+", default=[0.05, 0.1])
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--check", action="store_true", help="evaluate every candidate exact too, side by side")
    args = parser.parse_args()
    started = time.perf_counter()
    full = bbc_news_retrieval()
    vectors = {m: full_vectors(m, full) for m in DENSE}
    exact_values = per_query(full, full, vectors)
    exact = {m: float(np.mean(list(v.values()))) for m, v in exact_values.items()}
    order = sorted(exact, key=lambda m: -exact[m])
    shown = separated(exact_values)
    print(f"BBCNewsRetrieval, {len(full.queries)} queries, {len(full.corpus)} documents; vectors in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    print("exact: " + ", ".join(f"{m} {exact[m]:.5f}" for m in order))
    if args.check:
        with tempfile.TemporaryDirectory() as folder:
            for m in order:
                report = embedscope.evaluate(m, ["BBCNewsRetrieval"], output_folder=folder, show_progress=False)
                print(f"  {m}: evaluate {report.outcomes[0].result.main_score():.5f}, here {exact[m]:.5f}")
    print(f"pairs the full task separates (p < 0.05): {len(shown)} of {len(order) * (len(order) - 1) // 2}; not: "
          + ", ".join(f"{a}/{b}" for a, b in itertools.combinations(order, 2) if (a, b) not in shown))  # fmt: skip
    pairs = list(zip(order, order[1:]))
    for size, (recipe, options) in itertools.product(args.size, RECIPES.items()):
        taus, kept, agree, right = [], [], {p: 0 for p in pairs}, []
        stated_taus, stated, wrong = [], [], []
        for seed in range(args.draws):
            proxy, _ = retrieval_proxy(full, ProxySpec(size=size, seed=seed, **options))
            values = per_query(proxy, full, vectors)
            scores = {m: float(np.mean(list(v.values()))) for m, v in values.items()}
            right.append(np.mean([scores[a] > scores[b] for a, b in shown]))
            taus.append(float(kendalltau([exact[m] for m in order], [scores[m] for m in order]).statistic))
            ranking, places = as_stated(values, size)
            stated_taus.append(float(kendalltau([exact[m] for m in ranking], [-p for p in places]).statistic))
            ordered = [
                (a, b) for (i, a), (j, b) in itertools.combinations(enumerate(ranking), 2) if places[i] < places[j]
            ]
            stated.append(len(ordered))
            wrong.append(sum(exact[a] < exact[b] for a, b in ordered))
            kept.append(len(proxy.corpus))
            for a, b in pairs:
                agree[(a, b)] += scores[a] > scores[b]
        print(
            f"\nsize {size}, {recipe}: {args.draws} seeds, {len(proxy.queries)} queries, {np.mean(kept):.0f} documents kept"
        )
        print(f"  tau-b: mean {np.mean(taus):.3f}, at least 0.8 in {np.mean(np.array(taus) >= 0.8):.0%} of seeds")
        print(f"  tau-b as a screen states it (unresolved neighbours share a place): mean {np.mean(stated_taus):.3f}, "
              f"at least 0.8 in {np.mean(np.array(stated_taus) >= 0.8):.0%} of seeds; pairs ordered {np.mean(stated):.1f} "
              f"of {len(order) * (len(order) - 1) // 2}, against the exact order {np.sum(wrong) / max(np.sum(stated), 1):.1%}")  # fmt: skip
        print(f"  pairs the full task separates, ordered as exact: {np.mean(right):.1%} (all of them in "
              f"{np.mean(np.array(right) == 1):.0%} of seeds)")  # fmt: skip
        for a, b in pairs:
            print(f"  {a} above {b} (exact by {exact[a] - exact[b]:+.5f}): in {agree[(a, b)] / args.draws:.0%}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
