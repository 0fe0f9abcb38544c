"""Failure attribution of pipelines (issue 51): each reranking or fusion stage's per-query candidates recall, nDCG@10
ceiling and failure class, checked against the earlier stage's run and pytrec_eval; the loss split recorded in
``pipeline_stages`` and printed with the stage table."""

from __future__ import annotations

import math

import numpy as np
import pytest

import embedscope
from embedscope.retrieval.pipeline import Pipeline, RerankStep
from embedscope.settings import RunSettings
from embedscope.tasks.retrieval import RetrievalTask, evaluate_retrieval_split
from embedscope.types import Corpus, Queries, RankedRun, RetrievalData

pytrec_eval = pytest.importorskip("pytrec_eval")

DOCS = tuple(f"d{i}" for i in range(1, 9))
QRELS = {
    "q1": {"d1": 2, "d2": 1},  # d2 falls out of the candidates, d1 is ranked first: partial recall, no failure
    "q2": {"d5": 1},  # ranked 5th by stage 1, outside the reranker's 3 candidates: candidate_miss
    "q3": {"d6": 1},  # a candidate, but the reranker puts it 3rd: ranking
    "q4": {"d7": 1},  # first everywhere: none
    "q5": {"d8": 0},  # judged, nothing relevant: candidate_miss
}
# distinct scores everywhere: every cut is the same whichever tie order
RETRIEVER = {
    "q1": {"d3": 0.9, "d4": 0.8, "d1": 0.7, "d5": 0.6, "d2": 0.5},
    "q2": {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6, "d5": 0.5},
    "q3": {"d6": 0.9, "d1": 0.8, "d2": 0.7, "d3": 0.6},
    "q4": {"d7": 0.9, "d8": 0.8, "d1": 0.7, "d2": 0.6},
    "q5": {"d8": 0.9, "d1": 0.8, "d2": 0.7},
}
OTHER = {q: {"d4": 0.9, "d2": 0.5} for q in QRELS} | {"q2": {"d5": 0.9, "d4": 0.5}}  # the second fused retriever
FIRST_RERANKER = {
    "q1": {"d1": 3, "d3": 2, "d4": 1},
    "q3": {"d1": 3, "d2": 2, "d6": 1},
    "q4": {"d7": 3, "d8": 2, "d1": 1},
}
SECOND_RERANKER = {"q1": {"d3": 2, "d1": 1}, "q3": {"d1": 2, "d2": 1}, "q4": {"d7": 2, "d8": 1}}


class TableRetriever:
    """Returns each query's documents of a fixed table, best first, cut to ``top_k``."""

    def __init__(self, table: dict[str, dict[str, float]], name: str) -> None:
        self.table, self.name, self.fingerprint = table, name, name

    def retrieve(self, queries: Queries, corpus: Corpus, options) -> RankedRun:
        rows = [sorted(self.table[q].items(), key=lambda item: -item[1])[: options.top_k] for q in queries.ids]
        width = max(len(row) for row in rows)
        index = np.full((len(rows), width), -1, dtype=np.int64)
        scores = np.full((len(rows), width), -np.inf)
        for i, row in enumerate(rows):
            index[i, : len(row)] = [corpus.ids.index(d) for d, _ in row]
            scores[i, : len(row)] = [s for _, s in row]
        return RankedRun(queries.ids, corpus.ids, index, scores)


class TableReranker:
    """Scores each candidate by a fixed table (0 for a pair it lacks)."""

    def __init__(self, table: dict[str, dict[str, float]], name: str) -> None:
        self.table, self.name, self.fingerprint = table, name, name

    def score_candidates(self, queries, corpus, candidates, options) -> np.ndarray:
        out = np.full(candidates.doc_index.shape, -np.inf)
        for i, row in enumerate(candidates.doc_index):
            for j, d in enumerate(row):
                if d >= 0:
                    out[i, j] = self.table.get(queries.ids[i], {}).get(corpus.ids[d], 0.0) + 0.01 * (8 - d)
        return out


def _task(k_values: tuple[int, ...] = (1, 2, 3, 5, 10)) -> RetrievalTask:
    data = RetrievalData(Corpus(DOCS, DOCS), Queries(tuple(QRELS), tuple(QRELS)), QRELS, name="Made")
    return RetrievalTask(name="Made", load_split=lambda split: data, k_values=k_values)


def _three_stages() -> Pipeline:
    return Pipeline(
        [TableRetriever(RETRIEVER, "table")],
        rerankers=[
            RerankStep(TableReranker(FIRST_RERANKER, "rr1"), 3),
            RerankStep(TableReranker(SECOND_RERANKER, "rr2"), 2),
        ],
    )


def _evaluate(pipeline: Pipeline, task: RetrievalTask, top_k: int = 5):
    options = RunSettings(top_k=top_k).search_options(show_progress=False)
    return evaluate_retrieval_split(task, task.load_split("test"), pipeline, options)


def _top(table: dict[str, dict[str, float]], q: str, k: int) -> list[str]:
    return [d for d, _ in sorted(table[q].items(), key=lambda item: -item[1])[:k]]


