"""Learned-sparse search without a real model: the inverted index against brute force, the costs against their
formulas, the cache's sparse rows bit for bit, and the refusals of dense post-processing.

A sparse model is one whose backend record says ``vectors="sparse"``; here a toy record (``fake-sparse``) and a
keyword encoder that declares it stand in for a SPLADE model.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from scipy import sparse

from embedscope.errors import ConfigError, NonFiniteError
from embedscope.models.backends import Backend, register_backend, unregister_backend, vector_kind
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.models.sparse_rows import csr_from_pairs, pair_blob, pair_from_blob, row_pair
from embedscope.retrieval.base import SearchOptions
from embedscope.retrieval.dense import dense_search
from embedscope.retrieval.sparse import flops, index_bytes, inverted_index, sparse_search, sparse_top_k_search
from embedscope.settings import RunSettings
from embedscope.testing.fakes import KeywordEncoder
from embedscope.types import Corpus, Queries

WORDS = ["heart", "disease", "cause", "older", "adult", "cancer", "sport", "film", "music", "election"]


class SparseKeywords(KeywordEncoder):
    """Keyword counts (most of them zero), declared sparse through its backend's record."""

    backend = "fake-sparse"


@pytest.fixture(autouse=True)
def fake_sparse_backend() -> Iterator[None]:
    register_backend(Backend("fake-sparse", "a toy sparse model", ("nothing",), vectors="sparse"))
    yield
    unregister_backend("fake-sparse")


def _random_csr(rng: np.random.Generator, rows: int, dim: int, active: int) -> sparse.csr_matrix:
    dense = np.zeros((rows, dim), dtype=np.float32)
    for r in range(rows):
        where = rng.choice(dim, size=int(rng.integers(1, active + 1)), replace=False)
        dense[r, where] = rng.integers(1, 5, size=len(where)).astype(np.float32) / 4  # ties on purpose
    return sparse.csr_matrix(dense)


def _brute_force(q: sparse.csr_matrix, chunks: list[sparse.csr_matrix], top_k: int) -> np.ndarray:
    import torch

    from embedscope.retrieval.dense import top_k_search

    dense_chunks = [c.toarray() for c in chunks]
    index, scores = top_k_search(q.toarray(), dense_chunks, top_k=top_k, similarity="dot")
    return index, scores, torch


def test_the_inverted_index_ranks_as_dense_dot_product_search_ties_included() -> None:
    rng = np.random.default_rng(0)
    q = _random_csr(rng, 40, 300, 6)
    chunks = [_random_csr(rng, n, 300, 25) for n in (70, 1, 55)]
    sizes: list[int] = []
    index, scores = sparse_top_k_search(q, chunks, top_k=12, query_block=7, sizes=sizes)
    expected_index, expected_scores, _ = _brute_force(q, chunks, 12)
    np.testing.assert_array_equal(scores, expected_scores)
    np.testing.assert_array_equal(index, expected_index)
    assert sizes == [index_bytes(inverted_index(c)) for c in chunks]
    posting = inverted_index(chunks[0])
    assert posting.shape == (300, 70) and posting.nnz == chunks[0].nnz


def test_flops_is_the_expected_number_of_multiplications_per_pair() -> None:
    rng = np.random.default_rng(1)
    q = _random_csr(rng, 9, 50, 5)
    docs = _random_csr(rng, 30, 50, 12)
    overlaps = [
        len(set(q[i].indices) & set(docs[j].indices)) for i in range(q.shape[0]) for j in range(docs.shape[0])
    ]  # the multiplications each pair needs; their mean equals FLOPS as queries and documents are drawn apart
    p_q = (q.toarray() != 0).mean(axis=0)
    p_d = (docs.toarray() != 0).mean(axis=0)
    assert flops(q, [docs[:10], docs[10:]]) == pytest.approx(float(p_q @ p_d), rel=1e-12)
    assert flops(q, [docs]) == pytest.approx(float(np.mean(overlaps)), rel=1e-12)


def test_rows_are_stored_as_active_positions_and_come_back_bit_for_bit() -> None:
    row = np.array([0.0, -0.0, 2.5, 0.0, np.float32(1e-30)], dtype=np.float32)
    back = csr_from_pairs([pair_from_blob(pair_blob(row_pair(row)), 5)], 5)  # type: ignore[list-item]
    assert row_pair(row)[0].tolist() == [1, 2, 4]  # -0.0 is kept, so a dense row comes back with its bits
    assert back.toarray()[0].tobytes() == np.where(row == 0, np.float32(0), row).tobytes()
    assert pair_from_blob(b"\x01\x02\x03", 5) is None  # not a whole number of entries
    assert pair_from_blob(pair_blob((np.array([7], np.int32), np.array([1.0], np.float32))), 5) is None  # past dim
    assert pair_from_blob(pair_blob((np.array([3, 1], np.int32), np.ones(2, np.float32))), 5) is None  # unsorted


