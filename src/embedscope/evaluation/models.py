"""The model of one run entry: built once from its resolved settings, and what results record about it.

A model given by name or path is loaded on the run's engine, with its devices resolved once and its dtype as the
settings parsed it; a pipeline spec becomes a :class:`~embedscope.retrieval.pipeline.Pipeline`; a model object the
caller holds is wrapped as it is. Encoders go behind the embedding cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from embedscope.engines import build_encoder
from embedscope.errors import ConfigError
from embedscope.models.api import API_OPTIONS, is_api_model
from embedscope.models.backends import backend
from embedscope.models.cache import EmbeddingCache, default_cache_dir, with_cache
from embedscope.models.device import short_dtype
from embedscope.models.exports import calibration_hash, calibration_sample
from embedscope.models.options import EncoderOptions, encoder_options
from embedscope.models.specs import load_encoder
from embedscope.settings.run import ModelRun, RunSettings
from embedscope.tasks.base import Task


class TaskCalibration:
    """A seeded sample of the texts a model's tasks encode (:func:`~embedscope.models.exports.calibration_sample`),
    gathered the first time a static-int8 export asks for it. Its ``str`` is the sample's hash, so the lazy
    encoder's identity key (which hashes the load options) follows the sample."""

    def __init__(self, tasks: Callable[[], Sequence[Task]]) -> None:
        self.tasks = tasks
        self._sample: list[str] | None = None

    def __call__(self) -> list[str]:
        if self._sample is None:
            from embedscope.compare.embeddings import task_texts

            texts = [
                text
                for task in self.tasks()
                for _, text in task_texts(task, RunSettings().search_options(show_progress=False))
            ]
            self._sample = calibration_sample(texts)
        return self._sample

    def __str__(self) -> str:
        return f"task-texts:{calibration_hash(self())}"


def _with_fast_path(
    load: EncoderOptions,
    entry: ModelRun,
    settings: RunSettings,
    cache: EmbeddingCache | None,
    tasks: list[Task] | None,
) -> EncoderOptions:
    """``load`` with what an exporting backend (its registry record has an ``export``) needs: the export folder (the
    cache folder's ``exports/``, also without ``--no-cache``) and, for one that calibrates with no calibration file,
    the tasks' own texts."""
    record = backend(load.backend) if load.backend is not None else None
    if record is None or record.export is None:
        return load
    load = load.replace(exports_dir=str(cache.directory if cache else settings.cache_dir or default_cache_dir()))
    if record.calibrates and load.calibration is None:
        from embedscope.evaluation.plan import entry_tasks

        load = load.replace(calibration_texts=TaskCalibration(lambda: entry_tasks(tasks, entry, settings)))
    return load


def _single(model: Any) -> Any:
    """A pipeline that is one dense retriever is its encoder (usable for every task type)."""
    dense = getattr(type(model), "dense_encoder", None)
    return (model.dense_encoder or model) if dense is not None else model


def build_model(
    entry: ModelRun, settings: RunSettings, cache: EmbeddingCache | None, tasks: list[Task] | None = None
) -> Any:
    """The encoder (cached) or pipeline of ``entry``; ``tasks``: the run's (None: the default suite), whose texts a
    static-int8 fast path calibrates on."""
    from embedscope.retrieval.pipeline import Pipeline, is_pipeline_spec, model_pipeline

    model = entry.model
    options = dict(entry.options)
    if settings.budget is not None:  # a run option that acts in an API model's encoder only (refused if not)
        options["budget"] = settings.budget
    if not isinstance(model, (str, Mapping)):
        _refuse_api_options(model, {"budget": options.pop("budget", None)})
        return _held_model(model, options, settings, cache)
    if isinstance(model, str) and is_api_model(model, options):
        return _api_model(model, options, settings, cache)
    _refuse_api_options(model, options)
    devices = settings.engine.devices(options.pop("device", None) or settings.device)  # resolved once, here
    dtype = options.pop("dtype", None) or settings.dtype  # parsed once, by the settings
    load = encoder_options(options, dtype=dtype)
    if isinstance(model, Mapping):
        return _single(Pipeline.build(**model, cache=cache, model_options={**load.given(), "device": devices[0]}))
    if is_pipeline_spec(model):
        return _single(model_pipeline(model, cache=cache, model_options={**load.given(), "device": devices[0]}))
    load = _with_fast_path(load, entry, settings, cache, tasks)
    encoder = build_encoder(model, load.given(), settings.engine, devices, cache.directory if cache else None)
    return with_cache(encoder, cache)


