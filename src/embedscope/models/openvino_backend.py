"""OpenVINO backend: a transformer converted to OpenVINO IR, run on the CPU in fp32, bf16 or int8.

* Export (:func:`export_ir`): the transformer of a sentence-transformers or transformers folder
  (torch weights) is traced by ``openvino.convert_model`` with example inputs and saved as
  ``model.xml`` + ``model.bin`` with fp32 weights. Its one output is the token embeddings
  ``[batch, seq, hidden]``; inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when
  the model takes them), batch and sequence dynamic.
* Static int8 (:func:`quantize_ir_int8`): NNCF post-training quantization of an fp32 IR,
  calibrated on tokenized batches of the given texts (``ModelType.TRANSFORMER``: the attention
  softmax and layer norms stay in floating point).
* Encoding (:class:`OpenVinoEncoder`): compiled for the CPU with ``INFERENCE_PRECISION_HINT``
  ``f32`` (exact fp32 arithmetic) or ``bf16`` (AVX-512 BF16 / AMX where present), tokenized as the
  ONNX backend does, pooled by :func:`embedscope.models.pooling.pool` and L2-normalised when the
  model normalises. OpenVINO's ``GPU`` device is an Intel GPU: this backend runs on the CPU only.
* Fingerprint: sha256 of the IR's ``.xml`` and ``.bin`` bytes, the tokenizer, and every setting
  (inference precision included).

Needs ``pip install 'embedscope[openvino]'`` (``openvino``, ``nncf``).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import BaseEncoder, Similarity, prompted_texts
from embedscope.models.batching import cpu_threads, encode_sorted
from embedscope.models.device import DeviceUnavailableError, device_kind, parse_dtype
from embedscope.models.fingerprint import hash_dict, hash_file, short
from embedscope.models.folder import (
    quiet_loading,
    resolve_prompts,
    st_max_seq_length,
    st_modules,
    st_normalizes,
    st_pooling_mode,
    st_prompts,
    st_similarity,
)
from embedscope.models.onnx_backend import _Tokenizer
from embedscope.models.options import Placement, requested_device
from embedscope.models.pooling import check_pooling_mode, normalize_rows, pool
from embedscope.models.third_party import quiet_nncf, quiet_openvino
from embedscope.types import Role

BACKEND = "openvino"
EXTRA = "pip install 'embedscope[openvino]'"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
PRECISIONS = {"f32": "float32", "bf16": "bfloat16"}  # INFERENCE_PRECISION_HINT → the dtype results record
_PRECISION_SYNONYMS = {"fp32": "f32", "float32": "f32", "bfloat16": "bf16"}
DEFAULT_STREAMS = 2  # 2 streams beat 1 on 2 cores in every precision (bench/bench_openvino.py --encode 128)
CALIBRATION_BATCH = 8  # texts per calibration batch for NNCF


def _import_openvino() -> Any:
    quiet_openvino()  # before openvino's converter can load its telemetry
    try:
        import openvino
    except ImportError as e:
        raise MissingDependencyError("openvino", f"The OpenVINO backend ({EXTRA})") from e
    return openvino


@functools.lru_cache(maxsize=1)
def cpu_capabilities() -> tuple[str, ...]:
    """What OpenVINO's CPU plugin can compute in here (``OPTIMIZATION_CAPABILITIES``: ``FP32``, ``INT8``, ``BF16`` …)."""
    return tuple(_import_openvino().Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def check_precision_here(precision: str) -> None:
    """A one-line ConfigError when this CPU cannot compute in ``precision``: OpenVINO would run f32 instead and the
    results would record bf16."""
    if precision == "bf16" and "BF16" not in cpu_capabilities():
        raise ConfigError(
            f"inference precision bf16: this CPU cannot compute in bf16 (OpenVINO's CPU capabilities: "
            f"{', '.join(cpu_capabilities())}), so OpenVINO would run f32 under a bf16 label: use backend openvino"
        )


def _import_nncf() -> Any:
    quiet_openvino()  # before NNCF can load its telemetry
    try:
        import nncf
    except ImportError as e:
        raise MissingDependencyError("nncf", f"int8 quantization for the OpenVINO backend ({EXTRA})") from e
    return nncf


# -- export -----------------------------------------------------------------------------------------------------


def transformer_folder(source: Path) -> Path:
    """The folder of ``source``'s transformer weights: the path of the sentence-transformers
    ``Transformer`` module in ``modules.json`` (often the folder itself), else ``source``."""
    for module in st_modules(source):
        if str(module.get("type", "")).endswith("Transformer"):
            return source / str(module.get("path", ""))
    return source


class _TokenEmbeddings:
    """Builds a torch module whose forward returns the transformer's last hidden state."""

    @staticmethod
    def wrap(model: Any, takes_token_types: bool) -> Any:
        import torch

        class TokenEmbeddings(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
                extra = {"token_type_ids": token_type_ids} if takes_token_types else {}
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **extra)
                return out.last_hidden_state

        return TokenEmbeddings().eval()


def _takes_token_types(model: Any) -> bool:
    import inspect

    params = inspect.signature(model.forward).parameters
    return "token_type_ids" in params and int(getattr(model.config, "type_vocab_size", 0) or 0) > 0


def export_ir(source: Path, target: Path, *, max_seq_length: int) -> None:
    """Convert the transformer of ``source`` into OpenVINO IR ``target/model.xml`` + ``model.bin``.

    The output is the token embeddings ``[batch, seq, hidden]`` (fp32 weights kept); inputs are
    ``input_ids``, ``attention_mask`` and, when the model takes them, ``token_type_ids``, with
    dynamic batch and sequence. ``max_seq_length`` bounds the example input used for tracing.
    """
    ov = _import_openvino()
    import torch
    from transformers import AutoModel

    source, target = Path(source), Path(target)
    folder = transformer_folder(source)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{source}: no transformers config.json to export to OpenVINO (looked in {folder})")
    try:
        with quiet_loading():
            model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    except (OSError, ValueError) as e:
        raise ConfigError(f"{source}: cannot load the transformer for the OpenVINO export: {e}") from e
    takes_types = _takes_token_types(model)
    module = _TokenEmbeddings.wrap(model, takes_types)
    seq = max(2, min(16, int(max_seq_length)))
    example = {
        "input_ids": torch.ones((2, seq), dtype=torch.long),
        "attention_mask": torch.ones((2, seq), dtype=torch.long),
    }
    if takes_types:
        example["token_type_ids"] = torch.zeros((2, seq), dtype=torch.long)
    shapes = [(name, ov.PartialShape([-1, -1]), ov.Type.i64) for name in example]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", torch.jit.TracerWarning
        )  # its one branch (KV-cache mask padding) never applies here
        converted = ov.convert_model(module, example_input=example, input=shapes)
    for name, port in zip(example, converted.inputs):
        port.get_tensor().set_names({name})
    converted.outputs[0].get_tensor().set_names({"token_embeddings"})
    target.mkdir(parents=True, exist_ok=True)
    ov.save_model(converted, str(target / "model.xml"), compress_to_fp16=False)


