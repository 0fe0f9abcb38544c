"""The settings of a run (one type, :class:`RunSettings`), where each value came from, and the config-file schemas.

- :mod:`~embedscope.settings.run`: :class:`RunSettings` (embedscope's config-file schema) and its resolved parts;
- :mod:`~embedscope.settings.sources`: layers (defaults < config file < flags) merged with provenance;
- :mod:`~embedscope.settings.files`: YAML/JSON config files, either schema;
- :mod:`~embedscope.settings.evalscope`: EvalScope's ``eval_config``.
"""

from embedscope.settings.run import CustomTask, ModelEntry, ModelOptions, ModelRun, PipelineConfig, RunSettings
from embedscope.settings.sources import Layer, build_settings

__all__ = [
    "CustomTask",
    "Layer",
    "ModelEntry",
    "ModelOptions",
    "ModelRun",
    "PipelineConfig",
    "RunSettings",
    "build_settings",
]
