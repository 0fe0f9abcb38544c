"""Every backend takes a device and a dtype, records them, and keys the cache on them; model
objects a user holds are evaluated directly. Tiny models built here: no real model loads."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from embedscope.errors import ConfigError
from support.lazy import lazy_module

torch = lazy_module("torch")  # imported by the first test that uses it: collection imports nothing heavy
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning")

TEXTS = ["a cat sat", "dogs bark loudly at night", "x", "the quick brown fox jumps over the lazy dog", "cats"]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sentence-transformers", "transformers"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_dtype_reaches_the_model_and_the_fingerprint(tiny_st, backend, dtype):
    from embedscope.models.specs import load_encoder

    fp32 = load_encoder(str(tiny_st), backend=backend, device="cpu")
    low = load_encoder(str(tiny_st), backend=backend, device="cpu", dtype=dtype)
    torch_model = low.model if backend == "transformers" else low.model[0].auto_model
    assert next(torch_model.parameters()).dtype == getattr(torch, low.dtype)
    assert low.dtype == {"fp16": "float16", "bf16": "bfloat16"}[dtype] and fp32.dtype == "float32"
    assert low.fingerprint != fp32.fingerprint
    assert low.describe() == {"backend": backend, "device": "cpu", "dtype": low.dtype, "engine": "local"}
    a, b = fp32.encode(TEXTS, role="document"), low.encode(TEXTS, role="document")
    assert b.dtype == np.float32 and a.shape == b.shape
    assert 0 < np.abs(a - b).max() < 0.05  # a real low-precision run, close to fp32


def test_backends_without_low_precision_say_so():
    from embedscope.models.specs import load_encoder

    with pytest.raises(ConfigError, match="onnx models compute in float32 only"):
        load_encoder("paraphrase-minilm-l3", dtype="fp16", device="cpu")
    with pytest.raises(ConfigError, match="model2vec models compute in float32 only"):
        load_encoder("static-64", dtype="bf16", device="cpu")


def test_onnx_cuda_without_the_gpu_runtime_is_a_clean_error(monkeypatch):
    import onnxruntime as ort

    from embedscope.models.device import DeviceUnavailableError
    from embedscope.models.onnx_backend import execution_providers

    assert execution_providers(ort, "cpu") == ["CPUExecutionProvider"]
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(DeviceUnavailableError, match="onnxruntime-gpu"):
        execution_providers(ort, "cuda:0")
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert execution_providers(ort, "cuda:1") == [("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]


@pytest.mark.slow
def test_fp32_cpu_is_todays_path(tiny_st):
    """``device=cpu, dtype=fp32`` gives exactly the vectors of the model's own encode."""
    from sentence_transformers import SentenceTransformer

    from embedscope.models.specs import load_encoder

    ours = load_encoder(str(tiny_st), device="cpu", dtype="fp32").encode(TEXTS, role="document")
    theirs = SentenceTransformer(str(tiny_st)).encode(TEXTS, batch_size=32, convert_to_numpy=True)
    assert ours.tobytes() == np.asarray(theirs, dtype=np.float32).tobytes()


# -- model objects the user holds ---------------------------------------------------------------


def _same_scores(a, b) -> bool:
    """Equal score dicts, NaN (nAUC of a constant run) equal to NaN."""
    return json.dumps(a.outcomes[0].result.scores, sort_keys=True) == json.dumps(
        b.outcomes[0].result.scores, sort_keys=True
    )


def _task():
    from embedscope.testing.tiny import tiny_retrieval_task

    return tiny_retrieval_task()


@pytest.mark.slow
def test_evaluate_a_held_sentence_transformer(tiny_st, tmp_path):
    from sentence_transformers import SentenceTransformer

    import embedscope

    model = SentenceTransformer(str(tiny_st))
    report = embedscope.evaluate(
        model, [_task()], output_folder=tmp_path / "a", cache=tmp_path / "cache", show_progress=False
    )
    assert report.cache is not None and report.cache.encoded > 0  # fingerprinted from its weights, so cached
    by_path = embedscope.evaluate(
        str(tiny_st), [_task()], output_folder=tmp_path / "b", cache=False, show_progress=False, device="cpu"
    )
    assert _same_scores(report, by_path)
    assert report.outcomes[0].result.extra["device"] == "cpu"
    assert report.outcomes[0].result.extra["dtype"] == "fp32"

    again = embedscope.evaluate(
        model, [_task()], output_folder=tmp_path / "c", cache=tmp_path / "cache", show_progress=False
    )
    assert again.cache.encoded == 0  # same weights, same fingerprint: all from the cache
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    changed = embedscope.evaluate(
        model, [_task()], output_folder=tmp_path / "d", cache=tmp_path / "cache", show_progress=False
    )
    assert changed.cache.encoded > 0  # other weights: never served the old vectors


def test_held_object_with_encode_only_runs_uncached_and_says_so(tmp_path, caplog):
    import embedscope
    from embedscope.testing.fakes import HashEncoder

    class Plain:  # what a user might write around an API client
        def __init__(self) -> None:
            self.inner = HashEncoder(dim=8)

        def encode(self, texts, batch_size=32):
            return self.inner.encode(texts, role="document")

    with caplog.at_level(logging.WARNING):
        report = embedscope.evaluate(Plain(), [_task()], output_folder=tmp_path / "out", show_progress=False)
    assert report.cache is None
    assert "no fingerprint" in caplog.text and "cache off" in caplog.text
    cached = embedscope.evaluate(
        Plain(),
        [_task()],
        output_folder=tmp_path / "out2",
        show_progress=False,
        fingerprint="plain-v1",
        cache=tmp_path / "cache",
    )
    assert cached.cache is not None and cached.cache.encoded > 0
    assert _same_scores(cached, report)


def test_not_a_model_is_a_clean_error(tmp_path):
    import embedscope

    with pytest.raises(ConfigError, match="not a model embedscope can evaluate"):
        embedscope.evaluate(object(), [_task()], output_folder=tmp_path, show_progress=False)


@pytest.mark.slow
def test_held_cross_encoder_scores_like_its_folder(tmp_path):
    from sentence_transformers import CrossEncoder

    from embedscope.retrieval.cross_encoder import CrossEncoderReranker
    from support.tiny_models import build_tiny_cross_encoder

    folder = build_tiny_cross_encoder(tmp_path / "ce")
    pairs = [("a cat", "cats sit"), ("dogs", "a dog barks"), ("x", "")]
    held = CrossEncoderReranker(CrossEncoder(str(folder), device="cpu"))
    loaded = CrossEncoderReranker(folder, device="cpu")
    assert held.device == loaded.device == "cpu"
    assert held.score_pairs(pairs).tolist() == loaded.score_pairs(pairs).tolist()
    assert held.fingerprint != loaded.fingerprint or held.content != loaded.content


@pytest.mark.slow
def test_held_mteb_model_encodes_like_the_backend(tiny_st):
    pytest.importorskip("mteb")
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from embedscope.models.specs import load_encoder
    from embedscope.models.wrap import MtebModelEncoder, as_encoder

    wrapped = as_encoder(SentenceTransformerEncoderWrapper(SentenceTransformer(str(tiny_st))))
    assert isinstance(wrapped, MtebModelEncoder)
    ours = load_encoder(str(tiny_st), device="cpu")
    for role in ("query", "document"):
        assert wrapped.encode(TEXTS, role=role).tobytes() == ours.encode(TEXTS, role=role).tobytes()
