"""Strict reading and checking of input files; every error names the file, the line or field, and the fix.

All loaders in :mod:`embedscope.data` go through these helpers, so a bad row is reported the same
way whatever the layout: ``<file>, line <n>: <what is wrong>; <how to fix it>``.

>>> as_relevance("2", "qrels.tsv, line 3")
2
>>> as_id(7.0, "corpus.parquet, row 1", "id")
'7'
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, DataFormatError
from embedscope.messages import listing

SHOW = 5
"""How many offending items an error message lists before ``and N more``."""


def pick(row: Mapping[str, Any], names: Sequence[str], where: str, field: str, *, required: bool = True) -> Any:
    """The value of the first of ``names`` present (and not null) in ``row``; a missing required field is explained."""
    for name in names:
        value = row.get(name)
        if value is not None:
            return value
    if not required:
        return None
    present = [n for n in names if n in row]
    if present:
        detail = f"field {present[0]!r} is null/empty"
    else:
        detail = f"looked for {', '.join(repr(n) for n in names)}"
    raise DataFormatError(
        f"{where}: missing field {field!r} ({detail}; the row has {listing(row, 10, quote=True) or 'no fields'}). "
        f"Rename it, or map it with columns={{{field!r}: '<name>'}}"
    )


def as_id(value: Any, where: str, field: str) -> str:
    """An id as a string (``7`` and ``7.0`` both give ``'7'``); empty ids are rejected."""
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise DataFormatError(f"{where}: {field} must be a string or an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text:
        raise DataFormatError(f"{where}: empty {field}; every row needs a non-empty {field}")
    return text


def as_text(value: Any, where: str, field: str) -> str:
    """A text field as a string; bytes (a Parquet binary column) are decoded as UTF-8.

    >>> as_text(b"caf\\xc3\\xa9", "corpus.parquet, row 1", "text")
    'café'
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataFormatError(
                f"{where}: {field} is binary and not valid UTF-8 ({e.reason} at byte {e.start}); "
                "store it as a UTF-8 string column"
            ) from None
    if isinstance(value, (list, dict)):
        raise DataFormatError(f"{where}: {field} must be a string, got a {type(value).__name__}")
    return str(value)


def as_relevance(value: Any, where: str) -> int:
    """An integer relevance judgment (``"1"``, ``1`` and ``1.0`` are accepted)."""
    if isinstance(value, bool):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(
            f"{where}: relevance score {value!r} is not a number; use integers such as 0, 1, 2"
        ) from None
    if not math.isfinite(number):
        raise DataFormatError(
            f"{where}: relevance score {value!r} is not finite (NaN, infinite or beyond a 64-bit float); "
            "use integers such as 0, 1, 2"
        )
    if not number.is_integer():
        raise DataFormatError(
            f"{where}: relevance score {value!r} is not an integer; use graded integers 0, 1, 2, … "
            "(round or threshold fractional labels first)"
        )
    return int(number)


def shown(items: Sequence[str]) -> str:
    """``'a', 'b' and 3 more``."""
    return listing(items, SHOW, quote=True)


def check_unique(ids: Iterable[tuple[str, str]], path: Path | str, kind: str) -> None:
    """``ids`` = ``(id, location)`` pairs; a repeated id names both places."""
    seen: dict[str, str] = {}
    for id_, where in ids:
        first = seen.setdefault(id_, where)
        if first is not where and first != where:
            raise DataFormatError(
                f"{where}: duplicate {kind} id {id_!r} (first at {first}); ids must be unique in {path}"
            )


def check_texts(ids: Sequence[str], texts: Sequence[str], path: Path | str, kind: str) -> None:
    """No empty (or whitespace-only) texts; names the offending ids."""
    empty = [i for i, t in zip(ids, texts) if not t or t.isspace()]
    if empty:
        raise DataFormatError(
            f"{path}: {len(empty)} {kind} with empty text ({shown(empty)}); remove them or fill them in"
        )


def check_qrels_ids(
    qrels: Mapping[str, Mapping[str, int]],
    locations: Mapping[tuple[str, str], str],
    query_ids: set[str],
    doc_ids: set[str],
    path: Path | str,
) -> None:
    """Every judged query and document must exist; the message lists the first few offenders with their lines."""
    bad_queries: list[tuple[str, str]] = []
    bad_docs: list[tuple[str, str, str]] = []
    for qid, docs in qrels.items():
        if qid not in query_ids:
            bad_queries.append((qid, locations.get((qid, next(iter(docs), "")), str(path))))
        for doc in docs:
            if doc not in doc_ids:
                bad_docs.append((qid, doc, locations.get((qid, doc), str(path))))
    if bad_queries:
        where = bad_queries[0][1]
        more = (
            ""
            if len(bad_queries) == 1
            else f"; {len(bad_queries)} unknown query ids in all: " + shown([q for q, _ in bad_queries])
        )
        raise DataFormatError(
            f"{where}: qrels name query {bad_queries[0][0]!r}, which is not among the queries{more}. Fix the ids "
            "or add the queries"
        )
    if bad_docs:
        qid, doc, where = bad_docs[0]
        more = (
            ""
            if len(bad_docs) == 1
            else f"; {len(bad_docs)} unknown document ids in all: "
            + ", ".join(f"{d!r} ({w.rsplit(', ', 1)[-1]})" for _, d, w in bad_docs[:SHOW])
            + (f" and {len(bad_docs) - SHOW} more" if len(bad_docs) > SHOW else "")
        )
        raise DataFormatError(
            f"{where}: qrels name document {doc!r} (query {qid!r}), which is not in the corpus{more}. Fix the ids "
            "or add the documents"
        )


def add_judgment(
    qrels: dict[str, dict[str, int]], places: dict[tuple[str, str], str], qid: str, doc: str, relevance: int, where: str
) -> None:
    """Record one judgment; the same pair judged twice with different scores is an error naming both lines."""
    docs = qrels.setdefault(qid, {})
    old = docs.get(doc)
    if old is not None and old != relevance:
        raise DataFormatError(
            f"{where}: query {qid!r} / document {doc!r} is judged {relevance}, but {places[(qid, doc)]} judged it "
            f"{old}; keep one judgment per pair"
        )
    docs[doc] = relevance
    places.setdefault((qid, doc), where)


def unknown_split(split: str, available: Sequence[str], where: str | Path) -> DataFormatError:
    """The error for a split that does not exist; lists the available ones."""
    return DataFormatError(
        f"{where}: no split {split!r}; available: {', '.join(sorted(available)) or 'none'}. Pass one of them as split="
    )


def check_columns(columns: Mapping[str, str] | None, known: Sequence[str]) -> None:
    """A column mapping may only use ``known`` keys, and map them to non-empty column names."""
    if columns is None:
        return
    if not isinstance(columns, Mapping):
        raise ConfigError(f"columns must be a mapping such as {{'text': 'body'}}, got {type(columns).__name__}")
    for key, value in columns.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=2, cutoff=0.5)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(f"columns: unknown key {key!r}.{hint} Known keys: {', '.join(known)}")
        if not isinstance(value, str) or not value:
            raise ConfigError(f"columns[{key!r}] must be a column name (a non-empty string), got {value!r}")
