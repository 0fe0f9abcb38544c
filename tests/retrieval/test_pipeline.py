"""Stage specs, pipeline composition, and two-stage semantics (with a deterministic fake reranker)."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.metrics import evaluate_ranking
from embedscope.retrieval.bm25 import BM25Retriever
from embedscope.retrieval.cross_encoder import CrossEncoderReranker
from embedscope.retrieval.dense import DenseRetriever
from embedscope.retrieval.fts5 import FTS5Retriever
from embedscope.retrieval.fusion import reciprocal_rank_fusion
from embedscope.retrieval.late_interaction import LateInteraction
from embedscope.retrieval.pipeline import Pipeline, RerankStep, build_stage, is_pipeline_spec, parse_fusion, parse_stage
from embedscope.settings import RunSettings
from embedscope.testing.fakes import OverlapReranker
from embedscope.types import Corpus, Queries
from support.tiny_models import build_tiny_cross_encoder, build_tiny_pylate_colbert

CORPUS = Corpus(
    ("d1", "d2", "d3", "d4"),
    ("cat cat cat cat", "cat food for a hungry cat", "dog food", "a cat and a dog share food"),
)
QUERIES = Queries(("q1", "q2"), ("cat food", "dog"))


def test_parse_and_build_stages():
    assert parse_stage({"type": "CE", "model": "x"}) == {"type": "cross-encoder", "model": "x"}
    assert isinstance(build_stage("bm25:method=atire,k1=1.2,stemmer=none"), BM25Retriever)
    assert isinstance(build_stage({"type": "fts5", "match": "all"}), FTS5Retriever)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['k'\].*k1"):
        build_stage("bm25:k=1")
    with pytest.raises(UnknownNameError, match="retriever type"):
        build_stage("cross-encoder:./x")
    with pytest.raises(ConfigError, match="key=value"):
        build_stage("colbert:a,b")
    assert parse_fusion("wsum-z-score").norm == "zmuv"
    assert is_pipeline_spec("bm25") and is_pipeline_spec("colbert:minilm") and not is_pipeline_spec("minilm")


@pytest.mark.slow
def test_reranker_kind_is_detected_from_the_folder(tmp_path):
    ce = build_tiny_cross_encoder(tmp_path / "ce")
    colbert = build_tiny_pylate_colbert(tmp_path / "colbert")
    assert isinstance(build_stage(str(ce), reranker=True), CrossEncoderReranker)
    assert isinstance(build_stage(str(colbert), reranker=True), LateInteraction)
    assert isinstance(build_stage("minilm", reranker=True), DenseRetriever)
    assert is_pipeline_spec(str(ce)) and not is_pipeline_spec(str(colbert))


def test_stage_runs_names_costs_and_fusion():
    p = Pipeline.build(["bm25:stemmer=none", "fts5"], fusion={"method": "rrf", "k": 10})
    stages = p.stage_runs(QUERIES, CORPUS, RunSettings(top_k=3).search_options(show_progress=False))
    assert [s.stage for s in stages] == ["stage1.bm25-lucene", "stage1.fts5", "stage1"]
    assert [s.kind for s in stages] == ["retriever", "retriever", "fusion"]
    assert all(s.stats.seconds >= 0 and s.stats.peak_rss_mb > 0 for s in stages)
    expected = reciprocal_rank_fusion([stages[0].run, stages[1].run], k=10, top_k=3)
    np.testing.assert_array_equal(stages[-1].run.doc_index, expected.doc_index)
    assert p.name == "bm25-lucene+fts5_rrf-k10"
    assert p.fingerprint != Pipeline.build(["bm25:stemmer=none", "fts5"], fusion="rrf").fingerprint


def test_two_stage_reranks_only_the_candidates_and_misses_stay_misses():
    # stage 1 (BM25, top 2): q1 gets d2, d1 (d4 ranked 3rd falls out); q2 gets d3, d4
    reranker = OverlapReranker(bonus={"d4": 5.0, "d1": -1.0})
    p = Pipeline([BM25Retriever(stemmer="none", stopwords="none")], rerankers=[RerankStep(reranker)])
    stages = p.stage_runs(QUERIES, CORPUS, RunSettings(top_k=2).search_options(show_progress=False))
    first, second = stages[0].run, stages[1].run
    ids = lambda run, i: [CORPUS.ids[d] for d in run.doc_index[i] if d >= 0]  # noqa: E731
    assert set(ids(second, 0)) == set(ids(first, 0)) and "d4" not in ids(first, 0)
    assert ids(second, 0) == ["d2", "d1"]  # overlap 2 vs 2 - 1
    assert ids(second, 1) == ["d4", "d3"]  # the bonus lifts d4
    assert reranker.pairs_scored == 4  # only the candidates were scored
    qrels = {"q1": {"d4": 1}, "q2": {"d4": 1}}
    scores = evaluate_ranking(qrels, second, (1, 2))
    assert scores.per_query["recall_at_2"].tolist() == [0.0, 1.0]  # q1's positive fell out of the top 2
    assert scores.mean("recall_at_2") == 0.5  # and q1 still counts in the average


def test_reranker_depth_limits_what_it_reads():
    reranker = OverlapReranker()
    p = Pipeline([FTS5Retriever()], rerankers=[RerankStep(reranker, depth=1)])
    final = p.retrieve(QUERIES, CORPUS, RunSettings(top_k=3).search_options(show_progress=False))
    assert final.depth == 1 and reranker.pairs_scored == 2
    assert p.name == "fts5__rerank-fake/overlap-reranker@1"


def test_reranker_alone_cannot_retrieve():
    p = Pipeline([], rerankers=[RerankStep(OverlapReranker())])
    assert p.candidate_scorer() is p.rerankers[0].reranker
    with pytest.raises(ConfigError, match="reranking tasks only"):
        p.retrieve(QUERIES, CORPUS, RunSettings().search_options(show_progress=False))
    with pytest.raises(ConfigError, match="fusion needs two"):
        Pipeline([FTS5Retriever()], fusion=parse_fusion("rrf"))


def test_bi_encoder_as_reranker_scores_its_similarity():
    from embedscope.retrieval.base import rerank
    from embedscope.testing.fakes import KeywordEncoder
    from embedscope.types import RankedRun

    encoder = KeywordEncoder(["cat", "food", "dog"], similarity="cosine")
    candidates = RankedRun(QUERIES.ids, CORPUS.ids, np.array([[0, 1, 3], [2, -1, -1]]), np.zeros((2, 3)))
    run = rerank(
        DenseRetriever(encoder), QUERIES, CORPUS, candidates, RunSettings(top_k=3).search_options(show_progress=False)
    )
    q = encoder.encode(list(QUERIES.texts), role="query")
    d = encoder.encode(list(CORPUS.texts), role="document")
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    for i in range(2):
        idx = run.doc_index[i][run.doc_index[i] >= 0]
        np.testing.assert_allclose(run.scores[i][: len(idx)], cos[i, idx], rtol=1e-6)
        assert sorted(idx.tolist()) == sorted(d for d in candidates.doc_index[i] if d >= 0)
    assert run.doc_index[0].tolist() == [1, 3, 0]  # "cat food": d2 has both words, then the mixed d4, then d1
