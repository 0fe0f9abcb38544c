"""API rerankers (retrieval/api_reranker.py) against an in-process /rerank service whose scores are computed here
directly (support/rerank_server.py): scores, order, batching, retries, one-line errors, usage and the key kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.retrieval.api_reranker import ApiReranker, ApiRerankError
from embedscope.retrieval.base import rerank
from embedscope.retrieval.pipeline import Pipeline, build_stage, is_pipeline_spec, model_pipeline
from embedscope.settings import RunSettings
from embedscope.settings.evalscope import evalscope_layer
from embedscope.types import Corpus, Queries, RankedRun
from support.rerank_server import overlap_score, rerank_server

CORPUS = Corpus(
    ("d1", "d2", "d3", "d4"),
    ("the cat sat on the mat", "a dog barked at a cat", "fish swim in the sea", "dogs and cats and fish"),
)
QUERIES = Queries(("q1", "q2", "q3"), ("cat on a mat", "dog and fish", "sea"))
CANDIDATES = RankedRun(
    QUERIES.ids, CORPUS.ids, np.array([[0, 1, 2, 3], [3, 1, 2, -1], [2, -1, -1, -1]]), np.zeros((3, 4))
)


@pytest.fixture
def service():
    with rerank_server() as s:
        yield s


def _expected() -> np.ndarray:
    out = np.full(CANDIDATES.doc_index.shape, -np.inf)
    for r, q in enumerate(QUERIES.texts):
        for c, d in enumerate(CANDIDATES.doc_index[r]):
            if d >= 0:
                out[r, c] = overlap_score(q, CORPUS.texts[d])
    return out


def test_scores_are_the_services_in_candidate_order(service):
    reranker = ApiReranker("fake-reranker", service.url, texts_per_request=2, max_concurrency=2, backoff_s=0)
    got = reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    np.testing.assert_array_equal(got, _expected())
    # batches of at most 2 documents: 2 + 2 + 2 + 1 requests, empty slots never sent
    assert sorted(len(r["documents"]) for r in service.requests) == [1, 1, 2, 2, 2]
    assert all(r["top_n"] == len(r["documents"]) for r in service.requests)
    usage = reranker.api_usage()
    sent_words = sum(len(t.split()) for r in service.requests for t in [r["query"], *r["documents"]])
    assert usage["requests"] == 5 and usage["tokens"] == 2 * sent_words  # the service's usage.total_tokens
    assert usage["cost"] is None and usage["latency_p50_ms"] <= usage["latency_p95_ms"]


def test_rerank_orders_as_the_scores_computed_directly(service):
    run = rerank(
        ApiReranker("m", service.url),
        QUERIES,
        CORPUS,
        CANDIDATES,
        RunSettings(top_k=4).search_options(show_progress=False),
    )
    expected = _expected()
    for r in range(len(QUERIES)):
        slots = [c for c in range(4) if CANDIDATES.doc_index[r, c] >= 0]
        order = sorted(slots, key=lambda c: (-expected[r, c], CANDIDATES.doc_index[r, c]))
        assert run.doc_index[r, : len(slots)].tolist() == [CANDIDATES.doc_index[r, c] for c in order]


def test_tokens_counted_when_the_service_gives_none_and_cost_from_the_price(service):
    service.with_usage = False
    reranker = ApiReranker("m", service.url, price_per_mtok=2.5)
    reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    # one token per 4 bytes of UTF-8 of each text sent (rounded up), as the API encoder estimates
    tokens = sum(-(-len(t.encode()) // 4) for r in service.requests for t in [r["query"], *r["documents"]])
    usage = reranker.api_usage()
    assert usage["tokens"] == tokens
    assert usage["cost"] == pytest.approx(tokens * 2.5 / 1e6)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["429", "500", "drop", "slow"])
def test_transient_faults_are_retried(service, fault):
    service.faults = [fault, fault]
    service.slow_s = 0.5
    reranker = ApiReranker("m", service.url, max_concurrency=1, request_timeout=0.2, backoff_s=0)
    got = reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    np.testing.assert_array_equal(got, _expected())
    assert reranker.api_usage()["requests"] == 3  # only answered requests count


def test_retries_run_out_in_one_line(service):
    service.faults = ["500"] * 10
    reranker = ApiReranker("m", service.url, max_concurrency=1, max_retries=2, backoff_s=0)
    with pytest.raises(ApiRerankError) as err:
        reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    message = str(err.value)
    assert "\n" not in message and "HTTP 500 after 3 attempts" in message and "query 1 of 3" in message
    assert "0 of 3 requests had been answered" in message
    assert isinstance(err.value, ConfigError)  # a user-facing error: exit code 2


@pytest.mark.parametrize(
    ("fault", "words"),
    [("truncated", "not a /rerank answer"), ("count", "3 scores returned"), ("nan", "3 finite"), ("401", "HTTP 401")],
)
def test_unusable_answers_are_one_line_errors(service, fault, words):
    service.faults = [fault]
    queries = Queries(("q",), ("cat",))
    candidates = RankedRun(queries.ids, CORPUS.ids, np.array([[0, 1, 2, 3]]), np.zeros((1, 4)))
    with pytest.raises(ApiRerankError, match=words) as err:
        ApiReranker("m", service.url, backoff_s=0).score_candidates(
            queries, CORPUS, candidates, RunSettings().search_options(show_progress=False)
        )
    assert "\n" not in str(err.value)
    assert len(service.requests) == 1  # an answer that is wrong is not asked again


def test_key_from_the_environment_is_sent_to_the_service_only_and_recorded_nowhere(service, monkeypatch):
    monkeypatch.setenv("RERANK_KEY_FOR_TEST", "sk-secret-4242")
    reranker = build_stage(
        {"type": "api-rerank", "model": "m", "api_base": service.url, "api_key_env": "RERANK_KEY_FOR_TEST"},
        reranker=True,
    )
    reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    assert {h.get("Authorization") for h in service.headers} == {"Bearer sk-secret-4242"}
    pipeline = Pipeline.build(["bm25"], rerankers=[{"type": "api-rerank", "model": f"m@{service.url}"}])
    for record in (reranker.describe(), reranker.settings(), repr(reranker), pipeline.describe(), reranker.fingerprint):
        assert "sk-secret" not in json.dumps(record, default=str)


def test_key_from_a_file_or_a_secret_as_given(service, tmp_path):
    from pydantic import SecretStr

    (tmp_path / "key").write_text("sk-from-file-1\n")
    ApiReranker("m", service.url, api_key_file=str(tmp_path / "key")).score_candidates(
        QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False)
    )
    ApiReranker("m", service.url, api_key=SecretStr("sk-given-2")).score_candidates(
        QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False)
    )
    assert {h.get("Authorization") for h in service.headers} == {"Bearer sk-from-file-1", "Bearer sk-given-2"}
    with pytest.raises(ConfigError, match="api_key_file .*cannot read"):
        ApiReranker("m", service.url, api_key_file=str(tmp_path / "missing"))


def test_missing_key_variable_is_a_one_line_error(service, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR is not set"):
        ApiReranker("m", service.url, api_key_env="NO_SUCH_KEY_VAR")


def test_stage_specs(service):
    stage = build_stage(f"api-rerank:my/model@{service.url},texts_per_request=7,price_per_mtok=0.5", reranker=True)
    assert isinstance(stage, ApiReranker)
    assert (stage.model, stage.api_base, stage.texts_per_request, stage.price_per_mtok) == (
        "my/model",
        service.url,
        7,
        0.5,
    )
    assert stage.name == "model"
    assert is_pipeline_spec(f"api-rerank:m@{service.url}")
    alone = model_pipeline(f"api-rerank:m@{service.url}")
    assert not alone.retrievers and alone.candidate_scorer().model == "m"
    with pytest.raises(ConfigError, match="needs a model and a base URL"):
        build_stage("api-rerank:m", reranker=True)
    with pytest.raises(ConfigError, match="not an http"):
        build_stage("api-rerank:m@ftp://host/v1", reranker=True)
    with pytest.raises(ConfigError, match="texts_per_request=0"):
        build_stage(f"api-rerank:m@{service.url},texts_per_request=0", reranker=True)
    with pytest.raises(ConfigError, match="unknown option"):
        build_stage(f"api-rerank:m@{service.url},pooling=mean", reranker=True)


def test_pipeline_with_an_api_reranker_records_its_usage(service):
    from embedscope.results.usage import api_usage

    pipeline = Pipeline.build(["bm25"], rerankers=[{"type": "api-rerank", "model": "m", "api_base": service.url}])
    run = pipeline.retrieve(QUERIES, CORPUS, RunSettings(top_k=3).search_options(show_progress=False))
    assert run.doc_index.shape == (3, 3)
    usage = api_usage(pipeline)
    assert usage is not None and usage["requests"] == len(service.requests) > 0


def test_evalscope_api_cross_encoder_entry_is_an_api_rerank_stage(service):
    layer = evalscope_layer(
        {
            "models": [
                {"model_name_or_path": "minilm"},
                {
                    "model_name": "gte-rerank",
                    "api_base": service.url,
                    "api_key": "sk-evalscope-777",
                    "is_cross_encoder": True,
                    "encode_kwargs": {"batch_size": 8},
                },
            ],
            "eval": {"task_names": ["BBCNewsRetrieval"], "top_k": 10},
        },
        "c.json",
    )
    stage = layer.values["models"][0]["rerankers"][0]
    assert (stage["type"], stage["model"], stage["api_base"], stage["texts_per_request"]) == (
        "api-rerank",
        "gte-rerank",
        service.url,
        8,
    )
    assert "sk-evalscope-777" not in json.dumps(layer.values, default=str)  # the key is held masked
    reranker = build_stage(stage, reranker=True)
    reranker.score_candidates(QUERIES, CORPUS, CANDIDATES, RunSettings().search_options(show_progress=False))
    assert {h.get("Authorization") for h in service.headers} == {"Bearer sk-evalscope-777"}


@pytest.mark.slow
def test_a_pipeline_run_records_the_rerankers_usage_and_writes_the_key_nowhere(service, tmp_path, monkeypatch, capsys):
    import embedscope
    from embedscope.testing.tiny import tiny_retrieval_task

    monkeypatch.setenv("RERANK_KEY_FOR_TEST", "sk-pipeline-31337")
    stage = {"type": "api-rerank", "model": "m", "api_base": service.url, "api_key_env": "RERANK_KEY_FOR_TEST"}
    report = embedscope.evaluate(
        {"retrievers": ["bm25"], "rerankers": [{**stage, "price_per_mtok": 1.0}]},
        [tiny_retrieval_task()],
        output_folder=str(tmp_path / "out"),
        cache=str(tmp_path / "cache"),
        show_progress=False,
    )
    usage = report.outcomes[0].result.extra["api_usage"]
    assert usage["requests"] == len(service.requests) > 0
    assert usage["cost"] == pytest.approx(usage["tokens"] / 1e6)
    print(report.table())
    assert "| cost " in capsys.readouterr().out
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"sk-pipeline" not in path.read_bytes(), path