def _pytrec(qrels: dict, candidates: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """pytrec_eval's recall over the candidates, and its ndcg_cut.10 of the candidates in ideal order."""
    ideal = {q: {d: float(qrels[q].get(d, 0)) for d in docs} for q, docs in candidates.items()}
    return pytrec_eval.RelevanceEvaluator(qrels, {"recall.1000", "ndcg_cut.10"}).evaluate(ideal)


def test_a_reranker_stage_attributes_each_query_against_its_candidates():
    outcome = _evaluate(_three_stages(), _task())
    stage1, stage2, stage3 = outcome.stages
    assert "failure" not in stage1.per_item and stage1.failures is None  # it retrieved from the corpus
    rows = stage2.per_item
    assert rows["failure"] == ["none", "candidate_miss", "ranking", "none", "candidate_miss"]
    # candidates recall: stage 1's own recall at the reranker's depth (3), per query
    assert rows["candidates_recall"] == stage1.per_item["recall_at_3"]
    # and pytrec_eval on stage 1's table cut independently at 3; the ceiling: its ndcg_cut.10 in ideal order
    trec = _pytrec(QRELS, {q: _top(RETRIEVER, q, 3) for q in QRELS})
    assert rows["candidates_recall"] == pytest.approx([trec[q]["recall_1000"] for q in QRELS], abs=1e-12)
    assert rows["ceiling_ndcg_at_10"] == pytest.approx([trec[q]["ndcg_cut_10"] for q in QRELS], abs=1e-12)
    assert rows["ceiling_ndcg_at_10"][0] == pytest.approx(2 / (2 + 1 / math.log2(3)))  # d2 counts in the ideal DCG
    assert rows["ndcg_at_10"][2] == pytest.approx(0.5)  # q3: d6 third of three
    # stage 3 against stage 2's top 2 (not stage 1's): q1 now ranks d1 second, q3 lost d6
    rows3 = stage3.per_item
    assert rows3["candidates_recall"] == stage2.per_item["recall_at_2"]
    assert rows3["failure"] == ["ranking", "candidate_miss", "candidate_miss", "none", "candidate_miss"]
    # the run's per-item rows are the last stage's
    assert [outcome.per_item[c] for c in ("candidates_recall", "ceiling_ndcg_at_10", "failure")] == [
        rows3["candidates_recall"],
        rows3["ceiling_ndcg_at_10"],
        rows3["failure"],
    ]
    f = stage2.failures
    assert (f["queries"], f["candidate_miss"], f["ranking"], f["none"]) == (5, 2, 1, 2)
    ceiling_q1 = 2 / (2 + 1 / math.log2(3))
    assert f["loss_recall"] == pytest.approx(2 / 5) and f["loss_ranking"] == pytest.approx(0.5 / 5)
    assert f["loss_partial"] == pytest.approx((1 - ceiling_q1) / 5)
    assert f["loss"] == pytest.approx(1 - np.mean(rows["ndcg_at_10"]))


def test_a_fusion_attributes_against_the_union_of_its_retrievers():
    pipeline = Pipeline([TableRetriever(RETRIEVER, "a"), TableRetriever(OTHER, "b")])
    outcome = _evaluate(pipeline, _task(k_values=(1, 3)), top_k=2)  # no cutoff 10: nDCG@10 computed apart
    fused = outcome.stages[-1]
    assert fused.kind == "fusion" and fused.failures is not None
    union = {q: list(dict.fromkeys(_top(RETRIEVER, q, 2) + _top(OTHER, q, 2))) for q in QRELS}
    trec = _pytrec(QRELS, union)
    assert fused.per_item["candidates_recall"] == pytest.approx([trec[q]["recall_1000"] for q in QRELS], abs=1e-12)
    assert fused.per_item["ceiling_ndcg_at_10"] == pytest.approx([trec[q]["ndcg_cut_10"] for q in QRELS], abs=1e-12)
    assert fused.per_item["candidates_recall"][1] == 1.0  # q2's d5 came from the second retriever alone
    assert outcome.per_item["failure"] == fused.per_item["failure"]


def test_the_loss_split_is_recorded_and_printed(tmp_path):
    report = embedscope.evaluate(_three_stages(), [_task()], output_folder=tmp_path, cache=False, show_progress=False)
    stages = report.outcomes[0].result.extra["pipeline_stages"]["test"]
    assert "failures" not in stages[0] and stages[1]["failures"]["candidate_miss"] == 2
    assert stages[2]["failures"]["ranking"] == 1
    lines = [line for line in report.stage_table().splitlines() if line.startswith("failures")]
    assert lines[0] == (
        "failures (Made test, stage2 rr1): 2 of 5 queries have no relevant document among the candidates (recall), "
        "1 rank one too low (ranking); loss 0.548 = 0.400 recall + 0.100 ranking + 0.048 partial recall"
    )
    assert lines[1].startswith("failures (Made test, stage3 rr2): 3 of 5 queries")
