"""Failure attribution (metrics/failures.py): candidates recall and the nDCG@10 ceiling against pytrec_eval, the
failure classes and the loss split on hand-made cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embedscope.metrics.failures import TOLERANCE, candidate_failures, loss_split
from embedscope.types import RankedRun

pytrec_eval = pytest.importorskip("pytrec_eval")


def _random_case(seed: int) -> tuple[dict, dict[str, list[str]]]:
    """Graded qrels (0–3, some queries with 15 relevant documents, some with none) and random candidate lists."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, candidates = {}, {}
    for n in range(40):
        q = f"q{n}"
        judged = rng.choice(docs, size=int(rng.integers(1, 20)), replace=False)
        qrels[q] = {str(d): int(rng.integers(0, 4)) for d in judged}
        candidates[q] = [str(d) for d in rng.choice(docs, size=int(rng.integers(1, 25)), replace=False)]
        if n % 4 == 0:  # every judged document a candidate: a ceiling of 1 (or 0 without a relevant one)
            candidates[q] = list(dict.fromkeys([*candidates[q], *qrels[q]]))
    return qrels, candidates


def _as_run(candidates: dict[str, list[str]], score) -> RankedRun:
    return RankedRun.from_dict({q: {d: score(q, d) for d in docs} for q, docs in candidates.items()})


@pytest.mark.parametrize("seed", [0, 1])
def test_recall_and_ceiling_equal_pytrec_eval(seed):
    qrels, candidates = _random_case(seed)
    queries = tuple(qrels)
    found = candidate_failures(qrels, queries, [_as_run(candidates, lambda q, d: 0.5)], [0.0] * len(queries))
    # independent: pytrec_eval's recall over every candidate, and its ndcg_cut.10 of the candidates in ideal order
    ideal_run = {q: {d: float(qrels[q].get(d, 0)) for d in docs} for q, docs in candidates.items()}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1000", "ndcg_cut.10"}).evaluate(ideal_run)
    assert found.candidates_recall.tolist() == pytest.approx([trec[q]["recall_1000"] for q in queries], abs=1e-12)
    assert found.ceiling_ndcg_at_10.tolist() == pytest.approx([trec[q]["ndcg_cut_10"] for q in queries], abs=1e-12)
    ceiling = found.ceiling_ndcg_at_10  # the cases cover a ceiling of 0, between 0 and 1, and 1
    assert (ceiling == 0).sum() > 2 and ((ceiling > 0) & (ceiling < 1)).sum() > 5 and (ceiling == 1).sum() > 2


def test_the_union_of_several_runs_is_the_candidates():
    qrels = {"q": {"a": 1, "b": 3, "c": 2}}
    first = RankedRun.from_dict({"q": {"a": 0.9, "x": 0.1}})
    second = RankedRun.from_dict({"q": {"b": 0.3, "y": 0.2}})
    found = candidate_failures(qrels, ("q",), [first, second], [0.0])
    assert found.candidates_recall.tolist() == [2 / 3]
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    assert found.ceiling_ndcg_at_10.tolist() == pytest.approx([(3 + 1 / math.log2(3)) / ideal], abs=1e-15)


def test_failure_classes_and_loss_split():
    qrels = {
        "miss": {"a": 1},  # its relevant document is not a candidate
        "low": {"b": 1},  # a candidate, ranked third
        "best": {"c": 2, "z": 1},  # best order of its candidates, but z is not one: ceiling below 1
        "none": {"d": 0},  # no relevant judgment at all (MTEB keeps the query): a miss, loss 1
        "tie": {"e": 1},  # nDCG within the tolerance of its ceiling
    }
    run = RankedRun.from_dict({q: {"b": 1.0, "c": 0.5, "d": 0.2, "e": 0.1, "x": 0.0} for q in qrels})
    ceiling_best = 2 / (2 + 1 / math.log2(3))
    ndcg = [0.0, 0.5, ceiling_best, 0.0, 1.0 - TOLERANCE / 2]
    found = candidate_failures(qrels, tuple(qrels), [run], ndcg)
    assert found.failure == ("candidate_miss", "ranking", "none", "candidate_miss", "none")
    assert found.candidates_recall.tolist() == [0.0, 1.0, 0.5, 0.0, 1.0]
    split = loss_split(found.ndcg_at_10, found.ceiling_ndcg_at_10, found.failure)
    assert (split.queries, split.candidate_miss, split.ranking_failures, split.no_failure) == (5, 2, 1, 2)
    assert split.recall == pytest.approx(2 / 5)
    assert split.ranking == pytest.approx(0.5 / 5)
    assert split.partial == pytest.approx((1 - ceiling_best + TOLERANCE / 2) / 5)
    assert split.loss == pytest.approx(1 - sum(ndcg) / 5)
    assert split.loss == pytest.approx(split.recall + split.ranking + split.partial, abs=1e-15)
    # just below the tolerance: a ranking failure
    lower = candidate_failures(qrels, tuple(qrels), [run], [*ndcg[:4], 1.0 - 2 * TOLERANCE])
    assert lower.failure[-1] == "ranking"


def test_identical_ids_are_not_candidates_when_the_task_ignores_them():
    qrels = {"q": {"q": 1, "a": 1}}
    run = RankedRun.from_dict({"q": {"q": 1.0, "a": 0.5}})
    assert candidate_failures(qrels, ("q",), [run], [0.5]).candidates_recall.tolist() == [1.0]
    kept = candidate_failures(qrels, ("q",), [run], [0.5], ignore_identical_ids=True)
    assert kept.candidates_recall.tolist() == [0.5]
