"""EvalScope's ``eval_config`` schema (its RAGEval/MTEB tool) as a settings layer: exactly EvalScope's keys, each acted on.

Current keys (EvalScope 1.14): ``models`` (``model_name_or_path``, ``is_cross_encoder``, ``pooling_mode``,
``max_seq_length``, ``prompt``, ``prompts``, ``model_kwargs``, ``config_kwargs``, ``encode_kwargs``, ``hub``; an API
model's ``model_name``, ``api_base``, ``api_key`` and ``dimensions``: ``openai:NAME`` behind that base URL, its
``encode_kwargs.batch_size`` the texts per request), ``eval.task_names``, ``eval.task_types`` and ``eval.languages`` (filters, as
``mteb.get_tasks``), ``eval.custom_tasks``, ``output_folder``, ``overwrite_results``, ``limits``, ``hub``, ``top_k``,
``verbosity``, ``encode_kwargs``. Legacy keys: ``model``, ``eval.tasks``, ``eval.dataset_path``, ``topk``. Optionally
wrapped in ``{eval_backend: RAGEval, eval_config: …}``.

EvalScope's ``top_k`` sizes the stage-1 candidate list of a two-stage run (a second model with
``is_cross_encoder: true``); a one-stage run keeps MTEB's top 1000, as EvalScope's does, so ``top_k`` does not change
one-stage metrics. ``hub: modelscope`` is accepted for local models and data only (nothing is downloaded from
ModelScope). Per-task ``prompts`` split a model into one entry per prompt, each with its tasks.

>>> layer = evalscope_layer({"eval_config": {"models": [{"model_name_or_path": "minilm"}],
...                                          "eval": {"task_names": ["BBCNewsRetrieval"], "limits": 5}}}, "c.json")
>>> layer.values["models"], layer.values["limits"], layer.values["overwrite"]
(['minilm'], 5, 'always')
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, SecretStr, ValidationError

from embedscope.errors import ConfigError
from embedscope.settings.run import CustomTask
from embedscope.settings.sources import Layer, _one_line, _owner_fields, _problem

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
Hub = Literal["modelscope", "huggingface"]
_DTYPES = {"auto": None, "float32": None, "float16": "fp16", "bfloat16": "bf16"}


class EncodeKwargs(BaseModel):
    """EvalScope's ``encode_kwargs`` (sentence-transformers' ``encode`` keywords it passes on)."""

    model_config = _STRICT
    batch_size: PositiveInt | None = None
    show_progress_bar: bool | None = None


class ModelKwargs(BaseModel):
    """EvalScope's ``model_kwargs``: the model's precision."""

    model_config = _STRICT
    torch_dtype: Literal["auto", "float32", "float16", "bfloat16"] | None = None
    dtype: Literal["auto", "float32", "float16", "bfloat16"] | None = None


class EvalScopeModel(BaseModel):
    """One entry of EvalScope's ``models`` (or legacy ``model``) list."""

    model_config = _STRICT
    model_name_or_path: str | None = None
    is_cross_encoder: bool = False
    pooling_mode: str | None = None
    max_seq_length: PositiveInt | None = None
    prompt: str | None = None
    prompts: dict[str, str] | None = None
    model_kwargs: ModelKwargs = Field(default_factory=ModelKwargs)
    config_kwargs: dict[str, Any] = Field(default_factory=dict)
    encode_kwargs: EncodeKwargs = Field(default_factory=EncodeKwargs)
    hub: Hub | None = None
    model_name: str | None = None
    api_base: str | None = None
    api_key: SecretStr | None = None  # shown masked, never recorded
    dimensions: int | None = None


class EvalScopeEval(BaseModel):
    model_config = _STRICT
    task_names: list[str] | None = None
    tasks: list[str] | None = None  # legacy
    task_types: list[str] | None = None
    languages: list[str] | None = None
    custom_tasks: list[CustomTask] = Field(default_factory=list)
    dataset_path: str | None = None  # legacy, with tasks: [CustomRetrieval]
    output_folder: str = "outputs"
    overwrite_results: bool = True
    limits: PositiveInt | None = None
    hub: Hub | None = None
    top_k: PositiveInt | None = None
    topk: PositiveInt | None = None  # legacy spelling
    verbosity: int | None = Field(default=None, ge=0, le=3)
    encode_kwargs: EncodeKwargs = Field(default_factory=EncodeKwargs)


