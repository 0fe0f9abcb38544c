"""SQLite FTS5 retrieval: safe query escaping, keyword queries, and bm25 ranks checked against
FTS5's documented bm25 formula computed here."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.metrics import evaluate_ranking
from embedscope.retrieval.fts5 import FTS5Retriever, keyword_terms, match_expression
from embedscope.settings import RunSettings
from embedscope.types import Corpus, Queries

TEXTS = {
    "d1": "The cat sat on the mat. The cat was happy.",
    "d2": "Dogs chase cats; a dog barked at the postman.",
    "d3": "Running fish swim in the sea, fish markets sell fish.",
    "d4": "Weather report: rain tomorrow, sun on Sunday.",
    "d5": "A happy dog and a happy cat share a mat near the sea.",
}
CORPUS = Corpus(tuple(TEXTS), tuple(TEXTS.values()))


def _fts5_bm25(query_terms: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """FTS5's bm25(): sum of idf * tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)); idf floored at 1e-6."""
    docs = [re.findall(r"\w+", t.lower()) for t in CORPUS.texts]
    avg = sum(map(len, docs)) / len(docs)
    df = Counter(w for d in docs for w in set(d))
    out = np.zeros(len(docs))
    for i, d in enumerate(docs):
        tf = Counter(d)
        for t in query_terms:
            if tf[t]:
                idf = max(math.log((len(docs) - df[t] + 0.5) / (df[t] + 0.5)), 1e-6)
                out[i] += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
    return out


def test_scores_are_fts5_bm25_and_any_term_matches():
    queries = Queries(("q1", "q2"), ("happy cat", "fish SEA postman"))
    run = FTS5Retriever().retrieve(queries, CORPUS, RunSettings(top_k=10).search_options(show_progress=False))
    for i, text in enumerate(queries.texts):
        expected = _fts5_bm25(text.lower().split())
        idx = run.doc_index[i][run.doc_index[i] >= 0]
        assert sorted(idx.tolist()) == np.flatnonzero(expected > 0).tolist()  # OR: any term matches
        np.testing.assert_allclose(run.scores[i][: len(idx)], expected[idx], rtol=1e-9)
        assert np.all(np.diff(run.scores[i][: len(idx)]) <= 0)


def test_match_all_requires_every_term_and_top_k_cuts():
    queries = Queries(("q",), ("happy cat",))
    run = FTS5Retriever(match="all").retrieve(
        queries, CORPUS, RunSettings(top_k=10).search_options(show_progress=False)
    )
    assert sorted(CORPUS.ids[i] for i in run.doc_index[0] if i >= 0) == ["d1", "d5"]
    run = FTS5Retriever().retrieve(queries, CORPUS, RunSettings(top_k=1).search_options(show_progress=False))
    assert run.depth == 1


@pytest.mark.parametrize("text", ['cat" OR "dog', "NEAR(cat dog)", "cat*", "-cat", "cat:mat", "^cat", "AND", "(", '"'])
def test_user_text_with_fts5_syntax_is_inert(text):
    run = FTS5Retriever().retrieve(
        Queries(("q",), (text,)), CORPUS, RunSettings(top_k=10).search_options(show_progress=False)
    )
    words = set(re.findall(r"\w+", text.lower()))
    found = {CORPUS.ids[i] for i in run.doc_index[0] if i >= 0}
    expected = {d for d, t in TEXTS.items() if words & set(re.findall(r"\w+", t.lower()))}
    assert found == expected


def test_keyword_queries_replace_the_text_and_empty_queries_score_zero():
    queries = Queries(("q1", "q2"), ("this text is ignored", "zebra"))
    retriever = FTS5Retriever(keywords={"q1": '"postman, weather"'})
    run = retriever.retrieve(queries, CORPUS, RunSettings(top_k=10).search_options(show_progress=False))
    assert sorted(CORPUS.ids[i] for i in run.doc_index[0] if i >= 0) == ["d2", "d4"]
    assert (run.doc_index[1] == -1).all()
    scores = evaluate_ranking({"q1": {"d4": 1}, "q2": {"d1": 1}}, run, (10,))
    assert scores.per_query["ndcg_at_10"].tolist() == [1.0, 0.0]  # the query that found nothing counts as a miss
    assert retriever.expression("q1", "") == '"postman" OR "weather"'


def test_porter_tokenizer_stems():
    run = FTS5Retriever(tokenize="porter unicode61").retrieve(
        Queries(("q",), ("run",)), CORPUS, RunSettings().search_options(show_progress=False)
    )
    assert [CORPUS.ids[i] for i in run.doc_index[0] if i >= 0] == ["d3"]


def test_helpers_and_validation():
    assert keyword_terms(["deep,", '"learning"']) == ["deep", "learning"]
    assert match_expression(["a b"], "AND") == '"a" AND "b"'
    with pytest.raises(UnknownNameError):
        FTS5Retriever(match="some")
    with pytest.raises(ConfigError, match="tokenize"):
        FTS5Retriever(tokenize="unicode61'); DROP")
    with pytest.raises(ConfigError, match="cannot build"):
        FTS5Retriever(tokenize="nosuchtokenizer").retrieve(
            Queries(("q",), ("x",)), CORPUS, RunSettings().search_options(show_progress=False)
        )
