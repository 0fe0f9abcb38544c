"""Where encoding runs: in this process (``local``), on several local devices, or on a Ray cluster.

Each engine is one module with its settings model (see :mod:`embedscope.engines.base`); this package's
:func:`build_encoder` hands a model to the chosen one.

>>> from embedscope.engines.local import LocalEngine
>>> LocalEngine().devices("cpu")
['cpu']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedscope.engines.base import EngineSettings, engine_names, engine_settings, register_engine

__all__ = ["EngineSettings", "build_encoder", "engine_names", "engine_settings", "register_engine"]


def build_encoder(
    spec: Any, options: dict[str, Any], engine: EngineSettings, devices: list[str], cache_dir: Path | None = None
) -> Any:
    """An encoder for a model name/path on ``engine`` and its resolved ``devices`` (cache not yet applied).

    With ``cache_dir`` (the embedding cache's folder), a local model that ran before may be returned as
    a :class:`~embedscope.models.lazy.LazyEncoder`: it loads only if the cache lacks a vector.
    """
    return engine.build(spec, {k: v for k, v in options.items() if k != "device"}, devices, cache_dir)
