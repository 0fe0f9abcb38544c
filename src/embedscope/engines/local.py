"""The local engine: encoding in this process, on one device or sharded over several local devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from embedscope.engines.base import EngineSettings, register_engine
from embedscope.models.device import resolve_devices


class LocalEngine(EngineSettings):
    """Encode in this process (the default); several devices (``cuda:0,cuda:1``) shard each call."""

    name: Literal["local"] = "local"

    def devices(self, spec: str | None) -> list[str]:
        return resolve_devices(spec)

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        from embedscope.models.specs import load_encoder

        if len(devices) > 1:
            from embedscope.engines.devices import DeviceShards

            return DeviceShards([load_encoder(spec, device=d, **options) for d in devices])
        if cache_dir is None or not isinstance(spec, str):
            return load_encoder(spec, device=devices[0], **options)
        from embedscope.models.lazy import lazy_encoder

        return lazy_encoder(
            spec, options, devices[0], cache_dir, lambda: load_encoder(spec, device=devices[0], **options)
        )


register_engine(LocalEngine)
