"""evaluate_ranking against pytrec_eval (per query) and mteb 2.26's own scoring code (whole dict).

Random cases cover: many ties (few distinct scores; float64 scores equal in float32), graded
qrels 0–3, judged queries without positives, judged queries absent from the run, unjudged run
queries, judged docs outside the run, empty rows, and k larger than the depth.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from embedscope.errors import DataFormatError
from embedscope.metrics import DEFAULT_K_VALUES, RankingScores, evaluate_ranking
from embedscope.types import RankedRun

pytrec_eval = pytest.importorskip("pytrec_eval")

TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P", "hit_rate": "success"}
DOC_IDS = ["d1", "d2", "d10", "d11", "D3", "doc", "doc_9", "a", "zz", "é1", "q0", "q1", "q7"] + [
    f"x{i}" for i in range(40)
]


def _scores(rng: np.random.Generator, n: int, style: int) -> list[float]:
    """Scores with many ties: few distinct values, or float64 values equal in float32."""
    if style == 0:
        return rng.choice([0.0, 0.25, 0.5, 1.0], size=n).tolist()
    if style == 1:
        return (0.3 + rng.integers(0, 3, size=n) * 1e-12).tolist()
    if style == 2:
        return (rng.integers(0, 6, size=n) / 7.0 + rng.integers(0, 2, size=n) * 1e-13).tolist()
    return rng.normal(size=n).tolist()


def make_case(seed: int, n_queries: int = 60, max_depth: int = 30) -> tuple[dict, dict]:
    """Random qrels and run covering the awkward cases listed in the module docstring."""
    rng = np.random.default_rng(seed)
    docs = DOC_IDS[: int(rng.integers(8, len(DOC_IDS)))]
    pool = docs + ["only_in_qrels_1", "only_in_qrels_2"]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        kind = rng.integers(0, 10)
        if kind != 0:  # kind 0: a query absent from the qrels
            judged = rng.choice(len(pool), size=int(rng.integers(0, 8)), replace=False)
            rels = rng.integers(0, 4, size=len(judged)) if kind != 1 else np.zeros(len(judged), dtype=int)
            qrels[qid] = {pool[j]: int(r) for j, r in zip(judged, rels)}
        if kind == 2:  # a judged query absent from the run
            continue
        depth = 0 if kind == 3 else int(rng.integers(1, min(max_depth, len(docs)) + 1))
        picked = rng.choice(len(docs), size=depth, replace=False)
        run[qid] = dict(zip((docs[j] for j in picked), _scores(rng, depth, int(rng.integers(0, 4)))))
    return qrels, run


def pytrec_scores(qrels: dict, run: dict, ks=DEFAULT_K_VALUES) -> dict[str, dict[str, float]]:
    cut = ",".join(map(str, ks))
    measures = {f"{m}.{cut}" for m in TREC_NAMES.values()}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def mteb_scores(qrels: dict, run: dict, ks=DEFAULT_K_VALUES, ignore_identical_ids: bool = False) -> dict:
    """The dict AbsTaskRetrieval._evaluate_subset returns, built with mteb's own functions."""
    from mteb._evaluators.retrieval_evaluator import RetrievalEvaluator
    from mteb._evaluators.retrieval_metrics import make_score_dict

    results = copy.deepcopy(run)
    _, ndcg, _map, recall, precision, naucs, mrr, naucs_mrr, hit_rate = RetrievalEvaluator.evaluate(
        None, qrels, results, list(ks), ignore_identical_ids=ignore_identical_ids
    )
    return make_score_dict(
        ndcg=ndcg,
        _map=_map,
        recall=recall,
        precision=precision,
        mrr=mrr,
        naucs=naucs,
        naucs_mrr=naucs_mrr,
        hit_rate=hit_rate,
        task_scores={},
        previous_results_model_meta=None,
    )


def assert_same_dict(ours: dict, theirs: dict, tol: float = 1e-12) -> None:
    assert list(ours) == list(theirs)
    bad = {}
    for key, expected in theirs.items():
        got = ours[key]
        if math.isnan(expected) and math.isnan(got):
            continue
        if not abs(got - expected) <= tol:
            bad[key] = (got, expected)
    assert not bad, bad


def assert_matches_pytrec(ranking: RankingScores, qrels: dict, run: dict, ks=DEFAULT_K_VALUES) -> None:
    expected = pytrec_scores(qrels, run, ks)
    assert list(ranking.query_ids) == list(expected)
    for metric, trec in TREC_NAMES.items():
        for k in ks:
            ours = ranking.per_query[f"{metric}_at_{k}"]
            theirs = np.array([expected[q][f"{trec}_{k}"] for q in ranking.query_ids])
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12, err_msg=f"{metric}@{k}")
            assert abs(ranking.mean(f"{metric}_at_{k}") - theirs.mean()) <= 1e-12


@pytest.mark.parametrize("seed", range(12))
def test_per_query_values_match_pytrec_eval(seed: int) -> None:
    qrels, run = make_case(seed)
    ranking = evaluate_ranking(qrels, run, DEFAULT_K_VALUES)
    assert_matches_pytrec(ranking, qrels, run)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_to_mteb_matches_mteb(seed: int) -> None:
    qrels, run = make_case(seed)
    ranking = evaluate_ranking(qrels, run, DEFAULT_K_VALUES)
    # mteb searches only the queries that have judgments
    mteb_run = {q: run[q] for q in ranking.query_ids}
    assert_same_dict(ranking.to_mteb(), mteb_scores(qrels, mteb_run))