class EvalScopeConfig(BaseModel):
    model_config = _STRICT
    tool: str = "MTEB"
    models: list[EvalScopeModel] | None = None
    model: list[EvalScopeModel] | None = None  # legacy
    eval: EvalScopeEval = Field(default_factory=lambda: EvalScopeEval())


class EvalScopeTaskConfig(BaseModel):
    model_config = _STRICT
    eval_backend: Literal["RAGEval", "rag_eval", "rageval"] = "RAGEval"
    eval_config: EvalScopeConfig
    work_dir: str | None = None


def _validate(data: dict[str, Any], label: str) -> tuple[EvalScopeConfig, str]:
    """The validated config and the key path its ``eval_config`` sits at ("" when bare)."""
    wrapped = "eval_config" in data
    schema: type[BaseModel] = EvalScopeTaskConfig if wrapped else EvalScopeConfig
    try:
        cfg = schema.model_validate(data)
    except ValidationError as e:
        problems = [
            _problem(err, lambda path: f"{label}: {path}", lambda loc: _owner_fields(schema, loc[:-1]))
            for err in e.errors()
        ]
        raise _one_line(problems) from None
    if isinstance(cfg, EvalScopeTaskConfig):
        if cfg.work_dir is not None and not cfg.work_dir.strip():
            raise ConfigError(f"{label}: work_dir: empty; give a folder (the run's configuration and log go there)")
        return cfg.eval_config, "eval_config."
    assert isinstance(cfg, EvalScopeConfig)
    return cfg, ""


def _is_local(spec: str) -> bool:
    from embedscope.models.specs import ALIASES

    return spec.strip().lower() in ALIASES or Path(spec).expanduser().exists()


def _is_api(m: EvalScopeModel) -> bool:
    return bool(m.api_base or m.api_key or m.model_name or m.dimensions is not None)


def _api_model(m: EvalScopeModel, where: str) -> tuple[str, dict[str, Any]]:
    """EvalScope's API model (``model_name`` — else ``model_name_or_path`` — ``api_base``, ``api_key``,
    ``dimensions``) as ``openai:NAME`` with its options; its ``encode_kwargs.batch_size`` is texts per request."""
    name = m.model_name or m.model_name_or_path
    if not name:
        raise ConfigError(f"{where}: an API model needs 'model_name' (the name the service knows it by)")
    local: dict[str, Any] = {"pooling_mode": m.pooling_mode, "max_seq_length": m.max_seq_length, "hub": m.hub}
    local |= {
        "config_kwargs": m.config_kwargs or None,
        "model_kwargs": m.model_kwargs.torch_dtype or m.model_kwargs.dtype,
    }
    for key, value in local.items():
        if value is not None:
            raise ConfigError(f"{where}.{key}: cannot act on an API model (the service decides how it encodes)")
    options: dict[str, Any] = {"api_base": m.api_base, "api_key": m.api_key, "dimensions": m.dimensions}
    if m.prompt:
        options["query_prompt"] = m.prompt
    return f"openai:{name}", {k: v for k, v in options.items() if v is not None}


def _model_options(m: EvalScopeModel, where: str) -> dict[str, Any]:
    if not m.model_name_or_path:
        raise ConfigError(f"{where}: needs 'model_name_or_path'")
    if m.config_kwargs:
        raise ConfigError(f"{where}.config_kwargs: {sorted(m.config_kwargs)}: model config overrides are not supported")
    if m.hub == "modelscope" and not _is_local(m.model_name_or_path):
        raise ConfigError(
            f"{where}.hub: modelscope: nothing is downloaded from ModelScope; give a local path, a built-in alias, "
            "or hub: huggingface"
        )
    options: dict[str, Any] = {}
    dtype = _DTYPES[m.model_kwargs.torch_dtype or m.model_kwargs.dtype or "auto"]
    if dtype:
        options["dtype"] = dtype
    if m.pooling_mode:
        options["pooling"] = m.pooling_mode
    if m.max_seq_length is not None:
        options["max_seq_length"] = m.max_seq_length
    if m.prompt:
        options["query_prompt"] = m.prompt
    return options


