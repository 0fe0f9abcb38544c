"""Exact dense top-k: embedscope's chunked torch search against faiss IndexFlatIP, same data, same run.

100,000 × 384 float32 corpus (L2-normalised, clustered), 1,000 queries, top 100, inner product.
Prints `dense: embedscope X s, faiss Y s, ratio (embedscope/faiss) Z` and the agreement.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _util import median_time  # noqa: E402


def make_data(n_docs=100_000, n_queries=1_000, dim=384, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((200, dim)).astype(np.float32)
    docs = centers[rng.integers(0, 200, n_docs)] + 0.5 * rng.standard_normal((n_docs, dim)).astype(np.float32)
    queries = centers[rng.integers(0, 200, n_queries)] + 0.5 * rng.standard_normal((n_queries, dim)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return queries, docs


def main() -> None:
    try:
        import faiss
    except ImportError:
        sys.exit(
            "bench_dense.py compares against faiss, which is not installed: "
            "pip install -c constraints.txt -e '.[bench]' (or bash scripts/setup.sh --test)"
        )
    import torch

    from embedscope.retrieval.dense import top_k_search

    torch.set_num_threads(2)
    faiss.omp_set_num_threads(2)
    queries, docs = make_data()
    chunk = 50_000

    def ours():
        return top_k_search(
            queries, (docs[i : i + chunk] for i in range(0, len(docs), chunk)), top_k=100, similarity="dot"
        )

    def theirs():
        index = faiss.IndexFlatIP(docs.shape[1])
        index.add(docs)
        return index.search(queries, 100)

    t_ours, (idx, _) = median_time(ours, repeats=5)
    t_faiss, (_, f_idx) = median_time(theirs, repeats=5)
    overlap = np.mean([len(set(a) & set(b)) / 100 for a, b in zip(idx.tolist(), f_idx.tolist())])
    print(
        f"dense top-100, 1,000 queries x 100,000 docs x 384: embedscope {t_ours:.3f} s, faiss IndexFlatIP "
        f"{t_faiss:.3f} s, ratio (embedscope/faiss) {t_ours / t_faiss:.2f}x; top-100 overlap {overlap:.4f}"
    )


if __name__ == "__main__":
    main()
