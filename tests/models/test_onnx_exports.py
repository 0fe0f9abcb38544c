"""Fast paths of an ONNX graph (``embedscope.models.onnx_exports``): OpenVINO reads it, ONNX Runtime and NNCF quantize
an fp32 graph, a quantized graph is not quantized again.

The graphs are built here from a tiny sentence-transformers model (its torch export, then a pooled output added by
hand); each fast path's vectors are checked against onnxruntime running the same graph, the independent reference.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.errors import SettingError
from embedscope.models.specs import load_encoder
from support.cpu import require_bf16
from support.lazy import lazy_module
from support.tiny_models import build_tiny_sentence_transformer

onnx = lazy_module("onnx")
pytestmark = [
    pytest.mark.slow,  # torch, onnx and OpenVINO imported and a graph exported
    pytest.mark.skipif(
        importlib.util.find_spec("onnx") is None or importlib.util.find_spec("openvino") is None,
        reason="needs embedscope[onnx-export] and embedscope[openvino]",
    ),
]
TEXTS = ["a cat sat on the mat", "dogs bark at night", "fish swim", "the quick brown fox jumps over the lazy dog " * 3]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An fp32 ONNX graph with a token output (``token_embeddings``) and its tokenizer, in a folder of its own."""
    root = tmp_path_factory.mktemp("onnx-graph")
    st = build_tiny_sentence_transformer(root / "st")
    exported = load_encoder(str(st), backend="onnx", exports_dir=root / "cache")
    folder = root / "graph"
    shutil.copytree(exported.export_folder, folder, ignore=shutil.ignore_patterns("export.json"))
    return folder


