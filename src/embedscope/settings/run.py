"""The one settings type of a run: every option, checked once, whether it came from flags, a file or ``evaluate()``.

:class:`RunSettings` is embedscope's config-file schema as it is (``model``/``models``, ``pipeline``/``pipelines``,
``model_options``, ``tasks`` …); the command line, EvalScope's schema (:mod:`embedscope.settings.evalscope`) and
:func:`embedscope.evaluate` build the same object through :func:`embedscope.settings.sources.build_settings`, which
records where each value came from. Everything downstream receives its resolved parts (:meth:`RunSettings.runs`):
the devices resolved once, the dtype parsed once, the batch size's default worked out once.

>>> s = RunSettings.model_validate({"models": ["minilm", {"model": "static-64", "device": "cpu"}], "limits": 5})
>>> [(r.model, r.options.get("device")) for r in s.model_runs()]
[('minilm', None), ('static-64', 'cpu')]
>>> RunSettings.model_validate({"engine": "ray", "ray_workers": 2}).engine.workers
2
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PositiveInt,
    SerializeAsAny,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from embedscope.engines.base import EngineSettings, engine_names, engine_settings
from embedscope.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "minilm"
OverwriteName = Literal["only-missing", "never", "always", "only-cache"]


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, PurePath) else value


Folder = Annotated[str, BeforeValidator(_as_text)]  # a folder or file path, given as text or a Path


def _strict(arbitrary_types_allowed: bool = False) -> ConfigDict:
    return ConfigDict(extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=arbitrary_types_allowed)


_NON_FINITE = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def check_finite_tree(value: Any, where: str = "") -> Any:
    """``value`` when every number inside it (strings such as ``"nan"`` too) is finite; else a ValueError naming
    where inside it.

    >>> check_finite_tree({"a": [1, 2.5]})
    {'a': [1, 2.5]}
    >>> check_finite_tree({"weights": [1, float("nan")]})
    Traceback (most recent call last):
    ValueError: weights[1] = nan is not a finite number
    """
    if (isinstance(value, float) and not math.isfinite(value)) or (
        isinstance(value, str) and value.strip().lower() in _NON_FINITE
    ):
        raise ValueError(f"{where or 'value'} = {value} is not a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            check_finite_tree(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite_tree(v, f"{where}[{i}]")
    return value


class ModelOptions(BaseModel):
    """How a model given by name or path is loaded (:func:`~embedscope.models.specs.load_encoder`'s options)."""

    model_config = _strict()
    backend: str | None = None
    pooling: str | None = None
    max_seq_length: PositiveInt | None = None
    query_prompt: str | None = None
    prompts: dict[str, str] | None = None
    tokenizer: str | None = None
    revision: str | None = None
    normalize: bool | None = None
    output_name: str | None = None
    device: str | None = None
    dtype: str | None = None
    calibration: str | None = None  # texts that calibrate --backend openvino-int8 (default: a sample of the tasks')

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        from embedscope.models.specs import normalize_backend

        return normalize_backend(value) if value is not None else None

    @field_validator("pooling")
    @classmethod
    def _pooling(cls, value: str | None) -> str | None:
        from embedscope.models.pooling import check_pooling_mode

        return check_pooling_mode(value) if value is not None else None

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        from embedscope.models.device import parse_devices

        return ",".join(parse_devices(value)) if value is not None else None

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        from embedscope.models.device import parse_dtype, short_dtype

        return short_dtype(parse_dtype(value)) if value is not None else None

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str | None) -> str | None:
        from embedscope.results.store import check_path_name

        return check_path_name(value, "revision") if value is not None else None

    def given(self) -> dict[str, Any]:
        """The options that are set."""
        return self.model_dump(exclude_none=True)


MODEL_OPTION_KEYS = tuple(ModelOptions.model_fields)


