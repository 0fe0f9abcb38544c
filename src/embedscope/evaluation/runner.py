"""The one place stages are composed: task → data → encoder (cached) → search → metrics → results.

>>> import tempfile
>>> from embedscope.testing.fakes import KeywordEncoder
>>> from embedscope.testing.tiny import tiny_retrieval_task
>>> report = evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
...                   output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
>>> report.outcomes[0].result.main_score()
1.0
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from embedscope.engines import EngineOptions, build_encoder
from embedscope.errors import ConfigError
from embedscope.evaluation.scoring import rank_run
from embedscope.models.base import Encoder
from embedscope.models.cache import CachedEncoder, CacheStats, EmbeddingCache
from embedscope.progress import progress_wanted, task_progress
from embedscope.results.per_item import item_rows
from embedscope.results.schema import TaskResult, now_iso, phase_timings, score_entry
from embedscope.results.settings import (
    data_fingerprint,
    experiment_kwargs,
    experiment_name,
    run_settings,
    settings_difference,
    task_settings,
)
from embedscope.results.store import (
    OverwriteStrategy,
    ResultStore,
    check_path_name,
    check_strategy,
    splits_to_run,
)
from embedscope.retrieval.pipeline import Pipeline
from embedscope.tasks.base import SearchOptions, Task
from embedscope.tasks.registry import DEFAULT_RETRIEVAL_TASKS, DEFAULT_TASKS, resolve_task

logger = logging.getLogger(__name__)

PIPELINE_TASK_TYPES = ("Retrieval", "Reranking")


@dataclass
class TaskOutcome:
    """One task's result and how it was obtained."""

    task: Task
    result: TaskResult
    path: Path
    reused: bool  # True when served from the result store without running
    splits_run: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class EvaluationReport:
    """Everything one :func:`evaluate` call did."""

    model_name: str
    revision: str
    outcomes: list[TaskOutcome]
    cache: CacheStats | None
    seconds: float

    def table(self) -> str:
        from embedscope.results.table import summary_table

        return summary_table(self)

    def stage_table(self) -> str:
        """Per-stage main score, time and peak memory of pipeline runs ("" for a plain model)."""
        from embedscope.results.table import stage_table

        return stage_table(self)


def _cache_object(cache: bool | str | Path | EmbeddingCache | None) -> EmbeddingCache | None:
    if cache is None or cache is False:
        return None
    if isinstance(cache, EmbeddingCache):
        return cache
    return EmbeddingCache(None if cache is True else cache)


def _as_model(
    model: Any,
    model_options: dict[str, Any] | None,
    cache: bool | str | Path | EmbeddingCache | None,
    engine: EngineOptions,
    fingerprint: str | None = None,
) -> Encoder | Pipeline:
    """An encoder (cached) or a pipeline; a pipeline that is one dense retriever becomes its encoder.

    A model object the caller holds (a SentenceTransformer, a CrossEncoder, an mteb model, anything
    with ``encode``) is wrapped as it is; the engine and device options apply to models given by name.
    """
    from embedscope.models.wrap import as_encoder, is_cross_encoder
    from embedscope.retrieval.pipeline import is_pipeline_spec, model_pipeline

    stage_options = engine.single_device().model_options(model_options) if isinstance(model, (str, Mapping)) else None
    if isinstance(model, Mapping):
        model = Pipeline.build(**model, cache=_cache_object(cache), model_options=stage_options)
    elif isinstance(model, str) and is_pipeline_spec(model):
        model = model_pipeline(model, cache=_cache_object(cache), model_options=stage_options)
    elif isinstance(model, str):
        store = _cache_object(cache)
        return _with_cache(build_encoder(model, model_options, engine, store.directory if store else None), store)
    elif model_options:
        raise ConfigError("model_options apply only when the model is given by name or path")
    elif is_cross_encoder(model):
        from embedscope.retrieval.cross_encoder import CrossEncoderReranker
        from embedscope.retrieval.pipeline import RerankStep

        model = Pipeline([], rerankers=[RerankStep(CrossEncoderReranker(model))])
    if isinstance(model, Pipeline):
        return model.dense_encoder or model
    return _with_cache(as_encoder(model, fingerprint=fingerprint), cache)


def _with_cache(encoder: Encoder, cache: bool | str | Path | EmbeddingCache | None) -> Encoder:
    store = _cache_object(cache)
    if store is not None and encoder.fingerprint is None:
        logger.warning(
            "%s: no fingerprint (give fingerprint=... to evaluate, or a model by name or path): "
            "running with the embedding cache off",
            encoder.name,
        )
        return encoder
    return encoder if store is None or isinstance(encoder, CachedEncoder) else CachedEncoder(encoder, store)


