"""Strict reading and checking of input files; every error names the file, the line or field, and the fix."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError

TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".csv", ".tsv", ".parquet")


def suffix_of(path: Path) -> str:
    """``.jsonl.gz`` for compressed JSON lines, else the last suffix (lower case)."""
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; malformed JSON names the file and line."""
    opener = gzip.open if suffix_of(path) == ".jsonl.gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(
                    f"{path}, line {lineno}: malformed JSON ({e.msg} at column {e.colno}). Each line must be one "
                    "JSON object, e.g. {\"_id\": \"d1\", \"text\": \"...\"}"
                ) from e
            if not isinstance(obj, dict):
                raise DataFormatError(f"{path}, line {lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(location, row)`` for a JSONL / CSV / TSV / Parquet file; location is ``file, line N`` or ``file, row N``."""
    kind = suffix_of(path)
    if kind in (".jsonl", ".jsonl.gz", ".json"):
        for lineno, obj in read_jsonl(path):
            yield f"{path}, line {lineno}", obj
    elif kind in (".csv", ".tsv"):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, delimiter="\t" if kind == ".tsv" else ",")
            for row in reader:
                yield f"{path}, line {reader.line_num}", dict(row)
    elif kind == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield f"{path}, row {i}", row
    else:
        raise DataFormatError(f"{path}: unsupported file type {kind!r}; use one of {', '.join(TABLE_SUFFIXES)}")


def pick(row: Mapping[str, Any], names: Sequence[str], where: str, field: str, *, required: bool = True) -> Any:
    """The value of the first of ``names`` present in ``row``; a missing required field is explained."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    if not required:
        return None
    raise DataFormatError(
        f"{where}: missing field {field!r} (looked for {', '.join(repr(n) for n in names)}; the row has "
        f"{', '.join(repr(k) for k in row) or 'no fields'}). Rename it, or map it with columns={{{field!r}: '<name>'}}"
    )


def as_id(value: Any, where: str, field: str) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text:
        raise DataFormatError(f"{where}: empty {field}")
    return text


def as_relevance(value: Any, where: str) -> int:
    """An integer relevance judgment (``"1"``, ``1`` and ``1.0`` are accepted)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(f"{where}: relevance score {value!r} is not a number; use integers such as 0, 1, 2")
    if not number.is_integer():
        raise DataFormatError(f"{where}: relevance score {value!r} is not an integer; use graded integers 0, 1, 2, …")
    return int(number)


def check_unique(ids: Iterable[tuple[str, str]], path: Path | str, kind: str) -> None:
    """``ids`` = ``(id, location)`` pairs; a repeated id names both places."""
    seen: dict[str, str] = {}
    for id_, where in ids:
        if id_ in seen:
            raise DataFormatError(f"{where}: duplicate {kind} id {id_!r} (first at {seen[id_]}); ids must be unique "
                                  f"in {path}")
        seen[id_] = where


def check_texts(ids: Sequence[str], texts: Sequence[str], path: Path | str, kind: str) -> None:
    empty = [i for i, t in zip(ids, texts) if not t.strip()]
    if empty:
        shown = ", ".join(repr(e) for e in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        raise DataFormatError(f"{path}: {len(empty)} {kind} with empty text ({shown}); remove them or fill them in")


def check_qrels_ids(qrels: Mapping[str, Mapping[str, int]], locations: Mapping[tuple[str, str], str],
                    query_ids: set[str], doc_ids: set[str], path: Path | str) -> None:
    """Every judged query and document must exist."""
    for qid, docs in qrels.items():
        if qid not in query_ids:
            where = locations.get((qid, next(iter(docs), "")), str(path))
            raise DataFormatError(f"{where}: qrels name query {qid!r}, which is not among the queries; fix the id or "
                                  "add the query")
        for doc in docs:
            if doc not in doc_ids:
                raise DataFormatError(f"{locations.get((qid, doc), path)}: qrels name document {doc!r} (query {qid!r}), "
                                      "which is not in the corpus; fix the id or add the document")


def unknown_split(split: str, available: Sequence[str], where: str | Path) -> DataFormatError:
    return DataFormatError(f"{where}: no split {split!r}; available: {', '.join(sorted(available)) or 'none'}")
