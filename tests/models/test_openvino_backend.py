"""OpenVINO backend: IR export, static int8 with NNCF, and the encoder, against sentence-transformers' own vectors."""

from __future__ import annotations

import builtins
import importlib.util
import re
import sys

import numpy as np
import pytest

from embedscope.errors import ConfigError, MissingDependencyError
from support.cpu import require_bf16
from support.lazy import lazy_module

torch = lazy_module("torch")  # imported by the first test that uses it: collection imports nothing heavy
pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning"),
    pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("nncf") is None, reason="nncf is not installed"),
]

from embedscope.models import openvino_backend  # noqa: E402
from embedscope.models.openvino_backend import (  # noqa: E402
    INT8_DEFAULT,
    Int8Settings,
    OpenVinoEncoder,
    export_ir,
    quantize_ir_int8,
)

TEXTS = [
    "A man is playing a guitar.",
    "The stock market fell sharply today.",
    "x",
    "",
    "Photosynthesis converts light energy into chemical energy in plants. " * 8,  # truncated at 64 tokens
    "Ünïcödé tèxt wïth äccents and emoji 🙂",
    "What is the capital of France?",
    "numbers 1234567890",
]
CALIBRATION = [
    f"Sentence {i}: the {w} jumps over {i % 7} lazy dogs near the river." for i, w in enumerate(["fox"] * 50)
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (numpy, independent of the backend's normalisation)."""
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("ov")
    folder = build_tiny_sentence_transformer(root / "tiny-st")
    export_ir(folder, root / "ir", max_seq_length=64)
    quantize_ir_int8(
        root / "ir", root / "int8", tokenizer_source=folder, calibration_texts=CALIBRATION, max_seq_length=64
    )
    return folder, root / "ir", root / "int8"


@pytest.fixture(scope="module")
def tiny_reference(tiny):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny[0]), device="cpu").encode(TEXTS, convert_to_numpy=True, batch_size=3)


@pytest.mark.slow
def test_export_writes_token_embeddings_ir(tiny):
    import openvino as ov

    _, ir, _ = tiny
    model = ov.Core().read_model(str(ir / "model.xml"))
    assert [p.get_any_name() for p in model.inputs] == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(p.get_partial_shape().is_dynamic for p in model.inputs)
    assert str(model.outputs[0].get_partial_shape()) == "[?,?,32]"
    constants = {op.get_element_type().get_type_name() for op in model.get_ops() if op.get_type_name() == "Constant"}
    assert "f32" in constants and "f16" not in constants  # fp32 weights kept


