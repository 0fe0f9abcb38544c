"""EvalScope's ``eval_config`` schema (its RAGEval/MTEB tool), read as embedscope evaluation calls.

Current keys ``models``, ``eval.task_names``, ``custom_tasks``, ``overwrite_results``, ``top_k``,
``limits``; legacy keys ``model``, ``eval.tasks``, ``eval.dataset_path``, ``topk``; optionally
wrapped in ``{eval_backend: RAGEval, eval_config: …}``. EvalScope's ``top_k`` only sizes the
stage-1 candidate list of a two-stage run (a second model with ``is_cross_encoder: true``, as
EvalScope's two-stage evaluation); a one-stage run keeps MTEB's top 1000, so ``top_k`` does not
change one-stage metrics. :func:`embedscope.config.load_config` tells the schemas apart and
validates; :func:`evalscope_plan` turns a validated config into a :class:`~embedscope.config.Plan`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from embedscope.config import CustomTask, Plan, custom_task_objects
from embedscope.errors import ConfigError

_STRICT = ConfigDict(extra="forbid")


class EvalScopeModel(BaseModel):
    """One entry of EvalScope's ``models`` (or legacy ``model``) list."""

    model_config = _STRICT
    model_name_or_path: str | None = None
    is_cross_encoder: bool = False
    pooling_mode: str | None = None
    max_seq_length: int | None = None
    prompt: str | None = None
    prompts: dict[str, str] | None = None
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    config_kwargs: dict[str, Any] = Field(default_factory=dict)
    encode_kwargs: dict[str, Any] = Field(default_factory=dict)
    hub: str | None = None
    model_name: str | None = None
    api_base: str | None = None
    api_key: str | None = None
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
    limits: int | None = None
    hub: str | None = None
    top_k: int | None = None
    topk: int | None = None  # legacy spelling
    verbosity: int | None = None
    encode_kwargs: dict[str, Any] = Field(default_factory=dict)


class EvalScopeConfig(BaseModel):
    model_config = _STRICT
    tool: str = "MTEB"
    models: list[EvalScopeModel] | None = None
    model: list[EvalScopeModel] | None = None  # legacy
    eval: EvalScopeEval = Field(default_factory=EvalScopeEval)


class EvalScopeTaskConfig(BaseModel):
    model_config = _STRICT
    eval_backend: str = "RAGEval"
    eval_config: EvalScopeConfig
    work_dir: str | None = None


def _model_options(m: EvalScopeModel) -> dict[str, Any]:
    if m.api_base or m.api_key or m.model_name:
        raise ConfigError("API embedding models (model_name/api_base/api_key) are not supported: use a local model")
    if not m.model_name_or_path:
        raise ConfigError("EvalScope model entry needs 'model_name_or_path'")
    dtypes = {"auto": None, "float32": None, "float16": "fp16", "bfloat16": "bf16"}
    unsupported = {k: v for k, v in m.model_kwargs.items() if not (k in ("torch_dtype", "dtype") and v in dtypes)}
    if unsupported or m.config_kwargs:
        raise ConfigError(
            f"model_kwargs {unsupported or ''} config_kwargs {m.config_kwargs or ''}: only torch_dtype "
            "(auto, float32, float16, bfloat16) is supported"
        )
    options: dict[str, Any] = {}
    dtype = dtypes[m.model_kwargs.get("torch_dtype", m.model_kwargs.get("dtype", "auto"))]
    if dtype:
        options["dtype"] = dtype
    if m.pooling_mode:
        options["pooling"] = m.pooling_mode
    if m.max_seq_length is not None:
        options["max_seq_length"] = m.max_seq_length
    if m.prompt:
        options["query_prompt"] = m.prompt
    return options


def evalscope_plan(cfg: EvalScopeConfig) -> Plan:
    """The :func:`embedscope.evaluate` calls of a validated EvalScope ``eval_config``."""
    if cfg.tool.lower() != "mteb":
        raise ConfigError(f"eval_config.tool is {cfg.tool!r}: embedscope runs EvalScope's 'MTEB' tool configs")
    models = (cfg.models or []) + (cfg.model or [])
    if not models:
        raise ConfigError("EvalScope config has no 'models' (or legacy 'model') list")
    ev = cfg.eval
    names = list(ev.task_names or []) + list(ev.tasks or [])
    tasks: list[Any] = []
    for name in names:
        if name == "CustomRetrieval":
            if not ev.dataset_path:
                raise ConfigError("task 'CustomRetrieval' needs eval.dataset_path (the folder with corpus.jsonl …)")
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
            tasks.append(name)
    tasks += custom_task_objects(ev.custom_tasks)
    if not tasks:
        raise ConfigError("EvalScope config lists no tasks: set eval.task_names (or legacy eval.tasks) or custom_tasks")
    rerankers = [m for m in models if m.is_cross_encoder]
    models = [m for m in models if not m.is_cross_encoder]
    if len(rerankers) > 1 or (rerankers and len(models) != 1):
        raise ConfigError(
            "EvalScope two-stage config: give exactly one retrieval model and one cross-encoder "
            f"(is_cross_encoder: true); got {len(models)} and {len(rerankers)}"
        )
    calls = []
    for m in models:
        options = _model_options(m)
        encode = {**ev.encode_kwargs, **m.encode_kwargs}
        per_task_prompts = m.prompts or {}
        groups: dict[str | None, list[Any]] = {}
        for t in tasks:
            key = per_task_prompts.get(t if isinstance(t, str) else t.name)
            groups.setdefault(key, []).append(t)
        for prompt, group in groups.items():
            opts = dict(options)
            if prompt:
                opts["query_prompt"] = prompt
            model: Any = m.model_name_or_path
            top_k: dict[str, Any] = {}
            if rerankers:  # EvalScope's two-stage evaluation: top_k stage-1 candidates, then the cross-encoder
                model = {
                    "retrievers": [{"type": "dense", "model": m.model_name_or_path, **opts}],
                    "rerankers": [_reranker(rerankers[0])],
                }
                opts = {}
                top_k = {"top_k": ev.top_k or ev.topk or 5}
            calls.append(
                {
                    "model": model,
                    **top_k,
                    "model_options": opts or None,
                    "tasks": group,
                    "output_folder": ev.output_folder,
                    "overwrite": "always" if ev.overwrite_results else "only-missing",
                    "limits": ev.limits,
                    "batch_size": int(encode["batch_size"]) if encode.get("batch_size") else None,
                    "show_progress": bool(encode.get("show_progress_bar", True)),
                }
            )
    return Plan(calls)


def _reranker(m: EvalScopeModel) -> dict[str, Any]:
    if not m.model_name_or_path:
        raise ConfigError("EvalScope cross-encoder entry needs 'model_name_or_path'")
    stage: dict[str, Any] = {"type": "cross-encoder", "model": m.model_name_or_path}
    if m.max_seq_length is not None:
        stage["max_length"] = m.max_seq_length
    return stage
