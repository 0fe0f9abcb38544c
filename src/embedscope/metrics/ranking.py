"""Ranking metrics that reproduce pytrec_eval (trec_eval) and MTEB's retrieval scores exactly.

The trec_eval measures (``ndcg_cut``, ``map_cut``, ``recall``, ``P``, ``success``) follow
trec_eval's rules: scores are compared as float32, ties are broken by doc id descending, a doc is
relevant when its judgment is >= 1, and nDCG uses the judgment as its gain. ``mrr_at_k`` follows
MTEB's own code instead, which ranks by the float64 score (ties again by doc id descending).

Only the positions of the relevant documents matter to these measures, so nothing is sorted:
for each judged-relevant document found in a row we count how many entries of the row beat it.
That costs ``O(relevant docs × depth)`` comparisons, all vectorized.

The evaluated queries are the ones pytrec_eval evaluates: queries of the run that have a
non-empty qrels entry, in run order (an empty run row still counts, with all metrics 0).
``to_mteb()`` is what mteb computes when its results hold exactly those queries (mteb itself
drops unjudged queries before searching, and would fail on a run query without qrels). Sums run
in trec_eval's and mteb's order, so values come out bit-identical, not just close.
Unsupported: NaN scores, and the same doc twice in one row (a dict cannot hold that).

>>> qrels = {"q1": {"d1": 1, "d2": 2}, "q2": {"d3": 0}}
>>> run = {"q1": {"d1": 0.2, "d2": 0.9, "d4": 0.5}, "q2": {"d3": 0.1}, "q9": {"d1": 1.0}}
>>> r = evaluate_ranking(qrels, run, (1, 3))
>>> r.query_ids
('q1', 'q2')
>>> r.per_query["recall_at_1"].tolist(), r.per_query["precision_at_3"].tolist()
([0.5, 0.0], [0.6666666666666666, 0.0])
>>> scores = r.to_mteb()
>>> scores["recall_at_3"], scores["mrr_at_1"], scores["accuracy"]
(0.5, 0.5, 0.25)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from embedscope.errors import ConfigError, DataFormatError
from embedscope.messages import listing
from embedscope.metrics.nauc import ABSTENTION_RATES, CONFIDENCE_FUNCTIONS, TieGroups, abstention_curve, nauc
from embedscope.types import KeyedRun, Qrels, RankedRun, RunDict, short_order

DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 20, 100, 1000)
"""MTEB's retrieval cutoffs (``AbsTaskRetrieval.k_values``)."""

TREC_METRICS: tuple[str, ...] = ("ndcg", "map", "recall", "precision", "hit_rate")
"""Per-k metrics computed the trec_eval way (mteb key prefixes)."""

_CHUNK_ELEMENTS = 1 << 18  # rows per chunk × depth: keeps each working array near 2 MB, cache-sized