def _tasks(ev: EvalScopeEval, where: str) -> list[Any]:
    names = list(ev.task_names or []) + list(ev.tasks or [])
    tasks: list[Any] = []
    for name in names:
        if name == "CustomRetrieval":
            if not ev.dataset_path:
                raise ConfigError(
                    f"{where}eval.tasks: 'CustomRetrieval' needs eval.dataset_path (the folder with corpus.jsonl …)"
                )
            from embedscope.tasks.registry import custom_retrieval_task

            # EvalScope's legacy CustomRetrieval: identical ids ignored, main score recall_at_5, Chinese.
            tasks.append(
                custom_retrieval_task(
                    ev.dataset_path,
                    name="CustomRetrieval",
                    ignore_identical_ids=True,
                    main_score="recall_at_5",
                    languages=("cmn-Hans",),
                )
            )
        else:
            if ev.hub == "modelscope" and not Path(name).exists():
                raise ConfigError(
                    f"{where}eval.hub: modelscope: nothing is downloaded from ModelScope; catalog tasks read the "
                    "Hugging Face hub or local copies (--data-dir): set hub: huggingface"
                )
            tasks.append(name)
    if ev.dataset_path and "CustomRetrieval" not in names:
        raise ConfigError(f"{where}eval.dataset_path applies to the task 'CustomRetrieval' only: add it to eval.tasks")
    tasks += [c.task() for c in ev.custom_tasks]
    if not tasks:
        raise ConfigError(f"{where}eval: lists no tasks: set eval.task_names (or legacy eval.tasks) or custom_tasks")
    return tasks


def _task_name(task: Any) -> str:
    return task if isinstance(task, str) else task.name


def evalscope_layer(data: dict[str, Any], label: str) -> Layer:
    """An EvalScope config as a settings layer in :class:`~embedscope.settings.run.RunSettings`' keys."""
    cfg, root = _validate(data, label)
    where = f"{label}: {root}"
    if cfg.tool.lower() != "mteb":
        raise ConfigError(f"{where}tool is {cfg.tool!r}: embedscope runs EvalScope's 'MTEB' tool configs")
    models = (cfg.models or []) + (cfg.model or [])
    key = "models" if cfg.models else "model"
    if not models:
        raise ConfigError(f"{where}: has no 'models' (or legacy 'model') list")
    ev = cfg.eval
    tasks = _tasks(ev, root)
    rerankers = [m for m in models if m.is_cross_encoder]
    encoders = [(i, m) for i, m in enumerate(models) if not m.is_cross_encoder]
    if len(rerankers) > 1 or (rerankers and len(encoders) != 1):
        raise ConfigError(
            f"{where}{key}: a two-stage config has exactly one retrieval model and one cross-encoder "
            f"(is_cross_encoder: true); got {len(encoders)} and {len(rerankers)}"
        )
    entries: list[Any] = []
    for i, m in encoders:
        spec = m.model_name_or_path
        if _is_api(m):
            spec, options = _api_model(m, f"{where}{key}[{i}]")
        else:
            options = _model_options(m, f"{where}{key}[{i}]")
        prompts = m.prompts or {}
        groups: dict[str | None, list[Any]] = {}
        for t in tasks:
            groups.setdefault(prompts.get(_task_name(t)), []).append(t)
        for prompt, group in groups.items():
            own = {**options, **({"query_prompt": prompt} if prompt else {})}
            batch = m.encode_kwargs.batch_size or ev.encode_kwargs.batch_size
            limited = {"tasks": group} if len(groups) > 1 else {}
            if rerankers:  # EvalScope's two-stage evaluation: top_k stage-1 candidates, then the cross-encoder
                stage = {"type": "dense", "model": spec, **own}
                entries.append({"retrievers": [stage], "rerankers": [_reranker(rerankers[0], where)], **limited})
            else:
                extra = {"batch_size": batch} if batch else {}
                entries.append({"model": spec, **own, **extra, **limited} if own or extra or limited else spec)
    progress = [e.show_progress_bar for e in [ev.encode_kwargs, *(m.encode_kwargs for m in models)]]
    values: dict[str, Any] = {
        "models": entries,
        "tasks": tasks,
        "output_folder": ev.output_folder,
        "overwrite": "always" if ev.overwrite_results else "only-missing",
        "limits": ev.limits,
        "show_progress": False not in progress,
    }
    if rerankers:
        values["top_k"] = ev.top_k or ev.topk or 5
        batch = models[encoders[0][0]].encode_kwargs.batch_size or ev.encode_kwargs.batch_size
        if batch:
            values["batch_size"] = batch
    for name in ("task_types", "languages", "verbosity"):
        if getattr(ev, name) is not None:
            values[name] = getattr(ev, name)
    eval_key = f"{label}: {root}eval"
    names = {
        "models": f"{label}: {root}{key}",
        "tasks": f"{eval_key}.task_names",
        "output_folder": f"{eval_key}.output_folder",
        "limits": f"{eval_key}.limits",
        "task_types": f"{eval_key}.task_types",
        "languages": f"{eval_key}.languages",
        "top_k": f"{eval_key}.top_k",
    }
    work_dir = data.get("work_dir") if "eval_config" in data else None
    kept = {k: v for k, v in values.items() if v is not None}
    return EvalScopeLayer(label, kept, "file", names, work_dir=work_dir, config=data)


