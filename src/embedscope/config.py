"""Config files (YAML or JSON), validated up front: unknown keys are rejected with the valid ones.

Two schemas are accepted.

embedscope's own::

    model: minilm                 # or models: [minilm, static-64]
    model_options: {pooling: mean, query_prompt: "query: "}
    tasks: [BBCNewsRetrieval, ./my_beir_folder]
    custom_tasks: [{name: MyTask, data_path: ./data, eval_splits: [test]}]
    output_folder: results
    top_k: 1000                   # with a reranker: the stage-1 candidates it reorders
    overwrite: only-missing
    pipeline:                     # or pipelines: [...]; evaluated next to the models
      retrievers: [bm25, {type: dense, model: minilm}]
      fusion: {method: rrf, k: 60}          # or wsum-min-max, {method: wsum, norm: zmuv, weights: [1, 2]}
      rerankers: [{type: cross-encoder, model: ./my-reranker, top_k: 100}]

EvalScope's ``eval_config``, optionally wrapped in ``{eval_backend: RAGEval, eval_config: …}``: its
schema and its translation into evaluation calls are in :mod:`embedscope.compat.evalscope`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from embedscope.errors import ConfigError

_STRICT = ConfigDict(extra="forbid")


class CustomTask(BaseModel):
    model_config = _STRICT
    name: str
    data_path: str
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

        try:
            return check_path_name(name, "task name")
        except ConfigError as e:
            raise ValueError(str(e)) from None


class PipelineConfig(BaseModel):
    """A retrieval pipeline: retriever(s), optional fusion, optional reranker(s).

    Stage entries are spec strings (``bm25:k1=1.2``) or mappings (``{type: bm25, k1: 1.2}``);
    their options are checked when the stage is built.
    """

    model_config = _STRICT
    name: str | None = None
    retriever: str | dict[str, Any] | None = None
    retrievers: list[str | dict[str, Any]] = Field(default_factory=list)
    fusion: str | dict[str, Any] | None = None
    reranker: str | dict[str, Any] | None = None
    rerankers: list[str | dict[str, Any]] = Field(default_factory=list)

    def spec(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`embedscope.retrieval.pipeline.Pipeline.build`."""
        retrievers = ([self.retriever] if self.retriever is not None else []) + list(self.retrievers)
        if not retrievers:
            raise ConfigError("pipeline: give 'retriever' (or a 'retrievers' list)")
        rerankers = ([self.reranker] if self.reranker is not None else []) + list(self.rerankers)
        return {"retrievers": retrievers, "fusion": self.fusion, "rerankers": rerankers, "name": self.name}


class NativeConfig(BaseModel):
    """embedscope's own schema."""

    model_config = _STRICT
    model: str | None = None
    models: list[str | dict[str, Any]] | None = None  # a mapping: {model: NAME, device: cuda:1, dtype: fp16, ...}
    pipeline: PipelineConfig | None = None
    pipelines: list[PipelineConfig] = Field(default_factory=list)
    model_options: dict[str, Any] = Field(default_factory=dict)
    tasks: list[str] = Field(default_factory=list)
    benchmark: str | None = None  # one of mteb's benchmarks, e.g. "MTEB(eng, v2)": its text tasks
    custom_tasks: list[CustomTask] = Field(default_factory=list)
    task_params: dict[str, Any] = Field(default_factory=dict)  # as --task-param, on every task whose type has it
    splits: list[str] | None = None  # evaluation splits instead of each task's own
    data_dir: str | None = None
    output_folder: str = "results"
    batch_size: int | None = None
    top_k: int = 1000
    overwrite: Literal["only-missing", "never", "always", "only-cache"] = "only-missing"
    save_predictions: bool = False
    cache: bool | str = True
    limits: int | None = None
    corpus_chunk_size: int = 50_000
    show_progress: bool = True
    device: str = "auto"  # per model: model_options.device
    dtype: Literal["fp32", "fp16", "bf16"] | None = None  # per model: model_options.dtype
    engine: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_workers: int | None = None
    ray_gpus_per_worker: float | None = None


def _valid_keys(model: type[BaseModel]) -> str:
    return ", ".join(sorted(model.model_fields))


