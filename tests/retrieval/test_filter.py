"""Scope is a filter, never a smaller corpus (issue 21): ``SearchOptions.filter_field`` searches one index of
all passages. FTS5 equals a direct SQLite single-table query (the fastbook study's ``fts5(chapter, text)``
with ``AND chapter = ?``), BM25 equals bm25s' scores over the whole corpus with the other documents removed
after scoring, and dense / late-interaction search equal search over the matching documents alone."""

from __future__ import annotations

import json
import random
import sqlite3

import numpy as np
import pytest

from embedscope.data.detect import load_retrieval
from embedscope.data.documents import chunk_documents, passages_corpus
from embedscope.errors import ConfigError, DataFormatError
from embedscope.retrieval.bm25 import BM25Retriever
from embedscope.retrieval.dense import DenseRetriever
from embedscope.retrieval.fts5 import FTS5Retriever, text_expression
from embedscope.retrieval.late_interaction import LateInteraction
from embedscope.settings import RunSettings
from embedscope.settings.run import ChunkingSettings
from embedscope.testing.fakes import HashEncoder, WordTokenEncoder
from embedscope.types import Corpus, Queries

COMMON = ["model", "data", "training", "layer", "loss", "python", "tensor", "batch"]


def _notebooks(tmp_path):
    """Three chapters with different vocabularies: a term common in one chapter is rare in the book."""
    rng = random.Random(21)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    own = {1: ["cat", "dog", "pet", "breed"], 2: ["gradient", "descent", "loss", "step"], 3: ["token", "text", "vocab"]}
    for chapter, words in own.items():
        cells = []
        for _ in range(12):
            vocabulary = words * 3 + COMMON + own[chapter % 3 + 1]
            cells.append({"cell_type": "markdown", "source": " ".join(rng.choices(vocabulary, k=rng.randint(5, 30)))})
            cells.append({"cell_type": "markdown", "source": "\n"})
        (folder / f"{chapter:02d}_chapter.ipynb").write_text(json.dumps({"cells": cells}))
    passages = chunk_documents([folder], ChunkingSettings(method="paragraphs", stop_at=None).options())
    corpus = passages_corpus(passages)
    texts = [" ".join(rng.choices(COMMON + own[c] + own[c % 3 + 1], k=4)) for c in (1, 2, 3) for _ in range(6)]
    chapters = tuple(c for c in (1, 2, 3) for _ in range(6))
    queries = Queries(tuple(f"q{i}" for i in range(len(texts))), tuple(texts), {"chapter": chapters})
    return queries, corpus


def _ranked(run, corpus, row):
    return [(corpus.ids[i], float(s)) for i, s in zip(run.doc_index[row], run.scores[row]) if i >= 0]


def test_fts5_filtered_equals_a_direct_sqlite_single_table_query(tmp_path):
    queries, corpus = _notebooks(tmp_path)
    run = FTS5Retriever().retrieve(
        queries, corpus, RunSettings(top_k=10, filter_field="chapter").search_options(show_progress=False)
    )
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE book USING fts5(chapter, text)")
    con.executemany(
        "INSERT INTO book(rowid, chapter, text) VALUES (?, ?, ?)",
        [(i, str(c), t) for i, (c, t) in enumerate(zip(corpus.metadata["chapter"], corpus.texts))],
    )
    compared = 0
    for row, (text, chapter) in enumerate(zip(queries.texts, queries.metadata["chapter"])):
        direct = con.execute(
            "SELECT rowid, rank FROM book WHERE book MATCH ? AND chapter = ? ORDER BY rank LIMIT 10",
            (text_expression(text), str(chapter)),
        ).fetchall()
        assert _ranked(run, corpus, row) == [(corpus.ids[i], -rank) for i, rank in direct]
        compared += len(direct)
    assert compared > 50


