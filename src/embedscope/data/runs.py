"""Run and qrels files: TREC formats, BEIR / EvalScope qrels tables, and JSON ``{qid: {docid: value}}``.

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
from collections.abc import Mapping
from pathlib import Path

from embedscope.data.validate import as_id, as_relevance
from embedscope.errors import DataFormatError


def _read_json_mapping(path: Path) -> dict | None:
    text = path.read_text(encoding="utf-8")
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if "\n{" in text.strip():  # JSON lines, not one JSON document
            return None
        raise DataFormatError(f"{path}, line {e.lineno}: malformed JSON ({e.msg})") from e
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise DataFormatError(f"{path}: JSON must map query ids to {{doc id: value}} objects")
    return data


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A run from a TREC run file (``qid Q0 docid rank score tag``) or JSON ``{qid: {docid: score}}``."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such run file")
    data = _read_json_mapping(path)
    if data is not None:
        try:
            return {str(q): {str(d): float(s) for d, s in docs.items()} for q, docs in data.items()}
        except (TypeError, ValueError) as e:
            raise DataFormatError(f"{path}: every score must be a number ({e})") from e
    run: dict[str, dict[str, float]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise DataFormatError(f"{path}, line {lineno}: expected 6 fields 'qid Q0 docid rank score tag', "
                                      f"got {len(parts)}")
            try:
                score = float(parts[4])
            except ValueError:
                raise DataFormatError(f"{path}, line {lineno}: score {parts[4]!r} is not a number") from None
            docs = run.setdefault(parts[0], {})
            if parts[2] in docs:
                raise DataFormatError(f"{path}, line {lineno}: document {parts[2]!r} appears twice for query "
                                      f"{parts[0]!r}")
            docs[parts[2]] = score
    return run


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Qrels from TREC (``qid 0 docid rel``), BEIR tsv (with header), EvalScope ``qrels.jsonl`` or JSON."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such qrels file")
    data = _read_json_mapping(path)
    if data is not None:
        return {str(q): {str(d): as_relevance(r, f"{path}, query {q}") for d, r in docs.items()}
                for q, docs in data.items()}
    text = path.read_text(encoding="utf-8")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.lstrip().startswith("{"):  # EvalScope qrels.jsonl, whatever the file is called
        from embedscope.data.tabular import DEFAULTS
        from embedscope.data.validate import pick, read_jsonl

        out: dict[str, dict[str, int]] = {}
        for lineno, row in read_jsonl(path):
            where = f"{path}, line {lineno}"
            qid = as_id(pick(row, DEFAULTS["query-id"], where, "query-id"), where, "query-id")
            doc = as_id(pick(row, DEFAULTS["corpus-id"], where, "corpus-id"), where, "corpus-id")
            out.setdefault(qid, {})[doc] = as_relevance(pick(row, DEFAULTS["score"], where, "score"), where)
        return out
    qrels: dict[str, dict[str, int]] = {}
    header = first.replace("\t", " ").split()
    skip_header = bool(header) and header[0].lower() in ("query-id", "query_id", "qid")
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts or (skip_header and line == first):
            continue
        where = f"{path}, line {lineno}"
        if len(parts) == 4:
            qid, doc, rel = parts[0], parts[2], parts[3]
        elif len(parts) == 3:
            qid, doc, rel = parts
        else:
            raise DataFormatError(f"{where}: expected 'qid 0 docid relevance' (TREC) or 'query-id corpus-id score' "
                                  f"(BEIR), got {len(parts)} fields")
        qrels.setdefault(as_id(qid, where, "query id"), {})[as_id(doc, where, "doc id")] = as_relevance(rel, where)
    return qrels


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str = "embedscope") -> None:
    """Write a TREC run: per query, documents by score descending (ties by doc id descending), ranks from 1."""
    from embedscope.results.store import atomic_write_text

    lines = []
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)
        lines.extend(f"{qid} Q0 {doc} {rank} {score!r} {tag}" for rank, (doc, score) in enumerate(ranked, start=1))
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
