"""Encoder options: one typed object from the settings to the backend.

The settings (``ModelOptions.to_encoder_options()``) convert once into :class:`EncoderOptions`; :func:`load_encoder
<embedscope.models.specs.load_encoder>`, every backend's loader (:mod:`embedscope.models.backends`), the export cache,
the lazy encoder's identity and the fingerprint read it. Where a model is placed is a :class:`Placement`: the device
resolved once (``auto`` → the accelerator here) and the dtype parsed once, handed down to the backend.

>>> EncoderOptions(pooling="cls", dtype="bf16").given()
{'pooling': 'cls', 'dtype': 'bf16'}
>>> placed = Placement.resolve("cpu", "bf16")
>>> placed.device, placed.dtype, placed.batch_size
('cpu', 'bfloat16', 32)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.models.device import default_batch_size, parse_dtype, resolve_device

# set by the model's resolution (its alias or path), not by the user: never part of the options' identity
_RESOLVED = ("name", "source", "device")


@dataclass(frozen=True)
class Placement:
    """Where a model computes: a device present here (resolved once) and a torch dtype name (parsed once).
    ``requested`` is the device as asked (``auto`` lets a backend fall back to the CPU where its runtime has no
    accelerator provider)."""

    device: str
    dtype: str
    requested: str | None = None

    @classmethod
    def resolve(cls, device: str | Placement | None = "auto", dtype: str | None = None) -> Placement:
        """The placement of ``device`` (``auto``, ``cpu``, ``cuda:N``, ``mps``) and ``dtype`` (``fp32``/``fp16``/
        ``bf16``); a placement is kept as it is (only its dtype replaced when one is given)."""
        if isinstance(device, Placement):
            return device if dtype is None else dataclasses.replace(device, dtype=parse_dtype(dtype))
        return cls(resolve_device(device), parse_dtype(dtype), device)

    @property
    def batch_size(self) -> int:
        """The default batch size here (:func:`~embedscope.models.device.default_batch_size`)."""
        return default_batch_size(self.device)


def requested_device(device: str | Placement | None) -> str | None:
    """The device as the user asked for it (``auto`` lets a backend choose the CPU where its runtime must)."""
    return device.requested if isinstance(device, Placement) else device


@dataclass(frozen=True)
class EncoderOptions:
    """How a model given by name or path is loaded (every backend's options; a backend refuses the ones that cannot
    act on it). ``None`` is the model's own value.

    Attributes:
        backend: a registered backend name (:func:`~embedscope.models.backends.backend_names`); None: detected.
        pooling: pooling mode (``cls``, ``mean``, ``max``, ``lasttoken``, ``weightedmean``, ``mean_sqrt_len_tokens``).
        max_seq_length: truncation length in tokens.
        prompts: role (``query``/``document``) → prompt prepended to the text.
        query_prompt: prompt for queries only (EvalScope's ``prompt``).
        revision: hub revision (for a local model, the revision recorded in results).
        tokenizer: tokenizer path or hub id (backends that take one).
        normalize: force L2 normalisation on or off.
        output_name: ONNX graph output to use.
        device: ``auto`` (the best accelerator here), ``cpu``, ``cuda``, ``cuda:N``, ``mps``, or a :class:`Placement`.
        dtype: ``fp32`` (the exact path), ``fp16`` or ``bf16``.
        calibration: text file that calibrates a statically quantized fast path (``openvino-int8``).
        calibration_texts: the texts to sample for calibration when no file is given (the run's own tasks').
        exports_dir: the cache folder whose ``exports/`` holds fast-path exports (default ``~/.cache/embedscope``).
        name, source: what the model's resolution (alias, path, hub id) files it under and where it came from.
    """

    backend: str | None = None
    pooling: str | None = None
    max_seq_length: int | None = None
    prompts: Mapping[str, str] | None = None
    query_prompt: str | None = None
    revision: str | None = None
    tokenizer: str | Path | None = None
    normalize: bool | None = None
    output_name: str | None = None
    device: str | Placement | None = "auto"
    dtype: str | None = None
    calibration: str | None = None
    calibration_texts: Callable[[], Sequence[str]] | None = field(default=None, compare=False)
    exports_dir: str | Path | None = None
    name: str | None = None
    source: str | None = None

    def given(self) -> dict[str, Any]:
        """The options that are set, the device and the resolution's name and source apart: what identifies a
        load of one model (the lazy encoder's identity key hashes it)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _RESOLVED and getattr(self, f.name) is not None
        }

    def replace(self, **changes: Any) -> EncoderOptions:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def placement(self) -> Placement:
        """The device resolved and the dtype parsed (once: a placement stays as it is)."""
        return Placement.resolve(self.device, self.dtype)

    def common(self) -> dict[str, Any]:
        """The keyword arguments every backend's encoder class takes (its own options apart)."""
        return {
            "name": self.name,
            "revision": self.revision,
            "prompts": dict(self.prompts) if self.prompts is not None else None,
            "query_prompt": self.query_prompt,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "source": self.source,
            "device": self.device,
            "dtype": self.dtype,
        }


def encoder_options(options: EncoderOptions | Mapping[str, Any] | None = None, **given: Any) -> EncoderOptions:
    """``options`` (an :class:`EncoderOptions` or a mapping of its fields) with ``given`` on top; an unknown key is a
    TypeError naming it."""
    if options is None:
        return EncoderOptions(**given)
    if isinstance(options, EncoderOptions):
        return options.replace(**given) if given else options
    return EncoderOptions(**{**options, **given})
