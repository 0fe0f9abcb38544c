"""Fusion against ranx.fuse on the same runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.retrieval.fusion import Fusion, reciprocal_rank_fusion, weighted_sum
from embedscope.types import RankedRun


def _random_runs(n_runs: int, seed: int = 0) -> list[dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    runs = []
    for r in range(n_runs):
        run = {}
        for q in range(25):
            docs = rng.choice(60, size=int(rng.integers(1, 30)), replace=False)
            scale = [1.0, 10.0, 0.01][r % 3]  # different score ranges, as BM25 vs cosine
            scores = rng.permutation(len(docs)) + rng.random(len(docs)) * 0.5  # distinct: ranx ties are unordered
            run[f"q{q}"] = {f"d{d}": float(s * scale + r) for d, s in zip(docs, scores)}
        runs.append(run)
    return runs


def _as_dict(run: RankedRun) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for i, q in enumerate(run.query_ids):
        out[q] = [(run.doc_ids[d], s) for d, s in zip(run.doc_index[i], run.scores[i]) if d >= 0]
    return out


def _ranx_dict(run: Any) -> dict[str, list[tuple[str, float]]]:
    return {q: sorted(docs.items(), key=lambda x: -x[1]) for q, docs in run.to_dict().items()}


def _assert_same(ours: RankedRun, theirs: Any) -> None:
    """Same documents with the same fused scores per query; ours sorted (fusion makes ties, whose
    order ranx leaves unspecified, so order is compared through the scores)."""
    a, b = _as_dict(ours), _ranx_dict(theirs)
    assert set(a) == set(b)
    for q in a:
        ours_q, theirs_q = dict(a[q]), dict(b[q])
        assert set(ours_q) == set(theirs_q), q
        docs = sorted(ours_q)
        np.testing.assert_allclose([ours_q[d] for d in docs], [theirs_q[d] for d in docs], rtol=1e-9, atol=1e-12)
        assert all(x[1] >= y[1] for x, y in zip(a[q], a[q][1:])), q


@pytest.mark.slow
@pytest.mark.parametrize("k", [60, 5])
@pytest.mark.parametrize("n_runs", [2, 3])
def test_rrf_matches_ranx(k, n_runs):
    from ranx import Run, fuse  # imported here: numba makes it 2 s to import, and the fast tier needs none of it

    runs = _random_runs(n_runs, seed=k + n_runs)
    ours = reciprocal_rank_fusion([RankedRun.from_dict(r) for r in runs], k=k)
    theirs = fuse([Run(r) for r in runs], norm=None, method="rrf", params={"k": k})
    _assert_same(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("norm,ranx_norm", [("min-max", "min-max"), ("zmuv", "zmuv"), ("z-score", "zmuv")])
@pytest.mark.parametrize("weights", [None, (0.3, 0.7, 1.5)])
def test_weighted_sum_matches_ranx(norm, ranx_norm, weights):
    from ranx import Run, fuse

    runs = _random_runs(3, seed=7)
    ours = weighted_sum([RankedRun.from_dict(r) for r in runs], weights, norm)
    params = {"weights": list(weights or (1.0, 1.0, 1.0))}
    theirs = fuse([Run(r) for r in runs], norm=ranx_norm, method="wsum", params=params)
    _assert_same(ours, theirs)


def test_top_k_cut_and_query_order_independence():
    runs = _random_runs(2, seed=3)
    a = RankedRun.from_dict(runs[0])
    b = RankedRun.from_dict(dict(reversed(list(runs[1].items()))))  # same queries, other order
    fused = Fusion("rrf").fuse([a, b], top_k=5)
    assert fused.depth == 5
    full = reciprocal_rank_fusion([RankedRun.from_dict(runs[0]), RankedRun.from_dict(runs[1])])
    np.testing.assert_array_equal(fused.scores, full.scores[:, :5])


def test_single_document_run_and_empty_rows():
    a = RankedRun.from_dict({"q1": {"d1": 5.0}, "q2": {}})
    b = RankedRun.from_dict({"q1": {"d2": 1.0, "d1": 0.5}, "q2": {"d3": 2.0}})
    fused = weighted_sum([a, b], norm="min-max")
    got = _as_dict(fused)
    # one-document run: min-max gives 0 (ranx divides by max(max - min, 1e-9)); d1 = 0 + 0, d2 = 1
    assert got["q1"] == [("d2", 1.0), ("d1", 0.0)]
    assert got["q2"] == [("d3", 0.0)]


def test_validation():
    run = RankedRun.from_dict({"q": {"d": 1.0}})
    with pytest.raises(ConfigError, match="at least two"):
        reciprocal_rank_fusion([run])
    with pytest.raises(ConfigError, match="same query ids"):
        reciprocal_rank_fusion([run, RankedRun.from_dict({"other": {"d": 1.0}})])
    with pytest.raises(ConfigError, match="weights"):
        weighted_sum([run, run], weights=(1.0,))
    with pytest.raises(UnknownNameError, match="min-max"):
        Fusion("wsum", norm="minmaxx")
    assert Fusion("wsum", norm="z-score", weights=[1, 2]).label == "wsum-zmuv-w1_2"
