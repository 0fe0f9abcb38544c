"""Fast paths for any torch model: exported once (ONNX or OpenVINO IR, fp32 or int8), cached, reused.

``--backend onnx | onnx-int8 | openvino | openvino-bf16 | openvino-int8`` on a sentence-transformers or
transformers folder exports the model's transformer here, into the cache folder (``<cache>/exports/<key>/``):

* ``onnx``: ``torch.onnx.export`` (the TorchScript exporter) of the token output ``[batch, seq, hidden]``,
  then onnxruntime's transformer optimizer (``model_type="bert"``: attention, layer-norm and GELU fusions);
* ``onnx-int8``: the exported graph quantized dynamically by onnxruntime (``quantize_dynamic``: int8 weights per
  output channel — per tensor, MiniLM's vectors fell to cosine 0.95 of fp32, per channel they stay at 0.995 —;
  activations quantized per batch at run time, so no calibration sample is needed);
* ``openvino`` / ``openvino-bf16``: an OpenVINO IR (``embedscope.models.openvino_backend.export_ir``), run in f32
  or with bf16 inference precision;
* ``openvino-int8``: that IR statically quantized by NNCF on a calibration sample (the ``calibration`` file, else
  a seeded sample of the run's own task texts).

Why not optimum: optimum-onnx and optimum-intel pin ``transformers`` below the version embedscope pins, so they
cannot be installed beside it; the steps they wrap (``torch.onnx.export``, onnxruntime's optimizer and quantizer,
``openvino.convert_model`` and NNCF) are called directly.

The export key is the sha256 of the source model's files, the variant, the maximum length, the calibration
sample's hash (static int8) and the versions of the libraries that shape the graph. An export is built in a
temporary folder and renamed into place; its ``export.json`` lists the sha256 of every file and carries one
integrity key over itself and those hashes, so the manifest and the weights are checked together: a folder whose
files or manifest do not match (a killed or damaged export, an edited pooling or prompts, a removed setting) is
removed and built again with a one-line warning, never used. The manifest carries the source's pooling,
normalisation, prompts, similarity and maximum length, read from the source folder, and the encoder uses exactly
those. A temporary folder is named after its host and process; one left by a killed export is removed at the next
export into the same cache (never one of a process still running).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import inspect
import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedscope.errors import ConfigError, DataFormatError, MissingDependencyError, SettingError
from embedscope.files import current_umask
from embedscope.models.fingerprint import hash_dict, hash_file, hash_folder, short
from embedscope.models.folder import (
    EmbeddingSettings,
    resolve_prompts,
    st_max_seq_length,
    st_modules,
    st_normalizes,
    st_pooling_mode,
    st_prompts,
    st_similarity,
)
from embedscope.models.options import EncoderOptions

if TYPE_CHECKING:
    from embedscope.models.backends import Backend

logger = logging.getLogger(__name__)

EXPORTS = "exports"  # the exports' folder inside the cache folder
MANIFEST = "export.json"
FORMAT = 1  # bump when an export's layout or steps change
CALIBRATION_SIZE = 300
CALIBRATION_SEED = 0
_KEPT_MODULES = ("Transformer", "Pooling", "Normalize")
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "added_tokens.json",
)
_GRAPH_LIBRARIES = ("torch", "transformers", "onnx", "onnxruntime", "openvino", "nncf")


class MissingExtraError(MissingDependencyError):
    """A fast backend whose extra (``embedscope[onnx-export]``, ``embedscope[openvino]``) is not installed."""

    def __init__(self, extra: str, backend: str) -> None:
        ImportError.__init__(
            self, f"backend {backend} needs the extra embedscope[{extra}]: pip install 'embedscope[{extra}]'"
        )


def missing_extra(extra: str, backend: str) -> MissingDependencyError:
    """The one-line error for a fast backend whose extra is not installed."""
    return MissingExtraError(extra, backend)


# -- the source model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSource(EmbeddingSettings):
    """A torch model folder and what it says about its embeddings (read from its files, never guessed)."""

    root: Path  # the sentence-transformers (or transformers) folder
    transformer: Path  # the folder holding config.json and the weights
    tokenizer: Path  # the folder holding the tokenizer files
    fingerprint: str  # sha256 over the root's model files


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _has_weights(folder: Path) -> bool:
    return any((folder / f).is_file() for f in ("model.safetensors", "pytorch_model.bin")) or any(
        folder.glob("model-*.safetensors")
    )


def _default_max_length(transformer: Path) -> int:
    """transformers' default: the smaller of the tokenizer's ``model_max_length`` and the position embeddings."""
    tok = _read_json(transformer / "tokenizer_config.json").get("model_max_length")
    pos = _read_json(transformer / "config.json").get("max_position_embeddings")
    found = [int(v) for v in (tok, pos) if isinstance(v, (int, float)) and 0 < v < 1_000_000]
    return min(found) if found else 512


def export_source(path: str | Path, backend: str) -> ExportSource:
    """The :class:`ExportSource` of a torch model folder, or a one-line ConfigError saying why it cannot be exported."""
    root = Path(path)
    if root.is_file() or not root.is_dir():
        raise SettingError(
            "model_options.backend",
            f"{path}: {{model_options.backend}} {backend} exports a torch model folder; this is not one",
        )
    modules = st_modules(root)
    if modules:
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        other = [k for k in kinds if k not in _KEPT_MODULES]
        if other:
            raise ConfigError(
                f"{path}: cannot be exported for backend {backend}: its modules {', '.join(other)} are not a "
                "transformer, pooling or normalisation (only those are exported)"
            )
        first = next((m for m in modules if str(m.get("type", "")).endswith("Transformer")), None)
        if first is None:
            raise ConfigError(f"{path}: cannot be exported for backend {backend}: modules.json has no Transformer")
        transformer = root / str(first.get("path", ""))
    else:
        transformer = root
    config = _read_json(transformer / "config.json")
    if not config.get("architectures") and not config.get("model_type") or not _has_weights(transformer):
        raise ConfigError(
            f"{path}: cannot be exported for backend {backend}: no transformers config.json with torch weights "
            "(model.safetensors or pytorch_model.bin); a model2vec or ONNX model has no graph to export"
        )
    st_config = _read_json(root / "config_sentence_transformers.json")
    prompts = resolve_prompts(st_prompts(root), None, None, st_config.get("default_prompt_name"))
    max_length = st_max_seq_length(root) or st_max_seq_length(transformer) or _default_max_length(transformer)
    return ExportSource(
        root=root,
        transformer=transformer,
        tokenizer=transformer if (transformer / "tokenizer_config.json").is_file() else root,
        fingerprint=hash_folder(root),
        pooling=st_pooling_mode(root) or "mean",
        normalize=st_normalizes(root),
        prompts=prompts,
        similarity=st_similarity(root),
        max_seq_length=int(max_length),
    )


# -- calibration -------------------------------------------------------------------------------


def read_calibration_file(path: str | Path) -> list[str]:
    """Calibration texts from a file: one text per line, or ``.jsonl`` rows with a ``"text"`` key.

    An unreadable or empty file is a one-line :class:`DataFormatError` naming it."""
    p = Path(os.path.expanduser(str(path)))
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise DataFormatError(f"calibration file {path}: cannot read it ({reason})") from None
    texts: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if p.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except ValueError:
                raise DataFormatError(f"calibration file {path}, line {number}: not JSON") from None
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise DataFormatError(f"calibration file {path}, line {number}: no string 'text' key")
            texts.append(row["text"])
        else:
            texts.append(line)
    if not texts:
        raise DataFormatError(f"calibration file {path}: no texts in it")
    return texts


def calibration_sample(texts: Sequence[str], size: int = CALIBRATION_SIZE, seed: int = CALIBRATION_SEED) -> list[str]:
    """A deterministic sample: ``size`` distinct non-empty texts drawn with ``random.Random(seed)`` from the sorted set.

    >>> calibration_sample(["b", "a", "b", "c", ""], size=2) == calibration_sample(["c", "a", "b"], size=2)
    True
    """
    distinct = sorted({t for t in texts if t.strip()})
    if len(distinct) <= size:
        return distinct
    return random.Random(seed).sample(distinct, size)


def calibration_hash(texts: Sequence[str] | None) -> str | None:
    """sha256 of the calibration texts in order (None: no calibration)."""
    return hash_dict(list(texts)) if texts is not None else None


# -- the export cache --------------------------------------------------------------------------


def library_versions() -> dict[str, str | None]:
    """Versions of the libraries that shape an exported graph."""
    found: dict[str, str | None] = {}
    for dist in _GRAPH_LIBRARIES:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def export_key(
    source_fingerprint: str,
    variant: str,
    max_seq_length: int,
    calibration: str | None,
    quantization: Mapping[str, Any] | None = None,
) -> str:
    """sha256 of everything that decides an export's files (``quantization``: the static quantizer's settings)."""
    fields: dict[str, Any] = {
        "format": FORMAT,
        "source": source_fingerprint,
        "variant": variant,
        "max_seq_length": max_seq_length,
        "calibration": calibration,
        "versions": library_versions(),
    }
    if quantization is not None:  # absent otherwise: keys of the exports without it stay as they were
        fields["quantization"] = dict(quantization)
    return hash_dict(fields)


def _file_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hash_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


INTEGRITY = "integrity"  # the manifest's key holding the sha256 over the rest of it, its file hashes included
MANIFEST_FIELDS = ("key", "files", "pooling", "normalize", "prompts", "similarity", "max_seq_length")


def manifest_integrity(manifest: Mapping[str, Any]) -> str:
    """One key over an export's manifest and weights together: sha256 of the manifest without its
    ``integrity`` entry (canonical JSON), which lists the sha256 of every file of the export.

    >>> m = {"key": "k", "files": {"model.onnx": "ab"}, "pooling": "mean"}
    >>> manifest_integrity(m) == manifest_integrity({**m, INTEGRITY: "x"}) != manifest_integrity({**m, "pooling": "cls"})
    True
    """
    return hash_dict({k: v for k, v in manifest.items() if k != INTEGRITY})


def export_problem(folder: Path, key: str) -> str | None:
    """Why the export in ``folder`` cannot be used for ``key`` (None: it is complete and undamaged): a missing or
    unreadable manifest, another key, a manifest whose integrity key does not match it (an edited pooling, prompts
    or a removed setting), or files whose sha256 differ from the manifest's (a killed or damaged export)."""
    if not (folder / MANIFEST).is_file():
        return f"no {MANIFEST} (an interrupted export)"
    manifest = _read_json(folder / MANIFEST)
    if not manifest:
        return f"{MANIFEST} is not a JSON object"
    if manifest.get("key") != key:
        return f"{MANIFEST} names another export key"
    if manifest.get(INTEGRITY) != manifest_integrity(manifest):
        return f"{MANIFEST} does not match its integrity key (edited, damaged or written by an older embedscope)"
    missing = [f for f in MANIFEST_FIELDS if f not in manifest]
    files = manifest.get("files")
    if missing or not isinstance(files, dict) or not files:
        return f"{MANIFEST} lacks {', '.join(missing) or 'files'}"
    try:
        if _file_hashes(folder) != files:
            return f"its files differ from those {MANIFEST} lists (a killed or damaged export)"
    except OSError as e:
        return f"a file cannot be read ({e.strerror or e})"
    return None