def _options(**given) -> SearchOptions:
    return RunSettings(**given).search_options(show_progress=False)


def _data() -> tuple[Queries, Corpus]:
    rng = np.random.default_rng(2)
    docs = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)))) for _ in range(90)]
    queries = [" ".join(rng.choice(WORDS, size=2)) for _ in range(25)]
    return (
        Queries(tuple(f"q{i}" for i in range(len(queries))), tuple(queries)),
        Corpus(tuple(f"d{i}" for i in range(len(docs))), tuple(docs)),
    )


def test_a_model_whose_record_says_sparse_is_searched_by_its_inverted_index_cold_and_warm(tmp_path) -> None:
    queries, corpus = _data()
    encoder = SparseKeywords(WORDS)
    assert vector_kind(encoder) == "sparse" and vector_kind(KeywordEncoder(WORDS)) == "dense"
    options = _options(top_k=10, corpus_chunk_size=32)
    timings: dict[str, float] = {}
    run = dense_search(encoder, queries, corpus, options, timings)
    expected = dense_search(KeywordEncoder(WORDS), queries, corpus, options)  # the same vectors, searched densely
    np.testing.assert_array_equal(run.doc_index, expected.doc_index)
    np.testing.assert_array_equal(run.scores, expected.scores)
    d = KeywordEncoder(WORDS).encode(list(corpus.texts), role="document")
    q = KeywordEncoder(WORDS).encode(list(queries.texts), role="query")
    assert timings["sparse_active_dims_document_mean"] == pytest.approx(float(np.mean((d != 0).sum(1))))
    assert timings["sparse_active_dims_query_p95"] == pytest.approx(float(np.percentile((q != 0).sum(1), 95)))
    assert timings["sparse_flops"] == pytest.approx(float((q != 0).mean(0) @ (d != 0).mean(0)))
    assert timings["sparse_index_bytes"] == sum(
        index_bytes(inverted_index(sparse.csr_matrix(d[s : s + 32]))) for s in range(0, 90, 32)
    )

    cache = EmbeddingCache(tmp_path)
    cold = CachedEncoder(SparseKeywords(WORDS), cache)
    cold_run = dense_search(cold, queries, corpus, options)
    warm = CachedEncoder(SparseKeywords(WORDS), EmbeddingCache(tmp_path))
    warm_run = dense_search(warm, queries, corpus, options)
    assert cold.stats.encoded == 115 and warm.stats.encoded == 0 and warm.stats.hits == 115
    for other in (cold_run, warm_run):
        np.testing.assert_array_equal(other.doc_index, run.doc_index)
        assert other.scores.tobytes() == run.scores.tobytes()
    assert warm.encode(list(corpus.texts), role="document").tobytes() == d.tobytes()  # the dense rows, bit for bit

    from embedscope.models.planned import LocalPlanned  # an engine: its batches streamed back, made sparse

    engine = LocalPlanned(SparseKeywords(WORDS))
    assert vector_kind(engine) == "sparse" and engine.encode_sparse(["heart disease"], role="query").nnz == 2
    engine_run = dense_search(engine, queries, corpus, options)
    np.testing.assert_array_equal(engine_run.doc_index, run.doc_index)
    assert engine_run.scores.tobytes() == run.scores.tobytes()


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ({"truncate_dim": 4}, "truncate_dim cannot apply to fake/keyword-encoder: a sparse model's dimensions"),
        ({"precision": "int8"}, "precision int8 cannot apply to fake/keyword-encoder: int8 and binary quantize"),
        ({"index": "hnsw:M=8"}, "index cannot apply to fake/keyword-encoder: approximate indexes search dense"),
    ],
)
def test_dense_post_processing_of_a_sparse_model_is_refused_saying_why(given: dict, refusal: str) -> None:
    queries, corpus = _data()
    with pytest.raises(ConfigError, match=refusal):
        sparse_search(SparseKeywords(WORDS), queries, corpus, _options(top_k=10, **given), {})


def test_a_sparse_vector_with_nan_is_refused_never_stored(tmp_path) -> None:
    class Broken(SparseKeywords):
        def _encode(self, texts, role, batch_size, show_progress):
            out = super()._encode(texts, role, batch_size, show_progress)
            out[-1, 0] = np.nan
            return out

    queries, corpus = _data()
    cached = CachedEncoder(Broken(WORDS), EmbeddingCache(tmp_path))
    with pytest.raises(NonFiniteError, match="NaN or infinity"):
        dense_search(cached, queries, corpus, _options(top_k=10))
    assert EmbeddingCache(tmp_path).count(cached.fingerprint) == 0


