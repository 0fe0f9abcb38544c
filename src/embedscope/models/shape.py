"""A local model's shape read from its files, without loading its weights: what the memory guard and ``run
--dry-run`` need (:mod:`embedscope.evaluation.memory`).

:func:`model_shape` reads the configuration files a model folder carries — ``config.json`` (width, layers, heads,
feed-forward width, vocabulary, position limit), ``sentence_bert_config.json`` (the maximum length), the pooling
and Dense modules' configurations (the vector's dimension) — and the weight files' sizes; its
:attr:`ModelShape.tokenizer` (a ``tokenizer.json``) counts tokens as the model's tokenizer does
(:func:`token_counter`), with the ``tokenizers`` library alone. An ONNX file without a ``config.json`` beside it
(the built-in ``minilm-int8``) takes the configuration of the alias it takes its tokenizer from.

>>> shape = model_shape("minilm")
>>> shape.hidden, shape.layers, shape.heads, shape.intermediate, shape.max_length, shape.dim, shape.runtime
(384, 6, 12, 1536, 256, 384, 'torch')
>>> count = token_counter(shape.tokenizer)
>>> count(["a cat", "hello world, hello"])
[4, 6]
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".pt", ".pth", ".xml", ".npy")
SANE_LENGTH = 1_000_000  # a tokenizer's model_max_length above this means "no limit" (transformers' 1e30)


@dataclass(frozen=True)
class ModelShape:
    """What a model's memory and compute depend on, read from its files.

    ``runtime``: ``torch`` (each layer's activations freed before the next), ``graph`` (ONNX Runtime, OpenVINO: the
    runtime's arena keeps every layer's buffers) or ``static`` (a lookup table: no transformer). ``layers`` is 0 for
    a static model.
    """

    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_length: int
    dim: int
    vocab: int
    weight_bytes: int
    runtime: str
    sparse: bool = False
    bytes_per_value: int = 4
    attention: str = "sdpa"  # torch's fused attention (no T×T scores per head kept); "eager": the scores held
    tokenizer: Path | None = None

    @property
    def parameters(self) -> int:
        """Non-embedding parameters of the transformer: per layer ``4 H² + 2 H I`` (attention, feed-forward)."""
        return self.layers * (4 * self.hidden**2 + 2 * self.hidden * self.intermediate)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_folder(spec: str, revision: str | None = None) -> tuple[Path, Path | None] | None:
    """Where a model given by alias, local path or hub id (already in the local Hugging Face cache) lies: its folder
    (the folder of an ONNX file) and the file itself when it is one; None when it is not here (nothing is
    downloaded)."""
    from embedscope.models.folder import snapshot_folder
    from embedscope.models.specs import ALIASES, alias_path

    key = spec.strip().lower()
    try:
        path = alias_path(key) if key in ALIASES else Path(os.path.expanduser(spec))
    except ImportError:  # an alias whose package is not installed
        return None
    if not path.exists():
        if "/" not in spec or spec.startswith((".", "/", "~")):
            return None
        found = snapshot_folder(spec, revision)
        if found is None:
            return None
        path = found
    return (path.parent, path) if path.is_file() else (path, None)


def _backend_of(spec: str, folder: Path, file: Path | None, options: Mapping[str, Any]) -> str | None:
    from embedscope.models.backends import detect_backend, normalize_backend
    from embedscope.models.specs import ALIASES

    given = options.get("backend")
    if given:
        return normalize_backend(str(given))
    alias = ALIASES.get(spec.strip().lower())
    if alias is not None:
        return alias.backend
    return detect_backend(file or folder)


def _runtime(backend: str | None) -> tuple[str, bool]:
    """The runtime whose activations a backend's encoding makes, and whether its vectors are sparse."""
    from embedscope.models.backends import backend as record_of

    if backend is None:
        return "torch", False
    record = record_of(backend)
    sparse = record.vectors == "sparse"
    if record.name == "model2vec":
        return "static", False
    if record.module in ("onnxruntime", "openvino") or record.export is not None and record.always_exports:
        return "graph", sparse
    return "torch", sparse


def _config_folder(spec: str, folder: Path) -> Path:
    """The folder whose ``config.json`` describes the model: its own, else (an ONNX file alone) the folder of the
    alias it takes its tokenizer from."""
    from embedscope.models.specs import ALIASES, alias_path

    if (folder / "config.json").is_file():
        return folder
    alias = ALIASES.get(spec.strip().lower())
    if alias is not None and alias.tokenizer_from:
        source = alias_path(alias.tokenizer_from)
        return source if source.is_dir() else source.parent
    return folder


def _tokenizer_file(folder: Path, config_folder: Path, options: Mapping[str, Any]) -> Path | None:
    given = options.get("tokenizer")
    candidates = [Path(str(given))] if given else []
    candidates += [folder, config_folder]
    for c in candidates:
        file = c / "tokenizer.json" if c.is_dir() else c
        if file.name.endswith(".json") and file.is_file():
            return file
    return None


def _weight_bytes(folder: Path, file: Path | None) -> int:
    if file is not None:
        return file.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(folder):
        depth = Path(root).relative_to(folder).parts
        if len(depth) > 2:
            continue
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(WEIGHT_SUFFIXES))
    return total


