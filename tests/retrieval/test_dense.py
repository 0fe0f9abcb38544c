"""Dense exact search against a direct computation, MTEB's torch scores and faiss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedscope.retrieval.dense import similarity_matrix, top_k_search


def _data(n_q=37, n_d=503, dim=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_q, dim)).astype(np.float32), rng.standard_normal((n_d, dim)).astype(np.float32)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("chunk", [1000, 100, 7])
@pytest.mark.parametrize("query_block", [4096, 5])
def test_chunked_search_equals_full_sort(similarity, chunk, query_block):
    q, d = _data()
    full = similarity_matrix(torch.from_numpy(q), torch.from_numpy(d), similarity).numpy()
    idx, scores = top_k_search(
        q, [d[i : i + chunk] for i in range(0, len(d), chunk)], top_k=50, similarity=similarity, query_block=query_block
    )
    assert idx.shape == (37, 50)
    expected = np.argsort(-full, axis=1, kind="stable")[:, :50]
    np.testing.assert_array_equal(idx, expected)
    # BLAS may round differently for other matrix shapes: exact only when nothing is split
    exact = chunk >= len(d) and query_block >= len(q)
    ref = np.take_along_axis(full, expected, 1).astype(np.float64)
    if exact:
        np.testing.assert_array_equal(scores, ref)
    else:
        np.testing.assert_allclose(scores, ref, rtol=1e-6)


def test_scores_are_bit_identical_to_mteb_cos_sim():
    from mteb.similarity_functions import cos_sim

    q, d = _data(n_q=10, n_d=64)
    _, scores = top_k_search(q, [d], top_k=64, similarity="cosine")
    ref = cos_sim(q, d).numpy()
    assert set(scores.ravel().tolist()) == set(ref.ravel().astype(np.float64).tolist())


def test_top_k_larger_than_corpus_and_empty_inputs():
    q, d = _data(n_q=3, n_d=5)
    idx, scores = top_k_search(q, [d[:2], d[2:]], top_k=1000)
    assert idx.shape == (3, 5) and sorted(idx[0].tolist()) == [0, 1, 2, 3, 4]
    idx, _ = top_k_search(q, [], top_k=10)
    assert idx.shape == (3, 0)
    idx, _ = top_k_search(q[:0], [d], top_k=10)
    assert idx.shape == (0, 0)


def test_agrees_with_faiss_inner_product():
    faiss = pytest.importorskip("faiss")
    q, d = _data(n_q=50, n_d=2000, dim=32, seed=3)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = d / np.linalg.norm(d, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(32)
    index.add(dn)
    f_scores, f_idx = index.search(qn, 10)
    idx, scores = top_k_search(q, [d], top_k=10, similarity="cosine")
    np.testing.assert_array_equal(idx, f_idx)
    np.testing.assert_allclose(scores, f_scores, atol=1e-6)


def test_unknown_similarity():
    q, d = _data(n_q=2, n_d=3)
    with pytest.raises(ValueError, match="Unknown similarity"):
        top_k_search(q, [d], similarity="manhattan")


def test_a_corpus_encoded_within_another_gets_the_full_calls_vectors_chunk_by_chunk():
    """A proxy's documents (``Corpus.within``) are scored with the vectors the full corpus' own calls give them, per
    ``corpus_chunk_size`` chunk, although a vector depends on its batch."""
    from embedscope.retrieval.dense import dense_search
    from embedscope.settings import RunSettings
    from embedscope.testing.fakes import PaddedHashEncoder
    from embedscope.types import Corpus, EncodedWithin, Queries

    rng = np.random.default_rng(0)
    full = tuple(" ".join(rng.choice(list("abcdefgh"), size=int(rng.integers(2, 30)))) for _ in range(100))
    rows = (3, 17, 39, 40, 41, 77, 98)  # in three chunks of 40
    corpus = Corpus(tuple(f"d{r}" for r in rows), tuple(full[r] for r in rows), within=EncodedWithin(full, rows))
    queries = Queries(("q0", "q1"), ("a b c", "h g"))
    encoder = PaddedHashEncoder(dim=8)
    options = RunSettings(top_k=7, corpus_chunk_size=40, batch_size=8).search_options(show_progress=False)
    run = dense_search(encoder, queries, corpus, options)
    chunks = [encoder.encode(list(full[s : s + 40]), role="document", batch_size=8) for s in range(0, 100, 40)]
    vectors = np.stack([chunks[r // 40][r % 40] for r in rows])
    alone = encoder.encode(list(corpus.texts), role="document", batch_size=8)
    assert not np.array_equal(vectors, alone)  # the full calls' batches give other bits than the proxy's own call
    q = encoder.encode(list(queries.texts), role="query", batch_size=8)
    expected, _ = top_k_search(q, [vectors], top_k=7, similarity="cosine")
    got = np.asarray(run.scores)
    reference = np.take_along_axis(
        torch.nn.functional.normalize(torch.from_numpy(q), dim=1).numpy()
        @ torch.nn.functional.normalize(torch.from_numpy(vectors), dim=1).numpy().T,
        np.asarray(run.doc_index),
        axis=1,
    )
    assert np.asarray(run.doc_index).tolist() == np.asarray(expected).tolist()
    np.testing.assert_allclose(got, reference, rtol=1e-6)


def test_queries_encoded_within_a_full_set_get_the_full_calls_vectors():
    """A proxy's queries (``Queries.within``) are scored with the vectors the full query call gives them."""
    from embedscope.retrieval.dense import dense_search
    from embedscope.settings import RunSettings
    from embedscope.testing.fakes import PaddedHashEncoder
    from embedscope.types import Corpus, EncodedWithin, Queries

    rng = np.random.default_rng(1)
    full = tuple(" ".join(rng.choice(list("abcdefgh"), size=int(rng.integers(1, 12)))) for _ in range(50))
    rows = (2, 9, 30, 31, 48)
    queries = Queries(tuple(f"q{r}" for r in rows), tuple(full[r] for r in rows), within=EncodedWithin(full, rows))
    corpus = Corpus(("d0", "d1", "d2"), ("a b c d", "e f g", "h a"))
    encoder = PaddedHashEncoder(dim=8)
    options = RunSettings(top_k=3, batch_size=8).search_options(show_progress=False)
    run = dense_search(encoder, queries, corpus, options)
    q = encoder.encode(list(full), role="query", batch_size=8)[list(rows)]
    alone = encoder.encode(list(queries.texts), role="query", batch_size=8)
    assert not np.array_equal(q, alone)  # the full call's batches give other bits than the proxy's own call
    d = encoder.encode(list(corpus.texts), role="document", batch_size=8)
    expected_index, expected_scores = top_k_search(q, [d], top_k=3, similarity="cosine")
    assert np.asarray(run.doc_index).tolist() == np.asarray(expected_index).tolist()
    np.testing.assert_array_equal(np.asarray(run.scores), np.asarray(expected_scores))
