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

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.models.cache import CachedEncoder, CacheStats, EmbeddingCache
from embedscope.results.schema import TaskResult, now_iso, score_entry
from embedscope.results.store import OverwriteStrategy, ResultStore, check_strategy, splits_to_run
from embedscope.tasks.registry import DEFAULT_TASKS, resolve_task
from embedscope.tasks.base import SearchOptions, Task

logger = logging.getLogger(__name__)


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


def _as_encoder(model: str | Encoder, model_options: dict[str, Any] | None) -> Encoder:
    if isinstance(model, str):
        from embedscope.models.specs import load_encoder

        return load_encoder(model, **(model_options or {}))
    if model_options:
        raise ConfigError("model_options apply only when the model is given by name or path")
    return model


def _with_cache(encoder: Encoder, cache: bool | str | Path | EmbeddingCache | None) -> Encoder:
    if cache is None or cache is False:
        return encoder
    if isinstance(cache, EmbeddingCache):
        return CachedEncoder(encoder, cache)
    return CachedEncoder(encoder, EmbeddingCache(None if cache is True else cache))


def model_meta(encoder: Encoder) -> dict[str, Any]:
    """What ``model_meta.json`` records about the encoder."""
    from embedscope import __version__

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


def _run_task(
    task: Task,
    encoder: Encoder,
    store: ResultStore,
    strategy: OverwriteStrategy,
    options: SearchOptions,
    save_predictions: bool,
) -> TaskOutcome:
    stored = store.load(task.name)
    splits = splits_to_run(stored, task.eval_splits, strategy, task.name, store.path(task.name))
    if not splits and stored is not None:
        logger.info("%s: reusing stored result %s", task.name, store.path(task.name))
        return TaskOutcome(task, stored, store.path(task.name), reused=True)
    started = time.perf_counter()
    scores: dict[str, list[dict[str, Any]]] = dict(stored.scores) if stored and strategy != "always" else {}
    predictions: dict[str, dict[str, dict[str, float]]] = {}
    timings: dict[str, float] = {}
    for split in splits:
        outcome = task.evaluate_split(split, encoder, options)
        for key, value in outcome.timings.items():
            timings[key] = timings.get(key, 0.0) + value
        scores[split] = [score_entry(outcome.scores, task.main_score, task.hf_subset, task.languages)]
        if save_predictions and outcome.run is not None:
            predictions[split] = outcome.run.to_dict()
    result = TaskResult(
        task_name=task.name,
        dataset_revision=task.dataset_revision,
        scores=scores,
        evaluation_time=time.perf_counter() - started,
        date=now_iso(),
        evaluation_phases=[{"name": k, "seconds": round(v, 4)} for k, v in timings.items()],
        extra={"task_type": task.type},
    )
    path = store.save(result)
    if predictions:
        store.save_predictions(task.name, {task.hf_subset: predictions})
    return TaskOutcome(task, result, path, reused=False, splits_run=splits, timings=timings)


def evaluate(
    model: str | Encoder = "minilm",
    tasks: Sequence[str | Path | Task] = DEFAULT_TASKS,
    *,
    output_folder: str | Path = "results",
    batch_size: int = 32,
    top_k: int = 1000,
    overwrite: str = "only-missing",
    save_predictions: bool = False,
    cache: bool | str | Path | EmbeddingCache | None = True,
    limits: int | None = None,
    corpus_chunk_size: int = 50_000,
    show_progress: bool = True,
    model_options: dict[str, Any] | None = None,
    data_dir: str | Path | None = None,
) -> EvaluationReport:
    """Evaluate one model on retrieval tasks and write MTEB-format results.

    Args:
        model: a built-in alias (``minilm``, ``minilm-int8``, …), a local path, a hub id, or an Encoder.
        tasks: registered task names, folders of custom data, or task objects.
        output_folder: results go to ``<output_folder>/<org__model>/<revision>/<Task>.json``.
        batch_size: encoding batch size (MTEB's default 32).
        top_k: documents kept per query (MTEB's default 1000).
        overwrite: ``only-missing`` | ``never`` | ``always`` | ``only-cache``.
        save_predictions: also write each task's ranked run (``<Task>_predictions.json``).
        cache: embedding cache: True (default folder), a folder, an EmbeddingCache, or False.
        limits: EvalScope's ``limits`` (first N queries, judged documents only; inflates scores).
        corpus_chunk_size: documents encoded and scored at once (MTEB's 50,000).
        show_progress: progress bars while encoding.
        model_options: options for :func:`embedscope.models.specs.load_encoder` (pooling, prompts, …).
        data_dir: folder holding local copies of catalog datasets (``<dir>/<Task>`` in the hub's layout).
    """
    started = time.perf_counter()
    strategy = check_strategy(overwrite)
    if top_k < 1 or batch_size < 1 or corpus_chunk_size < 1:
        raise ConfigError("top_k, batch_size and corpus_chunk_size must be positive integers")
    resolved = [resolve_task(t, data_dir=data_dir) for t in tasks]
    encoder = _with_cache(_as_encoder(model, model_options), cache)
    store = ResultStore(output_folder, encoder.name, encoder.revision)
    store.save_model_meta(model_meta(encoder))
    options = SearchOptions(top_k, batch_size, corpus_chunk_size, show_progress, limits)
    outcomes = [_run_task(t, encoder, store, strategy, options, save_predictions) for t in resolved]
    stats = encoder.stats if isinstance(encoder, CachedEncoder) else None
    return EvaluationReport(encoder.name, encoder.revision, outcomes, stats, time.perf_counter() - started)


def evaluate_config(config: str | Path | dict[str, Any]) -> list[EvaluationReport]:
    """Run a YAML/JSON config file (embedscope's or EvalScope's ``eval_config`` schema)."""
    from embedscope.config import load_config

    plan = load_config(config)
    return [evaluate(**run) for run in plan.runs()]


def score_run(
    qrels: str | Path | dict, run: str | Path | dict, *, k_values: Sequence[int] | None = None,
    ignore_identical_ids: bool = False,
) -> dict[str, float]:
    """Metrics (MTEB key names) of a precomputed run against qrels, no model involved."""
    from embedscope.data.runs import read_qrels, read_run
    from embedscope.metrics import DEFAULT_K_VALUES, evaluate_ranking

    qrels_dict = read_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels
    run_dict = read_run(run) if isinstance(run, (str, Path)) else run
    scores = evaluate_ranking(
        qrels_dict, run_dict, tuple(k_values or DEFAULT_K_VALUES), ignore_identical_ids=ignore_identical_ids
    )
    return scores.to_mteb()
