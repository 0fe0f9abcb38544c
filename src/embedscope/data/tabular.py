"""Corpus, queries and qrels from JSONL / CSV / TSV / Parquet files, with a column mapping.

Column mapping keys (all optional; defaults in brackets):

* ``id`` [``_id``, ``id``], ``text`` [``text``], ``title`` [``title``]: corpus and queries;
  ``corpus.id`` / ``corpus.text`` / ``corpus.title`` / ``queries.id`` / ``queries.text`` override per file;
* ``query-id`` [``query-id``, ``query_id``, ``qid``], ``corpus-id`` [``corpus-id``, ``corpus_id``, ``doc_id``,
  ``docid``, ``pid``], ``score`` [``score``, ``relevance``, ``label``]: qrels;
* ``query`` [``query``, ``question``], ``positive`` [``positive``, ``pos``, ``passage``, ``answer``]: a pairs file.

>>> column_names({"text": "body"}, "corpus", "text")
['body']
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from embedscope.data.validate import (
    as_id,
    as_relevance,
    check_qrels_ids,
    check_texts,
    check_unique,
    pick,
    read_rows,
)
from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData, merge_title

DEFAULTS: dict[str, list[str]] = {
    "id": ["_id", "id"],
    "text": ["text"],
    "title": ["title"],
    "query-id": ["query-id", "query_id", "qid"],
    "corpus-id": ["corpus-id", "corpus_id", "doc_id", "docid", "pid"],
    "score": ["score", "relevance", "label"],
    "query": ["query", "question"],
    "positive": ["positive", "pos", "passage", "answer"],
}


def column_names(columns: Mapping[str, str] | None, file_kind: str, field: str) -> list[str]:
    """Names to look for: the per-file mapping, else the general mapping, else the defaults."""
    columns = columns or {}
    for key in (f"{file_kind}.{field}", field):
        if key in columns:
            return [columns[key]]
    return DEFAULTS[field]


def read_texts(path: Path, file_kind: str, columns: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Ids and texts (title merged the MTEB way) of a corpus or queries file, checked."""
    ids: list[str] = []
    texts: list[str] = []
    places: list[tuple[str, str]] = []
    id_names = column_names(columns, file_kind, "id")
    text_names = column_names(columns, file_kind, "text")
    title_names = column_names(columns, file_kind, "title")
    for where, row in read_rows(path):
        id_ = as_id(pick(row, id_names, where, "id"), where, "id")
        text = pick(row, text_names, where, "text")
        title = pick(row, title_names, where, "title", required=False) if file_kind == "corpus" else None
        ids.append(id_)
        texts.append(merge_title(str(title) if title is not None else "", str(text)))
        places.append((id_, where))
    check_unique(places, path, "document" if file_kind == "corpus" else "query")
    check_texts(ids, texts, path, "documents" if file_kind == "corpus" else "queries")
    return ids, texts


def read_qrels_rows(path: Path, columns: Mapping[str, str] | None = None
                    ) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], str]]:
    """``{qid: {doc: relevance}}`` from a qrels table, and where each judgment came from."""
    qrels: dict[str, dict[str, int]] = {}
    places: dict[tuple[str, str], str] = {}
    q_names = column_names(columns, "qrels", "query-id")
    d_names = column_names(columns, "qrels", "corpus-id")
    s_names = column_names(columns, "qrels", "score")
    for where, row in read_rows(path):
        qid = as_id(pick(row, q_names, where, "query-id"), where, "query-id")
        doc = as_id(pick(row, d_names, where, "corpus-id"), where, "corpus-id")
        qrels.setdefault(qid, {})[doc] = as_relevance(pick(row, s_names, where, "score"), where)
        places[(qid, doc)] = where
    return qrels, places


def assemble(corpus_path: Path, queries_path: Path, qrels: dict[str, dict[str, int]],
             places: dict[tuple[str, str], str], qrels_path: Path, *, columns: Mapping[str, str] | None,
             name: str, split: str) -> RetrievalData:
    """Read corpus and queries, check the qrels against them, and build the split."""
    doc_ids, doc_texts = read_texts(corpus_path, "corpus", columns)
    query_ids, query_texts = read_texts(queries_path, "queries", columns)
    check_qrels_ids(qrels, places, set(query_ids), set(doc_ids), qrels_path)
    return RetrievalData(Corpus(tuple(doc_ids), tuple(doc_texts)), Queries(tuple(query_ids), tuple(query_texts)),
                         qrels, name=name, split=split, source=str(corpus_path.parent))


def load_pairs_file(path: Path, *, columns: Mapping[str, str] | None = None, split: str = "test") -> RetrievalData:
    """A file of (query, relevant passage) rows → corpus of distinct passages, queries, qrels.

    Optional ``query-id`` / ``corpus-id`` columns give the ids; otherwise identical query texts share
    one query (``q1``, ``q2``, …) and identical passages one document (``d1``, …).
    """
    q_names, p_names = column_names(columns, "pairs", "query"), column_names(columns, "pairs", "positive")
    qid_names, did_names = column_names(columns, "pairs", "query-id"), column_names(columns, "pairs", "corpus-id")
    queries: dict[str, str] = {}
    docs: dict[str, str] = {}
    by_query_text: dict[str, str] = {}
    by_doc_text: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for where, row in read_rows(path):
        q_text = str(pick(row, q_names, where, "query")).strip()
        p_text = str(pick(row, p_names, where, "positive")).strip()
        if not q_text or not p_text:
            raise DataFormatError(f"{where}: empty query or passage text; remove the row or fill it in")
        qid_raw = pick(row, qid_names, where, "query-id", required=False)
        did_raw = pick(row, did_names, where, "corpus-id", required=False)
        qid = as_id(qid_raw, where, "query-id") if qid_raw is not None else by_query_text.setdefault(
            q_text, f"q{len(by_query_text) + 1}")
        did = as_id(did_raw, where, "corpus-id") if did_raw is not None else by_doc_text.setdefault(
            p_text, f"d{len(by_doc_text) + 1}")
        for store, key, text, kind in ((queries, qid, q_text, "query"), (docs, did, p_text, "document")):
            if store.setdefault(key, text) != text:
                raise DataFormatError(f"{where}: {kind} id {key!r} is used for two different texts; ids must be unique")
        qrels.setdefault(qid, {})[did] = 1
    return RetrievalData(Corpus(tuple(docs), tuple(docs.values())), Queries(tuple(queries), tuple(queries.values())),
                         qrels, name=path.stem, split=split, source=str(path))
