"""A result's ``compute`` (the thread budget each backend ran with, the CPU) and ``truncated`` (texts longer than the
model's maximum length), each checked against what the runtime or the tokenizer says on its own."""

from __future__ import annotations

import numpy as np
import pytest

import embedscope
from embedscope.models.cache import EmbeddingCache
from embedscope.results.compute import cpu_info, threadpools, truncation_lines
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task

LONG = "the market said the government film music company game " * 12  # well over 64 tokens
SHORT = "a short text about the market"


def _run(model, tmp_path, **settings):
    report = embedscope.evaluate(
        model, [tiny_retrieval_task()], output_folder=str(tmp_path / "out"), show_progress=False, **settings
    )
    return report.outcomes[0].result.extra


@pytest.fixture
def one_torch_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield torch
    finally:
        torch.set_num_threads(before)


def test_the_torch_thread_budget_is_what_torch_reports_during_the_run(tmp_path, one_torch_thread):
    extra = _run(KeywordEncoder(["cat", "dog", "fish"]), tmp_path, cache=False)
    threads = extra["compute"]["threads"]
    assert threads["torch"]["intra_op"] == 1
    assert threads["torch"]["inter_op"] == one_torch_thread.get_num_interop_threads()


def test_blas_and_openmp_pools_are_threadpoolctls(tmp_path):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    extra = _run(KeywordEncoder(["cat", "dog", "fish"]), tmp_path, cache=False)
    recorded = {
        (p["internal_api"], p.get("prefix")): p["num_threads"] for p in extra["compute"]["threads"]["threadpools"]
    }
    now = {(p["internal_api"], p.get("prefix")): p["num_threads"] for p in threadpoolctl.threadpool_info()}
    assert recorded == now and threadpools() is not None
    with threadpoolctl.threadpool_limits(1):  # a limit set around the run is what the result says
        limited = _run(KeywordEncoder(["cat", "dog", "fish"]), tmp_path / "limited", cache=False)
    assert {p["num_threads"] for p in limited["compute"]["threads"]["threadpools"]} == {1}


def test_the_cpu_is_recorded(tmp_path):
    import platform

    cpu = _run(KeywordEncoder(["cat", "dog", "fish"]), tmp_path, cache=False)["compute"]["cpu"]
    assert cpu == cpu_info() and cpu["machine"] == platform.machine() and cpu["cpus"] >= 1


class CountingEncoder(KeywordEncoder):
    """A keyword encoder whose tokens are words plus two special tokens, truncated at 6."""

    max_seq_length = 6

    def token_lengths(self, texts, *, role):
        prompt = self.prompts.get(role, "")
        return [len((prompt + t).split()) + 2 for t in texts]


def test_truncation_counts_the_texts_the_model_encodes_per_role(tmp_path):
    # TinyRetrieval: documents of 3-11 words (5-13 tokens with the two specials), queries of one word
    from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES

    extra = _run(CountingEncoder(["cat", "dog", "fish"]), tmp_path, cache=False)
    docs = sum(len(t.split()) + 2 > 6 for t in TINY_CORPUS.values())
    queries = sum(len(t.split()) + 2 > 6 for t in TINY_QUERIES.values())
    assert extra["truncated"]["document"] == {
        "texts": len(TINY_CORPUS),
        "truncated": docs,
        "share": round(docs / len(TINY_CORPUS), 6),
        "max_length": 6,
    }
    assert extra["truncated"]["query"]["truncated"] == queries


def test_texts_the_cache_serves_are_not_counted(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache")
    first = _run(CountingEncoder(["cat", "dog", "fish"]), tmp_path / "a", cache=cache)
    again = _run(CountingEncoder(["cat", "dog", "fish"]), tmp_path / "b", cache=cache)
    assert first["truncated"]["document"]["texts"] > 0
    assert "truncated" not in again  # every text served from the cache: nothing encoded, nothing counted


def test_a_backend_that_cannot_say_records_no_truncation(tmp_path):
    assert "truncated" not in _run(KeywordEncoder(["cat", "dog", "fish"]), tmp_path, cache=False)


def test_run_prints_a_line_above_five_percent():
    entry = {"texts": 2225, "truncated": 412, "share": 412 / 2225, "max_length": 256}
    assert truncation_lines(
        "BBCNewsRetrieval", {"document": entry, "query": {**entry, "truncated": 1, "share": 0.01}}
    ) == ["BBCNewsRetrieval: 412 of 2,225 documents (18.5%) were truncated at 256 tokens"]
    assert truncation_lines("T", None) == []


@pytest.mark.slow  # loads a (tiny) model
def test_truncation_equals_the_tokenizers_count(tmp_path, one_torch_thread):
    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder
    from tests.support.tiny_models import build_tiny_sentence_transformer

    enc = SentenceTransformerEncoder(build_tiny_sentence_transformer(tmp_path / "tiny"), device="cpu")
    assert enc.max_seq_length == 64
    texts = [LONG, SHORT, LONG + " more words", SHORT * 3, "x"] * 3
    enc.prompts = {"query": "query: "}
    tokenizer = enc.model.tokenizer
    for role, prompt in (("query", "query: "), ("document", "")):
        independent = sum(len(tokenizer(prompt + t)["input_ids"]) > 64 for t in texts)
        before = enc.truncation_counts().get(role, {"texts": 0, "truncated": 0})
        enc.encode(texts, role=role, batch_size=4)
        after = enc.truncation_counts()[role]
        assert (after["texts"] - before["texts"], after["truncated"] - before["truncated"]) == (len(texts), independent)
        assert 0 < independent < len(texts)
    assert enc.thread_budget()["torch"]["intra_op"] == 1


@pytest.mark.slow  # loads a (tiny) model and runs a task on it
def test_a_sentence_transformers_run_records_torch_threads_and_truncation(tmp_path, one_torch_thread):
    from tests.support.tiny_models import build_tiny_sentence_transformer

    folder = build_tiny_sentence_transformer(tmp_path / "tiny")
    extra = _run(str(folder), tmp_path, cache=False, device="cpu")
    assert extra["compute"]["threads"]["torch"]["intra_op"] == 1
    assert extra["truncated"]["document"]["truncated"] == 0 and extra["truncated"]["document"]["max_length"] == 64


@pytest.mark.slow  # exports and runs a tiny ONNX graph
def test_onnx_records_its_sessions_threads_and_truncation(tmp_path):
    from tokenizers import Tokenizer

    from embedscope.models.onnx_backend import OnnxEncoder
    from tests.models.test_backends import _export

    _export(tmp_path / "g", seq=None)
    enc = OnnxEncoder(tmp_path / "g", threads=2, max_seq_length=4, device="cpu")
    assert enc.session.get_session_options().intra_op_num_threads == 2
    texts = ["the cat", "the cat sat on the mat", "a dog", "the the the the the"]
    enc.encode(texts, role="document")
    independent = sum(len(Tokenizer.from_file(str(tmp_path / "g" / "tokenizer.json")).encode(t).ids) > 4 for t in texts)
    assert enc.truncation_counts()["document"]["truncated"] == independent > 0
    extra = _run(enc, tmp_path, cache=False)
    assert extra["compute"]["threads"]["onnxruntime"]["intra_op"] == 2
    assert "torch" not in extra["compute"]["threads"]  # the ONNX encoder answers for itself
    assert np.isfinite(extra["truncated"]["document"]["share"])
