"""Ranked passages → ranked documents by best passage, against a plain-Python reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedscope.retrieval.passages import best_passage_per_document
from embedscope.types import RankedRun


def reference(run: RankedRun, parent_of: dict[str, str], top_k: int) -> dict[str, dict[str, float]]:
    out = {}
    for qid, ranked in run.to_dict().items():
        best: dict[str, float] = {}
        for pid, score in sorted(ranked.items(), key=lambda kv: -kv[1]):
            best.setdefault(parent_of[pid], score)
        out[qid] = dict(sorted(best.items(), key=lambda kv: -kv[1])[:top_k])
    return out


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(1, 25), st.integers(1, 8), st.integers(0, 2**31))
def test_each_document_takes_its_best_passage_score(n_queries, n_passages, top_k, seed):
    rng = np.random.default_rng(seed)
    ids = tuple(f"p{i}" for i in range(n_passages))
    parent_of = {p: f"d{rng.integers(0, 5)}" for p in ids}
    depth = int(rng.integers(1, n_passages + 1))
    index = np.stack([rng.permutation(n_passages)[:depth] for _ in range(n_queries)]).astype(np.int64)
    index[:, depth // 2 :] = np.where(rng.random((n_queries, depth - depth // 2)) < 0.2, -1, index[:, depth // 2 :])
    scores = np.where(index >= 0, rng.normal(size=index.shape), -np.inf)
    run = RankedRun(tuple(f"q{i}" for i in range(n_queries)), ids, index, scores)
    got = best_passage_per_document(run, parent_of, top_k).to_dict()
    want = reference(run, parent_of, top_k)
    assert {q: set(d) for q, d in got.items()} == {q: set(d) for q, d in want.items()}
    assert got == want
