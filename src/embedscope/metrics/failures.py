"""Failure attribution for a stage that ranks given candidates (a reranker; a fusion of several retrievers): was a
query lost because its relevant documents were not among the candidates (recall) or because they were ranked too
low (ranking)?

For a query ``q`` with relevant documents ``R_q`` (qrels relevance > 0; judgments are integers, so trec_eval's
relevance level 1), gains ``g_d`` (the relevance, graded) and the candidates ``C_q`` the stage received:

* ``candidates_recall_q = |R_q ∩ C_q| / |R_q|`` (0 when ``R_q`` is empty);
* ``ceiling_q = DCG@10(R_q ∩ C_q by gain, descending) / IDCG@10(R_q)``, with ``DCG@10 = Σ_{i<10} g_(i) / log2(i + 2)``
  over the ranked gains: the best nDCG@10 any order of the candidates reaches, by trec_eval's ``ndcg_cut.10`` (the
  task's ``ndcg_at_10``), against *all* the query's qrels: a relevant document outside the candidates still counts in
  the ideal DCG. 0 when ``R_q`` is empty;
* ``failure_q`` = ``candidate_miss`` when ``R_q ∩ C_q`` is empty (a query with no relevant judgment at all, which
  MTEB keeps, is one), else ``ranking`` when ``nDCG@10_q < ceiling_q − 1e-12`` (:data:`TOLERANCE`: the two are sums
  of the same terms in other orders), else ``none``.

The loss of the stage over its ``n`` evaluated queries, ``L = 1 − mean nDCG@10 = (1/n) Σ_q (1 − nDCG@10_q)``, splits
exactly into three parts (:func:`loss_split`):

* ``recall  = (1/n) Σ_{q: candidate_miss} (1 − nDCG@10_q)`` (nDCG@10_q is 0 there: each such query costs 1/n);
* ``ranking = (1/n) Σ_{q: ranking} (ceiling_q − nDCG@10_q)``, what a better order of the candidates would win back;
* ``partial = (1/n) [Σ_{q: ranking} (1 − ceiling_q) + Σ_{q: none} (1 − nDCG@10_q)]``, what remains: queries with a
  relevant candidate whose candidates lack other relevant documents the ideal top 10 needs (partial recall).

>>> from embedscope.types import RankedRun
>>> candidates = RankedRun.from_dict({"q1": {"a": 0.9, "b": 0.1}, "q2": {"c": 1.0}})
>>> found = candidate_failures({"q1": {"a": 1, "b": 2}, "q2": {"d": 1}}, ("q1", "q2"), [candidates], [0.8, 0.0])
>>> found.candidates_recall.tolist(), found.ceiling_ndcg_at_10.tolist(), found.failure
([1.0, 0.0], [1.0, 0.0], ('ranking', 'candidate_miss'))
>>> split = loss_split(found.ndcg_at_10, found.ceiling_ndcg_at_10, found.failure)
>>> round(split.loss, 3), round(split.recall, 3), round(split.ranking, 3), split.partial
(0.6, 0.5, 0.1, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from embedscope.metrics.ranking import _doc_lookup
from embedscope.types import Qrels, RankedRun

FAILURE_CLASSES: tuple[str, ...] = ("candidate_miss", "ranking", "none")
"""A query's failure class, in the order summaries count them."""

FAILURE_COLUMNS: tuple[str, ...] = ("candidates_recall", "ceiling_ndcg_at_10", "failure")
"""The per-item columns a stage that ranks candidates adds to each query's row."""

TOLERANCE = 1e-12
"""How far below its ceiling a query's nDCG@10 must be to count as a ranking failure."""

CUTOFF = 10


@dataclass(frozen=True)
class CandidateFailures:
    """Per query (in ``query_ids`` order): recall of the candidates, their nDCG@10 ceiling, the failure class, and the
    stage's own nDCG@10."""

    query_ids: tuple[str, ...]
    candidates_recall: np.ndarray  # float64 [n]
    ceiling_ndcg_at_10: np.ndarray  # float64 [n]
    failure: tuple[str, ...]
    ndcg_at_10: np.ndarray  # float64 [n]

    def columns(self) -> dict[str, list]:
        """The per-item columns (:data:`FAILURE_COLUMNS`)."""
        return {
            "candidates_recall": self.candidates_recall.tolist(),
            "ceiling_ndcg_at_10": self.ceiling_ndcg_at_10.tolist(),
            "failure": list(self.failure),
        }


