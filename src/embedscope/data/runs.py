"""Run and qrels files: TREC formats, BEIR / EvalScope qrels tables, and JSON ``{qid: {docid: value}}``.

The format is detected from the content, not the file name. Errors name the file and line.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
>>> write_trec_run({"q1": {"d1": 0.5, "d2": 0.9}}, path)
>>> path.read_text().splitlines()[0]
'q1 Q0 d2 1 0.9 embedscope'
>>> read_run(path)
{'q1': {'d2': 0.9, 'd1': 0.5}}
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embedscope.data.validate import add_judgment, as_id, as_relevance, pick
from embedscope.errors import DataFormatError

_QID_HEADERS = ("query-id", "query_id", "qid", "queryid")


def _text(path: Path, what: str) -> str:
    if not path.is_file():
        raise DataFormatError(f"{path}: no such {what} file")
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        import gzip

        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start}); save it as UTF-8") from None


def _json_mapping(path: Path, text: str) -> dict | None:
    """``{qid: {doc: value}}`` when the file is one JSON document of that shape; None when it is not JSON
    (TREC / TSV) or is JSON lines."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines[:2]):
            return None  # JSON lines
        raise DataFormatError(f"{path}, line {e.lineno}: malformed JSON ({e.msg} at column {e.colno})") from None
    if isinstance(data, dict) and any(k in data for k in ("query-id", "query_id", "qid")):
        return None  # a single JSON-lines row
    if not isinstance(data, dict):
        raise DataFormatError(f"{path}: JSON must map query ids to {{doc id: value}} objects")
    for qid, docs in data.items():
        if not isinstance(docs, dict):
            raise DataFormatError(f"{path}: query {qid!r} maps to a {type(docs).__name__}; JSON must map query ids "
                                  "to {doc id: value} objects")
    return data


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise DataFormatError(f"{where}: score {value!r} is not a number")
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(f"{where}: score {value!r} is not a number") from None
    if math.isnan(score):
        raise DataFormatError(f"{where}: score is NaN; fix the scoring that produced it")
    return score


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A run from a TREC run file (``qid Q0 docid rank score tag``, whitespace-separated) or JSON
    ``{qid: {docid: score}}``. A document listed twice for one query is an error."""
    path = Path(path)
    text = _text(path, "run")
    data = _json_mapping(path, text)
    if data is not None:
        return {str(q): {str(d): _score(s, f"{path}, query {q!r}, document {d!r}") for d, s in docs.items()}
                for q, docs in data.items()}
    run: dict[str, dict[str, float]] = {}
    seen_at: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"{path}, line {lineno}"
        if len(parts) != 6:
            hint = " (this looks like JSON lines; use one JSON object {qid: {docid: score}})" if parts[0].startswith(
                "{") else ""
            raise DataFormatError(f"{where}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}{hint}")
        qid, doc = parts[0], parts[2]
        score = _score(parts[4], where)
        docs = run.setdefault(qid, {})
        if doc in docs:
            raise DataFormatError(f"{where}: document {doc!r} appears twice for query {qid!r} (first at line "
                                  f"{seen_at[(qid, doc)]}); keep one line per query and document")
        docs[doc] = score
        seen_at[(qid, doc)] = lineno
    return run


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Qrels from TREC (``qid 0 docid rel``), BEIR TSV (header ``query-id corpus-id score``), EvalScope
    ``qrels.jsonl`` (``{"query-id", "corpus-id", "score"}`` per line) or JSON ``{qid: {docid: rel}}``.

    Zero judgments are kept. Relevance must be an integer.
    """
    path = Path(path)
    text = _text(path, "qrels")
    data = _json_mapping(path, text)
    if data is not None:
        return {str(q): {str(d): as_relevance(r, f"{path}, query {q!r}, document {d!r}") for d, r in docs.items()}
                for q, docs in data.items()}
    qrels: dict[str, dict[str, int]] = {}
    places: dict[tuple[str, str], str] = {}
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.lstrip().startswith("{"):  # EvalScope qrels.jsonl, whatever the file is called
        from embedscope.data.jsonl import iter_jsonl
        from embedscope.data.tabular import DEFAULTS

        for lineno, row in iter_jsonl(path):
            where = f"{path}, line {lineno}"
            qid = as_id(pick(row, DEFAULTS["query-id"], where, "query-id"), where, "query-id")
            doc = as_id(pick(row, DEFAULTS["corpus-id"], where, "corpus-id"), where, "corpus-id")
            add_judgment(qrels, places, qid, doc, as_relevance(pick(row, DEFAULTS["score"], where, "score"), where),
                         where)
        return qrels
    header = first.split()
    has_header = bool(header) and header[0].lower() in _QID_HEADERS
    seen_header = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if has_header and not seen_header:
            seen_header = True
            continue
        where = f"{path}, line {lineno}"
        if len(parts) == 4:
            qid, doc, rel = parts[0], parts[2], parts[3]
        elif len(parts) == 3:
            qid, doc, rel = parts
        else:
            raise DataFormatError(f"{where}: expected 'qid 0 docid relevance' (TREC) or 'query-id corpus-id score' "
                                  f"(BEIR), got {len(parts)} fields")
        add_judgment(qrels, places, as_id(qid, where, "query id"), as_id(doc, where, "doc id"),
                     as_relevance(rel, where), where)
    return qrels


def _check_token(value: str, what: str) -> str:
    value = str(value)
    if not value or any(c.isspace() for c in value):
        raise DataFormatError(f"{what} {value!r} is empty or contains whitespace, which the TREC run format cannot "
                              "hold; use ids without spaces (or write JSON)")
    return value


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str = "embedscope") -> None:
    """Write a TREC run: per query, documents by score descending (ties by doc id descending, as trec_eval
    orders them), ranks from 1. Scores are written with full precision (``repr`` of the float), so
    :func:`read_run` gives back exactly the same values. The file is replaced atomically."""
    tag = _check_token(tag, "run tag")
    lines: list[str] = []
    for qid, docs in run.items():
        qid = _check_token(qid, "query id")
        ranked = sorted(((str(d), float(s)) for d, s in docs.items()), key=lambda item: (item[1], item[0]),
                        reverse=True)
        for rank, (doc, score) in enumerate(ranked, start=1):
            lines.append(f"{qid} Q0 {_check_token(doc, 'document id')} {rank} {score!r} {tag}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