def test_one_filtered_index_differs_from_per_chapter_indexes(tmp_path):
    """The old ``--scope chapter``: one index per chapter, so each chapter's statistics alone."""
    queries, corpus = _notebooks(tmp_path)
    for retriever in (FTS5Retriever(), BM25Retriever(backend="numpy")):
        filtered = retriever.retrieve(
            queries, corpus, RunSettings(top_k=10, filter_field="chapter").search_options(show_progress=False)
        )
        differ = 0
        for chapter in (1, 2, 3):
            q_rows = [i for i, c in enumerate(queries.metadata["chapter"]) if c == chapter]
            d_rows = [i for i, c in enumerate(corpus.metadata["chapter"]) if c == chapter]
            sub_corpus = corpus.select(d_rows)
            alone = retriever.retrieve(
                queries.select(q_rows), sub_corpus, RunSettings(top_k=10).search_options(show_progress=False)
            )
            for r, q in enumerate(q_rows):
                got = _ranked(filtered, corpus, q)
                assert {d for d, _ in got} <= set(sub_corpus.ids)  # the filter keeps the chapter
                differ += got != _ranked(alone, sub_corpus, r)
        assert differ >= 3, retriever.name


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_bm25_filtered_equals_whole_corpus_scores_with_the_others_removed(tmp_path, method):
    import bm25s

    queries, corpus = _notebooks(tmp_path)
    retriever = BM25Retriever(method=method, backend="numpy")
    run = retriever.retrieve(
        queries, corpus, RunSettings(top_k=len(corpus), filter_field="chapter").search_options(show_progress=False)
    )
    tokenizer = retriever.tokenizer()
    model = bm25s.BM25(method=method, k1=retriever.k1, b=retriever.b, delta=retriever.delta)
    model.index(tokenizer.tokenize(list(corpus.texts), return_as="tuple", show_progress=False), show_progress=False)
    doc_chapters = np.array(corpus.metadata["chapter"])
    for row, (text, chapter) in enumerate(zip(queries.texts, queries.metadata["chapter"])):
        ids = tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0]
        scores = model.get_scores(ids).astype(np.float32)  # every document of the book
        vocabulary = set(ids)
        holds = np.array(
            [
                bool(
                    vocabulary
                    & set(tokenizer.tokenize([t], update_vocab=False, return_as="ids", show_progress=False)[0])
                )
                for t in corpus.texts
            ]
        )
        keep = (doc_chapters == chapter) & holds  # after scoring: its chapter, and a query term
        expected = {corpus.ids[i]: float(scores[i]) for i in np.flatnonzero(keep)}
        assert dict(_ranked(run, corpus, row)) == expected


@pytest.mark.parametrize(
    "retriever", [DenseRetriever(HashEncoder()), LateInteraction(WordTokenEncoder())], ids=["dense", "colbert"]
)
def test_dense_and_late_interaction_filtered_equal_search_over_the_subset(tmp_path, retriever):
    queries, corpus = _notebooks(tmp_path)
    run = retriever.retrieve(
        queries, corpus, RunSettings(top_k=5, filter_field="chapter").search_options(show_progress=False)
    )
    for chapter in (1, 2, 3):
        q_rows = [i for i, c in enumerate(queries.metadata["chapter"]) if c == chapter]
        d_rows = [i for i, c in enumerate(corpus.metadata["chapter"]) if c == chapter]
        sub = corpus.select(d_rows)
        alone = retriever.retrieve(
            queries.select(q_rows), sub, RunSettings(top_k=5).search_options(show_progress=False)
        )
        for r, q in enumerate(q_rows):
            assert _ranked(run, corpus, q) == _ranked(alone, sub, r)


