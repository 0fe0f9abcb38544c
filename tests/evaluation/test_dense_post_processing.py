"""Truncation, quantization and approximate indexes as run settings (issue 22): they act on the vectors the encoder
gave (no re-encoding), are recorded and stored apart, and leave the default exact path as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.models.cache import EmbeddingCache
from embedscope.retrieval.compression import compressed_search
from embedscope.retrieval.dense import dense_search, top_k_search
from embedscope.settings import RunSettings
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import HashEncoder
from embedscope.types import Corpus, Queries, RetrievalData

N_DOCS, N_QUERIES = 300, 24


def _data(split: str = "test") -> RetrievalData:
    corpus = Corpus(tuple(f"d{i}" for i in range(N_DOCS)), tuple(f"document number {i}" for i in range(N_DOCS)))
    queries = Queries(tuple(f"q{i}" for i in range(N_QUERIES)), tuple(f"question {i}" for i in range(N_QUERIES)))
    qrels = {f"q{i}": {f"d{(7 * i) % N_DOCS}": 1} for i in range(N_QUERIES)}
    return RetrievalData(corpus, queries, qrels, name="SynthRetrieval", split=split)


def _task() -> RetrievalTask:
    return RetrievalTask(name="SynthRetrieval", load_split=_data, description="hash vectors")


class TruncatedHashEncoder(HashEncoder):
    """An independent truncation: the encoder itself returns the first ``keep`` dimensions (as ST's truncate_dim)."""

    def __init__(self, keep: int) -> None:
        super().__init__(dim=32)
        self.keep = keep

    def _encode(self, texts, role, batch_size, show_progress):
        return super()._encode(texts, role, batch_size, show_progress)[:, : self.keep]


def _search(encoder, **options):
    data = _data()
    timings: dict[str, float] = {}
    run = dense_search(
        encoder,
        data.queries,
        data.corpus,
        RunSettings(top_k=10, **options).search_options(show_progress=False),
        timings,
    )
    return run, timings


def test_the_default_path_is_mteb_s_exact_search_bit_for_bit() -> None:
    encoder, data = HashEncoder(dim=32), _data()
    run, _ = _search(encoder)
    q = encoder.encode(list(data.queries.texts), role="query")
    d = encoder.encode(list(data.corpus.texts), role="document")
    index, scores = top_k_search(q, [d], top_k=10, similarity="cosine")
    assert np.array_equal(run.doc_index, index) and np.array_equal(run.scores, scores)
    assert not RunSettings(precision="fp32", index=None).search_options(show_progress=False).post_processes


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_truncation_equals_an_encoder_that_truncates(similarity: str) -> None:
    ours, _ = _search(HashEncoder(dim=32, similarity=similarity), truncate_dim=8)
    truncating = TruncatedHashEncoder(8)
    truncating.similarity = similarity
    reference, _ = _search(truncating)
    assert np.array_equal(ours.doc_index, reference.doc_index) and np.array_equal(ours.scores, reference.scores)


@pytest.mark.parametrize("precision,rescore", [("int8", None), ("int8", 3), ("binary", None), ("binary", 4)])
def test_quantized_search_runs_on_the_encoder_s_vectors(precision: str, rescore: int | None) -> None:
    encoder, data = HashEncoder(dim=32), _data()
    run, _ = _search(encoder, truncate_dim=16, precision=precision, rescore_multiplier=rescore)
    q = encoder.encode(list(data.queries.texts), role="query")
    d = encoder.encode(list(data.corpus.texts), role="document")
    index, scores = compressed_search(
        q, d, similarity="cosine", top_k=10, precision=precision, truncate_dim=16, rescore_multiplier=rescore
    )
    assert np.array_equal(run.doc_index, index) and np.array_equal(run.scores, scores)


def test_an_approximate_index_reports_its_recall_of_exact_search() -> None:
    pytest.importorskip("faiss")
    exact, _ = _search(HashEncoder(dim=32))
    run, timings = _search(HashEncoder(dim=32), index={"type": "hnsw", "M": 16, "ef_search": 64})
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(run.doc_index, exact.doc_index)])
    assert timings["ann_recall_at_10"] == pytest.approx(overlap) and overlap >= 0.9
    assert {"index_build", "recall_check", "search"} <= set(timings)


def test_settings_are_recorded_stored_apart_and_reuse_the_cached_vectors(tmp_path) -> None:
    cache = EmbeddingCache(tmp_path / "cache")
    common = dict(output_folder=tmp_path / "out", cache=cache, show_progress=False)
    plain = embedscope.evaluate(HashEncoder(dim=32), [_task()], **common)
    explicit = embedscope.evaluate(HashEncoder(dim=32), [_task()], precision="fp32", index="exact", **common)
    assert explicit.outcomes[0].path == plain.outcomes[0].path and explicit.outcomes[0].reused
    squeezed = embedscope.evaluate(
        HashEncoder(dim=32), [_task()], truncate_dim=16, precision="binary", rescore_multiplier=2, **common
    )
    outcome = squeezed.outcomes[0]
    assert outcome.path != plain.outcomes[0].path and "experiments" in str(outcome.path)
    record = outcome.result.extra["run_settings"]
    assert (record["truncate_dim"], record["precision"], record["rescore_multiplier"]) == (16, "binary", 2)
    meta = json.loads((outcome.path.parent / "model_meta.json").read_text())
    assert meta["experiment_kwargs"] == {"truncate_dim": 16, "precision": "binary", "rescore_multiplier": 2}
    assert squeezed.cache is not None and squeezed.cache.encoded == 0 and squeezed.cache.hits == N_DOCS + N_QUERIES


def test_options_that_cannot_act_are_refused(tmp_path, capsys) -> None:
    with pytest.raises(ConfigError, match="acts on dense retrieval"):
        embedscope.evaluate("bm25", [_task()], precision="int8", cache=False, output_folder=tmp_path / "o")
    with pytest.raises(ConfigError, match="truncate_dim has no effect"):
        embedscope.evaluate(HashEncoder(), ["LeeDocumentSimilarity"], truncate_dim=8, cache=False)
    assert main(["run", "--rescore", "2", "--print-settings"]) == 2
    assert capsys.readouterr().err.strip().startswith("embedscope: error: --rescore:")
    assert main(["run", "--index", "hnsw:M=8,ef_search=x", "--print-settings"]) == 2
    assert "--index" in capsys.readouterr().err
    argv = ["run", "--truncate-dim", "64", "--precision", "int8", "--rescore", "4", "--index", "exact"]
    assert main([*argv, "--print-settings"]) == 0
    out = capsys.readouterr().out
    assert "command line (--rescore)" in out and "command line (--truncate-dim)" in out
