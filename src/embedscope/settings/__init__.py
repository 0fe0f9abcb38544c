"""The settings of a run (one type, :class:`RunSettings`), where each value came from, and the config-file schemas.

- :mod:`~embedscope.settings.run`: :class:`RunSettings` (embedscope's config-file schema) and its resolved parts;
- :mod:`~embedscope.settings.sources`: layers (defaults < config file < flags) merged with provenance;
- :mod:`~embedscope.settings.files`: YAML/JSON config files, either schema;
- :mod:`~embedscope.settings.evalscope`: EvalScope's ``eval_config``;
- :mod:`~embedscope.settings.statistics`, :mod:`~embedscope.settings.screen`: the second option family, the
  statistics and the screen's options, declared as the run's are.
"""

from embedscope.settings.run import CustomTask, ModelEntry, ModelOptions, ModelRun, PipelineConfig, RunSettings
from embedscope.settings.screen import ScreenSettings
from embedscope.settings.sources import Layer, build_settings
from embedscope.settings.statistics import StatisticsSettings

__all__ = [
    "CustomTask",
    "Layer",
    "ModelEntry",
    "ModelOptions",
    "ModelRun",
    "PipelineConfig",
    "RunSettings",
    "ScreenSettings",
    "StatisticsSettings",
    "build_settings",
]
