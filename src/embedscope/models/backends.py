"""The backend registry: each model backend is one record, as task types and engines are.

A record says what the rest of embedscope asks of a backend: its name (and synonyms), the model forms it loads and
how it recognises one on disk, how it builds an encoder from :class:`~embedscope.models.options.EncoderOptions`, the
extra that installs it, whether a torch model is exported for it (and so whether it is one of ``screen``'s fast
paths), its precisions and the options only it takes. ``--backend``, config ``backend:``, ``evaluate(model_options=
{"backend": …})``, :func:`~embedscope.models.specs.load_encoder`, the export cache, the lazy encoder's versions, the
integrity check and ``screen`` read it.

>>> backend_names()[:4]
('sentence-transformers', 'transformers', 'onnx', 'model2vec')
>>> normalize_backend("ov-int8"), backend("openvino-int8").extra
('openvino-int8', 'openvino')
>>> [b.name for b in fast_paths()]
['onnx', 'onnx-int8', 'openvino', 'openvino-bf16', 'openvino-int8']
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.models.options import EncoderOptions
from embedscope.models.pooling import POOLING_MODES

Loader = Callable[[Any, EncoderOptions], Any]  # (path or hub id, options) -> Encoder

TORCH_KINDS = ("sentence-transformers", "transformers")  # the model forms an export starts from


@dataclass(frozen=True)
class Backend:
    """One model backend.

    Attributes:
        name: the canonical name (``--backend NAME``).
        description: one line for ``--backend``'s help.
        forms: the model forms it loads, in words (``a .onnx file``, ``a sentence-transformers folder``, …).
        load: builds an encoder from a path (or hub id) and the options; None for a backend that only runs exports.
        detect: whether a local path is in this backend's own form (None: it never claims a path).
        detect_order: detection tries lower numbers first (a folder can look like several forms).
        hub: whether it loads hub ids (``org/name``) itself.
        synonyms: other spellings accepted for ``name``.
        module: the module it imports (``screen`` checks it is installed before offering the backend).
        extra: the embedscope extra that installs it (``pip install 'embedscope[EXTRA]'``); None: a core dependency.
        export: the export variant it runs (:mod:`embedscope.models.exports`); None: no export.
        sources: the model forms (backend names) it exports from: a torch model, and for some an ONNX graph
            (:mod:`embedscope.models.onnx_exports`).
        always_exports: it runs only exports (else it loads its own form too, as ``onnx`` loads a .onnx file).
        fast_path: ``screen`` may offer it as a fast path (its model options are ``{"backend": name}``).
        fast_rank: ``screen``'s default order among fast paths (lower first); None: only when named.
        precisions: the dtypes it computes in (``fp32``, ``fp16``, ``bf16``; a fast path sets its own).
        quantization: what its export quantizes to (``int8-dynamic``, ``int8-static``, ``bf16``), if anything.
        calibrates: its export calibrates on texts (``calibration`` applies).
        options: the load options only some backends take, that this one does (``tokenizer``, ``output_name``).
        not_exportable: why a model of this form has no fast path (said when one is asked for).
        libraries: distributions whose versions decide its vectors (the lazy encoder's identity key).
        export_libraries: distributions whose versions shape its exported graph.
        error_modules: top-level modules whose exceptions mean unreadable model files (the integrity check).
        vectors: ``dense`` (float32 rows) or ``sparse`` (a learned-sparse model's term weights: searched by an inverted
            index, cached as active positions and values, never truncated or quantized as dense vectors).
        poolings: the pooling modes it takes (:mod:`embedscope.models.pooling`).
    """

    name: str
    description: str
    forms: tuple[str, ...]
    load: Loader | None = None
    detect: Callable[[Path], bool] | None = None
    detect_order: int = 100
    hub: bool = False
    synonyms: tuple[str, ...] = ()
    module: str | None = None
    extra: str | None = None
    export: str | None = None
    sources: tuple[str, ...] = TORCH_KINDS
    always_exports: bool = False
    fast_path: bool = False
    fast_rank: int | None = None
    precisions: tuple[str, ...] = ("fp32",)
    quantization: str | None = None
    calibrates: bool = False
    options: frozenset[str] = field(default_factory=frozenset)
    not_exportable: str | None = None
    libraries: tuple[str, ...] = ()
    export_libraries: tuple[str, ...] = ()
    error_modules: tuple[str, ...] = ()
    vectors: str = "dense"
    poolings: tuple[str, ...] = POOLING_MODES

    def installed(self) -> bool:
        """Whether the module it needs can be imported here."""
        return self.module is None or importlib.util.find_spec(self.module) is not None

    def install_hint(self) -> str:
        """What installs it: ``pip install 'embedscope[EXTRA]'`` (or the module's name)."""
        return f"pip install 'embedscope[{self.extra}]'" if self.extra else f"install {self.module}"

    def exports_from(self, kind: str) -> bool:
        """Whether a model that the ``kind`` backend loads is exported for this backend."""
        return self.export is not None and kind in self.sources


_BACKENDS: dict[str, Backend] = {}
_BUILTIN_LOADED = False


def register_backend(record: Backend) -> Backend:
    """Add (or replace) a backend: every entry point follows."""
    _BACKENDS[record.name] = record
    return record


def unregister_backend(name: str) -> None:
    """Remove a backend (tests' toys)."""
    _BACKENDS.pop(name, None)


BUILTIN_MODULES = ("builtin_backends",)  # the modules that register the shipped backends


def _registry() -> dict[str, Backend]:
    global _BUILTIN_LOADED
    if not _BUILTIN_LOADED:
        _BUILTIN_LOADED = True
        for module in BUILTIN_MODULES:  # by name, as engines and task types: the registry imports no backend
            importlib.import_module(f"embedscope.models.{module}")
    return _BACKENDS


def backends() -> tuple[Backend, ...]:
    """Every registered backend, in registration order."""
    return tuple(_registry().values())


def backend_names() -> tuple[str, ...]:
    """The canonical names (the choices of the ``model_options.backend`` setting)."""
    return tuple(_registry())


def synonyms() -> dict[str, str]:
    """Every accepted spelling other than a name → the name."""
    return {s: b.name for b in backends() for s in b.synonyms}


def backend(name: str) -> Backend:
    """The record of ``name`` (a canonical name or a synonym); :class:`UnknownNameError` with suggestions."""
    canonical = normalize_backend(name)
    assert canonical is not None
    return _registry()[canonical]


def normalize_backend(name: str | None) -> str | None:
    """The canonical backend name, or :class:`UnknownNameError` with suggestions."""
    if name is None:
        return None
    key = name.strip().lower()
    key = synonyms().get(key, key)
    if key not in _registry():
        raise UnknownNameError("backend", name, backend_names(), hint=f"Synonyms: {', '.join(sorted(synonyms()))}.")
    return key


def backend_help() -> str:
    """One line per backend for the ``model_options.backend`` setting's help and docs: name, forms, extra, fast path."""
    lines = []
    for b in backends():
        extra = f"; needs embedscope[{b.extra}]" if b.extra else ""
        fast = "; a screen fast path" if b.fast_path else ""
        lines.append(f"{b.name}: {b.description} ({', '.join(b.forms)}{extra}{fast})")
    return "\n".join(lines)


def backend_choices() -> str:
    """The backend names on one line, each with the extra it needs (the ``model_options.backend`` flag's help).

    >>> "openvino-int8 (needs embedscope[openvino])" in backend_choices()
    True
    """
    return " | ".join(f"{b.name} (needs embedscope[{b.extra}])" if b.extra else b.name for b in backends())


def fast_paths() -> tuple[Backend, ...]:
    """The backends ``screen`` may run as fast paths."""
    return tuple(b for b in backends() if b.fast_path)


def detect_backend(path: Path) -> str | None:
    """The first backend (by ``detect_order``) whose form ``path`` is in, or None."""
    for b in sorted(backends(), key=lambda b: b.detect_order):
        if b.detect is not None and b.detect(path):
            return b.name
    return None


def libraries(exported: bool = False) -> tuple[str, ...]:
    """Distributions whose versions decide the vectors of the backends that load models (``exported``: and of the
    exports' tools too), sorted."""
    found = {lib for b in backends() for lib in b.libraries}
    if exported:
        found |= {lib for b in backends() for lib in b.export_libraries}
    return tuple(sorted(found))


def error_modules() -> tuple[str, ...]:
    """Top-level modules whose exceptions mean a model's files are unreadable, over every backend."""
    return tuple(sorted({m for b in backends() for m in b.error_modules}))


def vector_kind(model: Any) -> str:
    """``sparse`` when ``model``'s backend record says its vectors are sparse, else ``dense`` (a model of no
    registered backend: a custom encoder, a model behind an API). A lazy or cached encoder answers from its
    identity, without loading its model.

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> vector_kind(KeywordEncoder(["cat"]))
    'dense'
    """
    name = getattr(model, "backend", None)
    if not isinstance(name, str):
        return "dense"
    canonical = synonyms().get(name, name)
    record = _registry().get(canonical)
    return record.vectors if record is not None else "dense"


def check_options(record: Backend, options: EncoderOptions) -> None:
    """ConfigError for a backend-specific option this backend does not take (``tokenizer``, ``output_name``)."""
    for option in ("tokenizer", "output_name"):
        if getattr(options, option) is not None and option not in record.options:
            takers = sorted(b.name for b in backends() if option in b.options)
            which = f"the {takers[0]} backend" if len(takers) == 1 else f"the {' and '.join(takers)} backends"
            raise ConfigError(f"{option} applies to {which} only, not {record.name}")