@dataclass(frozen=True)
class RankingScores:
    """Per-query ranking metrics for the evaluated queries (run order).

    ``per_query[f"{metric}_at_{k}"]`` holds one float64 per query for ``metric`` in
    :data:`TREC_METRICS` and ``"mrr"``; ``confidence[fct]`` holds MTEB's confidence scores.
    """

    query_ids: tuple[str, ...]
    k_values: tuple[int, ...]
    per_query: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray] = field(repr=False)

    def mean(self, name: str) -> float:
        """Unrounded mean of one metric over the evaluated queries (sequential sum, as MTEB)."""
        values = self.per_query[name]
        return sum(values.tolist()) / len(values) if len(values) else float("nan")

    def to_mteb(self) -> dict[str, float]:
        """The scores dict MTEB 2.26 builds for a retrieval split (``make_score_dict``), same key order.

        Means of the trec_eval metrics are rounded to 5 decimals, MRR is not (as in mteb);
        ``main_score``, ``hf_subset`` and ``languages`` are added by the caller, as in mteb.
        """
        ks = self.k_values
        out: dict[str, float] = {}
        for metric in ("ndcg", "map", "recall"):
            out.update({f"{metric}_at_{k}": self._rounded_mean(f"{metric}_at_{k}") for k in ks})
        out["accuracy"] = out.get("recall_at_1", float("nan"))
        out.update({f"precision_at_{k}": self._rounded_mean(f"precision_at_{k}") for k in ks})
        out.update({f"mrr_at_{k}": self.mean(f"mrr_at_{k}") for k in ks})
        groups = {fct: TieGroups(self.confidence[fct]) for fct in CONFIDENCE_FUNCTIONS}  # sorted once, not per metric
        for metric in ("ndcg", "map", "recall", "precision", "mrr"):
            for k in ks:
                values = self.per_query[f"{metric}_at_{k}"]
                oracle = abstention_curve(values, values, ABSTENTION_RATES)
                for fct in CONFIDENCE_FUNCTIONS:
                    out[f"nauc_{metric}_at_{k}_{fct}"] = nauc(
                        self.confidence[fct], values, groups=groups[fct], oracle=oracle
                    )
        out.update({f"hit_rate_at_{k}": self._rounded_mean(f"hit_rate_at_{k}") for k in ks})
        return out

    def per_query_csv(self) -> str:
        """One row per evaluated query: ``query_id`` and every metric at every k (full precision)."""
        import csv
        import io

        names = [f"{m}_at_{k}" for m in (*TREC_METRICS, "mrr") for k in self.k_values]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["query_id", *names])
        columns = [self.per_query[n].tolist() for n in names]
        writer.writerows([q, *values] for q, *values in zip(self.query_ids, *columns))
        return out.getvalue()

    def _rounded_mean(self, name: str) -> float:
        return round(self.mean(name), 5)

    def per_item(self, run: RankedRun, top: int = 10) -> dict[str, list]:
        """Columns of per-query values: ``id``, every metric, and ``top_{top}`` (doc ids by score, best first)."""
        lookup = {q: i for i, q in enumerate(run.query_ids)}
        rows = np.array([lookup[q] for q in self.query_ids], dtype=np.int64)
        return {
            "id": list(self.query_ids),
            **{k: v.tolist() for k, v in self.per_query.items()},
            f"top_{top}": top_doc_ids(run, rows, top),
        }


def top_doc_ids(run: RankedRun, rows: np.ndarray, top: int = 10) -> list[list[str]]:
    """The ``top`` best-scored doc ids of each of ``rows`` of ``run`` (ties keep the run's order).

    >>> top_doc_ids(RankedRun.from_dict({"q": {"a": 0.1, "b": 0.7, "c": 0.5}}), np.array([0]), 2)
    [['b', 'c']]
    """
    index, scores = run.doc_index[rows], np.where(run.doc_index[rows] >= 0, run.scores[rows], -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top]
    picked = np.take_along_axis(index, order, axis=1)
    return [[run.doc_ids[j] for j in row if j >= 0] for row in picked]


class KeyClash(Exception):
    """Two different doc ids of a :class:`KeyedRun` share a key: score a :class:`RankedRun` instead."""


