"""Approximate indexes and embedding post-processing against exact search, measured side by side in one run.

Part 1 (indexes): clustered, L2-normalised 384-d synthetic vectors (100,000 by default; ``--sizes 100000,1000000``
for the 1M figure: 1.5 GB of vectors), 1,000 queries, top 10. Anchors measured in the same run: faiss ``IndexFlatIP``
and embedscope's exact search (``top_k_search``, MTEB's). Each index (faiss HNSW and IVF-PQ through
``embedscope.retrieval.ann``) is built once (its build time printed) and searched at two search settings: recall of
the exact top 10, search time per query over the batch of 1,000, the one-query latency p50/p95 over 200 sampled
queries, and the ratios against each anchor. Every time is the best of 3 runs (others share the machine).

Part 2 (post-processing, ``--post``): a 20,000-document synthetic corpus encoded once with the ``static-64`` alias
(the anchor: one corpus encode); each post-processing point (truncation × precision × rescoring) searched with 200
queries at MTEB's top 1,000 on those vectors, and on 384-d synthetic vectors (a MiniLM-sized width), each timed as a
share of that one encode (the issue asks < 5%).

    PYTHONPATH=src .venv/bin/python bench/bench_ann.py [--sizes 100000] [--post] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _util import best_time, median_time  # noqa: E402


def make_data(n_docs: int, n_queries: int = 1_000, dim: int = 384, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((200, dim)).astype(np.float32)
    docs = np.empty((n_docs, dim), dtype=np.float32)
    for start in range(0, n_docs, 100_000):  # in blocks: 1M × 384 float64 noise would take 3 GB
        n = min(100_000, n_docs - start)
        docs[start : start + n] = centers[rng.integers(0, 200, n)] + 0.5 * rng.standard_normal((n, dim))
    queries = centers[rng.integers(0, 200, n_queries)] + 0.5 * rng.standard_normal((n_queries, dim))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    return queries, docs


def index_plan(n_docs: int) -> list[tuple[str, str, list[int]]]:
    """Each index built once, searched at several settings: ``(spec, search parameter, values)``. IVF-PQ: 1,024
    lists at every size (faiss trains its k-means on at most 256 points per list: 262,144)."""
    nlist = 1024  # 4·√n would be 4,000 at 1M: four times the k-means training, too long on 2 shared cores
    return [
        ("hnsw:M=32,ef_construction=40", "ef_search", [16, 64]),
        (f"ivfpq:nlist={nlist},m=48,nbits=8", "nprobe", [8, 32]),
    ]


def _set_search(index: object, parameter: str, value: int) -> None:
    if parameter == "ef_search":
        index.hnsw.efSearch = value  # type: ignore[attr-defined]
    else:
        index.nprobe = value  # type: ignore[attr-defined]


def single_query_ms(search: object, queries: np.ndarray, n: int = 200, repeats: int = 3) -> tuple[float, float]:
    """p50 and p95 (numpy.percentile) of one query's search time, ms, over ``n`` queries (seeded sample), each the
    best of ``repeats`` timings."""
    picks = np.sort(np.random.default_rng(0).choice(len(queries), size=min(n, len(queries)), replace=False))
    samples = []
    for i in picks:
        q = queries[i : i + 1]
        best = min(_timed(search, q) for _ in range(repeats))
        samples.append(1e3 * best)
    return float(np.percentile(samples, 50)), float(np.percentile(samples, 95))


def _timed(search: object, q: np.ndarray) -> float:
    t0 = time.perf_counter()
    search(q)  # type: ignore[operator]
    return time.perf_counter() - t0


def bench_indexes(n_docs: int, threads: int) -> None:
    import faiss

    from embedscope.retrieval import ann
    from embedscope.retrieval.dense import top_k_search

    t0 = time.perf_counter()
    queries, docs = make_data(n_docs)
    nq, k = len(queries), 10
    chunk = 50_000
    print(
        f"\n{n_docs:,} docs x 384 ({docs.nbytes / 2**30:.2f} GiB), {nq:,} queries, top {k} ({threads} threads; "
        f"data made in {time.perf_counter() - t0:.0f} s; every time is the best of 3 runs, the machine being shared; "
        "at more than 200,000 documents the exact anchors are the best of 2 and their one-query latency is over 50 "
        "queries)"
    )
    flat_index = faiss.IndexFlatIP(docs.shape[1])
    flat_index.add(docs)

    def flat(q: np.ndarray = queries) -> tuple[np.ndarray, np.ndarray]:
        return flat_index.search(q, k)

    def exact(q: np.ndarray = queries) -> tuple[np.ndarray, np.ndarray]:
        return top_k_search(q, (docs[i : i + chunk] for i in range(0, n_docs, chunk)), top_k=k, similarity="dot")

    big = n_docs > 200_000  # at 1M: exact search timed best of 2 (no warm-up), one query on 50 queries, best of 2
    runs = {"repeats": 2, "warmup": 0} if big else {}
    sample = {"n": 50, "repeats": 2} if big else {}
    t_flat, (_, flat_ids) = best_time(flat, **runs)
    t_exact, (exact_ids, _) = best_time(exact, **runs)
    f50, f95 = single_query_ms(flat, queries, **sample)
    e50, e95 = single_query_ms(exact, queries, **sample)
    print(
        f"  anchor faiss IndexFlatIP: {1e3 * t_flat / nq:.3f} ms/query batched, one query p50 {f50:.2f} / p95 "
        f"{f95:.2f} ms; embedscope exact: {1e3 * t_exact / nq:.3f} ms/query batched ({t_exact / t_flat:.2f}x faiss), "
        f"one query p50 {e50:.2f} / p95 {e95:.2f} ms; faiss flat recall of embedscope exact "
        f"{ann.recall_of_exact(flat_ids, exact_ids, k):.4f}"
    )
    for spec, parameter, values in index_plan(n_docs):
        t0 = time.perf_counter()
        built = ann.build_index(docs, ann.parse_index(spec), "dot", threads=None)
        build = time.perf_counter() - t0
        print(
            f"  {spec}: built in {build:.1f} s, index {ann.index_bytes(built) / 2**20:.0f} MiB "
            f"(flat {docs.nbytes / 2**20:.0f} MiB)"
        )
        for value in values:
            _set_search(built, parameter, value)

            def search(q: np.ndarray = queries, b: object = built) -> tuple[np.ndarray, np.ndarray]:
                return ann.index_search(b, q, k, "dot")

            t_search, (ids, _) = best_time(search)
            p50, p95 = single_query_ms(search, queries)
            recall = ann.recall_of_exact(ids, exact_ids, k)
            print(
                f"    {parameter}={value:<4} recall@10 {recall:.4f}; {1e3 * t_search / nq:.4f} ms/query batched = "
                f"{t_search / t_flat:.3f}x faiss flat, {t_search / t_exact:.3f}x embedscope exact; one query p50 "
                f"{p50:.3f} / p95 {p95:.3f} ms ({e50 / p50:.0f}x faster than exact's p50)"
            )
        del built


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [f"word{i}" for i in range(5_000)]
    return [" ".join(rng.choice(words, 60)) for _ in range(n)]


def bench_post_processing() -> None:
    from embedscope.models.specs import load_encoder
    from embedscope.retrieval.base import SearchOptions
    from embedscope.retrieval.compression import bytes_per_vector
    from embedscope.retrieval.dense import post_processed_search, top_k_search

    encoder = load_encoder("static-64")
    docs_text, query_text = _texts(20_000, 1), _texts(200, 2)
    encoder.encode(docs_text[:100], role="document")  # load the model outside the timing
    t0 = time.perf_counter()
    d64 = encoder.encode(docs_text, role="document")
    t_encode = time.perf_counter() - t0
    q64 = encoder.encode(query_text, role="query")
    q384, d384 = make_data(20_000, 200, seed=3)
    print(f"\npost-processing, 20,000 docs, 200 queries, top 1,000; anchor: one static-64 encode {t_encode:.2f} s")
    for label, (q, d) in (("static-64 (64-d)", (q64, d64)), ("synthetic 384-d", (q384, d384))):
        dim = d.shape[1]
        t_fp32, _ = median_time(lambda q=q, d=d: top_k_search(q, [d], top_k=1000, similarity="cosine"), repeats=3)
        print(f"  {label}: exact fp32 search {t_fp32:.3f} s = {100 * t_fp32 / t_encode:.2f}% of the encode")
        for dims in sorted({dim, dim // 2, dim // 4} if dim == 64 else {384, 128, 64}, reverse=True):
            for precision, rescore in (("fp32", None), ("int8", None), ("int8", 4), ("binary", None), ("binary", 4)):
                if precision == "fp32" and dims == dim:
                    continue
                options = SearchOptions(top_k=1000, truncate_dim=dims, precision=precision, rescore_multiplier=rescore)
                t, _ = median_time(
                    lambda o=options, q=q, d=d: post_processed_search(q, [d], "cosine", o, {}), repeats=3
                )
                name = f"d={dims} {precision}" + (f" rescore x{rescore}" if rescore else "")
                print(
                    f"    {name:<24} {bytes_per_vector(dims, precision):5d} B/vector  {t:.3f} s = "
                    f"{100 * t / t_encode:.2f}% of the encode ({t / t_fp32:.2f}x exact fp32 search)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="corpus sizes, comma-separated (default 100000)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--post", action="store_true", help="also measure post-processing (loads static-64)")
    parser.add_argument("--no-indexes", action="store_true", help="skip part 1")
    args = parser.parse_args()
    try:
        import faiss
    except ImportError:
        sys.exit("bench_ann.py needs faiss: pip install -c constraints.txt -e '.[ann]'")
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    if not args.no_indexes:
        for n in (int(s) for s in args.sizes.split(",")):
            bench_indexes(n, args.threads)
    if args.post:
        bench_post_processing()


if __name__ == "__main__":
    main()
