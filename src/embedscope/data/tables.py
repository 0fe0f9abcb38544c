"""Reading tables: the file types, row reading, column mapping and split-file resolution every loader shares.

A table is a JSON lines (optionally gzipped), JSON-lines ``.json``, CSV, TSV or Parquet file
(:func:`table_suffixes`; :func:`register_table_format` adds a format, which every loader, table route and the
hub-layout reader then read). :func:`read_rows` yields ``(location, row)`` pairs, the location being
``<file>, line <n>`` (``<file>, row <n>`` for Parquet), so every error names the file, the line and the field.

**Column mapping** (``columns=``): keys are the fields embedscope needs, values are your column names.

===============================  =================================================  ===========================
key                              used for                                           looked for when not mapped
===============================  =================================================  ===========================
``id``                           id column of corpus *and* queries                  ``_id``, ``id``
``text``                         text column of corpus *and* queries                ``text``
``title``                        title column of the corpus (optional)              ``title``
``corpus.id`` ``corpus.text``    the corpus only (override ``id`` / ``text`` /
``corpus.title``                 ``title``)
``queries.id`` ``queries.text``  the queries only
``query-id``                     query id column of qrels and pairs files           ``query-id``, ``query_id``,
                                                                                    ``qid``
``corpus-id``                    document id column of qrels and pairs files        ``corpus-id``, ``corpus_id``,
                                                                                    ``doc-id``, ``doc_id``,
                                                                                    ``docid``, ``pid``
``score``                        relevance column of qrels                          ``score``, ``relevance``,
                                                                                    ``rel``, ``label``
``query``                        query text of a pairs file                         ``query``, ``question``,
                                                                                    ``anchor``
``positive``                     relevant passage(s) of a pairs file                ``positive``, ``pos``,
                                                                                    ``passage``, ``answer``
``negative``                     non-relevant passage(s) of a pairs file (become    ``negative``, ``neg``
                                 unjudged corpus documents)
===============================  =================================================  ===========================

A per-file key (``corpus.text``) names the only column used for that file. A general key
(``text``) is looked for first, then the defaults, so one mapping can serve a corpus with
``body`` and queries with ``text``. ``qrels.query-id``, ``qrels.corpus-id`` and ``qrels.score`` are
accepted as spellings of the qrels keys. Unknown keys are a :class:`~embedscope.errors.ConfigError`.

Task files of the other types (classification, clustering, STS …) map their own roles (``text``, ``label``,
``title``, ``split`` …) and are read one split at a time by :func:`embedscope.data.tabular.split_rows`: ``<folder>/<split>.<ext>``, a hub
download's split files, or the rows of one file whose ``split`` column matches.

>>> column_names({"text": "body"}, "corpus", "text")
['body', 'text']
>>> column_names({"corpus.text": "body"}, "corpus", "text")
['body']
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from embedscope.data.jsonl import iter_jsonl, reading
from embedscope.data.validate import check_columns
from embedscope.errors import DataFormatError
from embedscope.messages import listing

TableReader = Callable[[Path], Iterator[tuple[str, dict[str, Any]]]]
"""A file → its ``(location, row)`` pairs, the location naming the file and the line or row."""
_READERS: dict[str, TableReader] = {}


def table_suffixes() -> tuple[str, ...]:
    """File types a corpus, queries, qrels or pairs table may have (JSON lines, delimited text, Parquet, and any
    registered format).

    >>> table_suffixes()[:3]
    ('.jsonl', '.jsonl.gz', '.json')
    """
    return tuple(_READERS)


def register_table_format(suffix: str, reader: TableReader) -> None:
    """Adds a table format: files ending in ``suffix`` are read by ``reader`` (one call, in the format's module).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from embedscope import register_table_format
        >>> from embedscope.data.tables import read_rows, unregister_table_format
        >>> def read_lines(path):  # one text a line; the id is the line number
        ...     for n, line in enumerate(path.read_text().splitlines(), start=1):
        ...         yield f"{path.name}, line {n}", {"_id": str(n), "text": line}
        >>> register_table_format(".lines", read_lines)
        >>> path = Path(tempfile.mkdtemp()) / "corpus.lines"
        >>> _ = path.write_text("a cat\\na dog\\n")
        >>> [row for _, row in read_rows(path)]
        [{'_id': '1', 'text': 'a cat'}, {'_id': '2', 'text': 'a dog'}]
        >>> unregister_table_format(".lines")
    """
    if suffix in _READERS:
        raise ValueError(f"table format {suffix!r} is registered already")
    _READERS[suffix] = reader


def unregister_table_format(suffix: str) -> None:
    """Removes a table format (tests registering a toy format clean up with this)."""
    del _READERS[suffix]


def suffix_of(path: Path) -> str:
    """``.jsonl.gz`` for compressed JSON lines, else the last suffix (lower case)."""
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _csv_field_limit() -> None:
    try:
        csv.field_size_limit(sys.maxsize)
    except OverflowError:  # pragma: no cover - 32-bit platforms
        csv.field_size_limit(2**31 - 1)


def _csv_rows(reader: csv.DictReader[str], path: Path) -> Iterator[dict[str | None, Any]]:
    """The rows of ``reader`` (cells past the header's names under the key None); a CSV syntax error (an
    unbalanced quote) names the line its row starts on."""
    start = 1
    try:
        _ = reader.fieldnames  # the header line
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            yield row
    except csv.Error as e:
        raise DataFormatError(
            f"{path}, line {start}: CSV parse error ({e}); a quoted cell needs its closing "
            'quote, and a quote inside it is written twice ("")'
        ) from None


def _json_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for lineno, obj in iter_jsonl(path):
        yield f"{path}, line {lineno}", obj


def _delimited_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    _csv_field_limit()
    with reading(path), open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter="\t" if suffix_of(path) == ".tsv" else ",", strict=True)
        for row in _csv_rows(reader, path):
            if None in row:  # more cells than header names
                raise DataFormatError(
                    f"{path}, line {reader.line_num}: {len(reader.fieldnames or []) + len(row[None])} cells but "
                    f"the header has {len(reader.fieldnames or [])} ({listing(reader.fieldnames or [], 10)}); "
                    "quote cells that contain the delimiter"
                )
            yield f"{path}, line {reader.line_num}", cast("dict[str, Any]", row)  # no None key: checked above


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for broken files
        raise DataFormatError(f"{path}: not a readable Parquet file ({e})") from None
    n = 0
    for batch in parquet.iter_batches(batch_size=65536):
        for row in batch.to_pylist():
            n += 1
            yield f"{path}, row {n}", row


for _suffix, _reader in (
    (".jsonl", _json_rows),
    (".jsonl.gz", _json_rows),
    (".json", _json_rows),
    (".csv", _delimited_rows),
    (".tsv", _delimited_rows),
    (".parquet", _parquet_rows),
):
    register_table_format(_suffix, _reader)


def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(location, row)`` for a table file of any registered format; location is ``file, line N`` or ``file, row N``."""
    path = Path(path)
    reader = _READERS.get(suffix_of(path))
    if reader is None:
        raise DataFormatError(
            f"{path}: unsupported file type {suffix_of(path)!r}; use one of {', '.join(table_suffixes())}"
        )
    yield from reader(path)


DEFAULTS: dict[str, list[str]] = {
    "id": ["_id", "id"],
    "text": ["text"],
    "title": ["title"],
    "query-id": ["query-id", "query_id", "qid"],
    "corpus-id": ["corpus-id", "corpus_id", "doc-id", "doc_id", "docid", "pid"],
    "score": ["score", "relevance", "rel", "label"],
    "query": ["query", "question", "anchor"],
    "positive": ["positive", "pos", "passage", "answer"],
    "negative": ["negative", "neg"],
}

COLUMN_KEYS: tuple[str, ...] = (
    "id",
    "text",
    "title",
    "corpus.id",
    "corpus.text",
    "corpus.title",
    "queries.id",
    "queries.text",
    "query-id",
    "corpus-id",
    "score",
    "qrels.query-id",
    "qrels.corpus-id",
    "qrels.score",
    "query",
    "positive",
    "negative",
)
"""Every key a column mapping may use (see the module docstring)."""

KEY_ALIASES: dict[str, str] = {
    "query_id": "query-id",
    "qid": "query-id",
    "corpus_id": "corpus-id",
    "doc_id": "corpus-id",
    "doc-id": "corpus-id",
    "docid": "corpus-id",
    "pid": "corpus-id",
    "relevance": "score",
    "label": "score",
    "_id": "id",
    "pos": "positive",
    "neg": "negative",
}
"""Other spellings accepted as mapping keys (``{"doc_id": "pid"}`` means ``{"corpus-id": "pid"}``)."""


def normalize_columns(columns: Mapping[str, str] | None) -> dict[str, str] | None:
    """Check a column mapping and rewrite key aliases; unknown keys are a ConfigError.

    >>> normalize_columns({"doc_id": "pid", "qrels.qid": "q", "text": "body"})
    {'corpus-id': 'pid', 'qrels.query-id': 'q', 'text': 'body'}
    """
    if columns is None:
        return None
    if not isinstance(columns, Mapping):
        check_columns(columns, COLUMN_KEYS)  # raises
    out: dict[str, str] = {}
    for key, value in columns.items():
        prefix, _, field = str(key).rpartition(".")
        canonical = (f"{prefix}." if prefix else "") + KEY_ALIASES.get(field, field)
        out[canonical] = value
    check_columns(out, COLUMN_KEYS)
    return out


def column_names(columns: Mapping[str, str] | None, file_kind: str, field: str) -> list[str]:
    """Column names to look for, in order: a per-file mapping alone, else a general mapping then the defaults."""
    columns = columns or {}
    specific = f"{file_kind}.{field}"
    if specific in columns:
        return [columns[specific]]
    defaults = DEFAULTS[field]
    if field in columns:
        return [columns[field], *(d for d in defaults if d != columns[field])]
    return list(defaults)


def find_table(folder: Path, stem: str) -> Path | None:
    """``folder/stem.<jsonl|jsonl.gz|json|csv|tsv|parquet>``; two candidates at once is an error."""
    found = [folder / f"{stem}{suffix}" for suffix in table_suffixes() if (folder / f"{stem}{suffix}").is_file()]
    if len(found) > 1:
        raise DataFormatError(f"{folder}: both {found[0].name} and {found[1].name}; keep only one {stem} file")
    return found[0] if found else None


def field_value(loc: str, row: dict[str, Any], column: str, role: str) -> Any:
    """``row[column]``, or a DataFormatError naming the location, the field and the fix."""
    if column not in row:
        raise DataFormatError(
            f"{loc}: missing field {column!r} (the {role}); present: {sorted(row)}. "
            f"Rename the column or map it, e.g. columns={{'{role}': '<your column>'}}"
        )
    value = row[column]
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataFormatError(f"{loc}: field {column!r} (the {role}) is empty; fill it or drop the row")
    return value
