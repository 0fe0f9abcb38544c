"""MaxSim reranking throughput: embedscope's document-major kernel vs the plain gather-then-matmul
version, on the anchor's shapes (performance-anchors.md §5): 10,000 docs x 180 tokens x 128,
1,000 queries x 32 tokens, 100 candidates per query, fp32, L2-normalised. Also exhaustive MaxSim
(16 queries against every document) vs a plain blocked torch matmul + amax.
Usage: ``python bench/bench_maxsim.py [n_queries]``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _util import median_time  # noqa: E402

from embedscope.retrieval.late_interaction import maxsim_candidates, maxsim_top_k  # noqa: E402

N_DOCS, DOC_LEN, DIM, Q_LEN, N_CAND = 10_000, 180, 128, 32, 100


def gather_then_matmul(q: torch.Tensor, d: torch.Tensor, cand: np.ndarray, block: int = 50) -> np.ndarray:
    """The plain version: gather each query block's candidate embeddings, batched matmul, amax, sum."""
    out = torch.empty(cand.shape)
    with torch.inference_mode():
        for s in range(0, len(cand), block):
            c = torch.from_numpy(cand[s : s + block])
            docs = d[c]  # [b, C, L, dim] copy
            b = docs.shape[0]
            sim = torch.bmm(q[s : s + block], docs.view(b, -1, DIM).transpose(1, 2)).view(b, Q_LEN, N_CAND, DOC_LEN)
            out[s : s + block] = sim.amax(-1).sum(1)
    return out.numpy()


def plain_exhaustive(q: torch.Tensor, d: torch.Tensor, chunk: int = 500) -> np.ndarray:
    out = []
    with torch.inference_mode():
        for s in range(0, len(d), chunk):
            dc = d[s : s + chunk]
            sim = (q.reshape(-1, DIM) @ dc.reshape(-1, DIM).T).view(len(q), Q_LEN, len(dc), DOC_LEN)
            out.append(sim.amax(-1).sum(1))
    return torch.cat(out, 1).numpy()


def main() -> None:
    n_q = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((N_DOCS, DOC_LEN, DIM), dtype=np.float32)
    docs /= np.linalg.norm(docs, axis=-1, keepdims=True)
    queries = rng.standard_normal((n_q, Q_LEN, DIM), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=-1, keepdims=True)
    cand = np.stack([rng.choice(N_DOCS, N_CAND, replace=False) for _ in range(n_q)])
    q_list, d_list = list(queries), list(docs)
    q_t, d_t = torch.from_numpy(queries), torch.from_numpy(docs)

    ours, ours_scores = median_time(lambda: maxsim_candidates(q_list, d_list, cand), repeats=3)
    plain, plain_scores = median_time(lambda: gather_then_matmul(q_t, d_t, cand), repeats=3)
    err = float(np.abs(ours_scores - plain_scores).max())
    print(f"rerank {n_q} queries x {N_CAND} candidates ({DOC_LEN}x{DIM} doc tokens, {Q_LEN} query tokens):")
    print(f"  embedscope document-major : {ours:6.2f} s  {n_q / ours:7.0f} q/s")
    print(f"  plain gather-then-matmul  : {plain:6.2f} s  {n_q / plain:7.0f} q/s")
    print(f"  speed-up {plain / ours:.2f}x; max |diff| {err:.2e}")
    print("  anchor (performance-anchors.md §5): plain gather + matmul 3.6-4.4 s per 1,000 queries (~250 q/s)")

    few = 16
    ex_ours, (idx, _) = median_time(lambda: maxsim_top_k(q_list[:few], [d_list], top_k=10), repeats=3)
    ex_plain, full = median_time(lambda: plain_exhaustive(q_t[:few], d_t), repeats=3)
    agree = np.mean([set(i) == set(np.argsort(-f)[:10]) for i, f in zip(idx, full)])
    print(
        f"exhaustive {few} queries x {N_DOCS} docs: embedscope {ex_ours / few:.3f} s/query, "
        f"plain torch {ex_plain / few:.3f} s/query (ratio {ex_plain / ex_ours:.2f}x); top-10 agreement {agree:.2f}"
    )
    print("  anchor: numpy fp32 0.110 s/query, torch fp32 0.159 s/query")


if __name__ == "__main__":
    main()
