"""Scoring a precomputed run against qrels: only what ``embedscope score`` needs is imported here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def rank_run(
    qrels: str | Path | Mapping[str, Mapping[str, int]],
    run: str | Path | Mapping[str, Mapping[str, float]],
    *,
    k_values: Sequence[int] | None = None,
    ignore_identical_ids: bool = False,
) -> Any:
    """Per-query ranking metrics (:class:`~embedscope.metrics.RankingScores`) of a precomputed run.

    A TREC run file is scored by its doc-id keys (:func:`~embedscope.data.runs.read_keyed_run`), without a
    vocabulary or dicts; a JSON run, ``ignore_identical_ids``, a document listed twice or two ids sharing a
    key take :func:`~embedscope.data.runs.read_trec_run` instead (which names the lines of a duplicate).
    """
    from embedscope.data.runs import json_run_or_none, read_keyed_run, read_qrels, read_trec_run
    from embedscope.metrics import DEFAULT_K_VALUES, evaluate_ranking
    from embedscope.metrics.ranking import KeyClash
    from embedscope.types import RankedRun

    ks = tuple(k_values or DEFAULT_K_VALUES)
    for path, kind in ((qrels, "qrels"), (run, "run")):
        if isinstance(path, (str, Path)):
            _check_not_empty(Path(path), kind)
    qrels_dict = read_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels
    if not isinstance(run, (str, Path)):
        return evaluate_ranking(qrels_dict, run, ks, ignore_identical_ids=ignore_identical_ids)
    data = json_run_or_none(Path(run))
    if data is not None:
        return evaluate_ranking(qrels_dict, RankedRun.from_dict(data), ks, ignore_identical_ids=ignore_identical_ids)
    if not ignore_identical_ids:
        # doc ids as strings and 63-bit keys, no vocabulary; a document listed twice (or, all but never,
        # two ids sharing a key) leaves the file to read_trec_run, which names the lines
        keyed = read_keyed_run(run)
        if keyed is not None:
            try:
                return evaluate_ranking(qrels_dict, keyed, ks)
            except KeyClash:
                pass
    return evaluate_ranking(qrels_dict, read_trec_run(run), ks, ignore_identical_ids=ignore_identical_ids)


def _check_not_empty(path: Path, kind: str) -> None:
    """DataFormatError naming ``path`` when the file holds nothing but whitespace."""
    from embedscope.errors import DataFormatError

    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            if chunk.strip():
                return
    if kind == "qrels":
        raise DataFormatError(f"qrels {path} has no judgments (the file is empty)")
    raise DataFormatError(f"{path}: the run file is empty (no ranked documents)")