def read_export(folder: Path, key: str) -> dict[str, Any] | None:
    """The manifest of a complete, undamaged export with this key (:func:`export_problem` finds none), else None."""
    return None if export_problem(folder, key) is not None else _read_json(folder / MANIFEST)


STALE_SECONDS = 24 * 3600  # a temporary export folder of another host, or of an unknown owner, this old is stale


def _host() -> str:
    import socket

    return "".join(c for c in socket.gethostname() if c.isalnum() or c == "-")[:32] or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process (or an absurd number: not ours)
    return True


def is_stale_temporary(path: Path, now: float | None = None) -> bool:
    """Whether ``path`` is the temporary folder of an export that will never finish: named
    ``.<key>.<host>~<pid>.<random>.tmp``, it is stale when that process no longer runs on this host; a folder of
    another host or without an owner in its name (an older embedscope) when untouched for :data:`STALE_SECONDS`.

    >>> is_stale_temporary(Path(f".k.{_host()}~{os.getpid()}.x.tmp"))
    False
    """
    parts = path.name.split(".")
    owner = parts[2] if len(parts) == 5 and parts[0] == "" and parts[-1] == "tmp" else ""
    host, _, pid = owner.rpartition("~")
    if host == _host() and pid.isdigit():
        return not _alive(int(pid))
    try:
        age = (now if now is not None else time.time()) - path.stat().st_mtime
    except OSError:
        return False
    return age > STALE_SECONDS