def test_a_run_of_a_sparse_model_records_and_prints_its_costs(tmp_path) -> None:
    import embedscope
    from embedscope.testing.tiny import tiny_retrieval_task

    report = embedscope.evaluate(
        SparseKeywords(["cat", "dog", "fish"]),
        [tiny_retrieval_task()],
        output_folder=str(tmp_path),
        cache=False,
        show_progress=False,
    )
    scores = report.outcomes[0].result.scores["test"][0]
    assert scores["sparse_active_dims_query_mean"] > 0 and scores["sparse_index_bytes"] > 0
    line = next(x for x in report.table().splitlines() if x.startswith("sparse vectors"))
    assert line.startswith("sparse vectors (TinyRetrieval test): ")
    assert f"FLOPS {scores['sparse_flops']:.2f} per query-document pair" in line


@pytest.mark.slow
def test_the_compiled_kernel_adds_the_same_products_in_the_same_order_as_scipy(monkeypatch) -> None:
    """Large blocks are scored by a numba loop into a dense array: every score bit-identical to scipy's product
    (float32 weights of many magnitudes, so a different order of additions would show)."""
    from embedscope.retrieval import sparse as module

    rng = np.random.default_rng(3)
    q = _random_csr(rng, 50, 400, 30)
    docs = _random_csr(rng, 300, 400, 60)
    q.data = (rng.lognormal(0, 3, q.nnz)).astype(np.float32)
    docs.data = (rng.lognormal(0, 3, docs.nnz)).astype(np.float32)
    index = inverted_index(docs)
    expected = np.asarray((q @ index).toarray(), dtype=np.float32)
    monkeypatch.setattr(module, "COMPILED_WORK", 0)
    assert module._compiled_accumulate() is not None
    assert module.block_scores(q, 0, 50, index).tobytes() == expected.tobytes()
    assert module.block_scores(q, 10, 20, index).tobytes() == expected[10:20].tobytes()


def test_a_proxy_encoded_within_the_full_sets_gets_the_full_runs_vectors(tmp_path) -> None:
    """A screen's proxy (queries and documents encoded within the full sets) is searched on the very rows the full
    run encodes, cached under the full calls' keys, so the full run that follows encodes nothing."""
    from embedscope.types import EncodedWithin

    queries, corpus = _data()
    q_rows, d_rows = (3, 7, 11), tuple(range(0, 90, 4))
    proxy_queries = Queries(
        tuple(queries.ids[i] for i in q_rows),
        tuple(queries.texts[i] for i in q_rows),
        within=EncodedWithin(queries.texts, q_rows),
    )
    proxy_corpus = Corpus(
        tuple(corpus.ids[i] for i in d_rows),
        tuple(corpus.texts[i] for i in d_rows),
        within=EncodedWithin(corpus.texts, d_rows),
    )
    options = _options(top_k=5, corpus_chunk_size=32)
    cached = CachedEncoder(SparseKeywords(WORDS), EmbeddingCache(tmp_path))
    timings: dict[str, float] = {}
    proxy = dense_search(cached, proxy_queries, proxy_corpus, options, timings)
    plain = dense_search(KeywordEncoder(WORDS), proxy_queries, proxy_corpus, options)  # the same rows, dense search
    np.testing.assert_array_equal(proxy.doc_index, plain.doc_index)
    assert proxy.scores.tobytes() == plain.scores.tobytes() and timings["sparse_flops"] > 0
    encoded = cached.stats.encoded
    dense_search(cached, queries, corpus, options)
    assert cached.stats.encoded == encoded  # the full run is served every row


def test_the_per_query_latency_of_a_sparse_model_searches_its_inverted_index(tmp_path) -> None:
    """``latency_sample`` times a sparse model's query against one inverted index built once; each sampled query's
    top documents are the batch search's."""
    from embedscope.retrieval.latency import _PreparedSparse, measure_latency, sample_positions

    queries, corpus = _data()
    options = _options(top_k=5, corpus_chunk_size=32, latency_sample=6)
    encoder = SparseKeywords(WORDS)
    batch = dense_search(encoder, queries, corpus, options)
    prepared = _PreparedSparse(encoder, corpus, options)
    docs = KeywordEncoder(WORDS).encode(list(corpus.texts), role="document")
    for i in sample_positions(len(queries), 6):
        query = encoder.encode([queries.texts[i]], role="query")
        found = prepared.search(query)[0]
        scores = sorted((docs[found] @ query[0]).tolist(), reverse=True)
        assert scores == batch.scores[i].tolist()  # the batch search's top scores (ties may pick other documents)
    latency = measure_latency(encoder, queries, corpus, options)
    assert latency is not None and latency["queries"] == 6 and latency["p95_ms"] >= latency["p50_ms"] > 0