class ModelEntry(ModelOptions):
    """One ``models`` entry given as a mapping: ``{model: NAME, device: cuda:1, pooling: cls, …}``; ``tasks``
    limits it to some of the run's tasks (EvalScope's per-task prompts use this)."""

    model_config = _strict(arbitrary_types_allowed=True)
    model: Any
    tasks: list[Any] | None = None
    batch_size: PositiveInt | None = None

    @model_validator(mode="before")
    @classmethod
    def _needs_model(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "model" not in data:
            raise ValueError("a models entry given as a mapping needs 'model' (e.g. {model: minilm, device: cuda:1})")
        return data


class PipelineConfig(BaseModel):
    """A retrieval pipeline: retriever(s), optional fusion, optional reranker(s).

    Stage entries are spec strings (``bm25:k1=1.2``) or mappings (``{type: bm25, k1: 1.2}``); their options are
    checked, by type, when the stage is built.
    """

    model_config = _strict()
    name: str | None = None
    retriever: str | dict[str, Any] | None = None
    retrievers: list[str | dict[str, Any]] = Field(default_factory=list)
    fusion: str | dict[str, Any] | None = None
    reranker: str | dict[str, Any] | None = None
    rerankers: list[str | dict[str, Any]] = Field(default_factory=list)
    tasks: list[Any] | None = None  # only these of the run's tasks

    @field_validator("retriever", "retrievers", "reranker", "rerankers", "fusion")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return check_finite_tree(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        from embedscope.results.store import check_path_name

        return check_path_name(value, "pipeline name") if value is not None else None

    @model_validator(mode="after")
    def _has_a_stage(self) -> PipelineConfig:
        if self.retriever is None and not self.retrievers and self.reranker is None and not self.rerankers:
            raise ValueError("a pipeline needs 'retriever' (or a 'retrievers' list) or a reranker")
        return self

    def spec(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`embedscope.retrieval.pipeline.Pipeline.build`."""
        retrievers = ([self.retriever] if self.retriever is not None else []) + list(self.retrievers)
        rerankers = ([self.reranker] if self.reranker is not None else []) + list(self.rerankers)
        return {"retrievers": retrievers, "fusion": self.fusion, "rerankers": rerankers, "name": self.name}


class ChunkingSettings(BaseModel):
    """How retrieval documents become passages (:class:`embedscope.data.documents.ChunkOptions`): ``method`` tokens
    (sentence-aware token windows), paragraphs, fastbook-reference or a fastbook paragraph strategy
    (fastbook-paragraphs-a … -f). A task whose relevance names documents is scored per document, by its best
    passage; a QA task whose relevance is context strings is scored per passage, relevance recomputed by substring.
    """

    model_config = _strict()
    method: str = "tokens"
    chunk_size: PositiveInt = 500
    overlap: Annotated[int, Field(ge=0)] | None = None
    tokenizer: str = "cl100k_base"
    paragraphs: PositiveInt = 1
    keep_headers: bool = True
    stop_at: str | None = "## Questionnaire"

    @model_validator(mode="after")
    def _valid(self) -> ChunkingSettings:
        try:
            self.options()
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self

    def options(self) -> Any:
        """The data layer's :class:`~embedscope.data.documents.ChunkOptions`."""
        from embedscope.data.documents import ChunkOptions

        return ChunkOptions(**self.model_dump())

    def record(self) -> dict[str, Any]:
        """Every option written out (defaults included), so equal chunkings record equally."""
        return self.model_dump()


class CustomTask(BaseModel):
    """A task over the user's own files (``custom_tasks`` entries of both schemas)."""

    model_config = _strict()
    name: str
    data_path: Folder
    eval_splits: list[str] = Field(default_factory=lambda: ["test"])
    main_score: str | None = None  # the type's main score (ndcg_at_10 for retrieval)
    ignore_identical_ids: bool = False
    columns: dict[str, str] | None = None
    type: str = "Retrieval"  # embedscope extension: STS, PairClassification, Classification, ...
    # protocol parameters, checked per type (embedscope.tasks.params)
    samples_per_label: int | None = None
    n_experiments: int | None = None
    max_document_to_embed: int | str | None = None
    max_fraction_of_documents_to_embed: float | str | None = None
    group_sets: str | None = None  # clustering: the column grouping rows into mteb's legacy sets
    legacy: bool | None = None
    k: list[int] | int | str | None = None
    top_k: int | None = None

    def task_params(self) -> dict[str, Any]:
        """The protocol parameters this entry sets."""
        names = (
            "samples_per_label",
            "n_experiments",
            "max_document_to_embed",
            "max_fraction_of_documents_to_embed",
            "group_sets",
            "legacy",
            "k",
            "top_k",
        )
        return {n: getattr(self, n) for n in names if n in self.model_fields_set}

    @field_validator("name")
    @classmethod
    def _file_name(cls, name: str) -> str:
        """The name names the result file: no path separators, '..' or absolute paths."""
        from embedscope.results.store import check_path_name

        return check_path_name(name, "task name")

    def task(self) -> Any:
        """The task object."""
        from embedscope.tasks.custom import custom_task, task_type_of
        from embedscope.tasks.params import task_param_fields

        kind = task_type_of(self.type)
        extra: dict[str, Any] = task_param_fields(
            kind, self.task_params(), where=f"custom task {self.name!r}: parameter"
        )
        if kind == "Retrieval":
            extra["ignore_identical_ids"] = self.ignore_identical_ids
        elif self.ignore_identical_ids:
            raise ConfigError(f"custom task {self.name!r}: ignore_identical_ids applies to retrieval tasks only")
        return custom_task(
            self.data_path,
            type=self.type,
            name=self.name,
            eval_splits=tuple(self.eval_splits),
            columns=self.columns,
            main_score=self.main_score,
            **extra,
        )


def _entry_kind(entry: Any) -> str:
    if isinstance(entry, PipelineConfig) or (
        isinstance(entry, Mapping) and any(k in entry for k in ("retriever", "retrievers", "reranker", "rerankers"))
    ):
        return "~pipeline"
    return "~options" if isinstance(entry, (Mapping, ModelEntry)) else "~model"


# a ``models`` entry: a pipeline mapping, a mapping with its own options, or a name, path or model object
ModelsEntry = Annotated[
    Annotated[PipelineConfig, Tag("~pipeline")]
    | Annotated[ModelEntry, Tag("~options")]
    | Annotated[Any, Tag("~model")],
    Discriminator(_entry_kind),
]
ENTRY_TAGS = {"~pipeline": PipelineConfig, "~options": ModelEntry, "~model": None}  # tag → the entry's model


def _engine_from_input(data: dict[str, Any]) -> dict[str, Any]:
    """``engine: NAME`` (or a mapping) with the flat ``NAME_FIELD`` keys folded into ``engine``; a flat key of an
    engine that is not the chosen one is an error (it would have no effect)."""
    engine = data.get("engine", "local")
    if isinstance(engine, EngineSettings):
        return data
    chosen = dict(engine) if isinstance(engine, Mapping) else {"name": engine}
    chosen.setdefault("name", "local")
    name = str(chosen["name"])
    for key in list(data):
        prefix = next((e for e in engine_names() if key.startswith(f"{e}_")), None)
        if prefix is None:
            continue
        if prefix != name:
            raise ValueError(f"{key} applies to engine {prefix!r} only, and this run's engine is {name!r}")
        chosen[key.removeprefix(f"{prefix}_")] = data.pop(key)
    data["engine"] = chosen
    return data


class RunSettings(BaseModel):
    """Everything a run is asked to do (embedscope's config-file schema; see the module docstring).

    Examples:
        >>> from embedscope import RunSettings
        >>> settings = RunSettings(model="minilm", tasks=["LeeDocumentSimilarity"], limits=10)
        >>> settings.limits, settings.top_k, settings.output_folder
        (10, 1000, 'results')
        >>> RunSettings(limits=0)
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for RunSettings
        ...
    """

    model_config = _strict(arbitrary_types_allowed=True)

    # models: names/paths, mappings with their own options, pipelines, or model objects (evaluate() only)
    model: Any = None
    models: list[ModelsEntry] | None = None
    pipeline: PipelineConfig | None = None
    pipelines: list[PipelineConfig] = Field(default_factory=list)
    model_options: ModelOptions = Field(default_factory=ModelOptions)
    fingerprint: str | None = None  # for a model object embedscope cannot fingerprint itself
    # tasks
    tasks: list[Any] = Field(default_factory=list)
    benchmark: str | None = None  # one of mteb's benchmarks, e.g. "MTEB(eng, v2)": its text tasks
    custom_tasks: list[CustomTask] = Field(default_factory=list)
    task_types: list[str] | None = None  # keep the tasks of these types (as `embedscope tasks --type`)
    languages: list[str] | None = None  # keep the tasks in these languages (ISO 639-3, as `--language`)
    task_params: dict[str, Any] = Field(default_factory=dict)  # as --task-param, on every task whose type has it
    splits: list[str] | None = None  # evaluation splits instead of each task's own
    data_dir: Folder | None = None
    # where and how to encode
    device: str = "auto"  # per model: models[].device or model_options.device
    dtype: str | None = None  # per model: models[].dtype or model_options.dtype
    batch_size: PositiveInt | None = None  # default: 32 on the CPU (MTEB's, the exact path), 256 on an accelerator
    engine: SerializeAsAny[EngineSettings] = Field(default_factory=lambda: engine_settings("local").model_validate({}))
    # search
    top_k: PositiveInt = 1000
    corpus_chunk_size: PositiveInt = 50_000
    limits: PositiveInt | None = None
    filter_field: str | None = None  # each query searches only documents whose metadata field equals its own
    # dense retrieval post-processing, on the vectors as encoded (embedscope.retrieval.compression / .ann)
    truncate_dim: PositiveInt | None = None  # the first d dimensions (Matryoshka)
    precision: Literal["fp32", "int8", "binary"] = "fp32"  # int8 / binary (sign) quantization of the vectors
    rescore_multiplier: PositiveInt | None = None  # int8/binary: rescore the top r × top_k with the float query
    index: dict[str, Any] | None = None  # an approximate index: {type: hnsw, M: 32, ef_search: 64} or "hnsw:M=32"
    # documents → passages before retrieval (a sweep axis: chunking.chunk_size: [100, 500, 2000])
    chunking: ChunkingSettings | None = None
    latency_sample: PositiveInt | None = None  # time N sampled queries one at a time (p50/p95; scores unchanged)
    # results and caches
    output_folder: Folder = "results"
    overwrite: OverwriteName = "only-missing"
    save_predictions: bool = False
    cache: bool = True
    cache_dir: Folder | None = None
    show_progress: bool = True
    verbosity: int | None = Field(default=None, ge=0, le=3)  # EvalScope's: 0 errors only … 3 debug

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if isinstance(data.get("cache"), (str, Path)):  # `cache: FOLDER` is the cache folder
            data["cache_dir"], data["cache"] = str(data["cache"]), True
        return _engine_from_input(data)

    @field_validator("model")
    @classmethod
    def _one_model(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple, set, bool, int, float)):
            raise ValueError("give one model name or path (several go under 'models')")
        return value

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: Any) -> Any:
        if isinstance(value, EngineSettings):
            return value
        return engine_settings(str(value.get("name", "local"))).model_validate(value)

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        from embedscope.models.device import parse_devices

        return ",".join(parse_devices(value))

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        return ModelOptions._dtype(value)

    @field_validator("output_folder")
    @classmethod
    def _output_folder(cls, value: str) -> str:
        if not str(value).strip():
            raise ValueError("an empty output folder: name a folder (e.g. results)")
        return value

    @field_validator("task_params")
    @classmethod
    def _task_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_finite_tree(value)

    @field_validator("rescore_multiplier")
    @classmethod
    def _rescore(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("precision", "fp32") == "fp32":
            raise ValueError("it rescores int8 or binary search: set the precision to int8 or binary too")
        return value

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, value: Any, info: ValidationInfo) -> dict[str, Any] | None:
        """Every option written out (defaults included), so equal indexes record equally; exact search is None."""
        from embedscope.retrieval.ann import ExactIndex, parse_index

        if value is None:
            return None
        spec = parse_index(check_finite_tree(value))
        if isinstance(spec, ExactIndex):
            return None
        precision = info.data.get("precision", "fp32")
        if precision != "fp32":
            raise ValueError(f"index {spec.type} searches fp32 vectors, and the precision is {precision}")
        return spec.model_dump()

    @field_validator("latency_sample")
    @classmethod
    def _latency(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("precision", "fp32") != "fp32":
            raise ValueError("per-query latency is measured for fp32 dense search (exact or an index): drop precision")
        if value is not None and info.data.get("filter_field") is not None:
            raise ValueError("per-query latency is not measured with filter_field: drop one of them")
        return value

    def dense_post_processing(self) -> dict[str, Any]:
        """The dense post-processing settings that depart from MTEB's exact fp32 search (empty when none)."""
        values = {
            "truncate_dim": self.truncate_dim,
            "precision": None if self.precision == "fp32" else self.precision,
            "rescore_multiplier": self.rescore_multiplier,
            "index": self.index,
        }
        return {k: v for k, v in values.items() if v is not None}

    def retrieval_settings(self) -> dict[str, Any]:
        """The retrieval settings that change a score apart from the model's: dense post-processing and chunking
        (each result records them, and they name the result's experiments folder)."""
        chunking = {"chunking": self.chunking.record()} if self.chunking is not None else {}
        return {**self.dense_post_processing(), **chunking}

    # -- resolved parts ------------------------------------------------------------------------

    def model_runs(self) -> list[ModelRun]:
        """One :class:`ModelRun` per model or pipeline, each with its options (run-wide ones under its own)."""
        given: list[Any] = ([self.model] if self.model is not None else []) + list(self.models or [])
        given += [p for p in ([self.pipeline] if self.pipeline else []) + list(self.pipelines)]
        if not given:
            given = [DEFAULT_MODEL]
        shared = self.model_options.given()
        runs = []
        for entry in given:
            if isinstance(entry, PipelineConfig):
                runs.append(ModelRun(entry.spec(), dict(shared), entry.tasks))
            elif isinstance(entry, ModelEntry):
                own = entry.model_dump(exclude_none=True, exclude={"model", "tasks", "batch_size"})
                runs.append(ModelRun(entry.model, {**shared, **own}, entry.tasks, entry.batch_size))
            else:
                runs.append(ModelRun(entry, dict(shared), None))
        return runs

    def task_specs(self) -> list[Any] | None:
        """The tasks asked for (names, folders, task objects), or None for the default suite."""
        tasks: list[Any] = list(self.tasks) + [c.task() for c in self.custom_tasks]
        if self.benchmark:
            from embedscope.tasks.catalog import benchmark_specs

            specs, missing = benchmark_specs(self.benchmark)
            if missing:
                logger.warning(
                    "%s: %d task(s) are not text tasks embedscope runs, left out: %s",
                    self.benchmark,
                    len(missing),
                    ", ".join(missing[:8]) + (" …" if len(missing) > 8 else ""),
                )
            if not specs:
                raise ConfigError(f"{self.benchmark}: none of its tasks is a text task embedscope runs")
            tasks += specs
        return tasks or None


@dataclass(frozen=True)
class ModelRun:
    """One model of a run and its options (``load_encoder``'s: pooling, prompts, device, dtype …)."""

    model: Any
    options: dict[str, Any]
    tasks: list[Any] | None = None
    batch_size: int | None = None  # its own; else the run's


def flag_keys() -> Sequence[str]:
    """The top-level settings keys, and each engine's flat ``NAME_FIELD`` keys."""
    keys = [k for k in RunSettings.model_fields if k != "engine"] + ["engine"]
    for name in engine_names():
        keys += [f"{name}_{f}" for f in engine_settings(name).model_fields if f != "name"]
    return keys
