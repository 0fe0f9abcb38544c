"""The memory guard and ``run --dry-run`` (issue 51, item 5): the estimate's formula against a hand computation, a
run over very long texts with a large batch refused in one line naming the batch size that fits (and the same run
accepted with it), ``--dry-run`` encoding and writing nothing while counting what the run would encode, and (slow) the
estimate held to the real peak resident memory of runs it accepts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.evaluation.memory import (
    WORKSPACE,
    Knobs,
    ModelPlan,
    TaskSizes,
    activation_bytes,
    estimate_memory,
    refusal,
)
from embedscope.models.shape import ModelShape, model_shape
from embedscope.profiling import format_bytes, parse_bytes, resident_bytes
from embedscope.settings.run import RunSettings
from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES, write_tiny_beir

TORCH = ModelShape(
    hidden=64, layers=4, heads=4, intermediate=256, max_length=128, dim=48, vocab=1000, weight_bytes=10**6,
    runtime="torch",
)  # fmt: skip


def _beir(folder: Path, docs: list[str], queries: list[str]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"_id": f"d{i}", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as f:
        for i, text in enumerate(queries):
            f.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
    judged = "".join(f"q{i}\td{i}\t1\n" for i in range(len(queries)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + judged)
    return folder


def _long_texts(n: int, words: int) -> list[str]:
    return [" ".join(f"w{i}x{j}" for j in range(words - (i * 7) % (words // 2))) for i in range(n)]


# -- the formula ------------------------------------------------------------------------------------------------


def test_one_batch_of_each_runtime_against_a_hand_computation() -> None:
    b, longest, t = 16, 300, 128  # the longest text's 300 tokens truncated at the model's 128
    tokenizer = max(b, 64) * longest * 256  # a batch, or the 64 texts the truncation count reads at once
    torch_layer = b * t * (4 * 64 + 2 * 256) * 4 + 2 * b * t * t
    assert activation_bytes(TORCH, b, longest, texts=1000) == WORKSPACE + tokenizer + torch_layer
    assert activation_bytes(TORCH, b, longest, texts=10) == WORKSPACE + b * longest * 256 + torch_layer
    half = ModelShape(**{**TORCH.__dict__, "bytes_per_value": 2, "attention": "eager"})
    eager = b * t * (4 * 64 + 2 * 256) * 2 + 2 * b * 4 * t * t * 4
    assert activation_bytes(half, b, longest, texts=1000) == WORKSPACE + tokenizer + eager
    sparse = ModelShape(**{**TORCH.__dict__, "sparse": True, "dim": 1000})
    assert (
        activation_bytes(sparse, b, longest, texts=1000) == WORKSPACE + tokenizer + torch_layer + 2 * b * t * 1000 * 4
    )
    graph = ModelShape(**{**TORCH.__dict__, "runtime": "graph"})
    assert (
        activation_bytes(graph, b, longest, texts=1000) == WORKSPACE + tokenizer + 4 * b * (4 * t * 64 + 4 * t * t) * 4
    )
    static = ModelShape(**{**TORCH.__dict__, "runtime": "static", "layers": 0})
    assert activation_bytes(static, b, longest, texts=1000) == WORKSPACE + tokenizer
    assert (
        activation_bytes(TORCH, b, 50, max_length=32, texts=b)
        == WORKSPACE + b * 50 * 256 + b * 32 * (4 * 64 + 2 * 256) * 4 + 2 * b * 32 * 32
    )


def test_a_retrieval_tasks_phases_against_a_hand_computation() -> None:
    """Queries, then the corpus chunk by chunk (the queries' vectors held), then the search; the largest phase
    counts, beside the resident set, the weights and the texts."""
    q, docs, d = 5000, 120_000, 48
    sizes = TaskSizes(
        "R",
        calls=((("query", q, 20, False), ("document", docs, 300, True)),),
        text_bytes=7_000_000,
        queries=q,
        documents=docs,
    )
    knobs = Knobs(batch_size=32, corpus_chunk_size=50_000, top_k=100)
    parts = estimate_memory(sizes, TORCH, knobs, resident=500 * 10**6, weights=10**6)
    queries_phase = 4 * q * d * 4 + activation_bytes(TORCH, 32, 20, texts=q)
    corpus_phase = q * d * 4 + 4 * 50_000 * d * 4 + activation_bytes(TORCH, 32, 300, texts=50_000)
    search = {"vectors": 2 * (q + 50_000) * d * 4, "scores": 3 * q * 101 * 16 + 2 * 4096 * 50_000 * 4}
    assert sum(search.values()) > max(queries_phase, corpus_phase)  # the score matrix is this task's peak
    assert parts == {
        "resident": 500 * 10**6,
        "runtime": 0,
        "weights": 10**6,
        "texts": 14_000_000,
        "activations": 0,
        "vectors": search["vectors"],
        "scores": search["scores"],
        "index": 0,
    }
    compressed = estimate_memory(
        sizes, TORCH, Knobs(corpus_chunk_size=50_000, top_k=100, post_processes=True), resident=0
    )
    assert compressed["index"] == 2 * docs * d * 4  # int8/binary or an index: the whole corpus at once
    on_gpu = estimate_memory(sizes, TORCH, knobs, resident=0, host_encoding=False, host_search=False)
    assert on_gpu["scores"] == 3 * q * 101 * 16 and on_gpu["activations"] == 0
    smaller = estimate_memory(sizes, TORCH, Knobs(corpus_chunk_size=5_000, top_k=100), resident=0)
    assert smaller["scores"] == 3 * q * 101 * 16 + 2 * 4096 * 5_000 * 4


def test_a_paired_task_holds_its_first_columns_vectors_while_encoding_the_second() -> None:
    sizes = TaskSizes("S", calls=((("document", 1000, 40, False), ("document", 1000, 900, False)),), text_bytes=0)
    parts = estimate_memory(sizes, TORCH, Knobs(batch_size=64), resident=0)
    assert parts["vectors"] == 1000 * 48 * 4 + 4 * 1000 * 48 * 4
    assert parts["activations"] == activation_bytes(TORCH, 64, 900, texts=1000)
    lexical = estimate_memory(
        TaskSizes("B", (), 1000, queries=10, documents=50), None, Knobs(top_k=5), resident=0, lexical=True
    )
    assert lexical == {
        "resident": 0,
        "runtime": 0,
        "weights": 0,
        "texts": 2000,
        "activations": 0,
        "vectors": 0,
        "scores": 3 * 10 * 6 * 16,
        "index": 3000,
    }


def test_a_models_shape_is_read_from_its_files_without_its_weights() -> None:
    shape = model_shape("minilm", {"max_seq_length": 512, "dtype": "fp16"})
    assert shape is not None
    assert (shape.hidden, shape.layers, shape.heads, shape.intermediate, shape.dim) == (384, 6, 12, 1536, 384)
    assert (shape.max_length, shape.bytes_per_value, shape.runtime) == (512, 2, "torch")
    assert shape.weight_bytes > 80e6 and shape.tokenizer is not None
    int8 = model_shape("minilm-int8")
    assert int8 is not None and (int8.runtime, int8.max_length, int8.layers) == ("graph", 256, 6)
    assert model_shape("bm25") is None and model_shape("openai:text-embedding-3-small") is None


def test_memory_sizes_parse_and_bad_ones_are_refused() -> None:
    assert [parse_bytes(v) for v in ("8GB", "512MB", "1.5 GiB", "2e9", 1000)] == [8e9, 512e6, 1.5 * 2**30, 2e9, 1000]
    assert RunSettings(memory_limit="8GB").memory_limit == "8GB"
    for bad in ("lots", "0", "-1GB", "nan", True, "12 parsecs"):
        with pytest.raises(ValueError, match="memory"):
            RunSettings(memory_limit=bad)
    assert format_bytes(7_600_000_000) == "7.6 GB"


def _plan(batch: int, shape: ModelShape | None = TORCH) -> ModelPlan:
    return ModelPlan("m", "local", shape, 48, "cpu", True, True, batch, 0)


def test_the_refusal_names_the_first_setting_that_fits_alone() -> None:
    settings = RunSettings(memory_limit="1GB", corpus_chunk_size=50_000, top_k=100)
    long_texts = TaskSizes("Long", calls=((("document", 2000, 20_000, False),),), text_bytes=0)
    estimate = _estimate(_plan(512), long_texts, settings)
    error = refusal(_plan(512), long_texts, settings, estimate)
    assert error.key == "batch_size" and re.search(r"\{batch_size\} (\d+) fits \(estimated", error.message)
    value = int(re.search(r"\{batch_size\} (\d+) fits", error.message).group(1))  # type: ignore[union-attr]
    assert (
        _estimate(_plan(value), long_texts, settings).fits
        and not _estimate(_plan(2 * value), long_texts, settings).fits
    )

    corpus = TaskSizes("Big", calls=((("query", 4096, 10, False), ("document", 2_000_000, 10, True)),), text_bytes=0,
                       queries=4096, documents=2_000_000)  # fmt: skip
    error = refusal(_plan(1, None), corpus, settings, _estimate(_plan(1, None), corpus, settings))
    assert error.key == "corpus_chunk_size", error.message  # the batch cannot help: the score matrix is the peak
    value = int(re.search(r"\{corpus_chunk_size\} (\d+) fits", error.message).group(1))  # type: ignore[union-attr]
    assert value == 25_000  # halved from 50,000 once: a 4,096 × 25,000 score matrix (and its selection) fits in 1 GB
    chunked = RunSettings(memory_limit="1GB", corpus_chunk_size=value, top_k=100)
    assert _estimate(_plan(1, None), corpus, chunked).fits and not _estimate(_plan(1, None), corpus, settings).fits

    hopeless = TaskSizes("Huge", calls=(), text_bytes=10**9)
    error = refusal(_plan(1), hopeless, settings, _estimate(_plan(1), hopeless, settings))
    assert error.key == "memory_limit" and "no one of {batch_size}" in error.message


def _estimate(plan: ModelPlan, sizes: TaskSizes, settings: RunSettings):
    from embedscope.evaluation.memory import estimate_task

    return estimate_task(plan, sizes, settings, resident=0, available=parse_bytes(settings.memory_limit))


# -- the guard through the command line -------------------------------------------------------------------------


@pytest.mark.slow  # a whole command, its model loaded
def test_a_run_of_long_texts_with_a_large_batch_is_refused_in_one_line_naming_the_batch_size_that_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guard sizes the run once minilm-int8 is built and before any task encodes (its shape and tokenizer read
    from its files)."""
    data = _beir(tmp_path / "long", _long_texts(64, 400), ["w1x1", "w2x2"])
    limit = resident_bytes() + 1000 * 10**6
    common = ["run", "--model", "minilm-int8", "--tasks", str(data), "--no-progress", "--memory-limit", str(limit)]
    common += ["--output-folder", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    assert main([*common, "--batch-size", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    found = re.fullmatch(
        r"embedscope: error: minilm-int8 on long: estimated peak memory [\d.]+ GB > --memory-limit [\d.]+ [GM]B "
        r"\(resident .* \+ activations [\d.]+ GB.*\): --batch-size (\d+) fits \(estimated [\d.]+ [GM]B\)\n",
        err,
    )
    assert found, err
    fits = int(found.group(1))
    assert 1 <= fits < 64
    assert not (tmp_path / "out").exists()  # refused before any task ran: no result, not even the model's metadata
    assert _vectors_stored(tmp_path / "cache") == 0  # nothing encoded

    # the same run with the batch size it names is accepted: test_the_estimate_holds_to_the_real_peak_of_runs_it_accepts
    # (in a process of its own: a second run in this one would start from the first's resident set)


def _vectors_stored(cache: Path) -> int:
    import sqlite3

    stores = [p for p in cache.rglob("*.sqlite") if p.name != "data-hashes.sqlite"]
    total = 0
    for path in stores:
        with sqlite3.connect(path) as conn:
            total += conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        conn.close()
    return total


# -- --dry-run --------------------------------------------------------------------------------------------------


@pytest.mark.slow  # two whole commands, and sentence-transformers imported
def test_dry_run_counts_texts_and_tokens_and_encodes_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentence_transformers
    from tokenizers import Tokenizer

    from embedscope.models import base, cache

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run loaded a model")

    monkeypatch.setattr(sentence_transformers.SentenceTransformer, "__init__", no_model)
    encoded: list[int] = []
    monkeypatch.setattr(base.BaseEncoder, "encode", lambda self, texts, **kw: encoded.append(len(texts)))
    opened: list[object] = []
    monkeypatch.setattr(cache.EmbeddingCache, "__init__", lambda self, *a, **kw: opened.append(a))
    task = write_tiny_beir(tmp_path / "tiny")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = ["run", "--model", "minilm", "--tasks", str(task), "--output-folder", str(tmp_path / "out")]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--dry-run", "--json"]) == 0
    assert encoded == [] and opened == []
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
    (row,) = json.loads(capsys.readouterr().out)["dry_run"]

    shape = model_shape("minilm")
    assert shape is not None and shape.tokenizer is not None
    tok = Tokenizer.from_file(str(shape.tokenizer))
    tok.no_truncation()
    tok.no_padding()
    counts = {
        role: [len(tok.encode(t).ids) for t in texts]
        for role, texts in (("query", TINY_QUERIES.values()), ("document", TINY_CORPUS.values()))
    }
    assert row["model"] == "minilm" and row["task"] == "tiny"
    assert row["roles"] == {
        "query": {"texts": len(TINY_QUERIES), "tokens": sum(counts["query"]), "longest": max(counts["query"])},
        "document": {"texts": len(TINY_CORPUS), "tokens": sum(counts["document"]), "longest": max(counts["document"])},
    }
    assert row["tokens_counted_by"] == ["tokenizer"] and row["cost_text"] == "local" and row["seconds"] > 0
    assert row["memory"]["peak"] > row["memory"]["resident"] > 0

    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    longest, total = max(counts["document"]), sum(counts["document"])
    assert f"| minilm | tiny | document | {len(TINY_CORPUS)} | {total} | {longest} | tokenizer |" in out
    assert "nothing was measured, encoded or written" in out


def test_dry_run_prices_a_model_behind_an_api_by_its_token_counting_and_sends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from embedscope.models.api.encoder import estimate_tokens

    task = write_tiny_beir(tmp_path / "tiny")
    argv = ["run", "--model", "openai:fake", "--api-base", "http://127.0.0.1:9/v1", "--price-per-mtok", "2"]
    assert main([*argv, "--tasks", str(task), "--query-prompt", "query: ", "--dry-run", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["dry_run"]
    texts = [f"query: {q}" for q in TINY_QUERIES.values()] + list(TINY_CORPUS.values())
    tokens = sum(estimate_tokens(t) for t in texts)  # the API model's own count (its --budget's)
    assert row["cost"] == pytest.approx(tokens * 2 / 1e6)
    assert row["tokens_counted_by"] == ["4 bytes a token"]
    assert sum(r["tokens"] for r in row["roles"].values()) == tokens
    assert row["memory"]["activations"] == 0  # a service encodes it


# -- the estimate against the real peak (slow: whole processes) -------------------------------------------------

CHILD = textwrap.dedent(
    """
    import contextlib, io, json, re, sys
    from embedscope.cli.main import main
    from embedscope.evaluation.runner import run
    from embedscope.profiling import resident_bytes
    from embedscope.settings import Layer, build_settings

    def peak():
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))

    def accepted(args):
        open("/proc/self/clear_refs", "w").write("5")  # the peak resident set from here (Linux 4.0+)
        (report,) = run(build_settings([Layer("test", args, "api")]))
        return {"estimate": report.memory.peak, "parts": dict(report.memory.parts), "peak": peak()}

    small, argv, room, long = json.loads(sys.argv[1])
    found = {"small": accepted(small)}
    limit = resident_bytes() + room
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*argv, "--memory-limit", str(limit)])
    found["refused"] = {"code": code, "stderr": err.getvalue(), "limit": limit}
    fits = re.search(r"--batch-size (\\d+) fits", err.getvalue())
    if fits:
        found["fits"] = int(fits.group(1))
        found["long"] = accepted({**long, "batch_size": found["fits"], "memory_limit": str(limit)})
    print(json.dumps(found))
    """
)


@pytest.mark.slow
def test_the_estimate_holds_to_the_real_peak_of_runs_it_accepts(tmp_path: Path) -> None:
    """A tiny model on a small task (the resident set is most of it), then a run of very long texts that the guard
    refuses at batch 1,024, accepted at the batch size it names under the same limit (activations are most of it):
    each estimate within 2× of the real peak resident set of the run (VmHWM, reset before it) and never below it by
    more than 25%. One process: the runs share its start-up."""
    from support.tiny_models import build_tiny_sentence_transformer

    model = str(build_tiny_sentence_transformer(tmp_path / "tiny-model"))
    base = {"model": model, "output_folder": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache")}
    base |= {"show_progress": False, "overwrite": "always"}
    small = _beir(tmp_path / "small", [f"document {i} about w{i % 7}" for i in range(300)], ["w1", "w2", "w3"])
    data = _beir(tmp_path / "long", _long_texts(1024, 260), ["w1x1 w1x2", "w2x1"])  # 600-1,200 tokens each
    argv = ["run", "--model", model, "--tasks", str(data), "--max-seq-length", "512", "--batch-size", "1024"]
    argv += ["--output-folder", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    long = {**base, "tasks": [str(data)], "model_options": {"max_seq_length": 512}}
    steps = [{**base, "tasks": [str(small)]}, argv, 1_000 * 10**6, long]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(steps)], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])

    estimate, peak = found["small"]["estimate"], found["small"]["peak"]
    print(f"small task: estimated {format_bytes(estimate)}, measured peak {format_bytes(peak)}, {estimate / peak:.2f}×")
    assert 0.75 * peak <= estimate <= 2 * peak, (format_bytes(estimate), format_bytes(peak))

    refused = found["refused"]
    assert refused["code"] == 2 and refused["stderr"].count("\n") == 1, refused
    assert re.search(r"estimated peak memory .* > --memory-limit .*: --batch-size \d+ fits", refused["stderr"])
    assert 1 <= found["fits"] < 1024
    estimate, peak, parts = found["long"]["estimate"], found["long"]["peak"], found["long"]["parts"]
    print(
        f"long texts, batch {found['fits']}: estimated {format_bytes(estimate)}, measured {format_bytes(peak)}, {estimate / peak:.2f}×"
    )
    assert parts["activations"] > parts["resident"]  # the long texts' batches are most of the peak
    assert 0.75 * peak <= estimate <= 2 * peak, (format_bytes(estimate), format_bytes(peak), parts)
