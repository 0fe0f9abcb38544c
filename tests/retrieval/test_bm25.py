"""BM25 (bm25s) against independent references on the same tokens: rank_bm25 and the formulas
of Kamphuis et al. (2020) written out here."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import rank_bm25

from embedscope.data.builtin import bbc_news_retrieval
from embedscope.errors import UnknownNameError
from embedscope.retrieval.bm25 import BM25Retriever
from embedscope.settings import RunSettings
from embedscope.types import Corpus, Queries


@pytest.fixture(scope="module")
def bbc():
    data = bbc_news_retrieval(limit=300)
    queries = data.queries.select(range(0, 300, 10))  # 30 real queries (article titles)
    return data.corpus, queries


def _tokens(retriever: BM25Retriever, corpus: Corpus, queries: Queries):
    tokenizer = retriever.tokenizer()
    docs = tokenizer.tokenize(list(corpus.texts), return_as="string", show_progress=False)
    qs = tokenizer.tokenize(list(queries.texts), update_vocab=False, return_as="string", show_progress=False)
    return docs, qs


def _term_score(
    method: str, tf: int, df: int, n_docs: int, length_ratio: float, k1: float, b: float, delta: float
) -> float:
    """One query term's contribution, as Kamphuis et al. (2020) write the variants.

    BM25L counts every query term of the vocabulary, an absent one with c = 0, as bm25s does
    (rank_bm25's BM25L multiplies by tf once more, so it is not used as the reference for it).
    """
    norm = 1 - b + b * length_ratio
    if method == "bm25l":
        c = tf / norm
        return math.log((n_docs + 1) / (df + 0.5)) * (k1 + 1) * (c + delta) / (k1 + c + delta)
    if tf == 0:
        return 0.0
    if method == "lucene":
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * norm)
    return math.log(n_docs / df) * tf * (k1 + 1) / (tf + k1 * norm)  # atire


def _formula_scores(
    method: str, docs: list[list[str]], query: list[str], k1: float, b: float, delta: float
) -> np.ndarray:
    avg = sum(len(d) for d in docs) / len(docs)
    df = Counter(t for d in docs for t in set(d))
    out = np.zeros(len(docs))
    for i, d in enumerate(docs):
        tf = Counter(d)
        out[i] = sum(_term_score(method, tf[t], df[t], len(docs), len(d) / avg, k1, b, delta) for t in query if df[t])
    return out


def _reference(method: str, docs, query, k1, b, delta) -> np.ndarray:
    if method in ("lucene", "atire", "bm25l"):
        return _formula_scores(method, docs, query, k1, b, delta)
    if method == "robertson":  # rank_bm25 with idf floored at 0 (bm25s' convention); bm25s drops the (k1 + 1)
        return rank_bm25.BM25Okapi(docs, k1=k1, b=b, epsilon=0.0).get_scores(query) / (k1 + 1)
    return rank_bm25.BM25Plus(docs, k1=k1, b=b, delta=delta).get_scores(query)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("stemmer,stopwords", [("english", "en"), ("none", "none")])
def test_scores_and_rankings_match_reference(bbc, method, stemmer, stopwords):
    corpus, queries = bbc
    k1, b, delta = 1.2, 0.6, 0.7
    retriever = BM25Retriever(method=method, k1=k1, b=b, delta=delta, stemmer=stemmer, stopwords=stopwords)
    run = retriever.retrieve(queries, corpus, RunSettings(top_k=20).search_options(show_progress=False))
    docs, qs = _tokens(retriever, corpus, queries)
    for i, query in enumerate(qs):
        expected = _reference(method, docs, query, k1, b, delta)
        got_idx = run.doc_index[i][run.doc_index[i] >= 0]
        got = run.scores[i][: len(got_idx)]
        # every returned score is the reference score of that document (float32 precision) ...
        np.testing.assert_allclose(got, expected[got_idx], rtol=2e-5, atol=1e-5)
        # ... and the returned scores are the reference's best ones among documents holding a query term
        # (with lucene/robertson/atire a term of idf 0, such as an unfiltered "the", is no evidence)
        matching = np.array([bool(set(query) & set(d)) for d in docs])
        if method not in ("bm25l", "bm25+"):
            matching &= expected > 0
        assert matching[got_idx].all()
        top = np.sort(expected[matching])[::-1][: len(got_idx)]
        assert len(got_idx) == min(20, int(matching.sum()))
        np.testing.assert_allclose(got, top, rtol=2e-5, atol=1e-5)
        assert np.all(np.diff(got) <= 1e-6)


def test_documents_without_a_query_term_are_not_returned():
    corpus = Corpus(("d1", "d2", "d3"), ("red apples", "green pears", "apple pie"))
    run = BM25Retriever().retrieve(
        Queries(("q", "none"), ("apples", "zebra")), corpus, RunSettings(top_k=10).search_options(show_progress=False)
    )
    assert [corpus.ids[i] for i in run.doc_index[0] if i >= 0] in (["d1", "d3"], ["d3", "d1"])
    assert (run.doc_index[1] == -1).all()  # nothing matched: an empty row, still present for scoring


@pytest.mark.slow
def test_numba_and_numpy_backends_agree(bbc):
    corpus, queries = bbc
    a = BM25Retriever(backend="numba").retrieve(
        queries, corpus, RunSettings(top_k=10).search_options(show_progress=False)
    )
    b = BM25Retriever(backend="numpy").retrieve(
        queries, corpus, RunSettings(top_k=10).search_options(show_progress=False)
    )
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)


def test_options_change_the_fingerprint_and_are_validated():
    assert BM25Retriever(k1=1.2).fingerprint != BM25Retriever(k1=1.5).fingerprint
    assert BM25Retriever(n_threads=1).fingerprint == BM25Retriever(n_threads=2).fingerprint
    with pytest.raises(UnknownNameError, match="bm25l"):
        BM25Retriever(method="bm25-l")
    with pytest.raises(UnknownNameError, match="english"):
        BM25Retriever(stemmer="englsh").tokenizer()
