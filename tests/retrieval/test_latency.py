"""Per-query latency (``latency_sample``): a seeded sample timed one query at a time, by the model not the cache;
p50/p95 are numpy's percentiles of the recorded samples; scores and the recorded settings do not change."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.retrieval.dense import top_k_search
from embedscope.retrieval.latency import measure_latency, sample_positions, uncached
from embedscope.settings import RunSettings
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import HashEncoder
from embedscope.types import Corpus, Queries, RetrievalData

N_DOCS, N_QUERIES = 200, 40


def _data(split: str = "test") -> RetrievalData:
    corpus = Corpus(tuple(f"d{i}" for i in range(N_DOCS)), tuple(f"document number {i}" for i in range(N_DOCS)))
    queries = Queries(tuple(f"q{i}" for i in range(N_QUERIES)), tuple(f"question {i}" for i in range(N_QUERIES)))
    qrels = {f"q{i}": {f"d{(7 * i) % N_DOCS}": 1} for i in range(N_QUERIES)}
    return RetrievalData(corpus, queries, qrels, name="SynthRetrieval", split=split)


def _task() -> RetrievalTask:
    return RetrievalTask(name="SynthRetrieval", load_split=_data, description="hash vectors")


class CountingEncoder(HashEncoder):
    """Counts the query texts the model itself encodes (served-from-cache calls never reach it)."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.query_calls: list[int] = []

    def _encode(self, texts, role, batch_size, show_progress):
        if role == "query":
            self.query_calls.append(len(texts))
        return super()._encode(texts, role, batch_size, show_progress)


def test_the_sample_is_seeded_without_replacement_and_in_query_order() -> None:
    picks = sample_positions(1000, 200)
    assert picks == sample_positions(1000, 200) and len(set(picks)) == 200 and picks == sorted(picks)
    assert sample_positions(7, 200) == list(range(7))
    assert picks != sample_positions(1000, 200, seed=1)


def test_percentiles_are_numpy_s_of_the_recorded_samples_and_qps_their_rate() -> None:
    data = _data()
    latency = measure_latency(
        HashEncoder(dim=32),
        data.queries,
        data.corpus,
        RunSettings(top_k=10, latency_sample=25).search_options(show_progress=False),
    )
    assert latency is not None
    total, encode = np.array(latency["total_ms"]), np.array(latency["encode_ms"])
    assert latency["queries"] == len(total) == len(encode) == 25
    assert latency["p50_ms"] == np.percentile(total, 50) and latency["p95_ms"] == np.percentile(total, 95)
    assert latency["encode_p50_ms"] == np.percentile(encode, 50)
    assert latency["search_p50_ms"] == np.percentile(total - encode, 50)
    assert latency["qps_single"] == pytest.approx(25 / (total.sum() / 1000))
    assert (total > 0).all() and (encode <= total).all() and latency["p50_ms"] <= latency["p95_ms"]


def test_each_timed_query_is_encoded_by_the_model_alone_never_served_by_the_cache(tmp_path: Path) -> None:
    model = CountingEncoder()
    cached = CachedEncoder(model, EmbeddingCache(tmp_path))
    data = _data()
    cached.encode(list(data.queries.texts), role="query")  # every query vector now in the cache
    model.query_calls.clear()
    latency = measure_latency(
        cached, data.queries, data.corpus, RunSettings(top_k=10, latency_sample=12).search_options(show_progress=False)
    )
    assert uncached(cached) is model
    assert latency is not None and model.query_calls == [1] * 13  # a warm-up and the 12 timed queries, one each


def test_the_timed_search_is_the_exact_search_of_the_batch_run() -> None:
    """The prepared corpus (normalised once) gives each sampled query the batch run's top k."""
    from embedscope.retrieval.latency import _Prepared

    encoder, data = HashEncoder(dim=32), _data()
    options = RunSettings(top_k=10, truncate_dim=16).search_options(show_progress=False)
    prepared = _Prepared(encoder, data.corpus, options)
    q = encoder.encode(list(data.queries.texts), role="query")
    d = encoder.encode(list(data.corpus.texts), role="document")
    exact, _ = top_k_search(q[:, :16], [d[:, :16]], top_k=10, similarity="cosine")
    for i in range(N_QUERIES):
        assert prepared.search(q[i : i + 1]).tolist() == exact[i : i + 1].tolist()


def _run(folder: Path, **settings) -> dict:
    report = embedscope.evaluate(
        HashEncoder(dim=32), [_task()], output_folder=str(folder), cache=False, show_progress=False, **settings
    )
    return json.loads(report.outcomes[0].path.read_text(encoding="utf-8"))


def test_scores_and_recorded_settings_are_identical_with_and_without_timing(tmp_path: Path) -> None:
    plain = _run(tmp_path / "plain", top_k=10)
    timed = _run(tmp_path / "timed", top_k=10, latency_sample=15)
    assert timed["scores"] == plain["scores"]  # bit-identical: JSON floats compared exactly
    assert timed["run_settings"] == plain["run_settings"]
    plain_files = sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("*.json"))
    timed_files = sorted(p.relative_to(tmp_path / "timed") for p in (tmp_path / "timed").rglob("*.json"))
    assert plain_files == timed_files  # the same experiment folder: the setting is not a score's
    assert "query_latency" not in plain
    sample = timed["query_latency"]["test"]
    assert sample["queries"] == 15 and sample["p95_ms"] == np.percentile(sample["total_ms"], 95)
    assert "latency_sample" in [p["name"] for p in timed["evaluation_phases"]]


def test_an_approximate_index_is_timed_through_the_index(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    timed = _run(tmp_path, top_k=10, index="hnsw:M=8", latency_sample=5)
    assert timed["query_latency"]["test"]["queries"] == 5


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"precision": "int8"}, "fp32 dense search"),
        ({"filter_field": "topic"}, "filter_field"),
        ({"latency_sample": 0}, "greater than 0"),
    ],
)
def test_what_cannot_be_timed_is_refused(settings: dict, message: str, tmp_path: Path) -> None:
    settings = {"latency_sample": 5, **settings}
    with pytest.raises(ConfigError, match=message):
        _run(tmp_path, top_k=10, **settings)


def test_a_pipeline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="latency_sample.*pipeline"):
        embedscope.evaluate(
            "bm25", [_task()], output_folder=str(tmp_path), cache=False, show_progress=False, latency_sample=5
        )


def test_the_flag_reaches_the_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "-m", "bm25", "-t", "BBCNewsRetrieval", "--output-folder", str(tmp_path)]
    assert main([*args, "--latency-sample", "5", "--precision", "binary"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--latency-sample" in err[0] and "fp32" in err[0]
