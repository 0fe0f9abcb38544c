"""Ranking metrics against pytrec_eval (query by query) and against mteb's own score dict."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from embedscope.metrics import DEFAULT_K_VALUES, evaluate_ranking
from embedscope.types import RankedRun

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {f"{m}.{','.join(map(str, DEFAULT_K_VALUES))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
PYTREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P", "hit_rate": "success"}


def random_case(seed: int, n_queries: int = 60, n_docs: int = 150, depth: int = 40, tie_values: int | None = 5):
    """A run with many ties (few distinct scores, or float64 scores equal in float32) and graded qrels."""
    rng = np.random.default_rng(seed)
    docs = [f"d{rng.integers(0, 10**6)}" for _ in range(n_docs)]
    docs = list(dict.fromkeys(docs))
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        chosen = rng.choice(len(docs), size=int(rng.integers(0, depth + 1)), replace=False)
        if tie_values:
            values = rng.integers(0, tie_values, size=len(chosen)) / tie_values
        else:  # distinct in float64, often equal in float32
            values = 0.5 + rng.integers(0, 4, size=len(chosen)) * 1e-9 + rng.integers(0, 3, size=len(chosen)) * 1e-3
        run[qid] = {docs[j]: float(v) for j, v in zip(chosen, values)}
        if q % 17 == 5:
            continue  # a query without judgments: not evaluated
        judged = rng.choice(len(docs), size=int(rng.integers(1, 12)), replace=False)
        qrels[qid] = {docs[j]: int(rng.integers(0, 4)) for j in judged}
    qrels["q_not_in_run"] = {docs[0]: 1}
    return qrels, run


@pytest.mark.parametrize("seed,ties", [(0, 5), (1, 2), (2, None), (3, 50)])
def test_every_query_and_metric_equals_pytrec_eval(seed, ties):
    qrels, run = random_case(seed, tie_values=ties)
    expected = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    ours = evaluate_ranking(qrels, run)
    assert list(ours.query_ids) == list(expected)  # pytrec_eval's query set and order
    for family, name in PYTREC_NAMES.items():
        for k in DEFAULT_K_VALUES:
            want = np.array([expected[q][f"{name}_{k}"] for q in ours.query_ids])
            np.testing.assert_allclose(
                ours.per_query[f"{family}_at_{k}"], want, rtol=0, atol=1e-12, err_msg=f"{family}@{k}"
            )


def test_float64_scores_are_compared_as_float32_like_trec_eval():
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 0.5, "b": 0.5 + 1e-12, "c": 0.4}}  # a and b tie in float32; "b" > "a" wins the tie
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1", "P.1"}).evaluate(run)["q"]
    ours = evaluate_ranking(qrels, run, k_values=(1,))
    assert ours.per_query["ndcg_at_1"][0] == expected["ndcg_cut_1"] == 0.0
    assert ours.per_query["mrr_at_1"][0] == 0.0  # mteb's MRR sorts float64 scores: b first as well


def mteb_reference(qrels, run, ignore_identical_ids=False):
    from mteb._evaluators.retrieval_evaluator import RetrievalEvaluator
    from mteb._evaluators.retrieval_metrics import make_score_dict

    result = RetrievalEvaluator.evaluate(
        None, qrels, copy.deepcopy(run), list(DEFAULT_K_VALUES), ignore_identical_ids=ignore_identical_ids
    )
    return make_score_dict(
        ndcg=result.ndcg,
        _map=result.map,
        recall=result.recall,
        precision=result.precision,
        mrr=result.mrr,
        naucs=result.naucs,
        naucs_mrr=result.naucs_mrr,
        hit_rate=result.hit_rate,
        task_scores={},
    )


def assert_same_dict(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(ours[key]), key
        else:
            assert ours[key] == pytest.approx(value, abs=1e-12, rel=0), key


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_score_dict_equals_mteb(seed):
    pytest.importorskip("mteb")
    qrels, run = random_case(seed, tie_values=[5, 2, None][seed])
    run = {q: d for q, d in run.items() if q in qrels}  # mteb searches only queries with judgments
    assert_same_dict(evaluate_ranking(qrels, run).to_mteb(), mteb_reference(qrels, run))


def test_ignore_identical_ids_matches_mteb():
    pytest.importorskip("mteb")
    qrels = {"a": {"a": 1, "b": 1}, "b": {"c": 2}, "c": {"c": 1, "a": 0}}
    run = {"a": {"a": 0.9, "b": 0.8, "c": 0.1}, "b": {"b": 0.99, "c": 0.5}, "c": {"c": 0.7, "a": 0.6}}
    ours = evaluate_ranking(qrels, run, ignore_identical_ids=True)
    assert ours.per_query["precision_at_1"].tolist() == [1.0, 1.0, 0.0]
    assert_same_dict(ours.to_mteb(), mteb_reference(qrels, run, ignore_identical_ids=True))


def test_ranked_run_and_dict_give_the_same_scores():
    qrels, run = random_case(7)
    from_dict = evaluate_ranking(qrels, run).to_mteb()
    from_array = evaluate_ranking(qrels, RankedRun.from_dict(run)).to_mteb()
    assert_same_dict(from_array, from_dict)


def test_run_without_judged_queries_is_a_clear_error():
    from embedscope.errors import DataFormatError

    with pytest.raises(DataFormatError, match="same query ids"):
        evaluate_ranking({"q1": {"d": 1}}, {"other": {"d": 1.0}})