@pytest.fixture(scope="module")
def pooled_graph(graph: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same graph with a pooled output ``sentence_embedding`` (the mean over the unpadded positions) added."""
    folder = tmp_path_factory.mktemp("pooled") / "graph"
    shutil.copytree(graph, folder)
    model = onnx.load(str(folder / "model.onnx"))
    axes = onnx.helper.make_tensor("axes", onnx.TensorProto.INT64, [1], [1])
    last = onnx.helper.make_tensor("last", onnx.TensorProto.INT64, [1], [2])
    model.graph.initializer.extend([axes, last])
    model.graph.node.extend(
        [
            onnx.helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=onnx.TensorProto.FLOAT),
            onnx.helper.make_node("Unsqueeze", ["mask_f", "last"], ["mask_3d"]),
            onnx.helper.make_node("Mul", ["token_embeddings", "mask_3d"], ["masked"]),
            onnx.helper.make_node("ReduceSum", ["masked", "axes"], ["summed"], keepdims=0),
            onnx.helper.make_node("ReduceSum", ["mask_3d", "axes"], ["counts"], keepdims=0),
            onnx.helper.make_node("Div", ["summed", "counts"], ["sentence_embedding"]),
        ]
    )
    model.graph.output.append(
        onnx.helper.make_tensor_value_info("sentence_embedding", onnx.TensorProto.FLOAT, ["batch", 32])
    )
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def _vectors(encoder) -> np.ndarray:
    return encoder.encode(TEXTS, role="document", batch_size=2)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _calibration(tmp_path: Path) -> str:
    path = tmp_path / "calibration.txt"
    path.write_text("\n".join(TEXTS * 3), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("backend", ["openvino", "openvino-bf16"])
def test_openvino_runs_an_onnx_graph_as_onnxruntime_does(
    graph: Path, backend: str, tmp_path: Path, monkeypatch
) -> None:
    from embedscope.models import onnx_exports

    if backend == "openvino-bf16":
        require_bf16()
    converted: list[Path] = []
    convert = onnx_exports.convert_ir
    monkeypatch.setattr(
        onnx_exports, "convert_ir", lambda source, target: converted.append(target) or convert(source, target)
    )
    reference = load_encoder(str(graph), backend="onnx")
    fast = load_encoder(str(graph), backend=backend, exports_dir=tmp_path)
    assert fast.backend == backend and fast.pooling == reference.pooling == "mean"
    assert fast.fast_path["backend"] == backend and fast.export_folder.parent == tmp_path / "exports"
    tolerance = 1e-5 if backend == "openvino" else 0.05  # bf16 keeps 8 bits of mantissa
    np.testing.assert_allclose(_vectors(fast), _vectors(reference), atol=tolerance)
    again = load_encoder(str(graph), backend=backend, exports_dir=tmp_path)
    assert again.export_key == fast.export_key and again.fingerprint == fast.fingerprint
    assert len(converted) == 1  # converted once, then read from the export cache


def test_a_pooled_output_stays_pooled_on_openvino(pooled_graph: Path, tmp_path: Path) -> None:
    reference = load_encoder(str(pooled_graph), backend="onnx")
    assert reference.output_name == "sentence_embedding" and reference.pooling == "graph"
    fast = load_encoder(str(pooled_graph), backend="openvino", exports_dir=tmp_path)
    assert fast.pooled_output and fast.pooling == "graph"
    np.testing.assert_allclose(_vectors(fast), _vectors(reference), atol=1e-5)
    tokens = load_encoder(str(pooled_graph), backend="openvino", exports_dir=tmp_path, output_name="token_embeddings")
    assert not tokens.pooled_output and tokens.export_key != fast.export_key  # the output chosen is in the key
    cls = load_encoder(str(pooled_graph), backend="openvino", exports_dir=tmp_path, pooling="cls")
    assert cls.pooling == "cls" and not cls.pooled_output  # a pooling asked for takes the token output, as onnx does
    np.testing.assert_allclose(
        _vectors(cls), _vectors(load_encoder(str(pooled_graph), backend="onnx", pooling="cls")), atol=1e-5
    )


def test_onnx_int8_quantizes_an_fp32_graph_as_onnxruntime_does(graph: Path, tmp_path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    direct = tmp_path / "direct" / "model.onnx"
    direct.parent.mkdir()
    quantize_dynamic(
        str(graph / "model.onnx"),
        str(direct),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # the fused graph's com.microsoft outputs
    )
    reference = load_encoder(str(direct), backend="onnx", tokenizer=str(graph))
    fast = load_encoder(str(graph), backend="onnx-int8", exports_dir=tmp_path / "cache")
    np.testing.assert_allclose(_vectors(fast), _vectors(reference), atol=1e-6)
    fp32 = _vectors(load_encoder(str(graph), backend="onnx"))
    assert not np.allclose(_vectors(fast), fp32, atol=1e-6)  # quantized: not the fp32 vectors


def test_openvino_int8_calibrates_an_fp32_graph(graph: Path, tmp_path: Path) -> None:
    fast = load_encoder(str(graph), backend="openvino-int8", exports_dir=tmp_path, calibration=_calibration(tmp_path))
    assert fast.quantized and fast.fast_path["calibration"]["texts"] == len(set(TEXTS))
    fp32, int8 = _vectors(load_encoder(str(graph), backend="onnx")), _vectors(fast)
    assert _cosines(fp32, int8).min() > 0.9 and not np.allclose(fp32, int8, atol=1e-6)


def test_a_quantized_graph_is_not_quantized_again_and_runs_on_openvino(graph: Path, tmp_path: Path, capsys) -> None:
    quantized = load_encoder(str(graph), backend="onnx-int8", exports_dir=tmp_path / "cache").export_folder
    folder = tmp_path / "quantized"
    shutil.copytree(quantized, folder, ignore=shutil.ignore_patterns("export.json"))
    for backend in ("onnx-int8", "openvino-int8"):
        with pytest.raises(
            SettingError, match=r"quantized already \(it has .*MatMulInteger nodes\): .* backend openvino$"
        ):
            calibration = _calibration(tmp_path) if backend == "openvino-int8" else None
            load_encoder(str(folder), backend=backend, exports_dir=tmp_path, calibration=calibration)
    code = main(
        [
            "run",
            "--model",
            str(folder),
            "--backend",
            "onnx-int8",
            "--tasks",
            "LeeDocumentSimilarity",
            "--output-folder",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "quantized already" in err
    reference = _vectors(load_encoder(str(folder), backend="onnx"))
    fast = _vectors(load_encoder(str(folder), backend="openvino", exports_dir=tmp_path))
    # activations are quantized per batch, and OpenVINO runs each batch as two parts (its streams): close, not equal
    assert _cosines(fast, reference).min() > 0.999 and np.abs(fast - reference).max() < 0.05


def test_int8_weights_count_as_a_quantized_graph(tmp_path: Path) -> None:
    from embedscope.models.onnx_exports import quantized_graph

    weights = onnx.numpy_helper.from_array(np.ones((2, 2), dtype=np.int8), "w")
    nodes = [
        onnx.helper.make_node("Cast", ["w"], ["wf"], to=onnx.TensorProto.FLOAT),
        onnx.helper.make_node("MatMul", ["x", "wf"], ["y"]),
    ]
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])
    path = tmp_path / "w.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y], [weights])), str(path))
    assert quantized_graph(path) == "its weights are stored as int8"
    weights.CopyFrom(onnx.numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "w"))
    nodes[0].attribute[0].i = onnx.TensorProto.FLOAT
    floats = onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y], [weights]))
    onnx.save(floats, str(path))
    assert quantized_graph(path) is None


def test_the_export_key_follows_the_tokenizers_content(graph: Path, tmp_path: Path) -> None:
    import json

    folder = tmp_path / "graph"
    shutil.copytree(graph, folder)
    first = load_encoder(str(folder), backend="openvino", exports_dir=tmp_path / "cache").export_key
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_text(json.dumps(json.loads(tokenizer.read_text(encoding="utf-8")), indent=2), encoding="utf-8")
    again = load_encoder(str(folder), backend="openvino", exports_dir=tmp_path / "cache")
    assert again.export_key != first  # the same path, other bytes: the copy in the old export is not reused
    assert (again.export_folder / "tokenizer.json").read_bytes() == tokenizer.read_bytes()
