"""The backend registry and the encoder options object: the shipped records say what the code did before they
existed (issue 27), and a run resolves its device once and hands it down as a placement."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import embedscope
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.models import backends as registry
from embedscope.models.backends import Backend, backend, backend_names, normalize_backend
from embedscope.models.options import EncoderOptions, Placement, encoder_options
from embedscope.testing.fakes import HashEncoder


def test_the_shipped_records_are_the_backends_embedscope_had() -> None:
    assert backend_names() == (
        "sentence-transformers",
        "transformers",
        "onnx",
        "model2vec",
        "sparse",
        "onnx-int8",
        "openvino",
        "openvino-bf16",
        "openvino-int8",
    )
    assert {b.name for b in registry.backends() if b.always_exports} == {
        "onnx-int8",
        "openvino",
        "openvino-bf16",
        "openvino-int8",
    }
    assert {b.name: b.export for b in registry.backends() if b.export} == {
        "onnx": "onnx",
        "onnx-int8": "onnx-int8",
        "openvino": "openvino",
        "openvino-bf16": "openvino",
        "openvino-int8": "openvino-int8",
    }
    assert {b.name: b.quantization for b in registry.backends() if b.quantization} == {
        "onnx-int8": "int8-dynamic",
        "openvino-int8": "int8-static",
        "openvino-bf16": "bf16",
    }
    assert [b.name for b in registry.backends() if b.calibrates] == ["openvino-int8"]
    # the lazy encoder's versions and the integrity check's modules, as they were
    assert registry.libraries() == tuple(
        sorted(("sentence-transformers", "transformers", "tokenizers", "onnxruntime", "model2vec", "torch"))
    )
    assert set(registry.libraries(exported=True)) - set(registry.libraries()) == {"onnx", "openvino", "nncf"}
    assert registry.error_modules() == tuple(sorted(("safetensors", "onnxruntime", "onnx", "tokenizers", "google")))


@pytest.mark.parametrize(
    ("given", "name"),
    [("st", "sentence-transformers"), ("HF", "transformers"), ("ort", "onnx"), ("static", "model2vec")]
    + [("ov", "openvino"), ("ov-bf16", "openvino-bf16"), ("ov-int8", "openvino-int8"), ("ort-int8", "onnx-int8")],
)
def test_synonyms_name_their_backend(given: str, name: str) -> None:
    assert normalize_backend(given) == name and backend(given).name == name


def test_an_unknown_backend_is_one_line_with_a_suggestion() -> None:
    with pytest.raises(UnknownNameError, match="openvino-int8") as e:
        normalize_backend("openvino-int9")
    assert "\n" not in str(e.value)


def test_a_backend_specific_option_names_the_backends_that_take_it(tmp_path: Path) -> None:
    from embedscope.models.specs import _build

    with pytest.raises(ConfigError, match="output_name applies to the onnx backend only, not model2vec"):
        _build("model2vec", tmp_path, EncoderOptions(output_name="x"))
    with pytest.raises(ConfigError, match="tokenizer applies to the onnx and transformers backends only"):
        _build("sentence-transformers", tmp_path, EncoderOptions(tokenizer="t"))


def test_encoder_options_are_one_frozen_object() -> None:
    options = encoder_options({"pooling": "cls"}, dtype="bf16")
    assert options == EncoderOptions(pooling="cls", dtype="bf16")
    assert options.given() == {"pooling": "cls", "dtype": "bf16"}  # device, name and source are not identity
    with pytest.raises(TypeError, match="poolin"):
        encoder_options({"poolin": "cls"})
    with pytest.raises(AttributeError):
        options.pooling = "mean"  # type: ignore[misc]
    from embedscope.settings.run import ModelOptions

    assert ModelOptions(backend="ov-int8", max_seq_length=64).to_encoder_options() == EncoderOptions(
        backend="openvino-int8", max_seq_length=64
    )


def test_a_placement_is_kept_as_it_is() -> None:
    placed = Placement.resolve("cpu", "fp16")
    assert (placed.device, placed.dtype, placed.requested) == ("cpu", "float16", "cpu")
    assert Placement.resolve(placed) is placed and Placement.resolve(placed, "bf16").dtype == "bfloat16"


# -- a run resolves its device once ---------------------------------------------------------------------------


@pytest.fixture
def counted_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """A registered backend that builds a hash encoder from the placement it is handed; device resolutions
    counted."""
    from embedscope.models import device as device_module
    from embedscope.models import options as options_module

    resolved: list[Any] = []
    real = device_module.resolve_device

    def counting(device: Any = "auto") -> str:
        resolved.append(device)
        return real(device)

    monkeypatch.setattr(device_module, "resolve_device", counting)
    monkeypatch.setattr(options_module, "resolve_device", counting)
    placements: list[Any] = []

    def load(path: Any, options: EncoderOptions) -> HashEncoder:
        placements.append(options.device)
        return HashEncoder(name=f"hash/{Path(path).name}", device=options.device)  # type: ignore[arg-type]

    registry.register_backend(Backend("counted", "a hash encoder", ("a folder with counted.txt",), load))
    yield [resolved, placements]
    registry.unregister_backend("counted")


def test_a_run_resolves_its_device_once_and_hands_it_down(counted_backend, tmp_path: Path) -> None:
    from embedscope.testing.tiny import tiny_retrieval_task

    resolved, placements = counted_backend
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "counted.txt").write_text("")
    embedscope.evaluate(
        str(folder),
        [tiny_retrieval_task()],
        output_folder=tmp_path / "out",
        cache=False,
        device="cpu",
        model_options={"backend": "counted"},
    )
    assert resolved == ["cpu"]  # by the engine, once
    assert placements == [Placement("cpu", "float32", "cpu")]