@dataclass
class EvalScopeLayer(Layer):
    """An EvalScope config's settings, with its ``work_dir`` (where EvalScope keeps the run's configuration dump and
    log; the MTEB results go to ``eval.output_folder``) and the config as given."""

    work_dir: str | None = None
    config: dict[str, Any] = field(default_factory=dict)


DEFAULT_WORK_DIR = "outputs"  # EvalScope's: a run under it gets its own time-stamped folder


def work_dir_folder(work_dir: str, run_time: str) -> Path:
    """Where a run keeps its configuration and log: ``work_dir`` itself, or ``work_dir/<run_time>`` when it is
    EvalScope's default ``outputs`` (as EvalScope's ``setup_work_directory`` does)."""
    folder = Path(work_dir)
    return folder / run_time if os.path.normpath(work_dir) == DEFAULT_WORK_DIR else folder


@contextlib.contextmanager
def work_dir_session(layers: Sequence[Layer]) -> Iterator[Path | None]:
    """Act on an EvalScope config's ``work_dir`` for the run inside the ``with``: its configuration dumped to
    ``<folder>/configs/task_config.yaml`` and embedscope's log written to ``<folder>/logs/eval_log.log``
    (:func:`work_dir_folder`). Nothing happens for layers without one."""
    found = next((x for x in layers if isinstance(x, EvalScopeLayer) and x.work_dir), None)
    if found is None or found.work_dir is None:
        yield None
        return
    import yaml

    from embedscope.files import atomic_write_text

    folder = work_dir_folder(found.work_dir, time.strftime("%Y%m%d_%H%M%S"))
    try:
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "configs" / "task_config.yaml", yaml.safe_dump(found.config, sort_keys=False))
        handler = logging.FileHandler(folder / "logs" / "eval_log.log", encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{found.label}: work_dir {found.work_dir}: cannot write in it ({e.strerror or e})") from None
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logger = logging.getLogger("embedscope")
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    handler.setLevel(logging.INFO)
    logger.info("run of %s; configuration in %s", found.label, folder / "configs" / "task_config.yaml")
    try:
        yield folder
    finally:
        logger.info("run of %s ended", found.label)
        logger.removeHandler(handler)
        logger.setLevel(previous)
        handler.close()


def _reranker(m: EvalScopeModel, where: str) -> dict[str, Any]:
    if m.api_base or m.model_name or m.api_key:  # an API reranker: the service's /rerank route
        return _api_reranker(m, where)
    if not m.model_name_or_path:
        raise ConfigError(f"{where}: the cross-encoder entry needs 'model_name_or_path'")
    stage: dict[str, Any] = {"type": "cross-encoder", "model": m.model_name_or_path}
    if m.max_seq_length is not None:
        stage["max_length"] = m.max_seq_length
    return stage


def _api_reranker(m: EvalScopeModel, where: str) -> dict[str, Any]:
    """EvalScope's API cross-encoder entry (``is_cross_encoder: true`` with ``model_name``, ``api_base``, ``api_key``;
    ``encode_kwargs.batch_size``: documents per request) as an ``api-rerank`` stage; its key is held as a
    ``SecretStr`` (shown masked wherever the settings are printed or recorded)."""
    model = m.model_name or m.model_name_or_path
    if not model or not m.api_base:
        raise ConfigError(f"{where}: the API cross-encoder entry needs 'model_name' and 'api_base'")
    if m.dimensions is not None:
        raise ConfigError(f"{where}: dimensions: a cross-encoder returns scores, not vectors; remove it")
    stage: dict[str, Any] = {"type": "api-rerank", "model": model, "api_base": m.api_base}
    if m.api_key:
        stage["api_key"] = m.api_key if isinstance(m.api_key, SecretStr) else SecretStr(m.api_key)
    if m.encode_kwargs.batch_size:
        stage["texts_per_request"] = m.encode_kwargs.batch_size
    return stage