def clean_stale_temporaries(exports: Path) -> list[Path]:
    """Remove the temporary folders (and atomic-write files) of interrupted exports under ``exports``, never
    those of a build still running (:func:`is_stale_temporary`); returns those removed."""
    removed: list[Path] = []
    try:
        candidates = [p for p in exports.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    except OSError:
        return removed
    for path in candidates:
        if is_stale_temporary(path):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            if not path.exists():
                removed.append(path)
    if removed:
        logger.warning("%s: removed %d temporary folder(s) of interrupted exports", exports, len(removed))
    return removed


@contextlib.contextmanager
def _building(exports: Path, key: str) -> Iterator[Path]:
    """A temporary folder beside the final one, named after this host and process (so a later start can tell a
    killed build's folder from a running one), removed if the build fails."""
    exports.mkdir(parents=True, exist_ok=True)
    prefix = f".{short(key, 16)}.{_host()}~{os.getpid()}."
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=exports))
    tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes 0700; an export folder gets the usual mode
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_export(
    key: str,
    exports: Path,
    build: Callable[[Path], None],
    meta: dict[str, Any],
) -> tuple[Path, dict[str, Any]]:
    """The folder of export ``key`` under ``exports`` (``<exports>/<key>``), built by ``build(folder)`` if it is
    missing or damaged. Returns the folder and its manifest."""
    final = exports / key
    if exports.is_dir():
        clean_stale_temporaries(exports)
    problem = export_problem(final, key) if final.exists() else "missing"
    if problem is None:
        return final, _read_json(final / MANIFEST)
    if final.exists():
        logger.warning("%s: %s; building the export again", final, problem)
        shutil.rmtree(final, ignore_errors=True)
    with _building(exports, key) as tmp:
        build(tmp)
        manifest = {**meta, "key": key, "files": _file_hashes(tmp)}
        manifest[INTEGRITY] = manifest_integrity(manifest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished the same export first: use it if it is whole
            found = read_export(final, key)
            if found is None:
                raise
            return final, found
    return final, manifest


# -- ONNX --------------------------------------------------------------------------------------


def _import_onnx_tools(backend: str) -> None:
    from embedscope.models.third_party import quiet_onnxruntime

    quiet_onnxruntime()  # telemetry off before onnxruntime initialises
    for module in ("onnx", "onnxruntime"):
        try:
            __import__(module)
        except ImportError:
            raise missing_extra("onnx-export", backend) from None


class _TokenOutput:
    """Wraps a transformers model so that its forward takes positional inputs and returns the token output."""

    @staticmethod
    def wrap(model: Any, names: Sequence[str]) -> Any:
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *inputs: Any) -> Any:
                return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

        return Wrapper().eval()