def test_dense_filtered_matches_numpy_cosine_over_the_subset():
    corpus = Corpus(("a", "b", "c", "d"), ("cats purr", "dogs bark", "cats and dogs", "fish swim"), {"g": (1, 2, 1, 2)})
    queries = Queries(("q1", "q2"), ("cats", "dogs"), {"g": ("1", "2")})  # values compare as text
    encoder = HashEncoder()
    run = DenseRetriever(encoder).retrieve(
        queries, corpus, RunSettings(top_k=10, filter_field="g").search_options(show_progress=False)
    )
    q = encoder.encode(list(queries.texts), role="query")
    d = encoder.encode(list(corpus.texts), role="document")
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    for row, rows in ((0, [0, 2]), (1, [1, 3])):
        sims = d[rows] @ q[row]
        order = np.argsort(-sims, kind="stable")
        got = _ranked(run, corpus, row)
        assert [corpus.ids[rows[i]] for i in order] == [doc for doc, _ in got]
        np.testing.assert_allclose([s for _, s in got], sims[order], rtol=1e-5)


def test_filter_errors_are_one_line():
    corpus = Corpus(("a",), ("cats",), {"chapter": (1,)})
    with pytest.raises(ConfigError, match=r"filter field 'topic': the queries have no metadata field of that name"):
        FTS5Retriever().retrieve(
            Queries(("q",), ("cats",)), corpus, RunSettings(filter_field="topic").search_options(show_progress=False)
        )
    queries = Queries(("q1", "q2"), ("cats", "cats"), {"chapter": (1, None)})
    with pytest.raises(DataFormatError, match=r"query 'q2' has no value"):
        BM25Retriever(backend="numpy").retrieve(
            queries, corpus, RunSettings(filter_field="chapter").search_options(show_progress=False)
        )


def test_a_query_whose_value_no_document_has_gets_no_documents():
    corpus = Corpus(("a", "b"), ("cats purr", "cats sleep"), {"chapter": (1, 1)})
    queries = Queries(("q1", "q2"), ("cats", "cats"), {"chapter": (1, 9)})
    for retriever in (FTS5Retriever(), BM25Retriever(backend="numpy"), DenseRetriever(HashEncoder())):
        run = retriever.retrieve(
            queries, corpus, RunSettings(top_k=5, filter_field="chapter").search_options(show_progress=False)
        )
        assert len(_ranked(run, corpus, 0)) == 2 and _ranked(run, corpus, 1) == []


def test_beir_metadata_objects_and_columns_are_read(tmp_path):
    (tmp_path / "qrels").mkdir()
    docs = [
        {"_id": "d1", "title": "", "text": "cats", "metadata": {"chapter": 1, "tags": ["x"]}},
        {"_id": "d2", "title": "", "text": "dogs", "chapter": 2, "source": "02.md"},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "cats", "chapter": 1}) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    data = load_retrieval(tmp_path, split="test")
    assert dict(data.corpus.metadata) == {"chapter": (1, 2), "source": (None, "02.md")}
    assert dict(data.queries.metadata) == {"chapter": (1,)}
    run = FTS5Retriever().retrieve(
        data.queries, data.corpus, RunSettings(filter_field="chapter").search_options(show_progress=False)
    )
    assert _ranked(run, data.corpus, 0)[0][0] == "d1"


def test_hub_copy_columns_are_metadata(tmp_path):
    """A ``--data-dir`` copy in the hub's layout (parquet per config): extra columns become metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {
        "corpus": {"_id": ["d1", "d2"], "title": ["", ""], "text": ["cats", "dogs"], "chapter": [1, 2]},
        "queries": {"_id": ["q1"], "text": ["cats"], "chapter": [1]},
        "default": {"query-id": ["q1"], "corpus-id": ["d1"], "score": [1]},
    }
    for name, columns in tables.items():
        (tmp_path / name).mkdir()
        pq.write_table(pa.table(columns), tmp_path / name / "test-00000-of-00001.parquet")
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}/test-*.parquet\n" for c in tables)
        + "---\n"
    )
    data = load_retrieval(tmp_path, split="test")
    assert dict(data.corpus.metadata) == {"chapter": (1, 2)} and dict(data.queries.metadata) == {"chapter": (1,)}