def evaluate_ranking(
    qrels: Qrels,
    run: RankedRun | KeyedRun | RunDict,
    k_values: Sequence[int] = DEFAULT_K_VALUES,
    ignore_identical_ids: bool = False,
) -> RankingScores:
    """Score a run against qrels at every cutoff in ``k_values``.

    ``ignore_identical_ids`` drops a retrieved doc whose id equals its query id before anything
    is computed (MTEB's ``RetrievalEvaluator.evaluate``); qrels are left untouched.
    Raises :class:`DataFormatError` when no query of the run has judgments, :class:`KeyClash` when a
    :class:`KeyedRun` cannot be scored by its keys (all but never).
    """
    ks = tuple(int(k) for k in k_values)
    if not ks or min(ks) < 1:
        raise ConfigError(f"cutoffs (k) must be positive integers, got {', '.join(map(str, k_values)) or 'none'}")
    keyed = isinstance(run, KeyedRun)
    if keyed and ignore_identical_ids:
        raise ValueError("ignore_identical_ids needs a RankedRun")
    if not isinstance(run, (RankedRun, KeyedRun)):
        run = RankedRun.from_dict(run)
    if len(set(run.query_ids)) != len(run.query_ids):
        raise DataFormatError("the run has duplicate query ids")
    rows = np.array([i for i, q in enumerate(run.query_ids) if len(qrels.get(q, {})) > 0], dtype=np.int64)
    if not len(rows):
        raise DataFormatError(
            "the run and the qrels have none of the same query ids (with a non-empty qrels entry): "
            f"run {listing(run.query_ids, 3, quote=True)}; qrels {listing(qrels, 3, quote=True)}"
        )
    query_ids = tuple(run.query_ids[i] for i in rows)
    lookup = _key_lookup(qrels, query_ids) if isinstance(run, KeyedRun) else _doc_lookup(run)
    judged = _judgments(qrels, query_ids, lookup)
    scan = _scan(run, rows, judged, ignore_identical_ids)
    if isinstance(run, KeyedRun):
        _check_keys(run, rows, judged, scan.slots, lookup)
    per_query = _trec_metrics(judged, scan.ranks32, ks)
    per_query.update(_mrr(scan.first64, ks))
    return RankingScores(query_ids, ks, per_query, scan.confidence)


# ---------------------------------------------------------------------------------------------
# Judgments


@dataclass(frozen=True)
class _Judged:
    """Relevant (>= 1) judgments of the evaluated queries, padded per query, retrieved-able first."""

    doc: np.ndarray  # int64 [nq, P]: run vocabulary index of each relevant doc, -1 = not in run/pad
    gain: np.ndarray  # float64 [nq, P]: its judgment (0 on padding)
    num_rel: np.ndarray  # int64 [nq]
    ideal: np.ndarray  # float64 [nq, P]: gains sorted descending (0 on padding)


def _doc_lookup(run: RankedRun) -> dict[str, int]:
    """``doc_id -> column`` for the run's vocabulary, cached on the run."""
    if len(run._lookup) != len(run.doc_ids):
        run._lookup.clear()
        run._lookup.update(zip(run.doc_ids, range(len(run.doc_ids))))
    return run._lookup


def _key_lookup(qrels: Qrels, query_ids: Sequence[str]) -> dict[str, int]:
    """``doc_id -> key`` (:func:`embedscope.data.runs.id_keys`) for the relevant docs of the queries."""
    from embedscope.data.runs import id_keys, string_array

    names = list(dict.fromkeys(d for q in query_ids for d, r in qrels[q].items() if r >= 1))
    keys = id_keys(string_array(names)).tolist()
    if len(set(keys)) != len(keys):
        raise KeyClash("two relevant doc ids share a key")
    return dict(zip(names, keys))


def _check_keys(run: KeyedRun, rows: np.ndarray, judged: _Judged, slots: np.ndarray, lookup: Mapping[str, int]) -> None:
    """Raises :class:`KeyClash` unless every relevant doc found by its key is that doc."""
    q, t = np.nonzero((slots >= 0) & (judged.doc >> 59 > 0))  # short ids are their keys: nothing to check
    if not len(q):
        return
    names = {key: name for name, key in lookup.items()}
    expected = [names[k] for k in judged.doc[q, t].tolist()]
    if run.docs_at(rows[q], slots[q, t]) != expected:
        raise KeyClash("a retrieved doc id shares its key with a relevant one")


def _judgments(qrels: Qrels, query_ids: Sequence[str], lookup: Mapping[str, int]) -> _Judged:
    docs: list[int] = []
    gains: list[int] = []
    num_rel: list[int] = []
    for q in query_ids:
        before = len(gains)
        for d, r in qrels[q].items():
            if r >= 1:
                docs.append(lookup.get(d, -1))
                gains.append(r)
        num_rel.append(len(gains) - before)
    counts = np.array(num_rel, dtype=np.int64)
    n, width = len(counts), int(counts.max(initial=0))
    row = np.repeat(np.arange(n), counts)
    doc_flat = np.array(docs, dtype=np.int64)
    gain_flat = np.array(gains, dtype=np.float64)
    order = np.lexsort((doc_flat < 0, row))  # docs present in the run first within each query
    col = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
    doc = np.full((n, width), -1, dtype=np.int64)
    gain = np.zeros((n, width), dtype=np.float64)
    doc[row, col] = doc_flat[order]
    gain[row, col] = gain_flat[order]
    ideal = -np.sort(-gain, axis=1)
    return _Judged(doc, gain, counts, ideal)