def export_onnx(source: ExportSource, target: Path) -> None:
    """torch → ``target/model.onnx``: inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the
    model takes them), output ``token_embeddings`` ``[batch, seq, hidden]``, batch and sequence dynamic (opset 17)."""
    import torch
    from transformers import AutoModel

    from embedscope.models.folder import quiet_loading

    with quiet_loading():
        model = AutoModel.from_pretrained(str(source.transformer), dtype=torch.float32).eval()
    accepted = inspect.signature(model.forward).parameters
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in accepted else [])
    vocab = int(getattr(model.config, "vocab_size", 2) or 2)
    ids = torch.arange(2 * 16, dtype=torch.long).reshape(2, 16) % max(vocab - 1, 1) + 1
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    dummy = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "token_embeddings"]}
    with torch.no_grad(), _quiet_export():
        torch.onnx.export(
            _TokenOutput.wrap(model, names),
            tuple(dummy[n] for n in names),
            str(target / "model.onnx"),
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """No exporter warnings, and none of onnxruntime's quantizer advice on the root logger."""
    import warnings

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def optimize_onnx(model: Path, target: Path) -> None:
    """onnxruntime's transformer optimizer (BERT fusions; heads and hidden size read from the graph)."""
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet_export():
        optimized = optimize_model(str(model), model_type="bert", num_heads=0, hidden_size=0, opt_level=1)
    optimized.save_model_to_file(str(target))


def quantize_onnx(model: Path, target: Path) -> None:
    """Dynamic int8 quantization (onnxruntime): int8 weights per output channel, activations per batch."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_export():
        quantize_dynamic(
            str(model),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=False,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # outputs of fused (com.microsoft) ops
        )


def _copy_tokenizer(source: ExportSource, target: Path) -> None:
    for name in _TOKENIZER_FILES:
        for folder in (source.tokenizer, source.root):
            if (folder / name).is_file():
                shutil.copy2(folder / name, target / name)
                break


def build_onnx(source: ExportSource, variant: str, target: Path) -> None:
    """Export, optimise and (``onnx-int8``) quantize into ``target/model.onnx``, with the tokenizer beside it."""
    work = target / ".work"
    work.mkdir()
    export_onnx(source, work)
    if variant == "onnx":
        optimize_onnx(work / "model.onnx", target / "model.onnx")
    else:  # the unfused graph: its MatMuls quantize per channel (fused attention quantized no better, and ran slower)
        quantize_onnx(work / "model.onnx", target / "model.onnx")
    shutil.rmtree(work)
    _copy_tokenizer(source, target)


# -- OpenVINO (embedscope.models.openvino_backend) -----------------------------------------------


def openvino_module(backend: str) -> Any:
    """``embedscope.models.openvino_backend``, or the missing-extra error."""
    import importlib

    from embedscope.models.third_party import quiet_openvino

    quiet_openvino()  # importing openvino loads its converter's telemetry, which writes ~/intel
    try:
        import openvino  # noqa: F401

        return importlib.import_module("embedscope.models.openvino_backend")
    except ImportError:
        raise missing_extra("openvino", backend) from None


def build_openvino(source: ExportSource, variant: str, target: Path, calibration: Sequence[str] | None) -> None:
    """An OpenVINO IR (``target/model.xml`` + ``model.bin``), NNCF-quantized for ``openvino-int8``."""
    ov = openvino_module(variant)
    if variant == "openvino":
        ov.export_ir(source.transformer, target, max_seq_length=source.max_seq_length)
    else:
        work = target / ".work"
        work.mkdir()
        ov.export_ir(source.transformer, work, max_seq_length=source.max_seq_length)
        ov.quantize_ir_int8(
            work,
            target,
            tokenizer_source=source.tokenizer,
            calibration_texts=list(calibration or []),
            max_seq_length=source.max_seq_length,
        )
        shutil.rmtree(work)
    _copy_tokenizer(source, target)


# -- the encoder ---------------------------------------------------------------------------------


def fast_encoder(path: str | Path, backend: str, options: EncoderOptions, form: str | None = None) -> Any:
    """An encoder on the ``backend`` fast path (a registered backend with an ``export``) of the model at ``path``,
    exported once into ``<exports_dir>/exports/<key>/`` (``options.exports_dir``: the cache folder, default
    ``~/.cache/embedscope``). ``form``: the backend that loads the source (``onnx``: an ONNX graph,
    :mod:`embedscope.models.onnx_exports`; else a torch model folder).

    The source's pooling, normalisation, prompts, similarity and maximum length apply unless given here."""
    from embedscope.models.backends import backend as backend_record
    from embedscope.models.backends import backends
    from embedscope.models.device import parse_dtype

    record = backend_record(backend)
    if record.export is None:
        raise SettingError("model_options.backend", f"{{model_options.backend}} {backend} runs no export")
    if parse_dtype(options.dtype) != "float32":
        raise SettingError(
            "model_options.dtype",
            f"{{model_options.backend}} {backend} sets its own precision; {{model_options.dtype}} {options.dtype!r} "
            "cannot apply (leave it fp32)",
        )
    if options.calibration is not None and not record.calibrates:
        static = ", ".join(b.name for b in backends() if b.calibrates)
        raise ConfigError(f"calibration applies to statically quantized backends ({static}) only, not {backend}")
    given = read_calibration_file(options.calibration) if options.calibration is not None else None
    quantization: dict[str, Any] | None = None
    if record.export.startswith("onnx"):
        _import_onnx_tools(backend)
    elif record.calibrates:
        quantization = openvino_module(backend).INT8_DEFAULT.key()
    else:
        openvino_module(backend)
    if form == "onnx":
        return _onnx_fast_encoder(path, record, options, given, quantization)
    src = export_source(path, backend)
    length = int(options.max_seq_length or src.max_seq_length)
    if length < 1:
        raise ConfigError(f"max_seq_length must be >= 1, got {length}")
    src = dataclasses.replace(src, max_seq_length=length)
    variant = record.export
    texts = _calibration_texts(record, options, given)
    key = export_key(src.fingerprint, variant, length, calibration_hash(texts), quantization)
    meta = {
        "variant": variant,
        "source": {"path": str(src.root), "fingerprint": src.fingerprint},
        "calibration": _calibration_meta(texts),
        "quantization_settings": quantization,
        "versions": library_versions(),
        **src.meta(),
    }

    def build(target: Path) -> None:
        if variant.startswith("onnx"):
            build_onnx(src, variant, target)
        else:
            build_openvino(src, variant, target, texts)

    folder, manifest = ensure_export(key, _exports_folder(options), build, meta)
    common = _encoder_options(options, manifest, src.root.resolve().name, src.fingerprint, length, path)
    mode = options.pooling or manifest["pooling"]
    if variant.startswith("onnx"):
        from embedscope.models.onnx_backend import OnnxEncoder

        encoder: Any = OnnxEncoder(
            folder / "model.onnx", tokenizer=folder, pooling=mode, similarity=manifest["similarity"], **common
        )
    else:
        encoder = _openvino_encoder(record, folder, folder, mode, common)
    encoder.similarity = manifest["similarity"]
    return _marked(encoder, record, key, src.fingerprint, meta["calibration"], folder)


def _calibration_texts(record: Backend, options: EncoderOptions, given: list[str] | None) -> list[str] | None:
    """The calibration sample of a statically quantized fast path (the file's texts, else the run's own); None for
    a fast path that does not calibrate."""
    if not record.calibrates:
        return None
    sample = options.calibration_texts
    texts = calibration_sample(given if given is not None else (sample() if sample else []))
    if not texts:
        raise SettingError(
            "model_options.calibration",
            f"{{model_options.backend}} {record.name} calibrates on texts: give a calibration file "
            "({model_options.calibration})",
        )
    return texts


def _calibration_meta(texts: list[str] | None) -> dict[str, Any] | None:
    return {"texts": len(texts), "sha256": calibration_hash(texts)} if texts is not None else None


def _exports_folder(options: EncoderOptions) -> Path:
    from embedscope.models.cache import default_cache_dir

    return Path(options.exports_dir or default_cache_dir()) / EXPORTS


def _encoder_options(
    options: EncoderOptions, manifest: Mapping[str, Any], name: str, fingerprint: str, length: int, path: str | Path
) -> dict[str, Any]:
    """The exported encoder's common keyword arguments: the given options over the manifest's."""
    return options.replace(
        name=options.name or name,
        revision=options.revision or short(fingerprint),
        prompts={**dict(manifest.get("prompts") or {}), **(options.prompts or {})},
        max_seq_length=length,
        normalize=manifest["normalize"] if options.normalize is None else options.normalize,
        source=options.source or str(path),
    ).common()


def _openvino_encoder(
    record: Backend, folder: Path, tokenizer: str | Path, mode: str | None, common: dict[str, Any]
) -> Any:
    return openvino_module(record.name).OpenVinoEncoder(
        folder,
        tokenizer=tokenizer,
        pooling=mode,
        inference_precision="bf16" if record.quantization == "bf16" else "f32",
        **common,
    )


def _marked(
    encoder: Any, record: Backend, key: str, fingerprint: str, calibration: dict[str, Any] | None, folder: Path
) -> Any:
    """``encoder`` marked as the fast path it is (its fingerprint's ``fast_path`` settings)."""
    encoder.fast_path = {
        "backend": record.name,
        "quantization": record.quantization,
        "export": key,
        "source_fingerprint": fingerprint,
        "calibration": calibration,
    }
    encoder.backend = record.name
    encoder.export_key = key
    encoder.export_folder = folder
    return encoder


def _onnx_fast_encoder(
    path: str | Path,
    record: Backend,
    options: EncoderOptions,
    given: list[str] | None,
    quantization: dict[str, Any] | None,
) -> Any:
    """The fast path ``record`` of an ONNX graph (:mod:`embedscope.models.onnx_exports`), exported once."""
    from embedscope.models import onnx_exports

    src = onnx_exports.onnx_source(path, options)
    onnx_exports.refuse_requantizing(src, record.name, record.quantization)
    variant = record.export
    assert variant is not None  # fast_encoder refused a backend that runs no export
    texts = _calibration_texts(record, options, given)
    source_key = hash_dict([src.fingerprint, src.meta()])  # the graph, its output and how its vectors are read
    key = export_key(source_key, f"{variant}:from-onnx", src.max_seq_length, calibration_hash(texts), quantization)
    meta = {
        "variant": variant,
        "source": {"path": str(src.onnx_file), "fingerprint": src.fingerprint, "quantized": src.quantized},
        "calibration": _calibration_meta(texts),
        "quantization_settings": quantization,
        "versions": library_versions(),
        **src.meta(),
    }

    def build(target: Path) -> None:
        onnx_exports.build(src, variant, target, texts, _TOKENIZER_FILES, quantize_onnx)

    folder, manifest = ensure_export(key, _exports_folder(options), build, meta)
    tokenizer = onnx_exports.export_tokenizer(src, folder)
    common = _encoder_options(options, manifest, src.onnx_file.stem, src.fingerprint, src.max_seq_length, path)
    mode = None if src.pooled else manifest["pooling"]
    if variant == "onnx-int8":
        from embedscope.models.onnx_backend import OnnxEncoder

        encoder: Any = OnnxEncoder(
            folder / "model.onnx", tokenizer=tokenizer, pooling=mode, output_name=src.output, **common
        )
    else:
        encoder = _openvino_encoder(record, folder, tokenizer, mode, common)
    encoder.similarity = manifest["similarity"]
    return _marked(encoder, record, key, src.fingerprint, meta["calibration"], folder)
