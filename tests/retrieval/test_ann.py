"""Approximate indexes (faiss HNSW, IVF-PQ) against exact search: recall, determinism, specs and refusals."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.retrieval import ann
from embedscope.retrieval.dense import top_k_search

faiss = pytest.importorskip("faiss")


def _clustered(n: int, seed: int, dims: int = 64) -> np.ndarray:
    """Vectors around 50 fixed centres (neighbourhoods as real embeddings have them), the same centres for any seed."""
    centres = np.random.default_rng(123).standard_normal((50, dims)).astype(np.float32)
    rng = np.random.default_rng(seed)
    return (centres[rng.integers(0, 50, n)] + 0.7 * rng.standard_normal((n, dims))).astype(np.float32)


DOCS, QUERIES = _clustered(5000, 0), _clustered(200, 1)


@pytest.fixture(scope="module")
def exact() -> np.ndarray:
    index, _ = top_k_search(QUERIES, [DOCS], top_k=10, similarity="cosine")
    return index


def test_exact_search_agrees_with_faiss_flat_ip(exact: np.ndarray) -> None:
    flat = faiss.IndexFlatIP(DOCS.shape[1])
    flat.add(ann._prepared(DOCS, "cosine"))
    _, ids = flat.search(ann._prepared(QUERIES, "cosine"), 10)
    assert ann.recall_of_exact(ids, exact, 10) == 1.0


@pytest.mark.parametrize(
    "spec,floor",
    # floors measured on these vectors (faiss 1.15.1): 0.995, 1.0, 0.66; set a little below
    [
        ("hnsw", 0.98),
        ("hnsw:M=16,ef_search=64", 0.99),
        pytest.param("ivfpq:nlist=64,m=16,nprobe=8", 0.6, marks=pytest.mark.slow),  # 4 s of k-means training
    ],
)
@pytest.mark.slow
def test_recall_of_the_exact_top_10_and_determinism(exact: np.ndarray, spec: str, floor: float) -> None:
    parsed = ann.parse_index(spec)
    first = ann.ann_search(QUERIES, DOCS, parsed, top_k=10, similarity="cosine")
    again = ann.ann_search(QUERIES, DOCS, parsed, top_k=10, similarity="cosine")
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    recall = ann.recall_of_exact(first[0], exact, 10)
    assert floor <= recall <= 1.0
    assert np.all(np.diff(first[1], axis=1) <= 1e-6)


@pytest.mark.slow
def test_hnsw_scores_are_the_cosines_of_the_documents_found() -> None:
    index, scores = ann.ann_search(QUERIES, DOCS, ann.parse_index("hnsw"), top_k=5, similarity="cosine")
    q, d = ann._prepared(QUERIES, "cosine"), ann._prepared(DOCS, "cosine")
    assert np.allclose(scores, np.einsum("ij,ikj->ik", q, d[index]), atol=1e-5)


def test_recall_counts_the_exact_neighbours_found() -> None:
    found = np.array([[0, 1, 2], [5, -1, -1]])
    truth = np.array([[2, 9, 0], [5, 6, -1]])
    assert ann.recall_of_exact(found, truth, 3) == pytest.approx((2 / 3 + 1 / 2) / 2)


def test_specs_are_checked() -> None:
    assert ann.parse_index({"type": "hnsw", "M": 8}).model_dump() == {
        "type": "hnsw",
        "M": 8,
        "ef_construction": 40,
        "ef_search": 16,
    }
    assert isinstance(ann.parse_index("exact"), ann.ExactIndex)
    for bad, message in [
        ("annoy", "index type 'annoy'"),
        ("hnsw:M=0", "index hnsw option M"),
        ("hnsw:efsearch=8", "index hnsw option efsearch"),
        ("ivfpq:nlist", "is not key=value"),
    ]:
        with pytest.raises(ConfigError, match=message):
            ann.parse_index(bad)
    with pytest.raises(ConfigError, match="must divide"):
        ann.build_index(DOCS[:, :60], ann.parse_index("ivfpq:m=16"), "cosine")
    with pytest.raises(ConfigError, match="the corpus has 100"):
        ann.build_index(DOCS[:100], ann.parse_index("ivfpq:nlist=256"), "cosine")


def test_a_missing_faiss_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingDependencyError, match="embedscope\\[ann\\]"):
        ann.build_index(DOCS[:10], ann.parse_index("hnsw"), "cosine")