def model_meta(encoder: Encoder | Pipeline) -> dict[str, Any]:
    """What ``model_meta.json`` records about the encoder or pipeline (beside :func:`run_placement`)."""
    from embedscope import __version__

    if isinstance(encoder, Pipeline):
        return {**encoder.describe(), "revision": encoder.revision, "embedscope_version": __version__}

    meta: dict[str, Any] = {
        "name": encoder.name,
        "revision": encoder.revision,
        "fingerprint": encoder.fingerprint,
        "similarity_fn_name": encoder.similarity,
        "prompts": dict(encoder.prompts),
        "embedscope_version": __version__,
    }
    inner = getattr(encoder, "encoder", encoder)
    for attr in ("backend", "pooling", "max_seq_length", "normalize", "embed_dim", "source"):
        value = getattr(inner, attr, None)
        if isinstance(value, (str, int, float, bool)):
            meta[attr] = value
    return meta


def run_placement(model: Any) -> dict[str, Any]:
    """Where and how outputs were computed (device, dtype, engine), for ``model_meta.json`` and each result.

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> run_placement(KeywordEncoder(["a"]))
    {'device': 'cpu', 'dtype': 'fp32', 'engine': 'local'}
    """
    from embedscope.models.device import short_dtype

    if isinstance(model, Pipeline):
        stages = [*model.retrievers, *(s.reranker for s in model.rerankers)]
        placed = [
            run_placement(getattr(s, "encoder", s)) for s in stages if hasattr(getattr(s, "encoder", s), "device")
        ]
        return {"stages": placed} if placed else {}
    inner = getattr(model, "encoder", model)
    describe = inner.describe() if hasattr(inner, "describe") else {}
    return {
        "device": str(describe.get("device", getattr(inner, "device", "cpu"))),
        "dtype": short_dtype(str(describe.get("dtype", getattr(inner, "dtype", "float32")))),
        "engine": str(describe.get("engine", getattr(inner, "engine", "local"))),
    }


def _split_by_subset(
    stored: TaskResult | None, subset: str
) -> tuple[TaskResult | None, dict[str, list[dict[str, Any]]]]:
    """A stored result's entries of ``subset`` (None when it has none) and, per split, those of other subsets."""
    if stored is None:
        return None, {}
    mine = {s: [e for e in entries if e.get("hf_subset", subset) == subset] for s, entries in stored.scores.items()}
    others = {s: [e for e in entries if e.get("hf_subset", subset) != subset] for s, entries in stored.scores.items()}
    mine = {s: entries for s, entries in mine.items() if entries}
    if not any(others.values()):
        return stored, {}
    return (dataclasses.replace(stored, scores=mine) if mine else None), {s: e for s, e in others.items() if e}