# -- static int8 ------------------------------------------------------------------------------------------------


def calibration_batches(
    tokenizer: _Tokenizer, texts: Sequence[str], *, max_seq_length: int, input_names: Sequence[str]
) -> list[dict[str, np.ndarray]]:
    """Tokenized batches of ``texts`` (padded to each batch's longest), with only the model's inputs."""
    texts = [t for t in texts if t]
    if not texts:
        raise ConfigError("int8 calibration needs at least one non-empty text")
    out = []
    for start in range(0, len(texts), CALIBRATION_BATCH):
        batch = tokenizer(list(texts[start : start + CALIBRATION_BATCH]), max_seq_length, None)
        out.append({name: batch[name] for name in input_names})
    return out


_RANGES = {"mean_minmax": "MEAN_MINMAX", "minmax": "MINMAX"}  # activation_range → NNCF's RangeEstimatorParametersSet


@dataclasses.dataclass(frozen=True)
class Int8Settings:
    """NNCF post-training quantization settings of :func:`quantize_ir_int8` (they change the graph: an export's
    key holds :meth:`key`).

    Attributes:
        preset: ``mixed`` (asymmetric activations, symmetric weights) or ``performance`` (both symmetric).
        smooth_quant_alpha: SmoothQuant's migration strength for ``MatMul`` inputs (0 < alpha < 1); ``None`` turns
            SmoothQuant off.
        fast_bias_correction: NNCF's fast bias correction (False: the slower full bias correction).
        fp32_patterns: regular expressions of node names kept unquantized (NNCF ignored scope; each matched from
            the start of the name, as ``re.match``).
        activation_range: how an activation's quantization range comes from the calibration batches:
            ``mean_minmax`` (NNCF's default: the mean over batches of each batch's min and max) or ``minmax`` (the
            smallest min and largest max over all batches: nothing seen in calibration is clipped).
    """

    preset: str = "mixed"
    smooth_quant_alpha: float | None = None
    fast_bias_correction: bool = True
    fp32_patterns: tuple[str, ...] = ()
    activation_range: str = "mean_minmax"

    def __post_init__(self) -> None:
        if self.preset not in ("mixed", "performance"):
            raise ConfigError(f"int8 preset {self.preset!r}: use mixed or performance")
        alpha = self.smooth_quant_alpha
        if alpha is not None and not 0.0 < float(alpha) < 1.0:
            raise ConfigError(f"smooth_quant_alpha {alpha!r}: use a number between 0 and 1, or None (off)")
        if self.activation_range not in _RANGES:
            raise ConfigError(f"activation_range {self.activation_range!r}: use {' or '.join(_RANGES)}")

    def key(self) -> dict[str, Any]:
        """The settings as plain JSON values."""
        return {**dataclasses.asdict(self), "fp32_patterns": list(self.fp32_patterns)}

    def nncf_options(self, nncf: Any) -> dict[str, Any]:
        """Keyword arguments of ``nncf.quantize`` (``ModelType.TRANSFORMER``) for these settings."""
        from nncf.quantization.range_estimator import RangeEstimatorParametersSet

        alpha = -1.0 if self.smooth_quant_alpha is None else float(self.smooth_quant_alpha)  # NNCF: -1 is off
        options: dict[str, Any] = {
            "preset": nncf.QuantizationPreset.MIXED if self.preset == "mixed" else nncf.QuantizationPreset.PERFORMANCE,
            "model_type": nncf.ModelType.TRANSFORMER,
            "fast_bias_correction": self.fast_bias_correction,
            "advanced_parameters": nncf.AdvancedQuantizationParameters(
                smooth_quant_alphas=nncf.AdvancedSmoothQuantParameters(matmul=alpha),
                activations_range_estimator_params=getattr(RangeEstimatorParametersSet, _RANGES[self.activation_range]),
            ),
        }
        if self.fp32_patterns:
            options["ignored_scope"] = nncf.IgnoredScope(patterns=list(self.fp32_patterns), validate=False)
        return options


