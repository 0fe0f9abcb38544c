"""The local engine: encoding in this process, on one device or sharded over several local devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from embedscope.engines.base import EngineSettings, register_engine
from embedscope.models.device import parse_dtype, resolve_devices


class LocalEngine(EngineSettings):
    """Encode in this process (the default); several devices (``cuda:0,cuda:1``) shard each call."""

    name: Literal["local"] = "local"

    def devices(self, spec: str | None) -> list[str]:
        return resolve_devices(spec)  # the one place a run's devices are resolved: handed down as placements

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        from embedscope.models.options import Placement, encoder_options
        from embedscope.models.specs import load_encoder

        load = encoder_options(options)
        placed = [load.replace(device=Placement(d, parse_dtype(load.dtype), d)) for d in devices]  # resolved once
        if len(devices) > 1:
            from embedscope.engines.devices import DeviceShards

            return DeviceShards([load_encoder(spec, one) for one in placed])
        one = placed[0]
        if cache_dir is None or not isinstance(spec, str):
            return load_encoder(spec, one)
        from embedscope.models.lazy import lazy_encoder

        return lazy_encoder(spec, load, devices[0], cache_dir, lambda: load_encoder(spec, one))


register_engine(LocalEngine)
