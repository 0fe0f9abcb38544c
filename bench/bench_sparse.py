"""Learned-sparse (SPLADE) retrieval: quality, encoding memory and search at scale, against the anchors measured
in the same run.

1. Quality on BBCNewsRetrieval (2,225 titles → 2,225 bodies; ``--quick``: a balanced 200), end to end through
   ``embedscope.evaluate``: splade-tiny vs BM25 vs minilm — nDCG@10, encode time, search q/s, index bytes and the
   peak RSS delta of each run (RSS sampled every 2 ms by a thread).
2. Encoding memory: embedscope's sliced decoder (``encode_sparse``) vs sentence-transformers'
   ``SparseEncoder.encode_document`` on the same 32 longest BBC bodies (truncated at the model's 512 tokens): peak
   RSS delta, time, and whether the vectors are bit-identical. Goal: embedscope's peak ≤ 1/4 of ST's.
3. Search at scale: a 100,000-document synthetic sparse corpus shaped by splade-tiny's own BBC vectors (each
   synthetic row takes the active terms of a real encoded body drawn at random, so the active-dims counts and the
   term document frequencies are the measured ones; the weights are drawn afresh from the measured weights, so the
   rows are not copies and scores do not tie), 1,000 queries likewise from the real encoded titles. embedscope's
   ``sparse_top_k_search`` (50,000-document chunks, the default ``corpus_chunk_size``) vs sentence-transformers'
   way (``util.dot_score`` on sparse COO tensors, then ``torch.topk``; all queries in one block, its fastest: each
   call converts the whole document matrix), top 10 and top 1000. Goal: embedscope ≥ 5x ST's q/s, same rankings.
   BM25 (bm25s through ``BM25Retriever``) on a 100,000-document synthetic text corpus gives the q/s anchor.

    .venv/bin/python bench/bench_sparse.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))
from _util import best_time  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
ANCHOR_BM25_QPS = 19_137  # performance-anchors.md §2: bm25s numba, 2 threads, 100k docs, top 10


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Peak:
    """Peak RSS above the RSS at entry, sampled by a thread every ``interval`` seconds."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.base, self.peak = interval, 0, 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(self.interval)

    def __enter__(self) -> Peak:
        self.base = self.peak = rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())

    @property
    def mb(self) -> float:
        return (self.peak - self.base) / 2**20


