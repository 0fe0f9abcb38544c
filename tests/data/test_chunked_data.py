"""Retrieval data chunked into passages: nothing lost, metadata kept, relevance by context recomputed per passage
(checked against the fastbook study's own rule), and a search depth that keeps the top documents exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from embedscope.data.chunked import NO_PASSAGE, ChunkedData, chunk_retrieval_data, context_qrels
from embedscope.data.documents import chunk_documents
from embedscope.data.qa import load_qa_folder
from embedscope.retrieval.passages import best_passage_per_document
from embedscope.settings.run import ChunkingSettings
from embedscope.studies.fastbook.corpus import relevant_passages
from embedscope.studies.fastbook.data import load_benchmark
from embedscope.types import Corpus, Queries, RankedRun, RetrievalData
from tests.support.qa import write_qa_folder


def test_every_paragraph_reaches_a_passage_with_its_documents_metadata():
    texts = ("One a.\n\nTwo b.\n\nThree c.", "Four d.", "Five e.\n\nSix f.")
    corpus = Corpus(("x", "y", "z"), texts, {"lang": ("en", "de", "fr")})
    data = RetrievalData(corpus, Queries(("q",), ("a",)), {"q": {"y": 1}})
    chunked = chunk_retrieval_data(data, ChunkingSettings(method="paragraphs").options())
    assert chunked.data.corpus.ids == ("x#0", "x#1", "x#2", "y#0", "z#0", "z#1")
    assert chunked.parents == ("x", "x", "x", "y", "z", "z")
    assert chunked.data.corpus.metadata["lang"] == ("en", "en", "en", "de", "fr", "fr")
    for doc, text in zip(corpus.ids, texts):
        parts = [t for t, p in zip(chunked.data.corpus.texts, chunked.parents) if p == doc]
        assert "\n\n".join(parts) == text
    assert chunked.by_document and chunked.data.qrels == {"q": {"y": 1}}
    assert chunked.most_passages == 3


def test_qa_relevance_is_recomputed_per_passage_as_the_fastbook_study_marks_it(tmp_path):
    folder = write_qa_folder(tmp_path / "qa")
    data = load_qa_folder(folder)
    benchmark = load_benchmark(folder / "questions.json")
    for options in (
        ChunkingSettings(method="paragraphs").options(),
        ChunkingSettings(method="paragraphs", paragraphs=3).options(),
    ):
        chunked = chunk_retrieval_data(data, options)
        passages = chunk_documents([folder / "documents"], options)
        assert chunked.data.corpus.ids == tuple(p.id for p in passages)  # the study's passage ids
        assert chunked.data.corpus.texts == tuple(p.text for p in passages)
        assert not chunked.by_document
        for question in benchmark.questions:
            expected = set(relevant_passages(question, passages)) or {NO_PASSAGE}
            assert set(chunked.data.qrels[question.qid]) == expected
    cut = chunk_retrieval_data(data, ChunkingSettings(method="paragraphs").options()).data.qrels
    assert any(set(v) == {NO_PASSAGE} for v in cut.values())  # a two-paragraph context cut by one-paragraph chunks


def test_a_question_no_text_answers_keeps_a_zero_judgment():
    corpus = Corpus(("a", "b"), ("cats purr", "dogs bark"))
    assert context_qrels({"q1": ("dogs",), "q2": ("fish",)}, corpus) == {"q1": {"b": 1}, "q2": {NO_PASSAGE: 0}}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=30),
    st.integers(1, 6),
    st.integers(0, 2**31),
)
def test_the_search_depth_keeps_the_top_documents_exact(parent_numbers, top_k, seed):
    parents = tuple(f"d{n}" for n in parent_numbers)
    ids = tuple(f"p{i}" for i in range(len(parents)))
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=len(ids)).astype(np.float64)  # ties on purpose
    order = np.argsort(-scores, kind="stable")
    chunked = ChunkedData(RetrievalData(Corpus(ids, ids), Queries((), ()), {}), parents, by_document=True)
    depth = chunked.search_depth(top_k)
    full = RankedRun(("q",), ids, order[None, :].astype(np.int64), scores[order][None, :])
    cut = RankedRun(("q",), ids, order[None, :depth].astype(np.int64), scores[order][None, :depth])
    parent_of = dict(zip(ids, parents))
    want = best_passage_per_document(full, parent_of, top_k).to_dict()
    got = best_passage_per_document(cut, parent_of, top_k).to_dict()
    assert got == want
