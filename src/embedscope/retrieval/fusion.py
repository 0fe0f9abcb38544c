"""Hybrid fusion of two or more runs, with ranx's definitions (``ranx.fuse``).

- ``rrf``: reciprocal rank fusion, ``sum_r 1 / (k + rank_r(d))`` with 1-based ranks (k=60).
- ``wsum``: weighted sum of per-query normalised scores, a document missing from a run adding 0.
  Normalisations: ``min-max`` ``(s - min) / max(max - min, 1e-9)``, ``zmuv`` (z-score)
  ``(s - mean) / max(std, 1e-9)`` with the population std, or ``none``.

Runs are aligned by query id and document id; every run must hold the same queries.

>>> a = RankedRun.from_dict({"q": {"d1": 3.0, "d2": 2.0}})
>>> b = RankedRun.from_dict({"q": {"d2": 0.9, "d3": 0.1}})
>>> fused = reciprocal_rank_fusion([a, b], k=60)
>>> [fused.doc_ids[i] for i in fused.doc_index[0]]
['d2', 'd1', 'd3']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.retrieval.base import sort_and_cut
from embedscope.types import RankedRun

FUSION_METHODS = ("rrf", "wsum")
NORMALIZATIONS = ("min-max", "zmuv", "none")
_NORM_ALIASES = {"min_max": "min-max", "minmax": "min-max", "z-score": "zmuv", "zscore": "zmuv", "z_score": "zmuv"}


@dataclass(frozen=True)
class Fusion:
    """How to fuse runs: ``rrf`` (``k``) or ``wsum`` (``norm``, ``weights``; default equal weights)."""

    method: str = "rrf"
    k: int = 60
    norm: str = "min-max"
    weights: tuple[float, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise UnknownNameError("fusion method", self.method, FUSION_METHODS)
        norm = _NORM_ALIASES.get(self.norm, self.norm)
        if norm not in NORMALIZATIONS:
            raise UnknownNameError("score normalization", self.norm, NORMALIZATIONS + tuple(_NORM_ALIASES))
        object.__setattr__(self, "norm", norm)
        if self.weights is not None:
            weights = tuple(float(w) for w in self.weights)
            if not all(math.isfinite(w) for w in weights):
                raise ConfigError(f"fusion weights must be finite numbers, got {', '.join(map(str, weights))}")
            object.__setattr__(self, "weights", weights)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ConfigError(f"fusion k (RRF) must be an integer >= 0, got {self.k!r}")

    @property
    def label(self) -> str:
        if self.method == "rrf":
            return f"rrf-k{self.k}"
        weights = "" if self.weights is None else "-w" + "_".join(f"{w:g}" for w in self.weights)
        return f"wsum-{self.norm}{weights}"

    def fuse(self, runs: Sequence[RankedRun], top_k: int | None = None) -> RankedRun:
        if self.method == "rrf":
            return reciprocal_rank_fusion(runs, self.k, top_k)
        return weighted_sum(runs, self.weights, self.norm, top_k)


def _aligned(runs: Sequence[RankedRun]) -> tuple[tuple[str, ...], tuple[str, ...], list[tuple[np.ndarray, np.ndarray]]]:
    """Query ids, the union of doc ids, and each run's ``(doc_index, scores)`` in that shared space."""
    if len(runs) < 2:
        raise ConfigError(f"fusion needs at least two runs, got {len(runs)}")
    query_ids = tuple(runs[0].query_ids)
    doc_ids = list(runs[0].doc_ids)
    lookup = {d: i for i, d in enumerate(doc_ids)}
    aligned = []
    for n, run in enumerate(runs):
        if set(run.query_ids) != set(query_ids):
            raise ConfigError(f"run {n} holds different queries from run 0: fusion needs the same query ids")
        remap = np.array([lookup.setdefault(d, len(lookup)) for d in run.doc_ids] + [-1], dtype=np.int64)
        position = {q: i for i, q in enumerate(run.query_ids)}
        rows = [position[q] for q in query_ids] if run.query_ids != query_ids else slice(None)
        aligned.append((remap[run.doc_index[rows]], run.scores[rows]))
    return query_ids, tuple(lookup), aligned