def _api_model(model: str, options: dict[str, Any], settings: RunSettings, cache: EmbeddingCache | None) -> Any:
    """A model behind an API: requested from this process (its own concurrency), no devices to resolve or shard."""
    if settings.engine.name != "local":
        raise ConfigError(
            f"engine {settings.engine.name}: {model} is a model behind an API, requested from this process: "
            "drop the engine"
        )
    options.pop("device", None)
    options["dtype"] = options.get("dtype") or settings.dtype
    return with_cache(load_encoder(model, **options), cache)


def _refuse_api_options(model: Any, options: Mapping[str, Any]) -> None:
    """A model that is not behind an API takes none of an API model's options (they would act nowhere)."""
    given = sorted(k for k in API_OPTIONS if options.get(k) is not None)
    if given:
        raise ConfigError(
            f"{', '.join(given)}: for models behind an API only (openai:NAME, cohere:NAME, voyage:NAME, or a model "
            f"name with api_base), not {_model_label(model)}"
        )
    for key in API_OPTIONS:
        options.pop(key, None)  # type: ignore[attr-defined]


def _model_label(model: Any) -> str:
    if isinstance(model, str):
        return model
    return "a pipeline" if isinstance(model, Mapping) else "a model object"


def _held_model(model: Any, options: dict[str, Any], settings: RunSettings, cache: EmbeddingCache | None) -> Any:
    """A model object the caller holds: a pipeline, a cross-encoder (a pipeline of that reranker) or an encoder."""
    from embedscope.models.wrap import as_encoder, is_cross_encoder
    from embedscope.retrieval.roles import model_roles

    if options:
        raise ConfigError("model_options apply only when the model is given by name or path")
    if is_cross_encoder(model):
        from embedscope.retrieval.cross_encoder import CrossEncoderReranker
        from embedscope.retrieval.pipeline import Pipeline, RerankStep

        model = Pipeline([], rerankers=[RerankStep(CrossEncoderReranker(model))])
    if "encoder" not in model_roles(model) and model_roles(model):
        return _single(model)
    return with_cache(as_encoder(model, fingerprint=settings.fingerprint), cache)


def model_meta(model: Any) -> dict[str, Any]:
    """What ``model_meta.json`` records about the encoder or pipeline (beside :func:`run_placement`)."""
    from embedscope.retrieval.roles import model_roles
    from embedscope.version import __version__

    if "encoder" not in model_roles(model):  # a pipeline describes its stages
        return {**model.describe(), "revision": model.revision, "embedscope_version": __version__}
    meta: dict[str, Any] = {
        "name": model.name,
        "revision": model.revision,
        "fingerprint": model.fingerprint,
        "similarity_fn_name": model.similarity,
        "prompts": dict(model.prompts),
        "embedscope_version": __version__,
    }
    inner = getattr(model, "encoder", model)
    for attr in ("backend", "pooling", "max_seq_length", "normalize", "embed_dim", "source", "export_key"):
        value = getattr(inner, attr, None)
        if isinstance(value, (str, int, float, bool)):
            meta[attr] = value
    return meta


def run_placement(model: Any) -> dict[str, Any]:
    """Where and how outputs were computed (device, dtype, engine), for ``model_meta.json`` and each result;
    a pipeline lists its stages'.

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> run_placement(KeywordEncoder(["a"]))
    {'device': 'cpu', 'dtype': 'fp32', 'engine': 'local'}
    """
    stages = getattr(type(model), "stage_models", None)
    if stages is not None:
        stage_placements = [run_placement(s) for s in model.stage_models() if hasattr(s, "device")]
        return {"stages": stage_placements} if stage_placements else {}
    inner = getattr(model, "encoder", model)
    describe = inner.describe() if hasattr(inner, "describe") else {}
    placed: dict[str, Any] = {
        "device": str(describe.get("device", getattr(inner, "device", "cpu"))),
        "dtype": short_dtype(str(describe.get("dtype", getattr(inner, "dtype", "float32")))),
        "engine": str(describe.get("engine", getattr(inner, "engine", "local"))),
    }
    export = getattr(inner, "export_key", None)
    if isinstance(export, str):  # a fast path (embedscope.models.exports): its backend and export, in every result
        placed["backend"] = str(describe.get("backend", getattr(inner, "backend", "")))
        placed["export_key"] = export
    return placed