@dataclass(frozen=True)
class LossSplit:
    """A stage's loss ``1 − mean nDCG@10`` split into recall, ranking and partial recall, and how many queries fall in
    each failure class (the formulas: this module's docstring)."""

    queries: int
    candidate_miss: int
    ranking_failures: int
    no_failure: int
    loss: float
    recall: float
    ranking: float
    partial: float

    def as_dict(self) -> dict[str, float]:
        """What a result's ``pipeline_stages`` entry records (under ``failures``)."""
        return {
            "queries": self.queries,
            "candidate_miss": self.candidate_miss,
            "ranking": self.ranking_failures,
            "none": self.no_failure,
            "loss": self.loss,
            "loss_recall": self.recall,
            "loss_ranking": self.ranking,
            "loss_partial": self.partial,
        }


def _dcg(gains: Sequence[float], k: int) -> float:
    """``Σ_{i<k} gains[i] / log2(i + 2)``, summed in rank order."""
    total = 0.0
    for i, gain in enumerate(gains[:k]):
        total += gain / np.log2(i + 2.0)
    return float(total)


def candidate_failures(
    qrels: Qrels,
    query_ids: Sequence[str],
    candidates: Sequence[RankedRun],
    ndcg_at_10: Sequence[float],
    *,
    ignore_identical_ids: bool = False,
    tolerance: float = TOLERANCE,
) -> CandidateFailures:
    """Each query's candidates recall, nDCG@10 ceiling and failure class (this module's docstring).

    ``candidates``: the runs whose rows, together, hold each query's candidates (one run for a reranker's input; the
    fused retrievers' runs for a fusion, whose candidates are their union). ``ndcg_at_10``: the stage's nDCG@10 of
    each of ``query_ids``. ``ignore_identical_ids`` drops a candidate whose id is its query's, as the task's scoring
    does.
    """
    lookups = [_doc_lookup(run) for run in candidates]
    rows = [{q: i for i, q in enumerate(run.query_ids)} for run in candidates]
    recall = np.zeros(len(query_ids))
    ceiling = np.zeros(len(query_ids))
    ndcg = np.asarray(ndcg_at_10, dtype=np.float64)
    failure = []
    for n, q in enumerate(query_ids):
        relevant = [(d, r) for d, r in qrels.get(q, {}).items() if r > 0]
        present = np.zeros(len(relevant), dtype=bool)
        for run, lookup, row_of in zip(candidates, lookups, rows):
            if q not in row_of or not relevant:
                continue
            index = np.array([lookup.get(d, -1) for d, _ in relevant], dtype=np.int64)
            row = run.doc_index[row_of[q]]
            present |= (index >= 0) & (row[None, :] == index[:, None]).any(axis=1)
        if ignore_identical_ids:
            present &= np.array([d != q for d, _ in relevant], dtype=bool)
        if relevant:
            recall[n] = int(present.sum()) / len(relevant)
            ideal = _dcg(sorted((float(r) for _, r in relevant), reverse=True), CUTOFF)
            found = sorted((float(r) for (_, r), p in zip(relevant, present) if p), reverse=True)
            ceiling[n] = _dcg(found, CUTOFF) / ideal if ideal > 0 else 0.0
        if not present.any():
            failure.append("candidate_miss")
        elif ndcg[n] < ceiling[n] - tolerance:
            failure.append("ranking")
        else:
            failure.append("none")
    return CandidateFailures(tuple(query_ids), recall, ceiling, tuple(failure), ndcg)


def loss_split(
    ndcg_at_10: Sequence[float] | np.ndarray, ceiling: Sequence[float] | np.ndarray, failure: Sequence[str]
) -> LossSplit:
    """The loss ``L = 1 − mean nDCG@10`` as ``recall + ranking + partial`` (formulas: this module's docstring);
    sums run over the queries in order.

    >>> s = loss_split([0.0, 0.5, 0.9, 1.0], [0.0, 1.0, 0.9, 1.0], ["candidate_miss", "ranking", "none", "none"])
    >>> (s.candidate_miss, s.ranking_failures, s.no_failure), round(s.loss, 3), s.recall, s.ranking, round(s.partial, 3)
    ((1, 1, 2), 0.4, 0.25, 0.125, 0.025)
    """
    counts = {name: 0 for name in FAILURE_CLASSES}
    recall = ranking = partial = loss = 0.0
    for value, top, kind in zip(ndcg_at_10, ceiling, failure, strict=True):
        value, top = float(value), float(top)
        counts[kind] += 1
        loss += 1.0 - value
        if kind == "candidate_miss":
            recall += 1.0 - value
        elif kind == "ranking":
            ranking += top - value
            partial += 1.0 - top
        else:
            partial += 1.0 - value
    n = len(failure)
    mean = (lambda total: total / n) if n else (lambda total: float("nan"))
    return LossSplit(
        n,
        counts["candidate_miss"],
        counts["ranking"],
        counts["none"],
        mean(loss),
        mean(recall),
        mean(ranking),
        mean(partial),
    )
