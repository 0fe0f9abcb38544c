"""Devices and precisions: what the ``device`` and ``dtype`` settings mean, checked before any model loads.

>>> parse_dtype("bf16"), parse_dtype(None)
('bfloat16', 'float32')
>>> parse_devices("cuda:0, cuda:1")
['cuda:0', 'cuda:1']
>>> device_kind("cuda:1"), device_kind("cpu")
('cuda', 'cpu')
>>> default_batch_size("cpu"), default_batch_size("cuda:0")
(32, 256)

``auto`` picks the best accelerator present (CUDA, then Apple MPS, else the CPU), as
sentence-transformers and mteb do. A device that is asked for but absent is a
:class:`DeviceUnavailableError` that says what the machine has.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

from embedscope.errors import ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")

DTYPES: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_DTYPE_SYNONYMS = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

CPU_BATCH_SIZE = 32  # MTEB's; the exact path on the CPU needs it
ACCELERATOR_BATCH_SIZE = 256


class DeviceUnavailableError(ConfigError):
    """A device was asked for that this machine (or this torch build) does not have."""


def parse_dtype(dtype: str | None) -> str:
    """The torch dtype name for ``fp32`` / ``fp16`` / ``bf16`` (``None`` → ``float32``, the exact path)."""
    if dtype is None:
        return "float32"
    key = str(dtype).strip().lower()
    key = _DTYPE_SYNONYMS.get(key, key)
    if key not in DTYPES:
        raise ConfigError(f"dtype {dtype!r}: use fp32 (exact, the default), fp16 or bf16")
    return DTYPES[key]


def short_dtype(dtype: str) -> str:
    """``float16`` → ``fp16`` (what results and tables show).

    >>> short_dtype("bfloat16")
    'bf16'
    """
    return {v: k for k, v in DTYPES.items()}.get(dtype, dtype)


def torch_dtype(dtype: str):  # -> torch.dtype
    """The ``torch.dtype`` for a dtype name such as ``float16``."""
    import torch

    return getattr(torch, parse_dtype(dtype))


def parse_devices(spec: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """One or several device names from ``cuda:0,cuda:1`` (or a list); each is checked for form only."""
    if spec is None:
        return ["auto"]
    parts = [p.strip().lower() for p in (spec.split(",") if isinstance(spec, str) else spec)]
    parts = [p for p in parts if p]
    if not parts:
        raise ConfigError("device: give auto, cpu, cuda, cuda:N or mps")
    for p in parts:
        if not _DEVICE.match(p):
            raise ConfigError(f"device {p!r}: use auto, cpu, cuda, cuda:N or mps (several: cuda:0,cuda:1)")
    if "auto" in parts and len(parts) > 1:
        raise ConfigError("device 'auto' stands alone; name the devices to use several (cuda:0,cuda:1)")
    return parts


def device_kind(device: str) -> str:
    """``cpu``, ``cuda`` or ``mps``: what the embedding cache keys on (vectors differ across kinds)."""
    return device.split(":", 1)[0]


def default_batch_size(device: str) -> int:
    """MTEB's 32 on the CPU (exactness against mteb needs it); larger on an accelerator."""
    return CPU_BATCH_SIZE if device_kind(device) == "cpu" else ACCELERATOR_BATCH_SIZE


def available_devices() -> list[str]:
    """The devices torch can use here, e.g. ``['cpu', 'cuda:0', 'cuda:1']``."""
    found = ["cpu"]
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return found
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def resolve_device(device: str | None = "auto") -> str:
    """A concrete device for ``device``: ``auto`` → ``cuda:0``, else ``mps``, else ``cpu``.

    ``cuda`` means ``cuda:0``. A device that is not here raises :class:`DeviceUnavailableError`.
    """
    (spec,) = parse_devices(device or "auto")
    if spec == "cpu":
        return "cpu"  # always here; no need to import torch to know it
    present = available_devices()
    if spec == "auto":
        return next((d for d in present if d != "cpu"), "cpu")
    if spec == "cuda":
        spec = "cuda:0"
    if spec in present:
        return spec
    raise DeviceUnavailableError(
        f"device {spec!r} is not available here; this machine has: {', '.join(present)}{_cuda_hint(spec)}"
    )


def resolve_devices(spec: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """:func:`resolve_device` for each of several devices (no device twice)."""
    devices = [resolve_device(d) for d in parse_devices(spec)]
    if len(set(devices)) != len(devices) and any(device_kind(d) != "cpu" for d in devices):
        raise ConfigError(f"devices {', '.join(devices)}: an accelerator is named twice")
    return devices


def _cuda_hint(spec: str) -> str:
    if device_kind(spec) != "cuda":
        return ""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return ""
    if torch.version.cuda is None:
        return f" (this torch {torch.__version__} is a CPU build)"
    return ""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an accelerator out-of-memory error (torch's or onnxruntime's)."""
    if type(error).__name__ == "OutOfMemoryError":
        return True
    text = str(error).lower()
    return isinstance(error, (RuntimeError, MemoryError)) and ("out of memory" in text or "failed to allocate" in text)


def free_accelerator_memory() -> None:
    """Give cached accelerator memory back after an out-of-memory error."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def with_oom_halving(run: Callable[[int], T], batch_size: int, *, what: str = "encoding") -> T:
    """``run(batch_size)``; on out-of-memory, halve the batch size and run again (down to 1).

    The batch size changes the batches, so a halved run is not bit-identical to the first try: a
    warning says so. Errors other than out-of-memory pass through.

    >>> calls = []
    >>> def run(bs):
    ...     calls.append(bs)
    ...     if bs > 8:
    ...         raise RuntimeError("CUDA out of memory")
    ...     return bs
    >>> with_oom_halving(run, 32), calls
    (8, [32, 16, 8])
    """
    size = batch_size
    while True:
        try:
            return run(size)
        except Exception as e:
            if not is_out_of_memory(e) or size <= 1:
                raise
            free_accelerator_memory()
            size //= 2
            logger.warning("%s ran out of accelerator memory; retrying with batch size %d", what, size)


def compute_device(model: object) -> str:
    """Where to score a model's outputs: its device (the first of several) when that is an
    accelerator present here, else the CPU (e.g. a Ray worker's GPU is not the driver's).

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> compute_device(KeywordEncoder(["a"]))
    'cpu'
    """
    device = str(getattr(model, "device", "cpu")).split(",")[0]
    if device_kind(device) == "cpu":
        return "cpu"
    return device if device in available_devices() else "cpu"


def free_memory_mb(device: str, share: float = 0.25) -> float | None:
    """``share`` of the accelerator's free memory in MB, or None on the CPU."""
    if device_kind(device) != "cuda":
        return None
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return free * share / 2**20
