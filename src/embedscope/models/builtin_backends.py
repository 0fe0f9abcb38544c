"""The backends embedscope ships, one record each (:mod:`embedscope.models.backends`): four that load a model form
(sentence-transformers, transformers, ONNX, model2vec) and the fast paths that export a torch model once
(:mod:`embedscope.models.exports`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.models.backends import TORCH_KINDS, Backend, register_backend
from embedscope.models.options import EncoderOptions
from embedscope.models.pooling import SPARSE_POOLING_MODES

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
_TORCH_PRECISIONS = ("fp32", "fp16", "bf16")
_TORCH_LIBRARIES = ("transformers", "tokenizers", "torch")
_TORCH_ERRORS = ("safetensors", "tokenizers")


def has_weights(folder: Path) -> bool:
    """Whether ``folder`` holds torch (or other framework) weight files."""
    return any(p.suffix in _WEIGHT_SUFFIXES for p in folder.iterdir() if p.is_file())


def has_onnx(path: Path) -> bool:
    """A ``.onnx`` file, or a folder with ``model.onnx``, ``onnx/model.onnx`` or another ``*.onnx``."""
    if path.is_file():
        return path.suffix == ".onnx"
    return (path / "model.onnx").is_file() or (path / "onnx" / "model.onnx").is_file() or any(path.glob("*.onnx"))


def _is_sentence_transformers(path: Path) -> bool:
    return path.is_dir() and (
        (path / "modules.json").is_file() or (path / "config_sentence_transformers.json").is_file()
    )


def _is_model2vec(path: Path) -> bool:
    from embedscope.models.static_backend import is_model2vec_folder

    return path.is_dir() and is_model2vec_folder(path)


def _is_transformers(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file() and has_weights(path)


def _load_sentence_transformers(path: Any, options: EncoderOptions) -> Any:
    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder

    return SentenceTransformerEncoder(path, pooling=options.pooling, **options.common())


def _load_transformers(path: Any, options: EncoderOptions) -> Any:
    from embedscope.models.transformers_backend import TransformersEncoder

    return TransformersEncoder(path, pooling=options.pooling, tokenizer=options.tokenizer, **options.common())


def _load_onnx(path: Any, options: EncoderOptions) -> Any:
    from embedscope.models.onnx_backend import OnnxEncoder

    return OnnxEncoder(
        path, pooling=options.pooling, tokenizer=options.tokenizer, output_name=options.output_name, **options.common()
    )


def _is_sparse(path: Path) -> bool:
    from embedscope.models.sparse_backend import is_sparse_folder

    return is_sparse_folder(path)


def _load_sparse(path: Any, options: EncoderOptions) -> Any:
    from embedscope.models.sparse_backend import SparseModelEncoder

    return SparseModelEncoder(path, pooling=options.pooling, **options.common())


def _load_model2vec(path: Any, options: EncoderOptions) -> Any:
    if options.pooling not in (None, "mean"):
        raise ConfigError(f"a model2vec model always mean-pools; pooling={options.pooling!r} cannot apply")
    from embedscope.models.static_backend import StaticEncoder

    return StaticEncoder(path, **options.common())


register_backend(
    Backend(
        "sentence-transformers",
        "torch through sentence-transformers (the default)",
        ("a sentence-transformers folder", "a hub id"),
        _load_sentence_transformers,
        _is_sentence_transformers,
        detect_order=10,
        hub=True,
        synonyms=("st", "sentence_transformers", "sbert"),
        module="sentence_transformers",
        precisions=_TORCH_PRECISIONS,
        libraries=("sentence-transformers", *_TORCH_LIBRARIES),
        error_modules=_TORCH_ERRORS,
    )
)
register_backend(
    Backend(
        "transformers",
        "torch through transformers' AutoModel, with pooling",
        ("a transformers folder (config.json and weights)", "a sentence-transformers folder", "a hub id"),
        _load_transformers,
        _is_transformers,
        detect_order=30,
        hub=True,
        synonyms=("hf", "huggingface", "auto"),
        module="transformers",
        precisions=_TORCH_PRECISIONS,
        options=frozenset({"tokenizer"}),
        libraries=_TORCH_LIBRARIES,
        error_modules=_TORCH_ERRORS,
    )
)
register_backend(
    Backend(
        "onnx",
        "ONNX Runtime; a torch model is exported to ONNX once",
        ("a .onnx file", "a folder with model.onnx", "a torch model (exported)"),
        _load_onnx,
        has_onnx,
        detect_order=40,
        synonyms=("onnxruntime", "ort"),
        module="onnxruntime",
        extra="onnx-export",
        export="onnx",
        fast_path=True,
        options=frozenset({"tokenizer", "output_name"}),
        libraries=("onnxruntime", "tokenizers", "transformers"),
        export_libraries=("onnx",),
        error_modules=("onnxruntime", "onnx", "google"),
    )
)
register_backend(
    Backend(
        "model2vec",
        "Model2Vec static embeddings (no transformer)",
        ("a model2vec folder",),
        _load_model2vec,
        _is_model2vec,
        detect_order=20,
        synonyms=("static", "m2v"),
        not_exportable="a model2vec static model has no transformer to export",
        libraries=("model2vec", "tokenizers"),
        error_modules=_TORCH_ERRORS,
    )
)
register_backend(
    Backend(
        "sparse",
        "learned-sparse (SPLADE) term weights through sentence-transformers' SparseEncoder, searched by an inverted "
        "index",
        ("an MLM checkpoint (config.json and weights)", "a sentence-transformers SparseEncoder folder", "a hub id"),
        _load_sparse,
        _is_sparse,
        detect_order=5,  # before sentence-transformers: a SparseEncoder folder has modules.json too
        hub=True,
        synonyms=("splade", "sparse-encoder", "sparse_encoder"),
        module="sentence_transformers",
        precisions=_TORCH_PRECISIONS,
        not_exportable="a sparse model's fast paths are not built (its vocabulary-wide output is searched, not "
        "compressed)",
        libraries=("sentence-transformers", *_TORCH_LIBRARIES),
        error_modules=_TORCH_ERRORS,
        vectors="sparse",
        poolings=SPARSE_POOLING_MODES,
    )
)
_EXPORTED = ("a torch model (exported once into the cache folder)", "an ONNX graph (converted or quantized once)")
_FROM_ONNX = (*TORCH_KINDS, "onnx")  # the fast paths that act on an ONNX graph too (embedscope.models.onnx_exports)
register_backend(
    Backend(
        "onnx-int8",
        "ONNX Runtime, int8 dynamic quantization",
        _EXPORTED,
        synonyms=("onnx_int8", "ort-int8"),
        module="onnxruntime",
        extra="onnx-export",
        export="onnx-int8",
        sources=_FROM_ONNX,
        always_exports=True,
        fast_path=True,
        precisions=(),
        quantization="int8-dynamic",
        export_libraries=("onnx",),
    )
)
register_backend(
    Backend(
        "openvino",
        "OpenVINO IR, fp32",
        _EXPORTED,
        synonyms=("ov", "openvino-fp32"),
        module="openvino",
        extra="openvino",
        export="openvino",
        sources=_FROM_ONNX,
        always_exports=True,
        fast_path=True,
        fast_rank=4,  # after torch bf16: reached by an ONNX graph quantized already, where no bf16 is computed
        precisions=(),
        export_libraries=("openvino",),
    )
)
register_backend(
    Backend(
        "openvino-bf16",
        "OpenVINO IR, bf16 inference precision",
        _EXPORTED,
        synonyms=("openvino_bf16", "ov-bf16"),
        module="openvino",
        extra="openvino",
        export="openvino",  # the same IR, run with bf16 inference precision
        sources=_FROM_ONNX,
        always_exports=True,
        fast_path=True,
        fast_rank=2,
        precisions=(),
        quantization="bf16",
        export_libraries=("openvino",),
    )
)
register_backend(
    Backend(
        "openvino-int8",
        "OpenVINO IR, NNCF int8 static quantization calibrated on texts",
        _EXPORTED,
        synonyms=("openvino_int8", "ov-int8"),
        module="openvino",
        extra="openvino",
        export="openvino-int8",
        sources=_FROM_ONNX,
        always_exports=True,
        fast_path=True,
        fast_rank=1,
        precisions=(),
        quantization="int8-static",
        calibrates=True,
        export_libraries=("openvino", "nncf"),
    )
)