INT8_DEFAULT = Int8Settings(smooth_quant_alpha=None, fast_bias_correction=False)
"""The settings backend ``openvino-int8`` quantizes with: SmoothQuant off and NNCF's full bias correction, the
closest to torch fp32 of those measured on MiniLM's built-in suite (bench/bench_openvino_int8.py compares them)."""


def quantize_ir_int8(
    ir_folder: Path,
    target: Path,
    *,
    tokenizer_source: Path,
    calibration_texts: Sequence[str],
    max_seq_length: int,
    settings: Int8Settings = INT8_DEFAULT,
) -> None:
    """Static int8 quantization of the fp32 IR in ``ir_folder`` with NNCF, written to ``target/model.xml`` + ``.bin``.

    Calibrates on tokenized batches of ``calibration_texts`` (all of them: the subset size is their
    number); ``ModelType.TRANSFORMER`` keeps softmax and layer norms in floating point. ``settings``
    (:class:`Int8Settings`) chooses the preset, SmoothQuant, the bias correction and the nodes kept in fp32.
    """
    ov = _import_openvino()
    nncf = _import_nncf()
    model = ov.Core().read_model(str(Path(ir_folder) / "model.xml"))
    names = [port.get_any_name() for port in model.inputs]
    batches = calibration_batches(
        _Tokenizer(tokenizer_source), calibration_texts, max_seq_length=max_seq_length, input_names=names
    )
    with quiet_nncf(nncf):  # NNCF's own progress bars and INFO lines, even in a pipe and with show_progress off
        quantized = nncf.quantize(model, nncf.Dataset(batches), subset_size=len(batches), **settings.nncf_options(nncf))
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    ov.save_model(quantized, str(target / "model.xml"), compress_to_fp16=False)