def _dimension(folder: Path, hidden: int, sparse: bool, vocab: int) -> int:
    """The vector's dimension: the last Dense module's output, else the pooling's width, else the model's width (a
    sparse model: its vocabulary)."""
    if sparse:
        return vocab
    dim = hidden
    modules = folder / "modules.json"
    try:
        entries = json.loads(modules.read_text(encoding="utf-8")) if modules.is_file() else []
    except (OSError, ValueError):
        entries = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        kind = str(entry.get("type", ""))
        config = _read(folder / str(entry.get("path", "")) / "config.json")
        if kind.endswith("Pooling") and isinstance(config.get("word_embedding_dimension"), int):
            dim = int(config["word_embedding_dimension"])
        elif kind.endswith("Dense") and isinstance(config.get("out_features"), int):
            dim = int(config["out_features"])
    return dim


def _max_length(folder: Path, config_folder: Path, config: Mapping[str, Any], spec: str, options: Mapping) -> int:
    from embedscope.models.specs import ALIASES

    given = options.get("max_seq_length")
    alias = ALIASES.get(spec.strip().lower())
    if given is None and alias is not None:
        given = alias.options.get("max_seq_length")
    if given is not None:
        return int(given)
    for where in (folder, config_folder):
        st = _read(where / "sentence_bert_config.json").get("max_seq_length")
        if isinstance(st, int) and st > 0:
            return st
    tok = _read(config_folder / "tokenizer_config.json").get("model_max_length")
    if isinstance(tok, (int, float)) and 0 < tok < SANE_LENGTH:
        return int(tok)
    return int(config.get("max_position_embeddings") or 512)


def model_shape(spec: Any, options: Mapping[str, Any] | None = None) -> ModelShape | None:
    """The shape of the model ``spec`` names (an alias, a local path, a hub id in the local cache) with the load
    ``options`` that change it (``max_seq_length``, ``backend``, ``dtype``, ``tokenizer``); None for anything else
    (a model object, a model behind an API, a model not here, a folder whose configuration says no width)."""
    options = dict(options or {})
    if not isinstance(spec, str):
        return None
    try:
        found = model_folder(spec, options.get("revision"))
        if found is None:
            return None
        folder, file = found
        runtime, sparse = _runtime(_backend_of(spec, folder, file, options))
    except Exception:  # noqa: BLE001 - a shape is an estimate: a folder it cannot read has none
        return None
    config_folder = _config_folder(spec, folder)
    config = _read(config_folder / "config.json")
    tokenizer = _tokenizer_file(folder, config_folder, options)
    weights = _weight_bytes(folder, file)
    if runtime == "static":
        dim = _read(folder / "config.json").get("hidden_dim")
        embedding = _static_dimension(folder) if not isinstance(dim, int) else dim
        if embedding is None:
            return None
        return ModelShape(embedding, 0, 0, 0, SANE_LENGTH, embedding, 0, weights, runtime, tokenizer=tokenizer)
    hidden = config.get("hidden_size") or config.get("d_model") or config.get("dim")
    if not isinstance(hidden, int):
        return None
    layers = int(config.get("num_hidden_layers") or config.get("n_layers") or config.get("num_layers") or 12)
    heads = int(config.get("num_attention_heads") or config.get("n_heads") or max(1, hidden // 64))
    intermediate = int(config.get("intermediate_size") or config.get("hidden_dim") or 4 * hidden)
    vocab = int(config.get("vocab_size") or 30522)
    dtype = str(options.get("dtype") or "fp32")
    return ModelShape(
        hidden=hidden,
        layers=layers,
        heads=heads,
        intermediate=intermediate,
        max_length=_max_length(folder, config_folder, config, spec, options),
        dim=_dimension(folder, hidden, sparse, vocab),
        vocab=vocab,
        weight_bytes=weights,
        runtime=runtime,
        sparse=sparse,
        bytes_per_value=2 if dtype in ("fp16", "bf16", "float16", "bfloat16") else 4,
        attention="eager" if config.get("_attn_implementation") == "eager" else "sdpa",
        tokenizer=tokenizer,
    )


def _static_dimension(folder: Path) -> int | None:
    """A model2vec model's dimension from its safetensors header (no weights read)."""
    file = folder / "model.safetensors"
    try:
        with file.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    for entry in header.values():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if isinstance(shape, list) and len(shape) == 2:
            return int(shape[1])
    return None


def token_counter(tokenizer: Path | None) -> Callable[[Sequence[str]], list[int]] | None:
    """Each text's tokens as the ``tokenizer.json`` makes them, special tokens in and nothing truncated; None
    without a tokenizer."""
    if tokenizer is None:
        return None
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(tokenizer))
    except Exception:  # noqa: BLE001 - a tokenizer this library cannot read counts nothing
        return None
    tok.no_truncation()
    tok.no_padding()

    def count(texts: Sequence[str]) -> list[int]:
        out: list[int] = []
        for start in range(0, len(texts), 1024):
            out += [len(e.ids) for e in tok.encode_batch(list(texts[start : start + 1024]))]
        return out

    return count