@pytest.mark.slow
def test_deep_run_with_ties_beyond_k_1000() -> None:
    rng = np.random.default_rng(7)
    docs = [f"doc{i}" for i in range(1500)]
    qrels, run = {}, {}
    for q in range(8):
        picked = rng.choice(len(docs), size=int(rng.integers(900, 1300)), replace=False)
        run[f"q{q}"] = {docs[j]: float(s) for j, s in zip(picked, rng.integers(0, 5, size=len(picked)) / 4)}
        judged = rng.choice(len(docs), size=60, replace=False)
        qrels[f"q{q}"] = {docs[j]: int(r) for j, r in zip(judged, rng.integers(0, 4, size=60))}
    ranking = evaluate_ranking(qrels, run, DEFAULT_K_VALUES)
    assert_matches_pytrec(ranking, qrels, run)
    assert_same_dict(ranking.to_mteb(), mteb_scores(qrels, run))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_ignore_identical_ids_matches_mteb(seed: int) -> None:
    qrels, run = make_case(100 + seed)
    rng = np.random.default_rng(seed)
    for i, (qid, docs) in enumerate(run.items()):  # the query itself retrieved, sometimes judged relevant
        if i % 3:
            docs[qid] = float(rng.choice([0.0, 0.5, 1.0, 2.0]))
        if i % 4 == 0 and qid in qrels:
            qrels[qid][qid] = 1
    ranking = evaluate_ranking(qrels, run, DEFAULT_K_VALUES, ignore_identical_ids=True)
    mteb_run = {q: run[q] for q in ranking.query_ids}
    assert_same_dict(ranking.to_mteb(), mteb_scores(qrels, mteb_run, ignore_identical_ids=True))
    stripped = {q: {d: s for d, s in docs.items() if d != q} for q, docs in run.items()}
    assert_matches_pytrec(ranking, qrels, stripped)
    plain = evaluate_ranking(qrels, run, DEFAULT_K_VALUES)
    assert plain.to_mteb() != ranking.to_mteb()


def test_ranked_run_with_holes_and_junk_scores() -> None:
    qrels, run = make_case(42)
    dense = RankedRun.from_dict(run)
    rng = np.random.default_rng(3)
    width = dense.depth + 5
    index = np.full((len(dense.query_ids), width), -1, dtype=np.int64)
    scores = rng.normal(size=index.shape)  # junk behind the empty slots
    for i in range(len(dense.query_ids)):
        n = int(np.count_nonzero(dense.doc_index[i] >= 0))
        slots = np.sort(rng.choice(width, size=n, replace=False))
        index[i, slots] = dense.doc_index[i, :n]
        scores[i, slots] = dense.scores[i, :n]
    holey = RankedRun(dense.query_ids, dense.doc_ids, index, scores)
    assert holey.to_dict() == run
    ranking = evaluate_ranking(qrels, holey)
    assert_matches_pytrec(ranking, qrels, run)
    assert_same_dict(ranking.to_mteb(), evaluate_ranking(qrels, run).to_mteb(), tol=0.0)


def test_a_run_that_retrieved_nothing_for_any_query_scores_like_pytrec_eval() -> None:
    """A retriever that matched no document for any query gives a run of width 0 (FTS5 on a small proxy corpus)."""
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    empty = RankedRun(("q1", "q2"), ("d1", "d2", "d3"), np.empty((2, 0), dtype=np.int64), np.empty((2, 0)))
    ranking = evaluate_ranking(qrels, empty)
    assert_matches_pytrec(ranking, qrels, {"q1": {}, "q2": {}})
    assert ranking.mean("ndcg_at_10") == 0.0


def test_float32_ties_break_by_doc_id_but_mrr_uses_float64() -> None:
    qrels = {"q": {"d1": 1}}
    run = {"q": {"d1": 0.1 + 1e-12, "d2": 0.1}}  # equal as float32; "d2" > "d1"
    ranking = evaluate_ranking(qrels, run, (1, 2))
    assert ranking.per_query["precision_at_1"].tolist() == [0.0]
    assert ranking.per_query["ndcg_at_2"].tolist() == [1 / math.log2(3)]
    assert ranking.per_query["mrr_at_1"].tolist() == [1.0]


def test_only_queries_with_judgments_are_evaluated() -> None:
    qrels = {"a": {"x": 0}, "b": {}, "c": {"x": 2}}
    run = {"z": {"x": 1.0}, "b": {"x": 1.0}, "a": {"x": 1.0}, "c": {}}
    assert evaluate_ranking(qrels, run, (1,)).query_ids == ("a", "c")
    with pytest.raises(DataFormatError):
        evaluate_ranking({"b": {}}, run, (1,))


@pytest.mark.slow
@pytest.mark.parametrize(
    "qrels,run",
    [
        ({"q": {"d": 1}, "r": {"d": 0}}, {"q": {}, "r": {}}),  # every row empty
        ({"q": {"d": 1}}, {"q": {"d": 0.5}}),  # a single query and doc
        ({"q": {"q": 1}, "p": {"e": 2}}, {"q": {"q": 0.5}, "p": {"q": 1.0, "e": 0.2}}),  # only doc is the query
    ],
)
@pytest.mark.parametrize("ignore", [False, True])
def test_tiny_runs_match_mteb(qrels: dict, run: dict, ignore: bool) -> None:
    ranking = evaluate_ranking(qrels, run, ignore_identical_ids=ignore)
    assert_same_dict(ranking.to_mteb(), mteb_scores(qrels, run, ignore_identical_ids=ignore))