# -- encoding ---------------------------------------------------------------------------------------------------


def parse_precision(inference_precision: str | None, dtype: str | None) -> str:
    """``f32`` or ``bf16`` from the inference precision and the run's dtype (which must agree).

    >>> parse_precision(None, "bf16"), parse_precision("f32", None), parse_precision("bf16", None)
    ('bf16', 'f32', 'bf16')
    """
    given_dtype = parse_dtype(dtype) if dtype is not None else None
    if given_dtype is not None and given_dtype not in PRECISIONS.values():
        raise ConfigError(f"dtype {dtype!r}: the OpenVINO backend computes in fp32 or bf16 on the CPU")
    if inference_precision is None:
        return "bf16" if given_dtype == "bfloat16" else "f32"
    key = str(inference_precision).strip().lower()
    key = _PRECISION_SYNONYMS.get(key, key)
    if key not in PRECISIONS:
        raise ConfigError(f"inference_precision {inference_precision!r}: use f32 or bf16")
    if given_dtype is not None and given_dtype != PRECISIONS[key]:
        raise ConfigError(f"dtype {dtype!r} disagrees with inference_precision {inference_precision!r}")
    return key


def find_ir_file(ir_folder: str | Path) -> Path:
    """``model.xml`` in ``ir_folder`` (or the ``.xml`` file itself), with its ``.bin`` beside it."""
    p = Path(ir_folder)
    xml = p if p.suffix == ".xml" else p / "model.xml"
    if not xml.is_file() or not xml.with_suffix(".bin").is_file():
        raise ConfigError(f"{ir_folder}: no OpenVINO IR (expected model.xml and model.bin)")
    return xml


