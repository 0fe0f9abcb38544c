"""Where encoding runs: in this process (``local``), on several local devices, or on a Ray cluster.

>>> from embedscope.engines import EngineOptions
>>> EngineOptions(engine="local", device="cpu").validated().devices
['cpu']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.models.device import parse_devices, parse_dtype, resolve_devices

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """How and where to encode. ``device`` may name several devices (``cuda:0,cuda:1``)."""

    engine: str = "local"
    device: str | None = "auto"
    dtype: str | None = None
    ray_address: str | None = None
    ray_workers: int | None = None
    ray_gpus_per_worker: float | None = None

    @property
    def devices(self) -> list[str]:
        return parse_devices(self.device)

    def validated(self) -> EngineOptions:
        """Checked up front, before any model loads: engine name, dtype, devices present (locally)."""
        if self.engine not in ENGINES:
            raise ConfigError(f"engine {self.engine!r}: use {' or '.join(ENGINES)}")
        parse_dtype(self.dtype)
        if self.engine == "local":
            resolve_devices(self.device)
        else:
            if len(self.devices) > 1:
                raise ConfigError(
                    "with --engine ray, each worker uses one device: give --ray-gpus-per-worker "
                    "instead of several devices"
                )
            if self.ray_workers is not None and self.ray_workers < 1:
                raise ConfigError("--ray-workers must be >= 1")
        return self

    def model_options(self, options: dict[str, Any] | None) -> dict[str, Any]:
        """``options`` with this device (the first, for a single model) and dtype, unless they set their own."""
        merged = dict(options or {})
        merged.setdefault("device", self.devices[0])
        if self.dtype is not None:
            merged.setdefault("dtype", self.dtype)
        return merged

    def single_device(self) -> EngineOptions:
        return replace(self, device=self.devices[0])


def build_encoder(
    spec: Any, model_options: dict[str, Any] | None, engine: EngineOptions, cache_dir: str | Path | None = None
) -> Any:
    """An encoder for a model name/path on the chosen engine (cache not yet applied).

    With ``cache_dir`` (the embedding cache's folder), a local model that ran before is returned as
    a :class:`~embedscope.models.lazy.LazyEncoder`: it loads only if the cache lacks a vector.
    """
    from embedscope.models.specs import load_encoder

    engine = engine.validated()
    options = engine.model_options(model_options)
    if engine.engine == "ray":
        from embedscope.engines.ray_cluster import RayEncoder

        return RayEncoder(
            spec,
            options,
            address=engine.ray_address,
            workers=engine.ray_workers,
            gpus_per_worker=engine.ray_gpus_per_worker,
        )
    devices = resolve_devices((model_options or {}).get("device", engine.device))  # the model's own, else the run's
    del options["device"]
    if len(devices) == 1:
        if cache_dir is None or not isinstance(spec, str):
            return load_encoder(spec, device=devices[0], **options)
        from embedscope.models.lazy import lazy_encoder

        return lazy_encoder(
            spec, options, devices[0], cache_dir, lambda: load_encoder(spec, device=devices[0], **options)
        )
    from embedscope.engines.devices import DeviceShards

    return DeviceShards([load_encoder(spec, device=d, **options) for d in devices])