def _run_task(
    task: Task,
    encoder: Encoder | Pipeline,
    store: ResultStore,
    strategy: OverwriteStrategy,
    options: SearchOptions,
    save_predictions: bool,
    placement: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> TaskOutcome:
    record = json.loads(
        json.dumps(  # as the result file will hold it
            {"run_settings": settings or {}, "task_settings": task_settings(task), "data": data_fingerprint(task)},
            default=str,
        )
    )
    stored_all = _matching(_load_stored(store, task.name, strategy), record, strategy, task.name, store.path(task.name))
    stored, other_subsets = _split_by_subset(stored_all, task.hf_subset)
    fresh = stored is None or strategy == "always"
    splits = splits_to_run(stored, task.eval_splits, strategy, task.name, store.path(task.name))
    if not splits and stored is not None:
        assert stored_all is not None  # stored is a part of it
        logger.info("%s: reusing stored result %s", task.name, store.path(task.name))
        return TaskOutcome(task, stored_all, store.path(task.name), reused=True)
    started = time.perf_counter()
    scores: dict[str, list[dict[str, Any]]] = dict(stored.scores) if stored and not fresh else {}
    predictions: dict[str, dict[str, dict[str, float]]] = {}
    timings: dict[str, float] = {}
    split_timings: list[tuple[str, dict[str, float]]] = []
    per_item: list[dict[str, Any]] = []
    stage_scores: dict[str, dict[str, list[dict[str, Any]]]] = {}
    stage_records: dict[str, list[dict[str, Any]]] = {}
    stage_items: dict[str, list[dict[str, Any]]] = {}
    for split in splits:
        with task_progress(task.name, task.type):
            # a Pipeline is no Encoder, but it plays every role a task asks of its model (retrieval/roles.py)
            outcome = task.evaluate_split(split, cast(Encoder, encoder), options)
        split_timings.append((split, outcome.timings))
        if outcome.per_item is not None:
            per_item += item_rows(split, task.hf_subset, outcome.per_item)
        for key, value in outcome.timings.items():
            timings[key] = timings.get(key, 0.0) + value
        scores[split] = [score_entry(outcome.scores, task.main_score, task.hf_subset, task.languages)]
        if save_predictions and outcome.run is not None:
            predictions[split] = outcome.run.to_dict()
        for st in outcome.stages:
            entry = score_entry(st.scores, task.main_score, task.hf_subset, task.languages)
            stage_records.setdefault(split, []).append(
                {"stage": st.stage, "name": st.name, "kind": st.kind, "main_score": entry["main_score"], **st.stats}
            )
            if "." not in st.stage:
                stage_scores.setdefault(st.stage, {})[split] = [entry]
                if st.per_item is not None:
                    stage_items.setdefault(st.stage, []).extend(item_rows(split, task.hf_subset, st.per_item))
    extra: dict[str, Any] = {"task_type": task.type, "main_metric": task.main_score, **(placement or {}), **record}
    if stage_records:
        extra["pipeline_stages"] = stage_records
    elapsed = time.perf_counter() - started
    for split, entries in other_subsets.items():  # the task's other subsets (Task:subset runs) stay in its file
        scores[split] = entries + scores.get(split, [])
    result = TaskResult(
        task_name=task.name,
        dataset_revision=task.dataset_revision,
        scores=scores,
        evaluation_time=elapsed,
        date=now_iso(),
        evaluation_phases=phase_timings(split_timings, task.hf_subset),
        extra=extra,
    )
    if len(stage_scores) > 1:  # two-stage (or longer) pipelines: each stage's result in stage1/, stage2/ ...
        for stage, per_split in stage_scores.items():
            earlier = (
                None
                if fresh
                else _matching(
                    store.sub(stage).load(task.name), record, "always", task.name, store.sub(stage).path(task.name)
                )
            )
            merged = {**(earlier.scores if earlier else {}), **per_split}  # keep splits of earlier runs
            store.sub(stage).save(
                TaskResult(
                    task_name=task.name,
                    dataset_revision=task.dataset_revision,
                    scores=merged,
                    evaluation_time=elapsed,
                    date=result.date,
                    extra={"task_type": task.type, "main_metric": task.main_score, "stage": stage, **record},
                )
            )
            if stage in stage_items:
                store.sub(stage).save_per_item(task.name, stage_items[stage], keep_earlier=not fresh)
    if per_item:
        store.save_per_item(task.name, per_item, keep_earlier=not fresh)
    path = store.save(result)
    if predictions:
        store.save_predictions(task.name, {task.hf_subset: predictions})
    return TaskOutcome(task, result, path, reused=False, splits_run=splits, timings=timings)


def _load_stored(store: ResultStore, task_name: str, strategy: OverwriteStrategy) -> TaskResult | None:
    """The stored result of ``task_name``; with ``--overwrite always`` an unreadable one is None (it is replaced)."""
    try:
        return store.load(task_name)
    except ConfigError:
        if strategy == "always":
            return None
        raise


def _matching(
    stored: TaskResult | None, record: dict[str, Any], strategy: OverwriteStrategy, task_name: str, path: Path
) -> TaskResult | None:
    """``stored`` if it was computed with the settings and data in ``record``; None when it must be re-run
    (the strategy allows it); a ConfigError when it holds another dataset's result or must not be re-run."""
    if stored is None:
        return None
    recorded = {k: stored.extra.get(k) for k in record}
    where = recorded["data"].get("location") if isinstance(recorded["data"], dict) else None
    if where != record["data"]["location"] and where is not None:
        raise ConfigError(
            f"{path} holds the result of task {task_name!r} on other data ({where}), not on "
            f"{record['data']['location'] or 'this task'}'s: give one of them another task name "
            "(custom_tasks[].name), use another --output-folder, or delete that file"
        )
    difference = settings_difference(recorded, record)
    if not difference:
        return stored
    if strategy in ("never", "only-cache"):
        raise ConfigError(
            f"{path} was computed with other settings or data ({difference}); run with --overwrite always to replace it"
        )
    if strategy != "always":
        logger.warning(
            "%s: stored result %s was computed with other settings or data (%s): running it again",
            task_name,
            path,
            difference,
        )
    return None


def _check_task_names(tasks: Sequence[Task]) -> None:
    """Every task name can name a result file, and no two tasks of a run share one."""
    seen: dict[str, str] = {}
    for t in tasks:
        check_path_name(t.name, "task name")
        source = str(getattr(t, "source", ""))
        if t.name in seen and seen[t.name] != source:
            raise ConfigError(
                f"two tasks are named {t.name!r} ({seen[t.name] or 'built-in'} and {source}): results "
                "are filed by task name, so give them distinct names (custom_tasks[].name)"
            )
        seen[t.name] = source


def evaluate(
    model: str | Mapping[str, Any] | Encoder | Pipeline = "minilm",
    tasks: Sequence[str | Path | Task] | None = None,
    *,
    output_folder: str | Path = "results",
    batch_size: int | None = None,
    top_k: int = 1000,
    overwrite: str = "only-missing",
    save_predictions: bool = False,
    cache: bool | str | Path | EmbeddingCache | None = True,
    limits: int | None = None,
    corpus_chunk_size: int = 50_000,
    show_progress: bool = True,
    model_options: dict[str, Any] | None = None,
    data_dir: str | Path | None = None,
    device: str | None = "auto",
    dtype: str | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    ray_workers: int | None = None,
    ray_gpus_per_worker: float | None = None,
    fingerprint: str | None = None,
    task_params: Mapping[str, Any] | None = None,
    splits: Sequence[str] | None = None,
) -> EvaluationReport:
    """Evaluate one model on retrieval tasks and write MTEB-format results.

    Args:
        model: a built-in alias (``minilm``, ``minilm-int8``, …), a local path, a hub id, an Encoder,
            a retriever spec (``bm25``, ``fts5``, ``colbert:minilm`` …), a
            :class:`~embedscope.retrieval.pipeline.Pipeline` (or the keyword arguments of ``Pipeline.build``),
            or a model object: a ``SentenceTransformer`` or ``CrossEncoder`` (on its own device), an mteb
            model, or anything with ``encode(list[str]) -> array``.
        tasks: registered task names, folders of custom data, or task objects (default: the built-in
            suite; for a pipeline, its retrieval tasks).
        output_folder: results go to ``<output_folder>/<org__model>/<revision>/<Task>.json``; with settings
            apart from the model's own (``model_options``, ``dtype``, ``top_k``, ``limits``, ``corpus_chunk_size``)
            to ``<output_folder>/<org__model>/<revision>/experiments/<settings-hash>/<Task>.json``.
        batch_size: encoding batch size (default: MTEB's 32 on the CPU, 256 on an accelerator).
        top_k: documents kept per query (MTEB's default 1000).
        overwrite: ``only-missing`` | ``never`` | ``always`` | ``only-cache``.
        save_predictions: also write each task's ranked run (``predictions/<Task>_predictions.json``).
        cache: embedding cache: True (default folder), a folder, an EmbeddingCache, or False.
        limits: EvalScope's ``limits`` (first N queries, judged documents only; inflates scores).
        corpus_chunk_size: documents encoded and scored at once (MTEB's 50,000).
        show_progress: progress bars while encoding, when stderr is a terminal (or in a notebook); piped
            output and log files never get bars, nor the libraries' own (model loading, downloads).
        model_options: options for :func:`embedscope.models.specs.load_encoder` (pooling, prompts, …).
        data_dir: folder holding local copies of catalog datasets (``<dir>/<Task>`` in the hub's layout).
        device: ``auto`` (the best accelerator here), ``cpu``, ``cuda``, ``cuda:N``, ``mps``, or several
            (``cuda:0,cuda:1``: encode calls sharded over them, same vectors as one device).
        dtype: ``fp32`` (default, the exact path), ``fp16`` or ``bf16``.
        engine: ``local`` (this process) or ``ray`` (actors on a Ray cluster; ``ray_address``,
            ``ray_workers``, ``ray_gpus_per_worker``).
        fingerprint: for a model object embedscope cannot fingerprint itself: what identifies its
            vectors in the embedding cache (without one, the cache is off for it).
        task_params: protocol parameters (``samples_per_label``, ``n_experiments``, ``max_document_to_embed``,
            ``max_fraction_of_documents_to_embed``, ``k``, ``top_k``, …), each set on the tasks whose type has it
            (:mod:`embedscope.tasks.params`); a name no task's type has is an error listing the valid ones.
        splits: evaluate these splits instead of each task's own (e.g. ``["validation"]``).
    """
    started = time.perf_counter()
    strategy = check_strategy(overwrite)
    if top_k < 1 or (batch_size is not None and batch_size < 1) or corpus_chunk_size < 1:
        raise ConfigError("top_k, batch_size and corpus_chunk_size must be positive integers")
    engine_options = EngineOptions(engine, device, dtype, ray_address, ray_workers, ray_gpus_per_worker).validated()
    show_progress = progress_wanted(show_progress)  # never into piped output or log files, as the CLI
    # tasks first: a misspelled task or a folder without a dataset is reported before any model loads
    resolved = None if tasks is None else [resolve_task(t, data_dir=data_dir) for t in tasks]
    encoder = _as_model(model, model_options, cache, engine_options, fingerprint)
    if resolved is None:
        resolved = [
            resolve_task(t, data_dir=data_dir)
            for t in (DEFAULT_TASKS if not isinstance(encoder, Pipeline) else DEFAULT_RETRIEVAL_TASKS)
        ]
    _check_task_names(resolved)
    if task_params or splits:
        from embedscope.tasks.params import apply_task_options

        resolved = apply_task_options(resolved, task_params, splits)
    if isinstance(encoder, Pipeline):
        _check_pipeline_tasks(encoder, resolved)
    # a pipeline's top_k (its rerank depth) is checked per result, as its other settings, not a folder of its own
    kwargs = experiment_kwargs(
        model_options if isinstance(model, (str, Mapping)) else None,
        dtype,
        1000 if isinstance(encoder, Pipeline) else top_k,
        limits,
        corpus_chunk_size,
    )
    if task_params:
        kwargs["task_params"] = dict(task_params)  # another protocol: its own folder, as mteb's experiment_kwargs
    store = ResultStore(output_folder, encoder.name, encoder.revision, experiment_name(kwargs))
    placement = run_placement(encoder)
    settings = run_settings(encoder, top_k, limits, corpus_chunk_size, isinstance(encoder, Pipeline))
    experiment = {"experiment_kwargs": kwargs} if kwargs else {}
    store.save_model_meta({**model_meta(encoder), **placement, **experiment, "run_settings": settings})
    options = SearchOptions(top_k, batch_size, corpus_chunk_size, show_progress, limits)
    outcomes = [
        _run_task(t, encoder, store, strategy, options, save_predictions, placement, settings) for t in resolved
    ]
    stats = encoder.stats if isinstance(encoder, CachedEncoder) else None
    return EvaluationReport(encoder.name, encoder.revision, outcomes, stats, time.perf_counter() - started)


def _check_pipeline_tasks(pipeline: Pipeline, tasks: Sequence[Task]) -> None:
    from embedscope.messages import listing

    if not pipeline.retrievers:
        wrong = [f"{t.name} ({t.type})" for t in tasks if t.type != "Reranking"]
        if wrong:
            raise ConfigError(
                f"{pipeline.name} is a reranker without a first-stage retriever: it scores Reranking "
                f"tasks only, not {listing(wrong)}. For retrieval, give a retriever too "
                "(--retriever bm25 --reranker MODEL)."
            )
        return
    wrong = [f"{t.name} ({t.type})" for t in tasks if t.type not in PIPELINE_TASK_TYPES]
    if wrong:
        raise ConfigError(
            f"{pipeline.name} is a retrieval pipeline: it evaluates Retrieval and Reranking tasks only, "
            f"not {listing(wrong)}. Evaluate those with an embedding model."
        )


def evaluate_config(config: str | Path | dict[str, Any]) -> list[EvaluationReport]:
    """Run a YAML/JSON config file (embedscope's or EvalScope's ``eval_config`` schema)."""
    from embedscope.config import load_config

    plan = load_config(config)
    return [evaluate(**run) for run in plan.runs()]


def score_run(
    qrels: str | Path | dict,
    run: str | Path | dict,
    *,
    k_values: Sequence[int] | None = None,
    ignore_identical_ids: bool = False,
) -> dict[str, float]:
    """Metrics (MTEB key names) of a precomputed run against qrels, no model involved."""
    return rank_run(qrels, run, k_values=k_values, ignore_identical_ids=ignore_identical_ids).to_mteb()