@pytest.mark.slow
@pytest.mark.parametrize("streams", [1, 2, 3])
def test_f32_equals_sentence_transformers(tiny, tiny_reference, streams):
    folder, ir, _ = tiny
    enc = OpenVinoEncoder(ir, tokenizer=folder, inference_precision="f32", streams=streams)
    assert (enc.pooling, enc.normalize, enc.max_seq_length, enc.embed_dim) == ("mean", True, 64, 32)
    for batch_size in (1, 3, 32):
        vectors = enc.encode(TEXTS, role="document", batch_size=batch_size)
        np.testing.assert_allclose(vectors, tiny_reference, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("streams", [1, 2])
def test_planned_batches_give_the_same_bits(tiny, streams):
    folder, ir, _ = tiny
    enc = OpenVinoEncoder(ir, tokenizer=folder, streams=streams)
    full = enc.encode(TEXTS, role="query", batch_size=4)
    lengths = [len(t) for t in TEXTS]
    for plan in enc.batch_plan(lengths, 4):
        part = enc.encode_batch([TEXTS[i] for i in plan], role="query")
        assert np.array_equal(part, full[plan])


@pytest.mark.slow
def test_bf16_stays_close(tiny, tiny_reference):
    require_bf16()
    folder, ir, _ = tiny
    bf16 = OpenVinoEncoder(ir, tokenizer=folder, inference_precision="bf16")
    assert bf16.dtype == "bfloat16"
    assert _cosines(bf16.encode(TEXTS, role="document"), tiny_reference).min() > 0.99


@pytest.mark.slow
def test_bf16_on_a_cpu_without_it_is_refused_in_one_line(tiny, monkeypatch):
    folder, ir, _ = tiny
    monkeypatch.setattr(openvino_backend, "cpu_capabilities", lambda: ("FP32", "INT8"))
    for given in ({"inference_precision": "bf16"}, {"dtype": "bf16"}):
        with pytest.raises(
            ConfigError, match=r"^inference precision bf16: this CPU cannot compute in bf16 \(.*FP32, INT8\)"
        ) as e:
            OpenVinoEncoder(ir, tokenizer=folder, **given)
        assert str(e.value).endswith("use backend openvino") and "\n" not in str(e.value)
    assert OpenVinoEncoder(ir, tokenizer=folder).inference_precision == "f32"  # f32 still runs
    monkeypatch.setattr(openvino_backend, "cpu_capabilities", lambda: ("FP32", "INT8", "BF16"))
    assert OpenVinoEncoder(ir, tokenizer=folder, dtype="bf16").inference_precision == "bf16"


@pytest.mark.slow
def test_int8_stays_close(tiny, tiny_reference):
    folder, _, int8 = tiny
    quantized = OpenVinoEncoder(int8, tokenizer=folder)
    assert quantized.quantized and quantized.describe()["quantization"] == "int8-static"
    assert _cosines(quantized.encode(TEXTS, role="document"), tiny_reference).min() > 0.95


@pytest.mark.slow
def test_fingerprint_names_precision_ir_and_settings(tiny, monkeypatch):
    folder, ir, int8 = tiny
    monkeypatch.setattr(openvino_backend, "cpu_capabilities", lambda: ("FP32", "BF16"))  # only labels are compared
    f32 = OpenVinoEncoder(ir, tokenizer=folder)
    prints = {
        f32.fingerprint,
        OpenVinoEncoder(ir, tokenizer=folder, inference_precision="bf16").fingerprint,
        OpenVinoEncoder(int8, tokenizer=folder).fingerprint,
        OpenVinoEncoder(ir, tokenizer=folder, max_seq_length=32).fingerprint,
        OpenVinoEncoder(ir, tokenizer=folder, normalize=False).fingerprint,
        OpenVinoEncoder(ir, tokenizer=folder, pooling="cls").fingerprint,
    }
    assert len(prints) == 6
    one, two = (OpenVinoEncoder(ir, tokenizer=folder, streams=n).fingerprint for n in (1, 2))
    assert one != two
    assert OpenVinoEncoder(ir, tokenizer=folder, dtype="fp32").fingerprint == f32.fingerprint


@pytest.mark.slow
def test_dtype_and_precision(tiny, monkeypatch):
    folder, ir, _ = tiny
    monkeypatch.setattr(openvino_backend, "cpu_capabilities", lambda: ("FP32", "BF16"))  # only labels are read
    assert OpenVinoEncoder(ir, tokenizer=folder, dtype="bf16").inference_precision == "bf16"
    with pytest.raises(ConfigError, match="disagrees"):
        OpenVinoEncoder(ir, tokenizer=folder, dtype="bf16", inference_precision="f32")
    with pytest.raises(ConfigError, match="fp32 or bf16"):
        OpenVinoEncoder(ir, tokenizer=folder, dtype="fp16")
    with pytest.raises(ConfigError, match="use f32 or bf16"):
        OpenVinoEncoder(ir, tokenizer=folder, inference_precision="int4")


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps"])
def test_accelerators_are_refused(tiny, device):
    folder, ir, _ = tiny
    with pytest.raises(ConfigError, match=rf"device '{device}'.*runs on the CPU only") as err:
        OpenVinoEncoder(ir, tokenizer=folder, device=device)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_missing_ir_and_unexportable_folder(tmp_path, tiny):
    with pytest.raises(ConfigError, match="no OpenVINO IR"):
        OpenVinoEncoder(tmp_path, tokenizer=tiny[0])
    (tmp_path / "src").mkdir()
    with pytest.raises(ConfigError, match="no transformers config.json"):
        export_ir(tmp_path / "src", tmp_path / "out", max_seq_length=64)
    with pytest.raises(ConfigError, match="at least one non-empty text"):
        quantize_ir_int8(tiny[1], tmp_path / "q", tokenizer_source=tiny[0], calibration_texts=[""], max_seq_length=8)


@pytest.mark.slow
@pytest.mark.parametrize("package", ["openvino", "nncf"])
def test_missing_extra_names_it(monkeypatch, tiny, tmp_path, package):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == package or name.startswith(package + "."):
            raise ImportError(f"No module named {package!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, package, raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    folder, ir, _ = tiny
    with pytest.raises(MissingDependencyError, match=r"pip install 'embedscope\[openvino\]'"):
        if package == "openvino":
            OpenVinoEncoder(ir, tokenizer=folder)
        else:
            quantize_ir_int8(ir, tmp_path / "q", tokenizer_source=folder, calibration_texts=["a"], max_seq_length=8)


def _quantized_matmuls(xml) -> dict[str, bool]:
    """Each MatMul's name → whether its activation input comes through a FakeQuantize (read from the IR itself,
    looking back through the reshapes and transposes that NNCF quantizes before)."""
    import openvino as ov

    def source(node):
        while node.get_type_name() in ("Reshape", "Transpose"):
            node = node.input_value(0).get_node()
        return node.get_type_name()

    model = ov.Core().read_model(str(xml))
    return {
        op.get_friendly_name(): source(op.input_value(0).get_node()) == "FakeQuantize"
        for op in model.get_ops()
        if op.get_type_name() == "MatMul"
    }


def test_int8_settings_are_checked_and_keyed():
    assert INT8_DEFAULT.key() == {
        "preset": INT8_DEFAULT.preset,
        "smooth_quant_alpha": INT8_DEFAULT.smooth_quant_alpha,
        "fast_bias_correction": INT8_DEFAULT.fast_bias_correction,
        "fp32_patterns": list(INT8_DEFAULT.fp32_patterns),
        "activation_range": INT8_DEFAULT.activation_range,
    }
    assert Int8Settings().key() != Int8Settings(smooth_quant_alpha=0.5).key()
    with pytest.raises(ConfigError, match="preset 'fast'"):
        Int8Settings(preset="fast")
    with pytest.raises(ConfigError, match="activation_range 'max': use mean_minmax or minmax"):
        Int8Settings(activation_range="max")
    for alpha in (0.0, 1.0, 1.5, -1.0):
        with pytest.raises(ConfigError, match="smooth_quant_alpha"):
            Int8Settings(smooth_quant_alpha=alpha)


@pytest.mark.slow  # imports a heavy library (mteb, onnx, nncf): seconds
def test_int8_settings_reach_nncf():
    import nncf

    off = Int8Settings(smooth_quant_alpha=None).nncf_options(nncf)
    assert off["advanced_parameters"].smooth_quant_alphas.matmul == -1  # NNCF's "off"
    assert off["preset"] == nncf.QuantizationPreset.MIXED and off["model_type"] == nncf.ModelType.TRANSFORMER
    assert "ignored_scope" not in off
    ranges = nncf.quantization.range_estimator.RangeEstimatorParametersSet
    assert off["advanced_parameters"].activations_range_estimator_params == ranges.MEAN_MINMAX  # NNCF's own default
    on = Int8Settings(
        preset="performance",
        smooth_quant_alpha=0.5,
        fast_bias_correction=False,
        fp32_patterns=("a",),
        activation_range="minmax",
    )
    options = on.nncf_options(nncf)
    assert options["advanced_parameters"].smooth_quant_alphas.matmul == 0.5
    assert options["preset"] == nncf.QuantizationPreset.PERFORMANCE and options["fast_bias_correction"] is False
    assert options["ignored_scope"].patterns == ["a"]
    assert options["advanced_parameters"].activations_range_estimator_params == ranges.MINMAX


@pytest.mark.slow
def test_fp32_patterns_keep_those_matmuls_unquantized(tiny, tmp_path):
    folder, ir, int8 = tiny
    default = _quantized_matmuls(int8 / "model.xml")
    assert default and all(default.values()) == (not INT8_DEFAULT.fp32_patterns)
    pattern = r".*encoder\.layer\.1\.output\.dense"
    settings = Int8Settings(fp32_patterns=(pattern,))
    quantize_ir_int8(
        ir, tmp_path / "q", tokenizer_source=folder, calibration_texts=CALIBRATION, max_seq_length=64, settings=settings
    )
    kept = {name for name, quantized in _quantized_matmuls(tmp_path / "q" / "model.xml").items() if not quantized}
    assert kept == {name for name in default if re.match(pattern, name)} and len(kept) == 1
    vectors = OpenVinoEncoder(tmp_path / "q", tokenizer=folder).encode(TEXTS, role="document")
    assert np.isfinite(vectors).all()


# -- the shipped MiniLM ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_ir(tmp_path_factory):
    from embedscope.models.specs import alias_path

    folder = alias_path("minilm")
    root = tmp_path_factory.mktemp("ov-minilm")
    export_ir(folder, root / "ir", max_seq_length=256)
    return folder, root / "ir"


@pytest.fixture(scope="module")
def bbc_texts():
    from embedscope.data.builtin import bbc_news_articles

    return [a.body for a in bbc_news_articles()[:150]] + [a.title for a in bbc_news_articles()[:50]]


@pytest.mark.slow
@pytest.mark.long  # the real model through OpenVINO on long BBC texts: in the long tier
def test_minilm_f32_equals_sentence_transformers(minilm_ir, bbc_texts):
    from sentence_transformers import SentenceTransformer

    folder, ir = minilm_ir
    reference = SentenceTransformer(str(folder), device="cpu").encode(bbc_texts, convert_to_numpy=True)
    vectors = OpenVinoEncoder(ir, tokenizer=folder).encode(bbc_texts, role="document")
    assert np.abs(vectors - reference).max() < 1e-4


@pytest.mark.long
@pytest.mark.slow
def test_minilm_bf16_and_int8_cosines(minilm_ir, bbc_texts, tmp_path):
    require_bf16()
    folder, ir = minilm_ir
    exact = OpenVinoEncoder(ir, tokenizer=folder).encode(bbc_texts, role="document")
    bf16 = OpenVinoEncoder(ir, tokenizer=folder, inference_precision="bf16").encode(bbc_texts, role="document")
    quantize_ir_int8(
        ir, tmp_path / "int8", tokenizer_source=folder, calibration_texts=bbc_texts[::2], max_seq_length=256
    )
    int8 = OpenVinoEncoder(tmp_path / "int8", tokenizer=folder).encode(bbc_texts, role="document")
    bf16_cos, int8_cos = _cosines(bf16, exact), _cosines(int8, exact)
    print(f"bf16 cosine mean {bf16_cos.mean():.5f} min {bf16_cos.min():.5f}")
    print(f"int8 cosine mean {int8_cos.mean():.5f} min {int8_cos.min():.5f}")
    assert bf16_cos.mean() > 0.999 and bf16_cos.min() > 0.99
    assert int8_cos.mean() > 0.98 and int8_cos.min() > 0.9
