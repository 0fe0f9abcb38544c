"""The stored records and the experiments folder are pinned for a set of setting combinations: results stored before
they were computed from :class:`~embedscope.settings.RunSettings` are still reused (byte-identical ``run_settings``,
``experiment_kwargs`` and experiments hash; issue 27)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import embedscope
from embedscope.results.settings import experiment_name
from embedscope.settings import RunSettings
from embedscope.testing.fakes import KeywordEncoder

FP = "b4f492d15e18e4741779ce01a872f3f81a87076fb4332bb7e9abcf57ee3f2534"  # the keyword encoder's fingerprint

CORPUS = [("d1", "cat", "a"), ("d2", "dog", "a"), ("d3", "cat cat cat", "b"), ("d4", "fish", "b")]
QUERIES = [("q1", "cat", "a"), ("q2", "fish", "b")]
QRELS = {"q1": "d1", "q2": "d4"}

# (case, model, settings): (result path under the output folder, experiment_kwargs, run_settings), as JSON text
PINNED = [
    (
        "default",
        "keyword",
        {},
        "fake__keyword-encoder/e9914ddb5904/data.json",
        "null",
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000}',
    ),
    (
        "default",
        "fts5",
        {},
        "fts5/fd414e1bc1f9/data.json",
        "null",
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000}',
    ),
    (
        "top_k",
        "keyword",
        {"top_k": 10},
        "fake__keyword-encoder/e9914ddb5904/experiments/2e657cf83a6f/data.json",
        '{"top_k": 10}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 10, "limits": null, "corpus_chunk_size": 50000}',
    ),
    (
        "top_k",
        "fts5",
        {"top_k": 10},
        "fts5/fd414e1bc1f9/experiments/2e657cf83a6f/data.json",
        '{"top_k": 10}',
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 10, "limits": null, "corpus_chunk_size": 50000}',
    ),
    (
        "limits",
        "keyword",
        {"limits": 2},
        "fake__keyword-encoder/e9914ddb5904/experiments/2ccb526e32da/data.json",
        '{"limits": 2}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": 2, "corpus_chunk_size": 50000}',
    ),
    (
        "limits",
        "fts5",
        {"limits": 2},
        "fts5/fd414e1bc1f9/experiments/2ccb526e32da/data.json",
        '{"limits": 2}',
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 1000, "limits": 2, "corpus_chunk_size": 50000}',
    ),
    (
        "dense",
        "keyword",
        {"truncate_dim": 2, "precision": "int8", "rescore_multiplier": 4},
        "fake__keyword-encoder/e9914ddb5904/experiments/4a9a8d9bc357/data.json",
        '{"truncate_dim": 2, "precision": "int8", "rescore_multiplier": 4}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "truncate_dim": 2, "precision": "int8", "rescore_multiplier": 4}',
    ),
    (
        "binary",
        "keyword",
        {"precision": "binary"},
        "fake__keyword-encoder/e9914ddb5904/experiments/0d0d99e8c2a6/data.json",
        '{"precision": "binary"}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "precision": "binary"}',
    ),
    (
        "index",
        "keyword",
        {"index": "hnsw:M=8"},
        "fake__keyword-encoder/e9914ddb5904/experiments/9d86103d9824/data.json",
        '{"index": {"type": "hnsw", "M": 8, "ef_construction": 40, "ef_search": 16}}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "index": {"type": "hnsw", "M": 8, "ef_construction": 40, "ef_search": 16}}',
    ),
    (
        "chunking",
        "keyword",
        {"chunking": {"method": "paragraphs", "paragraphs": 2}},
        "fake__keyword-encoder/e9914ddb5904/experiments/efa030df5dea/data.json",
        '{"chunking": {"method": "paragraphs", "chunk_size": 500, "overlap": null, "tokenizer": "cl100k_base", "paragraphs": 2, "keep_headers": true, "stop_at": "## Questionnaire"}}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "chunking": {"method": "paragraphs", "chunk_size": 500, "overlap": null, "tokenizer": "cl100k_base", "paragraphs": 2, "keep_headers": true, "stop_at": "## Questionnaire"}}',
    ),
    (
        "chunking",
        "fts5",
        {"chunking": {"method": "paragraphs", "paragraphs": 2}},
        "fts5/fd414e1bc1f9/experiments/efa030df5dea/data.json",
        '{"chunking": {"method": "paragraphs", "chunk_size": 500, "overlap": null, "tokenizer": "cl100k_base", "paragraphs": 2, "keep_headers": true, "stop_at": "## Questionnaire"}}',
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "chunking": {"method": "paragraphs", "chunk_size": 500, "overlap": null, "tokenizer": "cl100k_base", "paragraphs": 2, "keep_headers": true, "stop_at": "## Questionnaire"}}',
    ),
    (
        "filter_field",
        "keyword",
        {"filter_field": "chapter"},
        "fake__keyword-encoder/e9914ddb5904/experiments/1c3ee9cacda4/data.json",
        '{"filter_field": "chapter"}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "filter_field": "chapter"}',
    ),
    (
        "filter_field",
        "fts5",
        {"filter_field": "chapter"},
        "fts5/fd414e1bc1f9/experiments/1c3ee9cacda4/data.json",
        '{"filter_field": "chapter"}',
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000, "filter_field": "chapter"}',
    ),
    (
        "latency_sample",
        "keyword",
        {"latency_sample": 2},
        "fake__keyword-encoder/e9914ddb5904/data.json",
        "null",
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 50000}',
    ),
    (
        "corpus_chunk_size",
        "keyword",
        {"corpus_chunk_size": 3},
        "fake__keyword-encoder/e9914ddb5904/experiments/22aae0c34c69/data.json",
        '{"corpus_chunk_size": 3}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 3}',
    ),
    (
        "corpus_chunk_size",
        "fts5",
        {"corpus_chunk_size": 3},
        "fts5/fd414e1bc1f9/experiments/22aae0c34c69/data.json",
        '{"corpus_chunk_size": 3}',
        '{"model": {"pipeline": "fd414e1bc1f9"}, "top_k": 1000, "limits": null, "corpus_chunk_size": 3}',
    ),
    (
        "several",
        "keyword",
        {"top_k": 5, "limits": 3, "corpus_chunk_size": 7, "filter_field": "chapter", "truncate_dim": 2},
        "fake__keyword-encoder/e9914ddb5904/experiments/585c68422726/data.json",
        '{"top_k": 5, "limits": 3, "corpus_chunk_size": 7, "filter_field": "chapter", "truncate_dim": 2}',
        '{"model": {"fingerprint": "<FP>", "prompts": {}, "similarity": "dot"}, "top_k": 5, "limits": 3, "corpus_chunk_size": 7, "filter_field": "chapter", "truncate_dim": 2}',
    ),
]

# settings → experiment_kwargs (as JSON text) and the experiments folder's name
PINNED_KWARGS = [
    ({}, "{}", None),
    ({"model_options": {"pooling": "cls", "device": "cpu", "revision": "x"}}, '{"pooling": "cls"}', "6ab3c50b7f0d"),
    ({"dtype": "fp16"}, '{"dtype": "fp16"}', "614d8bfdfd0d"),
    ({"model_options": {"dtype": "float32"}}, "{}", None),
    (
        {"model_options": {"max_seq_length": 128, "normalize": True}, "top_k": 7, "precision": "binary"},
        '{"max_seq_length": 128, "normalize": true, "top_k": 7, "precision": "binary"}',
        "a3eca7dd9474",
    ),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data", numbered=False)
    (root / "qrels").mkdir()
    rows = [{"_id": i, "text": t, "metadata": {"chapter": c}} for i, t, c in CORPUS]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": i, "text": t, "metadata": {"chapter": c}} for i, t, c in QUERIES]
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    )
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "model", "options", "path", "kwargs", "record"), PINNED, ids=[f"{p[0]}-{p[1]}" for p in PINNED]
)
def test_records_and_experiment_folder_are_pinned(case, model, options, path, kwargs, record, data, tmp_path):
    encoder = KeywordEncoder(["cat", "dog", "fish"]) if model == "keyword" else model
    out = tmp_path / "out"
    outcome = embedscope.evaluate(
        encoder, [str(data)], output_folder=out, cache=False, show_progress=False, **options
    ).outcomes[0]
    assert outcome.path.relative_to(out).as_posix() == path
    stored = json.loads(outcome.path.read_text())
    meta = json.loads((outcome.path.parent / "model_meta.json").read_text())
    assert json.dumps(stored["run_settings"]) == record.replace("<FP>", FP)  # key order included
    assert json.dumps(meta["run_settings"]) == record.replace("<FP>", FP)
    assert json.dumps(meta.get("experiment_kwargs")) == kwargs


def _experiment_kwargs(settings: RunSettings) -> dict:
    (entry,) = settings.model_runs()
    return settings.experiment_key(entry.options)


@pytest.mark.parametrize(("given", "kwargs", "folder"), PINNED_KWARGS)
def test_experiment_kwargs_of_model_options_are_pinned(given, kwargs, folder):
    computed = _experiment_kwargs(RunSettings.model_validate(given))
    assert json.dumps(computed) == kwargs
    assert experiment_name(computed) == folder


def test_a_qa_task_s_own_chunking_is_the_run_settings_default():
    from embedscope.data.documents import STUDY_REFERENCE
    from embedscope.settings.run import ChunkingSettings

    assert ChunkingSettings().options() == STUDY_REFERENCE


def test_every_search_option_is_a_run_setting_of_the_same_name():
    """SearchOptions is computed from RunSettings by field name: a field without a setting would have no source."""
    import dataclasses

    from embedscope.retrieval.base import SearchOptions

    assert {f.name for f in dataclasses.fields(SearchOptions)} <= set(RunSettings.model_fields)
    options = RunSettings(top_k=3, precision="int8").search_options(batch_size=4, show_progress=False)
    assert (options.top_k, options.precision, options.batch_size, options.corpus_chunk_size) == (3, "int8", 4, 50_000)
