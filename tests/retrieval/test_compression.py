"""Truncation, int8/binary quantization and rescoring against numpy and sentence-transformers' own functions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.retrieval.compression import (
    bytes_per_vector,
    calibration_ranges,
    compressed_search,
    dequantize_int8,
    hamming_distances,
    prepare,
    quantize_binary,
    quantize_int8,
    top_k_rows,
    truncate,
)


def quantize_embeddings(*args, **kwargs):
    """sentence-transformers' own, imported on first use (collection imports no heavy library)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers.util.quantization import quantize_embeddings as theirs
    return theirs(*args, **kwargs)


def semantic_search_faiss(*args, **kwargs):
    """sentence-transformers' own, imported on first use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers.util.quantization import semantic_search_faiss as theirs
    return theirs(*args, **kwargs)


def _vectors(n: int, dims: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)


@pytest.mark.parametrize("dims", [384, 61])
def test_int8_bit_identical_to_sentence_transformers(dims: int) -> None:
    docs, queries = _vectors(500, dims, 0), _vectors(20, dims, 1)
    ranges = calibration_ranges(docs)
    assert np.array_equal(quantize_int8(docs, ranges), quantize_embeddings(docs, "int8"))  # default: own ranges
    ours = quantize_int8(queries, ranges)
    theirs = quantize_embeddings(queries, "int8", calibration_embeddings=docs)
    assert ours.dtype == theirs.dtype == np.int8 and np.array_equal(ours, theirs)


@pytest.mark.parametrize("dims", [384, 61])
def test_binary_bit_identical_to_sentence_transformers(dims: int) -> None:
    x = _vectors(300, dims, 2)
    packed = quantize_binary(x)
    assert np.array_equal(packed, quantize_embeddings(x, "ubinary"))
    assert np.array_equal((packed.astype(np.int16) - 128).astype(np.int8), quantize_embeddings(x, "binary"))
    assert packed.shape[1] == bytes_per_vector(dims, "binary")


def test_int8_codes_match_a_plain_numpy_formula() -> None:
    x = _vectors(200, 16, 3)
    lo, hi = x.min(axis=0), x.max(axis=0)
    expected = np.array(
        [
            [min(255, max(0, int(np.floor((v - lo[j]) / ((hi[j] - lo[j]) / 255))))) - 128 for j, v in enumerate(r)]
            for r in x
        ]
    )
    got = quantize_int8(x, calibration_ranges(x)).astype(int)
    # float32 vs float64 rounding can move a value sitting on a bucket edge by one code, never more
    assert np.abs(got - expected).max() <= 1 and (got == expected).mean() > 0.99


def test_hamming_distances_equal_faiss_binary_flat() -> None:
    faiss = pytest.importorskip("faiss")
    docs, queries = quantize_binary(_vectors(400, 128, 4)), quantize_binary(_vectors(10, 128, 5))
    index = faiss.IndexBinaryFlat(128)
    index.add(docs)
    distances, ids = index.search(queries, 400)
    ours = hamming_distances(queries, docs, 128)
    assert np.array_equal(np.take_along_axis(ours, ids, axis=1), distances)
    bits = lambda p: np.unpackbits(p, axis=1).astype(int)  # noqa: E731
    assert np.array_equal(ours, (bits(queries)[:, None, :] != bits(docs)[None, :, :]).sum(axis=2))


def test_truncation_renormalises_for_cosine_only() -> None:
    x = _vectors(5, 32, 6) * 3
    cos = prepare(x, "cosine", 8)
    assert cos.shape == (5, 8) and np.allclose(np.linalg.norm(cos, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(prepare(x, "dot", 8), x[:, :8])
    with pytest.raises(ConfigError, match="truncate_dim 64"):
        truncate(x, 64)


def _numpy_reference(q, d, similarity, top_k, precision, dims, rescore):
    """An independent brute force: every score by a plain loop formula, a stable full sort."""
    q, d = q[:, :dims].astype(np.float64), d[:, :dims].astype(np.float64)
    if similarity == "cosine":
        q, d = q / np.linalg.norm(q, axis=1, keepdims=True), d / np.linalg.norm(d, axis=1, keepdims=True)
    if precision == "int8":
        lo, hi = d.min(axis=0), d.max(axis=0)
        code = lambda x: np.clip(np.floor((x - lo) / ((hi - lo) / 255)), 0, 255) - 128  # noqa: E731
        first = code(q) @ code(d).T
        full = q @ ((code(d) + 128) * ((hi - lo) / 255) + lo).T
    else:
        first = ((q > 0)[:, None, :] == (d > 0)[None, :, :]).sum(axis=2).astype(float)
        full = q @ (d > 0).T.astype(float)
    out = []
    for r in range(len(q)):
        order = sorted(range(len(d)), key=lambda j: (-first[r, j], j))[: top_k * (rescore or 1)]
        if rescore:
            order = sorted(order, key=lambda j: (-full[r, j], j))[:top_k]
        out.append(order)
    return np.array(out)


@pytest.mark.parametrize("precision", ["int8", "binary"])
@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("rescore", [None, 4])
def test_compressed_search_equals_numpy_brute_force(precision, similarity, rescore) -> None:
    d, q = _vectors(300, 48, 7), _vectors(12, 48, 8)
    index, scores = compressed_search(
        q, d, similarity=similarity, top_k=10, precision=precision, truncate_dim=40, rescore_multiplier=rescore
    )
    reference = _numpy_reference(q, d, similarity, 10, precision, 40, rescore)
    # near-ties of float scores may swap between float32 and float64 arithmetic: compare as sets, then order
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(index, reference)]) >= 0.98
    assert np.all(np.diff(scores, axis=1) <= 0)


@pytest.mark.parametrize("precision,st_precision", [("int8", "uint8"), ("binary", "ubinary")])
def test_rescored_scores_equal_sentence_transformers(precision: str, st_precision: str) -> None:
    """sentence-transformers' semantic_search_faiss rescoring gives each candidate q·dequant(d) (int8) or q·bits(d)
    (binary); our rescored scores of the same (query, document) pairs must be those numbers."""
    pytest.importorskip("faiss")
    d, q = prepare(_vectors(400, 64, 9), "cosine", None), prepare(_vectors(8, 64, 10), "cosine", None)
    ranges = calibration_ranges(d)
    corpus = quantize_embeddings(d, st_precision, ranges=ranges)
    hits, _ = semantic_search_faiss(
        q, corpus_embeddings=corpus, corpus_precision=st_precision, top_k=20, ranges=ranges, rescore_multiplier=5
    )
    if precision == "int8":
        docs = dequantize_int8(quantize_int8(d, ranges), ranges)
    else:
        docs = np.unpackbits(quantize_binary(d), axis=1)[:, :64].astype(np.float64)
    for r, row in enumerate(hits):
        for hit in row:
            assert q[r].astype(np.float64) @ docs[hit["corpus_id"]] == pytest.approx(hit["score"], rel=1e-12)
    # and ours, on our own candidates, are the same formula
    index, scores = compressed_search(q, d, similarity="dot", top_k=20, precision=precision, rescore_multiplier=5)
    assert np.allclose(scores, np.einsum("ij,ikj->ik", q.astype(np.float64), docs[index]), rtol=0, atol=1e-12)


def test_top_k_rows_breaks_ties_by_index() -> None:
    scores = np.array([[2.0, 5.0, 5.0, 5.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    index, values = top_k_rows(scores, 3)
    assert index.tolist() == [[1, 2, 3], [0, 1, 2]] and values[0].tolist() == [5.0, 5.0, 5.0]


def test_bytes_per_vector() -> None:
    assert [bytes_per_vector(61, p) for p in ("fp32", "int8", "binary")] == [244, 61, 8]
    with pytest.raises(ConfigError, match="precision 'int4'"):
        bytes_per_vector(8, "int4")
