"""Per-item scores beside each result: ``<Task>.per_item.jsonl.gz``.

gzip-compressed JSON Lines, one object per evaluated item (keys in this order):

- ``split``, ``hf_subset``, ``id``: which item (``id`` is the query id, or the pair's 0-based position);
- Retrieval and Reranking: every per-query metric (``ndcg_at_10``, ``map_at_1000``, ``recall_at_5``,
  ``precision_at_k``, ``hit_rate_at_k``, ``mrr_at_k`` …; the task's mean of a column is its score) and
  ``top_10``, the ten best doc ids, best first; the legacy reranking protocol has ``map`` and ``mrr``;
  a retrieval stage that ranks given candidates (a pipeline's reranker or fusion; the run's rows are its last stage's)
  adds ``candidates_recall``, ``ceiling_ndcg_at_10`` (the best nDCG@10 any order of its candidates reaches) and
  ``failure`` (``candidate_miss``, ``ranking`` or ``none``; :mod:`embedscope.metrics.failures`);
- STS: each prediction (``cosine``, ``manhattan``, ``euclidean``, ``similarity``) and ``gold``, the
  normalised gold score; PairClassification: ``similarity``, ``cosine``, ``manhattan``, ``euclidean``
  (distances), ``dot`` and ``gold``, the 0/1 label.
- BitextMining: ``predicted`` (the nearest second-column row), its ``score`` and ``gold``; Summarization (per
  scored text): ``cosine``, ``dot``, ``similarity`` and ``gold``, one value per machine summary.

Classification, multilabel classification and clustering have no such file: their per-experiment
scores are in the result JSON (``scores_per_experiment``, ``v_measures``). Files are written atomically
and deterministically (no gzip timestamp).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError

SUFFIX = ".per_item.jsonl.gz"
KEY_COLUMNS = ("split", "hf_subset", "id")


def per_item_path(result_path: str | Path) -> Path:
    """``<folder>/<Task>.json`` → ``<folder>/<Task>.per_item.jsonl.gz``."""
    path = Path(result_path)
    return path.with_name(path.name.removesuffix(".json") + SUFFIX)


def item_rows(split: str, hf_subset: str, columns: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Column-oriented per-item values (``id`` first) as rows with their split and subset.

    >>> item_rows("test", "default", {"id": ["q1", "q2"], "ndcg_at_10": [1.0, 0.5]})[1]
    {'split': 'test', 'hf_subset': 'default', 'id': 'q2', 'ndcg_at_10': 0.5}
    """
    names = list(columns)
    n = len(columns["id"])
    if any(len(columns[c]) != n for c in names):
        raise ValueError(f"per-item columns differ in length: { {c: len(columns[c]) for c in names} }")
    return [{"split": split, "hf_subset": hf_subset, **{c: columns[c][i] for c in names}} for i in range(n)]


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """gzip'd JSON Lines without a timestamp (same rows, same bytes)."""
    text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=True) + "\n" for r in rows)
    return gzip.compress(text.encode("utf-8"), mtime=0)


def read_per_item(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a per-item file; a damaged file is named in a :class:`DataFormatError`."""
    path = Path(path)
    try:
        content = path.read_bytes()
    except OSError as e:
        raise DataFormatError(f"{path}: unreadable per-item file ({e}); re-run the task with --overwrite") from e
    return decode_rows(content, str(path))


def decode_rows(content: bytes, where: str) -> list[dict[str, Any]]:
    """The rows of a per-item file's bytes (``where`` names them in a :class:`DataFormatError`).

    >>> decode_rows(encode_rows([{"split": "test", "hf_subset": "default", "id": "q1", "ndcg_at_10": 0.5}]), "x")
    [{'split': 'test', 'hf_subset': 'default', 'id': 'q1', 'ndcg_at_10': 0.5}]
    """
    try:
        lines = [line for line in gzip.decompress(content).decode("utf-8").split("\n") if line.strip()]
        rows = json.loads(f"[{','.join(lines)}]")  # one parse of every line (each one object): 3x faster
        if len(rows) != len(lines):  # a line that is not one object: parsed line by line, to say which
            rows = [json.loads(line) for line in lines]
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataFormatError(f"{where}: unreadable per-item file ({e}); re-run the task with --overwrite") from e
    if rows and not all(k in rows[0] for k in KEY_COLUMNS):
        raise DataFormatError(f"{where}: per-item rows need {', '.join(KEY_COLUMNS)}; got {', '.join(rows[0])}")
    return rows


def merge_rows(earlier: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``new`` plus the rows of ``earlier`` whose split ``new`` does not cover (stored splits kept)."""
    replaced = {r["split"] for r in new}
    return [dict(r) for r in earlier if r["split"] not in replaced] + [dict(r) for r in new]