# ---------------------------------------------------------------------------------------------
# One pass over the run: ranks of the relevant docs and confidence scores


class _DocRank:
    """Rank of each vocabulary doc id in string order, computed only when a tie needs it."""

    def __init__(self, doc_ids: Sequence[str]) -> None:
        self._doc_ids = doc_ids
        self._rank: np.ndarray | None = None

    def __call__(self, index: np.ndarray) -> np.ndarray:
        if self._rank is None:
            order = np.argsort(np.array(self._doc_ids, dtype=str), kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self._rank = rank
        return self._rank[np.maximum(index, 0)]


class _DocOrder:
    """``later(rows, a, b)``: whether the doc at slot ``a`` of run row ``rows[i]`` sorts after the one at
    slot ``b`` (string order, trec_eval's tie-break)."""

    def __init__(self, run: RankedRun | KeyedRun) -> None:
        self._run = run
        self._keyed = run if isinstance(run, KeyedRun) else None
        self._rank = None if isinstance(run, KeyedRun) else _DocRank(run.doc_ids)

    def later(self, rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self._rank is not None:
            index = self._run.doc_index
            return self._rank(index[rows, a]) > self._rank(index[rows, b])
        index = self._run.doc_index
        ka, kb = index[rows, a], index[rows, b]
        (wa, la), (wb, lb) = short_order(ka), short_order(kb)
        out = (wa > wb) | ((wa == wb) & (la > lb))
        long = np.flatnonzero((ka >> 59) | (kb >> 59))  # an id of more than 7 bytes: compare the strings
        if len(long):
            assert self._keyed is not None  # the keys of a RankedRun (no _rank) are doc ids: never here
            names_a = self._keyed.docs_at(rows[long], a[long])
            names_b = self._keyed.docs_at(rows[long], b[long])
            out[long] = [x > y for x, y in zip(names_a, names_b)]
        return out


@dataclass(frozen=True)
class _Scan:
    slots: np.ndarray  # int64 [nq, P]: slot of each relevant doc in its row, -1 if absent
    ranks32: np.ndarray  # float64 [nq, P]: 0-based trec_eval rank of each relevant doc, inf if absent
    first64: np.ndarray  # float64 [nq]: 0-based float64-order rank of the best relevant doc, inf if none
    confidence: dict[str, np.ndarray]


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """Number of True per row of a boolean matrix."""
    return mask.view(np.uint8).sum(axis=1, dtype=np.int64)


def _ranks_at(
    s32: np.ndarray, s64: np.ndarray, run_rows: np.ndarray, slot: np.ndarray, found: np.ndarray, order: _DocOrder
) -> tuple[np.ndarray, np.ndarray]:
    """0-based rank of the doc at ``slot`` of each row, in trec_eval order and in MTEB's MRR order.

    trec_eval: (float32 score, doc id) descending; MRR: (float64 score, doc id) descending. Rounding
    to float32 is monotonic, so the two orders differ only inside groups equal in float32.
    Empty slots must hold NaN; rows where ``found`` is False get inf.
    """
    rows = np.arange(len(slot))
    v32 = np.where(found, s32[rows, slot], np.float32(np.nan))[:, None]
    ahead = _row_counts(s32 > v32)
    equal = s32 == v32
    rank32 = ahead.astype(np.float64)
    rank64 = rank32.copy()
    tied = np.flatnonzero(_row_counts(equal) > 1)
    if len(tied):
        pair_row, pair_col = np.nonzero(equal[tied])  # the entries tied with a target, row by row
        src = tied[pair_row]
        later = order.later(run_rows[src], pair_col, slot[src])
        x64, v64 = s64[src, pair_col], s64[src, slot[src]]
        rank32[tied] += np.bincount(pair_row, weights=later, minlength=len(tied))
        rank64[tied] += np.bincount(pair_row, weights=(x64 > v64) | ((x64 == v64) & later), minlength=len(tied))
    return np.where(found, rank32, np.inf), np.where(found, rank64, np.inf)


def _valid_block(
    run: RankedRun | KeyedRun, rows: np.ndarray, ignore_identical_ids: bool
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Doc indices and float64 scores of some rows (copies); dropped or empty slots: index -1, NaN.

    The flag tells whether every slot holds a doc.
    """
    index = run.doc_index[rows]
    if ignore_identical_ids:
        assert isinstance(run, RankedRun)  # a KeyedRun with ignore_identical_ids is refused up front
        lookup = _doc_lookup(run)
        self_doc = np.array([lookup.get(run.query_ids[i], -2) for i in rows], dtype=np.int64)
        index[index == self_doc[:, None]] = -1
    scores = np.asarray(run.scores[rows], dtype=np.float64)
    full = bool(index.min(initial=0) >= 0)
    if not full:
        scores[index < 0] = np.nan
    return index, scores, full


def _scan(run: RankedRun | KeyedRun, rows: np.ndarray, judged: _Judged, ignore_identical_ids: bool) -> _Scan:
    """Ranks and confidence scores for the evaluated rows, in cache-sized chunks of rows."""
    n = len(rows)
    ranks32 = np.full(judged.doc.shape, np.inf)
    ranks64 = np.full(judged.doc.shape, np.inf)
    slots = np.full(judged.doc.shape, -1, dtype=np.int64)
    confidence = {fct: np.zeros(n) for fct in CONFIDENCE_FUNCTIONS}
    present = np.count_nonzero(judged.doc >= 0, axis=1)
    order = np.argsort(-present, kind="stable")  # within a chunk, rows needing more lookups first
    doc_order = _DocOrder(run)
    chunk = max(1, _CHUNK_ELEMENTS // max(run.depth, 1))
    for start in range(0, n, chunk):
        part = order[start : start + chunk]
        index, s64, full = _valid_block(run, rows[part], ignore_identical_ids)
        ranks32[part], ranks64[part], slots[part] = _chunk_ranks(
            index, s64, judged.doc[part], present[part], rows[part], doc_order
        )
        for fct, values in _chunk_confidence(index, s64, full).items():
            confidence[fct][part] = values
    return _Scan(slots, ranks32, ranks64.min(axis=1, initial=np.inf), confidence)


def _chunk_ranks(
    index: np.ndarray, s64: np.ndarray, docs: np.ndarray, present: np.ndarray, run_rows: np.ndarray, order: _DocOrder
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both ranks of every relevant doc of some rows (inf when not retrieved).

    Rows must come in decreasing order of ``present`` (relevant docs present in the vocabulary),
    with those docs first in ``docs``, so that each lookup round works on a prefix of the rows.
    """
    ranks32 = np.full(docs.shape, np.inf)
    ranks64 = np.full(docs.shape, np.inf)
    slots = np.full(docs.shape, -1, dtype=np.int64)
    s32 = s64.astype(np.float32)
    if index.shape[1] == 0:  # nothing retrieved for any query (a run of width 0): no relevant doc was found
        return ranks32, ranks64, slots
    for t in range(docs.shape[1]):
        m = int(np.count_nonzero(present > t))
        if m == 0:
            break
        hit = index[:m] == docs[:m, t][:, None]
        slot = hit.argmax(axis=1)
        found = hit[np.arange(m), slot]
        ranks32[:m, t], ranks64[:m, t] = _ranks_at(s32[:m], s64[:m], run_rows[:m], slot, found, order)
        slots[:m, t] = np.where(found, slot, -1)
    return ranks32, ranks64, slots


# ---------------------------------------------------------------------------------------------
# Metrics from ranks


def _prefix_sums(terms: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sequential sum of the first ``counts[i]`` terms of each row (0 when the count is 0)."""
    if terms.shape[1] == 0:
        return np.zeros(len(terms))
    cum = np.cumsum(terms, axis=1)
    picked = cum[np.arange(len(terms)), np.maximum(counts - 1, 0)]
    return np.where(counts > 0, picked, 0.0)


def _trec_metrics(judged: _Judged, ranks32: np.ndarray, ks: Sequence[int]) -> dict[str, np.ndarray]:
    """ndcg_cut, map_cut, recall, P and success per query, as trec_eval computes them."""
    order = np.argsort(ranks32, axis=1, kind="stable")
    ranks = np.take_along_axis(ranks32, order, axis=1)
    gains = np.take_along_axis(judged.gain, order, axis=1)
    found = np.isfinite(ranks)
    safe = np.where(found, ranks, 0.0)
    ordinal = np.arange(1, ranks.shape[1] + 1, dtype=np.float64)
    ap_terms = np.where(found, ordinal / (safe + 1.0), 0.0)
    dcg_terms = np.where(found, gains / np.log2(safe + 2.0), 0.0)
    ideal_terms = judged.ideal / np.log2(np.arange(judged.ideal.shape[1], dtype=np.float64) + 2.0)
    num_rel = judged.num_rel
    has_rel = num_rel > 0
    denom = np.where(has_rel, num_rel, 1).astype(np.float64)
    out: dict[str, np.ndarray] = {}
    for k in ks:
        retrieved = np.count_nonzero(ranks < k, axis=1)
        dcg = _prefix_sums(dcg_terms, retrieved)
        idcg = _prefix_sums(ideal_terms, np.minimum(num_rel, k))
        out[f"ndcg_at_{k}"] = np.where(idcg > 0.0, dcg / np.where(idcg > 0.0, idcg, 1.0), dcg)
        out[f"map_at_{k}"] = np.where(has_rel, _prefix_sums(ap_terms, retrieved) / denom, 0.0)
        out[f"recall_at_{k}"] = np.where(has_rel, retrieved / denom, 0.0)
        out[f"precision_at_{k}"] = retrieved / float(k)
        out[f"hit_rate_at_{k}"] = (retrieved > 0).astype(np.float64)
    return out


def _mrr(first64: np.ndarray, ks: Sequence[int]) -> dict[str, np.ndarray]:
    """MTEB's MRR@k: reciprocal float64-order rank of the first relevant doc within the top k."""
    reciprocal = 1.0 / (np.where(np.isfinite(first64), first64, 0.0) + 1.0)
    return {f"mrr_at_{k}": np.where(first64 < k, reciprocal, 0.0) for k in ks}


# ---------------------------------------------------------------------------------------------
# Confidence scores (mteb.retrieval_metrics.confidence_scores), vectorized per chunk; nAUC: metrics/nauc.py


def _chunk_confidence(index: np.ndarray, scores: np.ndarray, full: bool) -> dict[str, np.ndarray]:
    """Max, std and top1−top2 of each row's retrieved scores (row order kept, as MTEB's lists)."""
    if full and scores.shape[1] > 0:
        return dict(zip(CONFIDENCE_FUNCTIONS, _row_confidence(scores)))
    out = {fct: np.zeros(len(scores)) for fct in CONFIDENCE_FUNCTIONS}
    valid = index >= 0
    counts = np.count_nonzero(valid, axis=1)
    for n in np.unique(counts):
        if n == 0:
            continue
        which = np.flatnonzero(counts == n)
        block = scores[which][valid[which]].reshape(len(which), n)
        for fct, values in zip(CONFIDENCE_FUNCTIONS, _row_confidence(block)):
            out[fct][which] = values
    return out


def _row_confidence(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max, std and top1−top2 per row of a fully valid, C-contiguous block (modified in place)."""
    std = np.std(block, axis=1)
    rows = np.arange(len(block))
    col = block.argmax(axis=1)
    top = block[rows, col]
    if block.shape[1] < 2:
        return top, std, np.zeros(len(block))
    block[rows, col] = -np.inf
    second = block.max(axis=1)
    return top, std, top - second