def _ranks(doc_index: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """1-based rank of each slot within its row (score descending, ties by position); 0 for empty slots."""
    valid = doc_index >= 0
    keyed = np.where(valid, scores, -np.inf)
    order = np.lexsort((np.arange(doc_index.shape[1])[None, :].repeat(len(doc_index), 0), -keyed, ~valid), axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, doc_index.shape[1] + 1)[None, :], axis=1)
    return np.where(valid, ranks, 0)


def _normalize(doc_index: np.ndarray, scores: np.ndarray, norm: str) -> np.ndarray:
    valid = doc_index >= 0
    if norm == "none":
        return np.where(valid, scores, 0.0)
    masked = np.ma.masked_array(scores, ~valid)
    if norm == "min-max":
        low = masked.min(axis=1).filled(0.0)[:, None]
        high = masked.max(axis=1).filled(0.0)[:, None]
        out = (scores - low) / np.maximum(high - low, 1e-9)
    else:  # zmuv
        mean = masked.mean(axis=1).filled(0.0)[:, None]
        std = masked.std(axis=1).filled(0.0)[:, None]
        out = (scores - mean) / np.maximum(std, 1e-9)
    return np.where(valid, out, 0.0)


def _sum_contributions(
    query_ids: tuple[str, ...], doc_ids: tuple[str, ...], parts: list[tuple[np.ndarray, np.ndarray]], top_k: int | None
) -> RankedRun:
    n_docs = len(doc_ids)
    rows, docs, values = [], [], []
    for doc_index, contrib in parts:
        r, c = np.nonzero(doc_index >= 0)
        rows.append(r)
        docs.append(doc_index[r, c])
        values.append(contrib[r, c])
    row, doc, value = np.concatenate(rows), np.concatenate(docs), np.concatenate(values)
    keys, inverse = np.unique(row * n_docs + doc, return_inverse=True)
    totals = np.bincount(inverse, weights=value, minlength=len(keys))
    key_row, key_doc = keys // max(n_docs, 1), keys % max(n_docs, 1)
    counts = np.bincount(key_row, minlength=len(query_ids))
    depth = int(counts.max(initial=0))
    index = np.full((len(query_ids), depth), -1, dtype=np.int64)
    scores = np.full((len(query_ids), depth), -np.inf)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    col = np.arange(len(keys)) - starts[key_row]
    index[key_row, col] = key_doc
    scores[key_row, col] = totals
    run = RankedRun(query_ids, doc_ids, index, scores)
    return sort_and_cut(run, depth if top_k is None else top_k)


def reciprocal_rank_fusion(runs: Sequence[RankedRun], k: int = 60, top_k: int | None = None) -> RankedRun:
    """RRF (Cormack et al., 2009) as ranx computes it; keeps the top ``top_k`` (all by default)."""
    query_ids, doc_ids, aligned = _aligned(runs)
    parts = []
    for doc_index, scores in aligned:
        ranks = _ranks(doc_index, scores)
        parts.append((doc_index, np.where(ranks > 0, 1.0 / (k + np.maximum(ranks, 1)), 0.0)))
    return _sum_contributions(query_ids, doc_ids, parts, top_k)


def weighted_sum(
    runs: Sequence[RankedRun], weights: Sequence[float] | None = None, norm: str = "min-max", top_k: int | None = None
) -> RankedRun:
    """Weighted sum of normalised scores, as ``ranx.fuse(runs, norm=norm, method="wsum")``."""
    norm = _NORM_ALIASES.get(norm, norm)
    if norm not in NORMALIZATIONS:
        raise UnknownNameError("score normalization", norm, NORMALIZATIONS)
    weights = tuple(weights) if weights is not None else (1.0,) * len(runs)
    if len(weights) != len(runs):
        raise ConfigError(f"{len(weights)} fusion weights for {len(runs)} runs")
    query_ids, doc_ids, aligned = _aligned(runs)
    parts = [(doc_index, w * _normalize(doc_index, scores, norm)) for (doc_index, scores), w in zip(aligned, weights)]
    return _sum_contributions(query_ids, doc_ids, parts, top_k)
