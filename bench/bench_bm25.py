"""BM25 query throughput: embedscope's BM25 (bm25s inside) vs bm25s used directly vs SQLite FTS5.

Synthetic corpus shaped like the anchor in performance-anchors.md §2: Poisson(60)-word documents
over a Zipf(1.07) vocabulary, queries of 2–6 terms from a random document. Top-10, k1=1.2, b=0.75,
no stemming or stopwords on either side (the same tokens). Prints q/s and the ratios measured in
this run. Usage: ``python bench/bench_bm25.py [n_docs] [n_queries]``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import median_time  # noqa: E402

from embedscope.retrieval.bm25 import BM25Retriever  # noqa: E402
from embedscope.retrieval.fts5 import FTS5Index, text_expression  # noqa: E402
from embedscope.types import Corpus  # noqa: E402


def synthetic(n_docs: int, n_queries: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(300_000)])
    lengths = np.maximum(rng.poisson(60, n_docs), 1)
    ranks = np.minimum(rng.zipf(1.07, int(lengths.sum())) - 1, len(vocab) - 1)
    words = vocab[ranks]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    docs = [" ".join(words[s : s + n]) for s, n in zip(starts, lengths)]
    frequent = set(vocab[:50])
    queries = []
    for _ in range(n_queries):
        source = [w for w in docs[int(rng.integers(n_docs))].split() if w not in frequent] or ["w100"]
        queries.append(" ".join(rng.choice(source, size=min(len(source), int(rng.integers(2, 7))), replace=False)))
    return docs, queries


def main() -> None:
    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    n_queries = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    docs, queries = synthetic(n_docs, n_queries)
    print(f"corpus {n_docs} docs, {n_queries} queries, top-10")

    retriever = BM25Retriever(k1=1.2, b=0.75, stemmer="none", stopwords="none")
    t0 = time.perf_counter()
    index = retriever.index(Corpus(tuple(map(str, range(n_docs))), tuple(docs)))
    ours_index = time.perf_counter() - t0
    index.search(queries, 10)  # numba JIT warm-up (about 10 s, once per process)
    ours, (ours_idx, _) = median_time(lambda: index.search(queries, 10), repeats=5)

    import bm25s
    from bm25s.tokenization import Tokenizer

    def direct_index():
        tok = Tokenizer(lower=True, stopwords=None, stemmer=None)
        model = bm25s.BM25(method="lucene", k1=1.2, b=0.75, backend="numba")
        model.index(tok.tokenize(docs, return_as="tuple", show_progress=False), show_progress=False)
        return tok, model

    t0 = time.perf_counter()
    tok, model = direct_index()
    direct_index_s = time.perf_counter() - t0

    def direct_search():
        ids = tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
        return model.retrieve(ids, k=10, show_progress=False, n_threads=os.cpu_count() or 1)

    direct_search()
    direct, (direct_docs, _) = median_time(direct_search, repeats=5)

    t0 = time.perf_counter()
    fts = FTS5Index.build(docs)
    fts_index = time.perf_counter() - t0
    expressions = [text_expression(q) for q in queries]
    n_fts = min(n_queries, 50)
    fts_time, _ = median_time(lambda: [fts.search(e, 10) for e in expressions[:n_fts]], repeats=3)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
    con.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", ((i + 1, d) for i, d in enumerate(docs)))
    con.execute("INSERT INTO t(t) VALUES ('optimize')")
    raw_fts, _ = median_time(
        lambda: [
            con.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10", (e,)).fetchall()
            for e in expressions[:n_fts]
        ],
        repeats=3,
    )

    found = np.asarray(ours_idx)
    overlap = np.mean([len(set(a[a >= 0]) & set(b)) / 10 for a, b in zip(found, np.asarray(direct_docs))])
    print(f"index: embedscope {ours_index:.2f} s, bm25s direct {direct_index_s:.2f} s, FTS5 {fts_index:.2f} s")
    print(f"embedscope BM25 : {n_queries / ours:9.0f} q/s")
    print(f"bm25s direct    : {n_queries / direct:9.0f} q/s   (embedscope / bm25s = {direct / ours:.2f}x speed)")
    print(
        f"FTS5 embedscope : {n_fts / fts_time:9.0f} q/s   (BM25 / FTS5 = {(n_queries / ours) / (n_fts / fts_time):.0f}x)"
    )
    print(f"FTS5 raw sqlite : {n_fts / raw_fts:9.0f} q/s   (embedscope FTS5 / raw = {raw_fts / fts_time:.2f}x speed)")
    print(f"top-10 overlap embedscope vs bm25s direct: {overlap:.3f}")
    print("anchor (performance-anchors.md §2, 100k docs): bm25s numba 2 threads 19,137 q/s; FTS5 OR 182 q/s")


if __name__ == "__main__":
    main()