def measured(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, peak RSS delta (MB) and result of one call."""
    with Peak() as p:
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
    return seconds, p.mb, out


def machine() -> dict[str, Any]:
    model = platform.processor()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "load_average_start": os.getloadavg()}


# -- 1. quality --------------------------------------------------------------------------------------


@contextmanager
def captured_sparse_vectors() -> Iterator[list[tuple[str, Any]]]:
    """Keeps every CSR matrix sparse search encodes (role, matrix): the measured shape of the synthetic corpus."""
    import embedscope.retrieval.sparse as sparse_module

    kept: list[tuple[str, Any]] = []
    original = sparse_module.sparse_vectors

    def keeping(encoder: Any, texts: Any, *, role: str, **kw: Any) -> Any:
        out = original(encoder, texts, role=role, **kw)
        kept.append((role, out))
        return out

    sparse_module.sparse_vectors = keeping
    try:
        yield kept
    finally:
        sparse_module.sparse_vectors = original


def quality(data: Any) -> tuple[dict[str, Any], Any, Any]:
    from scipy import sparse

    from embedscope.evaluation.runner import evaluate
    from embedscope.retrieval.bm25 import BM25Retriever
    from embedscope.tasks.retrieval import RetrievalTask

    n_q, n_d = len(data.queries.texts), len(data.corpus.texts)
    rows: dict[str, Any] = {}
    for model in ("splade-tiny", "bm25", "minilm"):
        with tempfile.TemporaryDirectory() as tmp, captured_sparse_vectors() as kept:
            task = RetrievalTask("BBC", lambda split: data)
            run = functools.partial(evaluate, model, [task], output_folder=tmp, cache=False, show_progress=False)
            seconds, peak_mb, report = measured(run)
        result = report.outcomes[0].result
        scores = result.scores["test"][0]
        phases = {p["name"]: p["end"] - p["start"] for p in result.evaluation_phases}
        row = {"ndcg_at_10": scores["ndcg_at_10"], "wall_s": seconds, "peak_rss_delta_mb": peak_mb}
        if model == "bm25":  # evaluate's BM25 phase is index + search: time them apart, same retriever
            retriever = BM25Retriever()
            index_s, index = best_time(
                functools.partial(retriever.index, data.corpus, n_queries=n_q), repeats=1, warmup=0
            )
            search_s, _ = best_time(functools.partial(index.search, list(data.queries.texts), 1000), repeats=3)
            matrix = index.model.scores
            row |= {
                "encode_s": index_s,
                "encode_note": "tokenize + index",
                "search_qps": n_q / search_s,
                "index_bytes": int(sum(matrix[k].nbytes for k in ("data", "indices", "indptr"))),
                "index_note": "bm25s CSC scores: data+indices+indptr, vocabulary dict not counted",
            }
        else:
            row |= {
                "encode_s": phases["encode_queries"] + phases["encode_corpus"],
                "search_qps": n_q / max(phases["search"], 1e-9),
            }
            if model == "splade-tiny":
                row["index_bytes"] = int(scores["sparse_index_bytes"])
                row["index_note"] = "inverted index: postings (int32 doc, float32 weight) + term offsets"
                row |= {k: scores[k] for k in scores if k.startswith("sparse_") and k != "sparse_index_bytes"}
                q_csr = sparse.vstack([m for r, m in kept if r == "query"], format="csr")
                d_csr = sparse.vstack([m for r, m in kept if r == "document"], format="csr")
            else:
                row["index_bytes"] = n_d * 384 * 4
                row["index_note"] = "n_docs x 384 x float32"
        rows[model] = row
    return rows, q_csr, d_csr


# -- 2. encoding memory -----------------------------------------------------------------------------------


def encoding_memory(texts: list[str], repeats: int) -> dict[str, Any]:
    import torch

    from embedscope.models.specs import load_encoder

    enc = load_encoder("splade-tiny", device="cpu")
    st = enc.model
    tokens = st.preprocess(texts)["input_ids"].shape
    # one short call of each first: thread pools, oneDNN kernels, allocator
    enc.encode_sparse(texts[:2], role="document", batch_size=32)
    st.encode_document(texts[:2], batch_size=32, convert_to_tensor=True)

    def ours() -> np.ndarray:
        return enc.encode_sparse(texts, role="document", batch_size=32).toarray()

    def theirs() -> np.ndarray:
        return st.encode_document(texts, batch_size=32, convert_to_tensor=True).to_dense().numpy()

    out: dict[str, Any] = {"batch_shape": list(tokens), "max_seq_length": st.max_seq_length, "threads": None}
    out["threads"] = torch.get_num_threads()
    results = {}
    for name, fn in (("embedscope", ours), ("sentence_transformers", theirs)):  # ours first: ST's freed heap
        runs = [measured(fn) for _ in range(repeats)]  # cannot then hide ours
        out[name] = {"best_s": min(r[0] for r in runs), "peak_rss_delta_mb": max(r[1] for r in runs)}
        results[name] = runs[-1][2]
    out["bit_identical"] = bool(np.array_equal(results["embedscope"], results["sentence_transformers"]))
    out["active_dims_mean"] = float((results["embedscope"] != 0).sum(1).mean())
    out["peak_ratio"] = out["embedscope"]["peak_rss_delta_mb"] / out["sentence_transformers"]["peak_rss_delta_mb"]
    out["goal_met"] = out["peak_ratio"] <= 0.25 and out["bit_identical"]
    return out


# -- 3. search at scale -------------------------------------------------------------------------------------------


def synthetic_rows(real: Any, n: int, rng: np.random.Generator) -> Any:
    """``n`` rows, each with the active terms of a random row of ``real`` and weights drawn from ``real``'s."""
    out = real[rng.integers(0, real.shape[0], n)].tocsr()
    out.data = rng.choice(real.data, size=out.nnz).astype(np.float32)
    out.sort_indices()
    return out


def st_search(queries: Any, docs: Any, ks: tuple[int, ...]) -> tuple[dict[int, tuple[Any, Any, float]], float]:
    """sentence-transformers' way: ``dot_score`` of sparse COO tensors (all queries in one block), then topk per k.
    Returns per k (indices, values, seconds = dot_score + that topk) and the peak RSS delta (MB)."""
    import torch
    from sentence_transformers.util import dot_score

    def coo(m: Any) -> Any:
        m = m.tocoo()
        index = torch.from_numpy(np.vstack([m.row, m.col]).astype(np.int64))
        return torch.sparse_coo_tensor(index, torch.from_numpy(m.data), m.shape, check_invariants=False).coalesce()

    q, d = coo(queries), coo(docs)  # what ST's encode returns (convert_to_tensor): not timed
    with Peak() as p:
        t0 = time.perf_counter()
        scores = dot_score(q, d)
        dot_s = time.perf_counter() - t0
        out = {}
        for k in ks:
            t0 = time.perf_counter()
            top = torch.topk(scores, k, dim=1)
            out[k] = (top.indices.numpy(), top.values.numpy(), dot_s + time.perf_counter() - t0)
    return out, p.mb


def compare(ours_idx: np.ndarray, ours_sc: np.ndarray, st_idx: np.ndarray, st_sc: np.ndarray) -> dict[str, Any]:
    """Same documents in the same order for every query; where orders differ, whether the scores tie."""
    same_idx = bool(np.array_equal(ours_idx, st_idx))
    same_scores = bool(np.array_equal(ours_sc, st_sc.astype(np.float64)))
    return {
        "identical_rankings": same_idx,
        "identical_scores": same_scores,
        "queries_differing": int((ours_idx != st_idx).any(axis=1).sum()),
        "differences_are_ties": same_idx or same_scores,
    }


def search_at_scale(
    q_real: Any, d_real: Any, n_docs: int, n_queries: int, repeats: int, chunk: int = 50_000
) -> dict[str, Any]:
    import torch

    from embedscope.retrieval.sparse import flops, sparse_top_k_search

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    docs = synthetic_rows(d_real, n_docs, rng)
    queries = synthetic_rows(q_real, n_queries, rng)
    gen_s = time.perf_counter() - t0
    chunks = [docs[i : i + chunk] for i in range(0, n_docs, chunk)]
    out: dict[str, Any] = {
        "n_docs": n_docs,
        "n_queries": n_queries,
        "generate_s": gen_s,
        "doc_active_dims_mean": float(np.diff(docs.indptr).mean()),
        "query_active_dims_mean": float(np.diff(queries.indptr).mean()),
        "flops": flops(queries, chunks),
        "real_flops": flops(q_real, [d_real]),
        "threads": torch.get_num_threads(),
    }
    ours: dict[int, Any] = {}
    for k in (10, 1000):
        sizes: list[int] = []
        with Peak() as p:
            seconds, (idx, sc) = best_time(
                lambda: sparse_top_k_search(queries, chunks, top_k=k, sizes=sizes),  # noqa: B023
                repeats=repeats,
                warmup=0,
            )
        ours[k] = (idx, sc)
        out[f"embedscope_top{k}"] = {"s": seconds, "qps": n_queries / seconds, "peak_rss_delta_mb": p.mb}
        out["embedscope_index_bytes"] = int(sum(sizes[: len(chunks)]))
    theirs, st_peak = st_search(queries, docs, (10, 1000))
    out["st_index_bytes"] = int(docs.nnz * (2 * 8 + 4))  # COO: int64 row + col, float32 value
    for k in (10, 1000):
        idx, sc, seconds = theirs[k]
        out[f"st_top{k}"] = {"s": seconds, "qps": n_queries / seconds, "peak_rss_delta_mb": st_peak}
        out[f"ratio_top{k}"] = out[f"st_top{k}"]["s"] / out[f"embedscope_top{k}"]["s"]
        out[f"agreement_top{k}"] = compare(*ours[k], idx, sc)
    out["goal_met"] = all(
        out[f"ratio_top{k}"] >= 5 and out[f"agreement_top{k}"]["differences_are_ties"] for k in (10, 1000)
    )
    return out


def bm25_anchor(n_docs: int, n_queries: int, repeats: int) -> dict[str, Any]:
    from bench_bm25 import synthetic

    from embedscope.retrieval.bm25 import BM25Retriever
    from embedscope.types import Corpus

    docs, queries = synthetic(n_docs, n_queries)
    # numba as in the anchor (backend "auto" would pick numpy for 1,000 queries x 100,000 docs)
    retriever = BM25Retriever(k1=1.2, b=0.75, stemmer="none", stopwords="none", backend="numba")
    t0 = time.perf_counter()
    index = retriever.index(Corpus(tuple(map(str, range(n_docs))), tuple(docs)), n_queries=n_queries)
    index_s = time.perf_counter() - t0
    seconds, _ = best_time(lambda: index.search(queries, 10), repeats=repeats)  # warm-up: numba JIT
    return {"index_s": index_s, "qps_top10": n_queries / seconds, "anchor_qps": ANCHOR_BM25_QPS}


# -- report ---------------------------------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200-article BBC subset, one timed run each (< 3 min)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    parser.add_argument("--docs", type=int, default=100_000, help="synthetic corpus size for search at scale")
    parser.add_argument("--queries", type=int, default=1_000, help="synthetic queries for search at scale")
    args = parser.parse_args()

    import torch

    from embedscope.data.builtin import bbc_news_retrieval

    started = time.perf_counter()
    info = machine()
    info["torch_threads"] = torch.get_num_threads()
    repeats = 1 if args.quick else 3
    data = bbc_news_retrieval(200) if args.quick else bbc_news_retrieval()
    figures: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "default",
        "machine": info,
    }
    print(f"bench_sparse ({figures['mode']}) {figures['date']}")
    print(
        f"machine: {info['cpus']} CPUs, {info['cpu_model']}, torch threads {info['torch_threads']}, "
        f"load average {info['load_average_start'][0]:.2f} (other processes add noise)"
    )

    rows, q_real, d_real = quality(data)
    figures["quality"] = rows
    n_q, n_d = len(data.queries.texts), len(data.corpus.texts)
    print(f"\n1. BBCNewsRetrieval{' (quick: 200)' if args.quick else ''}: {n_q} queries, {n_d} docs, top 1000")
    print(f"{'model':<12} {'nDCG@10':>8} {'encode s':>9} {'search q/s':>11} {'index':>11} {'peak ΔRSS':>10}")
    for name, r in rows.items():
        print(
            f"{name:<12} {r['ndcg_at_10']:>8.4f} {r['encode_s']:>9.1f} {r['search_qps']:>11,.0f} "
            f"{mb(r['index_bytes']):>11} {r['peak_rss_delta_mb']:>7,.0f} MB"
        )
    s = rows["splade-tiny"]
    print(
        f"   splade active dims q/d mean {s['sparse_active_dims_query_mean']:.1f}/"
        f"{s['sparse_active_dims_document_mean']:.1f}, FLOPS {s['sparse_flops']:.2f}; bm25 encode = tokenize+index, "
        "index = bm25s CSC arrays; minilm index = n x 384 x 4 B"
    )

    texts = sorted(data.corpus.texts, key=len, reverse=True)[:32]
    enc = encoding_memory(texts, repeats=1 if args.quick else 2)
    figures["encoding_memory"] = enc
    o, t = enc["embedscope"], enc["sentence_transformers"]
    print(f"\n2. Encoding memory: 32 longest BBC bodies, batch {enc['batch_shape']} tokens, splade-tiny, CPU")
    print(f"   embedscope encode_sparse      {o['best_s']:6.2f} s  peak ΔRSS {o['peak_rss_delta_mb']:8,.0f} MB")
    print(f"   ST encode_document            {t['best_s']:6.2f} s  peak ΔRSS {t['peak_rss_delta_mb']:8,.0f} MB")
    print(
        f"   peak ratio embedscope/ST {enc['peak_ratio']:.3f} (goal <= 0.25: "
        f"{'met' if enc['goal_met'] else 'NOT met'}); time ratio {o['best_s'] / t['best_s']:.2f}x; "
        f"bit-identical: {enc['bit_identical']}"
    )

    scale = search_at_scale(q_real, d_real, args.docs, args.queries, repeats)
    figures["search_at_scale"] = scale
    print(
        f"\n3. Search at scale: {scale['n_docs']:,} synthetic docs x {scale['n_queries']:,} queries "
        f"(active dims q/d {scale['query_active_dims_mean']:.1f}/{scale['doc_active_dims_mean']:.1f}, FLOPS "
        f"{scale['flops']:.2f}; BBC measured {scale['real_flops']:.2f})"
    )
    print(f"{'method':<34} {'top 10 q/s':>11} {'top 1000 q/s':>13} {'index':>11} {'peak ΔRSS':>10}")
    for who, label, key in (
        ("embedscope", "embedscope sparse_top_k_search", "embedscope_index_bytes"),
        ("st", "ST dot_score(COO) + topk", "st_index_bytes"),
    ):
        a, b = scale[f"{who}_top10"], scale[f"{who}_top1000"]
        peak = max(a["peak_rss_delta_mb"], b["peak_rss_delta_mb"])
        print(f"{label:<34} {a['qps']:>11,.0f} {b['qps']:>13,.0f} {mb(scale[key]):>11} {peak:>7,.0f} MB")
    for k in (10, 1000):
        agree = scale[f"agreement_top{k}"]
        print(
            f"   top {k}: embedscope/ST speed {scale[f'ratio_top{k}']:.1f}x (goal >= 5x); rankings identical "
            f"{agree['identical_rankings']}, scores identical {agree['identical_scores']}"
            + (
                f" ({agree['queries_differing']} queries differ only in the order of tied scores)"
                if agree["queries_differing"] and agree["differences_are_ties"]
                else ""
            )
        )
    print(f"   goal (>= 5x at identical rankings): {'met' if scale['goal_met'] else 'NOT met'}")

    if args.quick:
        print("\n   BM25 anchor at 100k docs: skipped in --quick")
    else:
        anchor = bm25_anchor(args.docs, args.queries, repeats)
        figures["bm25_anchor"] = anchor
        sparse_qps = scale["embedscope_top10"]["qps"]
        print(
            f"   BM25 (bm25s via BM25Retriever, synthetic text, {args.docs:,} docs, 2-6 term queries): "
            f"{anchor['qps_top10']:,.0f} q/s top 10 (anchor {ANCHOR_BM25_QPS:,}: "
            f"{anchor['qps_top10'] / ANCHOR_BM25_QPS:.2f}x); SPLADE/BM25 q/s {sparse_qps / anchor['qps_top10']:.3f}"
        )
    figures["machine"]["load_average_end"] = os.getloadavg()
    figures["total_s"] = time.perf_counter() - started
    print(f"\ntotal {figures['total_s']:.0f} s; load average at end {figures['machine']['load_average_end'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=float))
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
