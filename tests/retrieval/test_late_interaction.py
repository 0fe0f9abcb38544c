"""MaxSim kernels against a direct implementation; ColBERT checkpoint loading (a tiny PyLate-layout
checkpoint built here, checked against sentence-transformers' own MaxSim); MiniLM token embeddings
as the ColBERT stand-in on a meaningful example."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.retrieval.late_interaction import (
    LateInteraction,
    MultiVectorTokens,
    SentenceTransformerTokens,
    load_token_encoder,
    maxsim_candidates,
    maxsim_top_k,
)
from embedscope.settings import RunSettings
from embedscope.testing.fakes import WordTokenEncoder
from embedscope.testing.tiny import tiny_retrieval_data
from embedscope.types import Corpus, Queries
from support.tiny_models import build_tiny_pylate_colbert


def _direct_maxsim(q: np.ndarray, d: np.ndarray) -> float:
    return float(sum(max(float(np.dot(qi, dj)) for dj in d) for qi in q))


def _random_tokens(rng, n, lengths=(1, 30), dim=16):
    out = []
    for _ in range(n):
        m = rng.standard_normal((int(rng.integers(*lengths)), dim)).astype(np.float32)
        out.append(m / np.linalg.norm(m, axis=1, keepdims=True))
    return out


@pytest.mark.parametrize("budget_mb", [256.0, 0.01])  # 0.01 MB forces one-doc groups and one-query blocks
def test_exhaustive_maxsim_matches_direct(budget_mb):
    rng = np.random.default_rng(0)
    queries, docs = _random_tokens(rng, 7), _random_tokens(rng, 23)
    chunks = [docs[:10], docs[10:11], docs[11:]]
    index, scores = maxsim_top_k(queries, chunks, top_k=5, budget_mb=budget_mb)
    for i, q in enumerate(queries):
        direct = np.array([_direct_maxsim(q, d) for d in docs])
        np.testing.assert_allclose(scores[i], np.sort(direct)[::-1][:5], rtol=1e-5)
        np.testing.assert_allclose(direct[index[i]], scores[i], rtol=1e-5)


def test_candidate_maxsim_matches_direct_with_repeats_and_empty_slots():
    rng = np.random.default_rng(1)
    queries, docs = _random_tokens(rng, 9), _random_tokens(rng, 12)
    cand = rng.integers(0, 12, size=(9, 6))
    cand[2, 3:] = -1
    cand[5] = -1
    scores = maxsim_candidates(queries, docs, cand)
    for i, j in np.ndindex(cand.shape):
        if cand[i, j] < 0:
            assert scores[i, j] == -np.inf
        else:
            assert scores[i, j] == pytest.approx(_direct_maxsim(queries[i], docs[cand[i, j]]), rel=1e-5)


def test_retrieve_and_rerank_agree_with_word_counting():
    data = tiny_retrieval_data()
    corpus = Corpus(data.corpus.ids + ("d5",), data.corpus.texts + ("cat and dog and fish",))
    queries = Queries(("q1", "q2"), ("cat dog", "fish market"))
    model = LateInteraction(WordTokenEncoder(dim=4096), doc_chunk_size=2, max_documents=2)
    run = model.retrieve(queries, corpus, RunSettings(top_k=3).search_options(show_progress=False))
    # MaxSim with one-hot words = number of query words found in the document
    assert corpus.ids[run.doc_index[0, 0]] == "d5" and run.scores[0, 0] == pytest.approx(2.0)
    assert corpus.ids[run.doc_index[1, 0]] == "d3" and run.scores[1, 0] == pytest.approx(2.0)
    rescored = model.score_candidates(queries, corpus, run, RunSettings(top_k=3).search_options(show_progress=False))
    np.testing.assert_allclose(rescored, run.scores, rtol=1e-6)


@pytest.fixture(scope="module")
def tiny_colbert(tmp_path_factory):
    return build_tiny_pylate_colbert(tmp_path_factory.mktemp("colbert"), dim=16, query_length=12)


@pytest.mark.slow
def test_pylate_checkpoint_loads_with_markers_expansion_projection_and_skiplist(tiny_colbert):
    encoder = load_token_encoder(str(tiny_colbert))
    assert isinstance(encoder, MultiVectorTokens)
    q = encoder.encode_tokens(["what is a cat?"], role="query")[0]
    d = encoder.encode_tokens(["The cat, sat."], role="document")[0]
    assert q.shape == (12, 16)  # expanded to query_length with [MASK]s; projected to 16 dims
    # [CLS] [unused1] the cat , sat . [SEP] -> punctuation skipped -> 6 tokens
    assert d.shape == (6, 16)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-5)
    prepared = encoder.model.preprocess(["what is a cat?"], prompt=encoder.model.prompts["query"], task="query")
    assert prepared["input_ids"][0, 1].item() == 1  # [unused0], the query marker


@pytest.mark.slow
def test_maxsim_on_checkpoint_equals_sentence_transformers_similarity(tiny_colbert):
    encoder = load_token_encoder(str(tiny_colbert))
    queries = Queries(("a", "b"), ("what is a cat?", "dogs barking"))
    corpus = Corpus(("x", "y", "z"), ("The cat sat on the mat.", "A dog barked!", "Rain tomorrow."))
    model = LateInteraction(encoder)
    run = model.retrieve(queries, corpus, RunSettings(top_k=3).search_options(show_progress=False))
    reference = encoder.model.similarity(
        encoder.model.encode_query(list(queries.texts)), encoder.model.encode_document(list(corpus.texts))
    ).numpy()
    for i in range(2):
        np.testing.assert_allclose(run.scores[i], reference[i][run.doc_index[i]], rtol=1e-5)
        assert run.doc_index[i].tolist() == np.argsort(-reference[i], kind="stable").tolist()


@pytest.mark.slow
def test_plain_model_folder_gives_token_outputs(tmp_path):
    from embedscope.models.specs import alias_path

    assert isinstance(load_token_encoder(str(alias_path("minilm"))), SentenceTransformerTokens)


@pytest.mark.slow
def test_minilm_stand_in_ranks_the_relevant_document_first():
    encoder = load_token_encoder("minilm")
    corpus = Corpus(
        ("bank", "river", "python", "cooking", "football"),
        (
            "The central bank raised interest rates to fight inflation.",
            "The river overflowed its banks after days of heavy rain.",
            "Python is a programming language used for data science and web development.",
            "Simmer the tomato sauce for twenty minutes before adding fresh basil.",
            "The striker scored twice as the home team won the league title.",
        ),
    )
    queries = Queries(
        ("q1", "q2", "q3", "q4", "q5"),
        (
            "Why did borrowing costs go up?",
            "flooding after a storm",
            "which language do data scientists code in",
            "how long to cook pasta sauce",
            "who won the championship match",
        ),
    )
    run = LateInteraction(encoder).retrieve(queries, corpus, RunSettings(top_k=5).search_options(show_progress=False))
    assert [corpus.ids[i] for i in run.doc_index[:, 0]] == ["bank", "river", "python", "cooking", "football"]
    assert len(encoder.encode_tokens(["two words"], role="query")[0]) == 4  # [CLS] two words [SEP]