def _validate(model: type[BaseModel], data: dict[str, Any], where: str) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                owner = _model_at(model, err["loc"][:-1])
                problems.append(
                    f"unknown key {loc!r} (Valid keys{' for ' + owner.__name__ if owner else ''}: "
                    f"{_valid_keys(owner or model)})"
                )
            else:
                problems.append(f"{loc}: {err['msg']}")
        raise ConfigError(f"{where}: {'; '.join(problems)}") from None


def _model_at(model: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the field at ``path`` (list indices skipped), for error messages."""
    import typing

    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *typing.get_args(annotation)]
        for c in list(candidates):
            candidates.extend(typing.get_args(c))
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return None
    return current


class Plan:
    """A validated config, turned into :func:`embedscope.evaluate` calls."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls

    def runs(self) -> Iterator[dict[str, Any]]:
        yield from self.calls


def custom_task_objects(custom: list[CustomTask]) -> list[Any]:
    from embedscope.tasks.custom import custom_task, task_type_of
    from embedscope.tasks.params import task_param_fields

    tasks = []
    for c in custom:
        extra: dict[str, Any] = task_param_fields(
            task_type_of(c.type), c.task_params(), where=f"custom task {c.name!r}: parameter"
        )
        if task_type_of(c.type) == "Retrieval":
            extra["ignore_identical_ids"] = c.ignore_identical_ids
        elif c.ignore_identical_ids:
            raise ConfigError(f"custom task {c.name!r}: ignore_identical_ids applies to retrieval tasks only")
        tasks.append(
            custom_task(
                c.data_path,
                type=c.type,
                name=c.name,
                eval_splits=tuple(c.eval_splits),
                columns=c.columns,
                main_score=c.main_score,
                **extra,
            )
        )
    return tasks


def _native_plan(cfg: NativeConfig) -> Plan:
    models: list[Any] = ([cfg.model] if cfg.model else []) + list(cfg.models or [])
    models += [p.spec() for p in ([cfg.pipeline] if cfg.pipeline else []) + list(cfg.pipelines)]
    if not models:
        models = ["minilm"]
    tasks: list[Any] = list(cfg.tasks) + custom_task_objects(cfg.custom_tasks)
    if cfg.benchmark:
        from embedscope.tasks.catalog import benchmark_specs

        tasks += benchmark_specs(cfg.benchmark)[0]
    common = cfg.model_dump(
        exclude={"model", "models", "pipeline", "pipelines", "tasks", "custom_tasks", "model_options", "benchmark"}
    )
    entries = [_model_entry(m, cfg.model_options) for m in models]
    if tasks:
        common["tasks"] = tasks
    return Plan([{"model": m, "model_options": options, **common} for m, options in entries])


def _model_entry(entry: Any, defaults: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """A ``models`` entry and its options: a name or pipeline spec with the shared ``model_options``,
    or a mapping ``{model: NAME, ...}`` whose other keys (device, dtype, pooling, …) override them."""
    if isinstance(entry, dict) and "model" in entry and "retrievers" not in entry:
        own = {k: v for k, v in entry.items() if k != "model"}
        return entry["model"], {**defaults, **own} or None
    if isinstance(entry, dict) and "retrievers" not in entry:
        raise ConfigError(f"models entry {entry}: a mapping needs 'model' (e.g. {{model: minilm, device: cuda:1}})")
    return entry, dict(defaults) or None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a dict (errors name the file and position)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"Config file {p} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not valid UTF-8 ({e.reason} at byte {e.start}); save the file as UTF-8") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except Exception as e:  # yaml.YAMLError carries the position in its text
        raise ConfigError(f"{p}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys to values")
    return data


def load_config(source: str | Path | dict[str, Any]) -> Plan:
    """Validate a config (file path or dict) and turn it into a plan of evaluation calls."""
    data = read_config_file(source) if isinstance(source, (str, Path)) else dict(source)
    where = str(source) if isinstance(source, (str, Path)) else "config"
    if "eval_config" in data or "eval" in data or "tool" in data:
        from embedscope.compat.evalscope import EvalScopeConfig, EvalScopeTaskConfig, evalscope_plan

        if "eval_config" in data:
            cfg = _validate(EvalScopeTaskConfig, data, where)
            return evalscope_plan(cfg.eval_config)  # type: ignore[attr-defined]
        return evalscope_plan(_validate(EvalScopeConfig, data, where))  # type: ignore[arg-type]
    return _native_plan(_validate(NativeConfig, data, where))  # type: ignore[arg-type]
