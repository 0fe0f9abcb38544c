"""Two-stage end-to-end on the built-in BBCNewsRetrieval (2,225 queries, 2,225 articles):
BM25 → ColBERT-stand-in (MiniLM token embeddings) reranking of the top 100, against exhaustive
ColBERT-stand-in MaxSim over the whole corpus, and BM25 / dense / RRF-fused for reference.
Prints each pipeline's per-stage seconds and peak memory, ndcg@10, and the time ratio of
exhaustive to two-stage measured in this run. Usage: ``python bench/bench_two_stage.py [n_queries]``.
"""

from __future__ import annotations

import sys
import tempfile
import time

from embedscope.data.builtin import bbc_news_retrieval
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.retrieval import RetrievalTask


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else None
    data = bbc_news_retrieval()
    if n:
        from embedscope.types import RetrievalData

        data = RetrievalData(data.corpus, data.queries.select(range(n)), data.qrels, data.name)
    task = RetrievalTask("BBCNewsRetrieval", load_split=lambda split: data)
    pipelines = {
        "bm25": ({"retrievers": ["bm25"]}, 1000),
        "bm25 -> colbert(minilm tokens) @100": ({"retrievers": ["bm25"], "rerankers": ["colbert:minilm"]}, 100),
        "colbert(minilm tokens) exhaustive": ({"retrievers": ["colbert:minilm"]}, 1000),
        "bm25 + minilm dense, rrf": ({"retrievers": ["bm25", "minilm"], "fusion": "rrf"}, 1000),
    }
    seconds = {}
    with tempfile.TemporaryDirectory() as out:
        for label, (spec, top_k) in pipelines.items():
            t0 = time.perf_counter()
            report = evaluate(spec, [task], output_folder=out, top_k=top_k, cache=False, show_progress=False)
            seconds[label] = time.perf_counter() - t0
            result = report.outcomes[0].result
            print(f"\n== {label}: ndcg@10 {result.main_score():.5f}, {seconds[label]:.1f} s end to end")
            print(report.stage_table().strip())
    two, full = seconds["bm25 -> colbert(minilm tokens) @100"], seconds["colbert(minilm tokens) exhaustive"]
    print(f"\nexhaustive / two-stage time: {full / two:.2f}x")


if __name__ == "__main__":
    main()