class OpenVinoEncoder(BaseEncoder):
    """An OpenVINO IR of a transformer (token-embeddings output, or an ONNX graph's pooled output) as an
    :class:`~embedscope.models.base.Encoder`.

    Args:
        ir_folder: folder holding ``model.xml`` + ``model.bin`` (from :func:`export_ir` or
            :func:`quantize_ir_int8`).
        tokenizer: ``tokenizer.json``, tokenizer folder or hub id (the source model's folder; its
            sentence-transformers configs give the defaults below).
        pooling: pooling mode (default: the tokenizer folder's Pooling config, else ``"mean"``).
        inference_precision: ``f32`` (exact fp32 arithmetic) or ``bf16``; default from ``dtype``, else ``f32``.
        max_seq_length: truncation length (default ``sentence_bert_config.json``, else the tokenizer's, else 512).
        normalize: L2-normalise (default: whether the tokenizer folder's ``modules.json`` has ``Normalize``).
        prompts / query_prompt: role → prompt prepended to the text; the query-only prompt.
        threads: CPU threads (default :func:`~embedscope.models.batching.cpu_threads`).
        streams: CPU streams (default: one per thread, up to :data:`DEFAULT_STREAMS`). With more than one,
            each batch is split into that many length-sorted parts, run in parallel (``AsyncInferQueue``,
            ``PERFORMANCE_HINT=THROUGHPUT``), each part padded to its own longest text; one stream runs the
            batch whole (``LATENCY``).
        device: ``cpu`` or ``auto`` (the CPU); any other device is an error.
        dtype: ``fp32`` or ``bf16``, as ``inference_precision``.
    """

    backend = BACKEND
    supported_dtypes = ("float32", "bfloat16")

    def __init__(
        self,
        ir_folder: str | Path,
        *,
        tokenizer: str | Path,
        pooling: str | None = None,
        inference_precision: str | None = None,
        name: str | None = None,
        revision: str | None = None,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        similarity: Similarity | None = None,
        threads: int | None = None,
        streams: int | None = None,
        source: str | None = None,
        device: str | Placement | None = None,
        dtype: str | None = None,
    ) -> None:
        asked = requested_device(device)
        if asked not in (None, "auto") and device_kind(str(asked)) != "cpu":
            raise DeviceUnavailableError(
                f"device {asked!r}: the OpenVINO backend runs on the CPU only (use device cpu, or another backend)"
            )
        self.inference_precision = parse_precision(inference_precision, dtype)
        check_precision_here(self.inference_precision)
        self._place("cpu", PRECISIONS[self.inference_precision])
        ov = _import_openvino()
        self.xml_file = find_ir_file(ir_folder)
        self.source = source or str(ir_folder)
        tok_path = Path(tokenizer)
        st_folder = tok_path if (tok_path / "modules.json").is_file() else None

        core = ov.Core()
        model = core.read_model(str(self.xml_file))
        self.input_names = [port.get_any_name() for port in model.inputs]
        unknown = [n for n in self.input_names if n not in INPUT_NAMES]
        if unknown or "input_ids" not in self.input_names:
            raise ConfigError(
                f"{self.xml_file}: inputs {self.input_names}; need input_ids, attention_mask[, token_type_ids]"
            )
        out_shape = model.outputs[0].get_partial_shape()
        if out_shape.rank.is_dynamic or out_shape.rank.get_length() not in (2, 3):
            raise ConfigError(
                f"{self.xml_file}: output shape {out_shape}; need token embeddings [batch, seq, hidden] or pooled "
                "[batch, hidden]"
            )
        self.pooled_output = out_shape.rank.get_length() == 2  # an ONNX graph's pooled output, converted
        if self.pooled_output and pooling not in (None, "graph"):
            raise ConfigError(f"{self.xml_file}: the output is already pooled; pooling={pooling!r} cannot apply")
        hidden = out_shape[-1]
        self.embed_dim = hidden.get_length() if hidden.is_static else None
        self.quantized = any(op.get_type_name() == "FakeQuantize" for op in model.get_ops())
        self.threads = int(threads or cpu_threads())
        self.streams = int(streams or min(self.threads, DEFAULT_STREAMS))
        if self.streams < 1 or self.threads < 1:
            raise ConfigError(f"threads={threads} and streams={streams}: each must be >= 1")
        config = {
            "INFERENCE_PRECISION_HINT": self.inference_precision,
            "INFERENCE_NUM_THREADS": self.threads,
            "PERFORMANCE_HINT": "LATENCY" if self.streams == 1 else "THROUGHPUT",
            "NUM_STREAMS": self.streams,
        }
        self.compiled = core.compile_model(model, "CPU", config)
        self._queue = ov.AsyncInferQueue(self.compiled, self.streams)
        self._queue.set_callback(self._collect)
        self._outputs: dict[int, np.ndarray] = {}

        self.tokenizer = _Tokenizer(tokenizer)
        if max_seq_length is None:
            max_seq_length = (st_max_seq_length(st_folder) if st_folder else None) or self.tokenizer.model_max_length
        self.max_seq_length = int(max_seq_length or 512)
        if self.max_seq_length < 1:
            raise ConfigError(f"max_seq_length must be >= 1, got {max_seq_length}")
        self.pooling = (
            "graph"
            if self.pooled_output
            else check_pooling_mode(pooling or (st_pooling_mode(st_folder) if st_folder else None) or "mean")
        )
        self.normalize = bool(normalize) if normalize is not None else bool(st_folder and st_normalizes(st_folder))
        self.prompts = resolve_prompts(st_prompts(st_folder) if st_folder else {}, prompts, query_prompt)
        self.similarity: Similarity = similarity or (st_similarity(st_folder) if st_folder else "cosine")
        self.content_hash = hash_dict([hash_file(self.xml_file), hash_file(self.xml_file.with_suffix(".bin"))])
        self.name = name or (self.xml_file.parent.name if self.xml_file.name == "model.xml" else self.xml_file.stem)
        self.revision = revision or short(self.content_hash)

    def settings(self) -> dict[str, Any]:
        """Everything that changes a vector apart from text and role (hashed into ``fingerprint``)."""
        return {
            "backend": self.backend,
            "ir_sha256": self.content_hash,
            "inference_precision": self.inference_precision,
            "streams": self.streams,  # a batch's parts are run apart: the split can move the last bits
            "pooling": self.pooling,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "tokenizer": self.tokenizer.content,
            "tokenizer_kind": self.tokenizer.kind,
        }

    def describe(self) -> dict[str, Any]:
        """The base record plus the inference precision and whether the IR is int8-quantized."""
        return {
            **super().describe(),
            "inference_precision": self.inference_precision,
            "quantization": "int8-static" if self.quantized else None,
        }

    def token_lengths(self, texts: Sequence[str], *, role: Role) -> list[int] | None:
        """Each text's token count as the tokenizer makes it (the role's prompt in), untruncated."""
        return self.tokenizer.lengths(prompted_texts(list(texts), role, self.prompts))

    def thread_budget(self) -> dict[str, Any]:
        """OpenVINO's threads and streams as the compiled model reports them (``INFERENCE_NUM_THREADS``,
        ``NUM_STREAMS``; the configured values where it does not say)."""

        def read(key: str, configured: int) -> Any:
            try:
                value = self.compiled.get_property(key)
            except Exception:  # noqa: BLE001 - a plugin without that property: the configured value
                return configured
            return int(value) if isinstance(value, int) or str(value).isdigit() else str(value)

        return {
            "openvino": {
                "inference_num_threads": read("INFERENCE_NUM_THREADS", self.threads),
                "num_streams": read("NUM_STREAMS", self.streams),
            }
        }

    def _collect(self, request: Any, part: int) -> None:
        self._outputs[part] = np.array(request.get_output_tensor(0).data, dtype=np.float32)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One batch: split into ``streams`` parts (each padded to its longest), run in parallel, pooled."""
        parts = [[texts[i] for i in idx] for idx in np.array_split(np.arange(len(texts)), self.streams) if len(idx)]
        masks = []
        self._outputs.clear()
        for number, part in enumerate(parts):
            batch = self.tokenizer(part, self.max_seq_length, None)
            masks.append(batch["attention_mask"])
            self._queue.start_async({name: batch[name] for name in self.input_names}, number)
        self._queue.wait_all()
        pooled = [
            self._outputs[n] if self.pooled_output else pool(self._outputs[n], masks[n], self.pooling)
            for n in range(len(parts))
        ]
        vectors = np.concatenate(pooled)
        self._outputs.clear()
        return normalize_rows(vectors) if self.normalize else vectors

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Encode ``texts`` (the role's prompt prepended) in length-sorted batches."""
        texts = prompted_texts(texts, role, self.prompts)
        return encode_sorted(
            texts, self._encode_batch, batch_size=batch_size, show_progress=show_progress, dim=self.embed_dim
        )

    def __repr__(self) -> str:
        return (
            f"OpenVinoEncoder(name={self.name!r}, file={str(self.xml_file)!r}, "
            f"inference_precision={self.inference_precision!r})"
        )
