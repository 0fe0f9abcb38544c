"""Corpus, queries and qrels from JSONL / CSV / TSV / Parquet tables, with a column mapping; pairs files.

The column mapping (``columns=``) is documented in :mod:`embedscope.data.tables`.

Document text is ``merge_title(title, text)`` (MTEB's ``(title + " " + text).strip()``); query text is
kept as given. Ids are strings; relevance scores are integers.

"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from embedscope.data.hub_files import split_files
from embedscope.data.jsonl import reading
from embedscope.data.tables import column_names, find_table, normalize_columns, read_rows
from embedscope.data.validate import (
    add_judgment,
    as_id,
    as_relevance,
    as_text,
    check_qrels_ids,
    check_texts,
    check_unique,
    pick,
)
from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData, merge_title

Rows = Iterable[tuple[str, Mapping[str, Any]]]
"""``(location, row)`` pairs, as :func:`embedscope.data.tables.read_rows` yields them."""

logger = logging.getLogger(__name__)


def texts_from_rows(
    rows: Rows,
    source: str | Path,
    kind: str,
    columns: Mapping[str, str] | None = None,
    *,
    allow_empty: bool = False,
    metadata: dict[str, tuple[Any, ...]] | None = None,
) -> tuple[list[str], list[str]]:
    """Ids and texts of a corpus (``kind="corpus"``, title merged) or query set (``kind="queries"``), checked.

    Checks: the id and text fields exist (the error says how to map them), ids are unique (both
    lines named) and no text is empty. ``allow_empty=True`` (published hub datasets, which MTEB
    evaluates as they are) turns empty texts into a warning. A ``metadata`` dict given is filled with
    the rows' other fields (:func:`row_metadata`) as columns.
    """
    is_corpus = kind == "corpus"
    id_names = column_names(columns, kind, "id")
    text_names = column_names(columns, kind, "text")
    title_names = column_names(columns, kind, "title") if is_corpus else []
    ids: list[str] = []
    texts: list[str] = []
    first_seen: dict[str, str] = {}
    noun = "document" if is_corpus else "query"
    extras: list[dict[str, Any]] = []
    used = {*id_names, *text_names, *title_names}
    for where, row in rows:
        if metadata is not None:
            others = row.keys() - used
            extras.append(row_metadata(row, used) if others and (others != _NESTED or row["metadata"]) else _NONE)
        id_ = as_id(pick(row, id_names, where, "id"), where, "id")
        text = as_text(pick(row, text_names, where, "text"), where, "text")
        if is_corpus:
            title = None
            for name in title_names:
                title = row.get(name)
                if title is not None:
                    break
            text = merge_title(as_text(title, where, "title") if title is not None else "", text)
        previous = first_seen.setdefault(id_, where)
        if previous is not where:
            check_unique([(id_, previous), (id_, where)], source, noun)
        ids.append(id_)
        texts.append(text)
    if not ids:
        raise DataFormatError(f"{source}: no {'documents' if is_corpus else 'queries'} found (the file is empty)")
    try:
        check_texts(ids, texts, source, "documents" if is_corpus else "queries")
    except DataFormatError as e:
        if not allow_empty:
            raise
        logger.warning("%s (kept, as MTEB does for published datasets)", e)
    if metadata is not None:
        names = dict.fromkeys(name for extra in extras for name in extra)
        metadata.update({name: tuple(extra.get(name) for extra in extras) for name in names})
    return ids, texts


_NESTED = {"metadata"}
_NONE: dict[str, Any] = {}


def row_metadata(row: Mapping[str, Any], used: set[str]) -> dict[str, Any]:
    """A row's metadata: its scalar (string, number, boolean) fields other than ``used`` (id, text, title),
    and those of its BEIR ``metadata`` object (which win on a clash).

    >>> row_metadata({"_id": "d1", "text": "t", "chapter": 4, "metadata": {"url": "u", "tags": []}}, {"_id", "text"})
    {'chapter': 4, 'url': 'u'}
    """
    out = {k: v for k, v in row.items() if k not in used and k != "metadata" and _scalar(v)}
    nested = row.get("metadata")
    if isinstance(nested, Mapping):
        out.update({str(k): v for k, v in nested.items() if _scalar(v)})
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and not (isinstance(value, float) and value != value)


def read_texts(
    path: Path,
    file_kind: str,
    columns: Mapping[str, str] | None = None,
    metadata: dict[str, tuple[Any, ...]] | None = None,
) -> tuple[list[str], list[str]]:
    """Ids and texts (title merged the MTEB way) of a corpus or queries file, checked (``metadata``: as
    :func:`texts_from_rows`)."""
    return texts_from_rows(read_rows(path), path, file_kind, columns, metadata=metadata)


def qrels_from_rows(
    rows: Rows, columns: Mapping[str, str] | None = None
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], str]]:
    """``{qid: {doc: relevance}}`` and where each judgment came from. Zero judgments are kept."""
    qrels: dict[str, dict[str, int]] = {}
    places: dict[tuple[str, str], str] = {}
    q_names = column_names(columns, "qrels", "query-id")
    d_names = column_names(columns, "qrels", "corpus-id")
    s_names = column_names(columns, "qrels", "score")
    for where, row in rows:
        qid = as_id(pick(row, q_names, where, "query-id"), where, "query-id")
        doc = as_id(pick(row, d_names, where, "corpus-id"), where, "corpus-id")
        add_judgment(qrels, places, qid, doc, as_relevance(pick(row, s_names, where, "score"), where), where)
    return qrels, places


def _qrels_tsv_rows(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """Rows of a qrels ``.tsv``: with a header (BEIR ``query-id corpus-id score``) or without one
    (``qid docid score``, or TREC ``qid 0 docid rel``). A header is a first line whose last cell is not a number.
    """
    with reading(path), open(path, encoding="utf-8-sig") as f:
        lines = [(n, line.rstrip("\r\n")) for n, line in enumerate(f, start=1)]
    lines = [(n, line) for n, line in lines if line.strip()]
    if not lines:
        return []
    first = lines[0][1].split("\t")
    try:
        float(first[-1])
        header = None
    except ValueError:
        header = [c.strip() for c in first]
        lines = lines[1:]
    out = []
    for n, line in lines:
        cells = [c.strip() for c in line.split("\t")]
        where = f"{path}, line {n}"
        if header is not None:
            if len(cells) != len(header):
                raise DataFormatError(
                    f"{where}: {len(cells)} tab-separated cells, but the header has {len(header)} "
                    f"({', '.join(header)}); qrels lines are 'query-id<TAB>corpus-id<TAB>score'"
                )
            out.append((where, dict(zip(header, cells))))
        elif len(cells) == 3:
            out.append((where, {"query-id": cells[0], "corpus-id": cells[1], "score": cells[2]}))
        elif len(cells) == 4:
            out.append((where, {"query-id": cells[0], "corpus-id": cells[2], "score": cells[3]}))
        else:
            raise DataFormatError(
                f"{where}: expected 3 tab-separated cells 'query-id corpus-id score' (BEIR, with that header line), "
                f"got {len(cells)}"
            )
    return out


def read_qrels_rows(
    path: Path, columns: Mapping[str, str] | None = None
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], str]]:
    """``{qid: {doc: relevance}}`` from a qrels table, and where each judgment came from."""
    path = Path(path)
    rows = _qrels_tsv_rows(path) if path.name.lower().endswith(".tsv") else read_rows(path)
    return qrels_from_rows(rows, columns)


def build_split(
    corpus: tuple[list[str], list[str]],
    queries: tuple[list[str], list[str]],
    qrels: dict[str, dict[str, int]],
    places: Mapping[tuple[str, str], str],
    qrels_source: str | Path,
    *,
    name: str,
    split: str,
    source: str,
    revision: str = "custom",
    corpus_metadata: Mapping[str, tuple[Any, ...]] | None = None,
    queries_metadata: Mapping[str, tuple[Any, ...]] | None = None,
) -> RetrievalData:
    """Check the qrels against corpus and queries, and build the split (queries without qrels are kept)."""
    doc_ids, doc_texts = corpus
    query_ids, query_texts = queries
    check_qrels_ids(qrels, places, set(query_ids), set(doc_ids), qrels_source)
    return RetrievalData(
        Corpus(tuple(doc_ids), tuple(doc_texts), dict(corpus_metadata or {})),
        Queries(tuple(query_ids), tuple(query_texts), dict(queries_metadata or {})),
        qrels,
        name=name,
        split=split,
        source=source,
        revision=revision,
    )


def assemble(
    corpus_path: Path,
    queries_path: Path,
    qrels: dict[str, dict[str, int]],
    places: dict[tuple[str, str], str],
    qrels_path: Path,
    *,
    columns: Mapping[str, str] | None,
    name: str,
    split: str,
) -> RetrievalData:
    """Read corpus and queries files (with their metadata), check the qrels against them, and build the split."""
    corpus_metadata: dict[str, tuple[Any, ...]] = {}
    queries_metadata: dict[str, tuple[Any, ...]] = {}
    return build_split(
        read_texts(corpus_path, "corpus", columns, corpus_metadata),
        read_texts(queries_path, "queries", columns, queries_metadata),
        qrels,
        places,
        qrels_path,
        name=name,
        split=split,
        source=str(corpus_path.parent),
        corpus_metadata=corpus_metadata,
        queries_metadata=queries_metadata,
    )


def _passages(value: Any, where: str, field: str) -> list[str]:
    """One passage or a list of passages (FlagEmbedding's ``pos``/``neg`` lists)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        text = as_text(item, where, field).strip()
        if not text:
            raise DataFormatError(f"{where}: empty {field} passage; remove it or fill it in")
        out.append(text)
    return out


def load_pairs_file(path: Path, *, columns: Mapping[str, str] | None = None, split: str = "test") -> RetrievalData:
    """A file of (query, relevant passage) rows → corpus of distinct passages, queries, qrels (relevance 1).

    Accepted rows: ``{"query", "positive"}`` (also ``question``/``anchor`` and ``pos``/``passage``/``answer``),
    where the passage may be a list (FlagEmbedding ``{"query", "pos": [...], "neg": [...]}``); an optional
    ``negative`` / ``neg`` passage or list adds unjudged distractor documents. Optional ``query-id`` /
    ``corpus-id`` columns give the ids (only with a single positive); otherwise identical query texts
    share one query (``q1``, ``q2``, …) and identical passages one document (``d1``, …), in order of first
    appearance. Texts are stripped of surrounding whitespace.
    """
    columns = normalize_columns(columns)
    path = Path(path)
    q_names, p_names = column_names(columns, "pairs", "query"), column_names(columns, "pairs", "positive")
    n_names = column_names(columns, "pairs", "negative")
    qid_names, did_names = column_names(columns, "pairs", "query-id"), column_names(columns, "pairs", "corpus-id")
    queries: dict[str, str] = {}
    docs: dict[str, str] = {}
    by_query_text: dict[str, str] = {}
    by_doc_text: dict[str, str] = {}
    first_place: dict[tuple[str, str], str] = {}
    qrels: dict[str, dict[str, int]] = {}

    def doc_id_for(text: str) -> str:
        if text not in by_doc_text:
            did = f"d{len(by_doc_text) + 1}"
            while did in docs:  # an explicit id elsewhere already uses this name
                did += "_"
            by_doc_text[text] = did
        return by_doc_text[text]

    def remember(store: dict[str, str], kind: str, key: str, text: str, where: str) -> None:
        old = store.setdefault(key, text)
        if old != text:
            raise DataFormatError(
                f"{where}: {kind} id {key!r} is used for two different texts (first at {first_place[(kind, key)]}); "
                "ids must identify one text"
            )
        first_place.setdefault((kind, key), where)

    for where, row in read_rows(path):
        q_text = as_text(pick(row, q_names, where, "query"), where, "query").strip()
        if not q_text:
            raise DataFormatError(f"{where}: empty query text; remove the row or fill it in")
        positives = _passages(pick(row, p_names, where, "positive"), where, "positive")
        negative_value = pick(row, n_names, where, "negative", required=False)
        negatives = _passages(negative_value, where, "negative") if negative_value is not None else []
        qid_raw = pick(row, qid_names, where, "query-id", required=False)
        did_raw = pick(row, did_names, where, "corpus-id", required=False)
        if qid_raw is not None:
            qid = as_id(qid_raw, where, "query-id")
        else:
            qid = by_query_text.setdefault(q_text, f"q{len(by_query_text) + 1}")
        remember(queries, "query", qid, q_text, where)
        if did_raw is not None and len(positives) != 1:
            raise DataFormatError(f"{where}: a 'corpus-id' needs exactly one positive passage, got {len(positives)}")
        for text in positives:
            did = as_id(did_raw, where, "corpus-id") if did_raw is not None else doc_id_for(text)
            remember(docs, "document", did, text, where)
            qrels.setdefault(qid, {})[did] = 1
        for text in negatives:
            did = doc_id_for(text)
            remember(docs, "document", did, text, where)
    if not queries:
        raise DataFormatError(f"{path}: no rows found (the file is empty)")
    return RetrievalData(
        Corpus(tuple(docs), tuple(docs.values())),
        Queries(tuple(queries), tuple(queries.values())),
        qrels,
        name=path.stem,
        split=split,
        source=str(path),
    )


def split_rows(path: str | Path, split: str | None, split_column: str) -> list[tuple[str, dict[str, Any]]]:
    """Rows of ``split``: from ``<dir>/<split>.<ext>`` for a folder, else the file's rows whose split column matches.

    A file without the split column is taken whole, whatever split is asked for.
    """
    path = Path(path)
    if path.is_dir():
        table = find_table(path, str(split))
        if table is None:  # a hub download: data/<split>-*.parquet, <split>/<subset>.parquet, README configs …
            try:
                found = split_files(path, str(split))
            except DataFormatError as e:
                raise DataFormatError(
                    f"{e}; or add {split}.csv, {split}.jsonl or {split}.parquet (one file per split), or pass one "
                    "file with a 'split' column"
                ) from None
            return [row for file in found for row in read_rows(file)]
        return list(read_rows(table))
    if not path.is_file():
        raise DataFormatError(f"{path}: no such file or folder")
    rows = list(read_rows(path))
    if split is None or not rows or split_column not in rows[0][1]:
        return rows
    kept = [(loc, row) for loc, row in rows if str(row.get(split_column)) == split]
    if not kept:
        present = sorted({str(row.get(split_column)) for _, row in rows})
        raise DataFormatError(f"{path}: no rows with {split_column}={split!r}; the file has splits {present}")
    return kept
