"""The one place stages are composed: settings → tasks → model (cached) → search → metrics → results.

:func:`run` takes one :class:`~embedscope.settings.RunSettings`; :func:`evaluate` and :func:`evaluate_config` build
it (as the command line does) and run it.

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
from typing import Any

from embedscope.compare.groups import split_groups
from embedscope.errors import ConfigError, SettingError
from embedscope.evaluation.memory import MemoryEstimate, Workloads, guard_memory, plan_model
from embedscope.evaluation.models import build_model, model_meta, run_placement
from embedscope.evaluation.plan import model_tasks, resolve_tasks
from embedscope.evaluation.recording import Recorded, check_recording, record_run
from embedscope.evaluation.scoring import rank_run
from embedscope.models.cache import CacheStats, EmbeddingCache, cache_stats
from embedscope.progress import progress_wanted, task_progress
from embedscope.results.compute import compute_record, truncation_counts, truncation_since
from embedscope.results.per_item import item_rows
from embedscope.results.schema import TaskResult, now_iso, phase_timings, score_entry
from embedscope.results.settings import data_fingerprint, experiment_name, settings_difference, task_settings
from embedscope.results.store import OverwriteStrategy, ResultStore, splits_to_run
from embedscope.results.usage import api_usage, usage_since
from embedscope.retrieval.roles import model_roles
from embedscope.settings import Layer, RunSettings, build_settings
from embedscope.settings.evalscope import work_dir_session
from embedscope.settings.files import config_layer
from embedscope.settings.run import ModelRun
from embedscope.tasks.base import SearchOptions, Task
from embedscope.tasks.types import get_task_type

logger = logging.getLogger(__name__)


@dataclass
class TaskOutcome:
    """One task's result and how it was obtained.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
        ...                              output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> outcome = report.outcomes[0]
        >>> outcome.task.name, outcome.reused, outcome.path.name
        ('TinyRetrieval', False, 'TinyRetrieval.json')
    """

    task: Task
    result: TaskResult
    path: Path
    reused: bool  # True when served from the result store without running
    splits_run: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class EvaluationReport:
    """Everything one :func:`evaluate` call did: ``table()`` is what ``embedscope run`` prints, ``to_dict()`` plain data.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
        ...                              output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> report.model_name, [o.task.name for o in report.outcomes]
        ('fake/keyword-encoder', ['TinyRetrieval'])
        >>> report.to_dict()["tasks"][0]["result"]["scores"]["test"][0]["main_score"]
        1.0
    """

    model_name: str
    revision: str
    outcomes: list[TaskOutcome]
    cache: CacheStats | None
    seconds: float
    recorded: Recorded | None = None  # where the results store recorded them (with a store set)
    memory: MemoryEstimate | None = None  # the largest estimated peak memory of the tasks it ran, before they ran

    def table(self) -> str:
        from embedscope.evaluation.summary import summary_table

        return summary_table(self)

    def stage_table(self) -> str:
        """Per-stage main score, time and peak memory of pipeline runs ("" for a plain model)."""
        from embedscope.evaluation.summary import stage_table

        return stage_table(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the model, and each task's MTEB result (as ``run --json`` prints it), file and reuse."""
        return {
            "model": self.model_name,
            "revision": self.revision,
            "seconds": self.seconds,
            "tasks": [
                {"task": o.task.name, "path": str(o.path), "reused": o.reused, "result": o.result.to_dict()}
                for o in self.outcomes
            ],
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


@dataclass
class _Prepared:
    """A task's stored result weighed before any task runs: reused whole (``reused``), or the splits to run."""

    task: Task
    record: dict[str, Any]
    stored_all: TaskResult | None
    stored: TaskResult | None
    other_subsets: dict[str, list[dict[str, Any]]]
    fresh: bool
    splits: tuple[str, ...]
    reused: TaskOutcome | None


def _prepare_task(
    task: Task,
    store: ResultStore,
    strategy: OverwriteStrategy,
    options: SearchOptions,
    settings: dict[str, Any] | None = None,
    index_dir: Path | None = None,
) -> _Prepared:
    """Whether ``task``'s stored result is reused, else which splits run (the run weighs every task first, so the
    memory guard sizes only those that run)."""
    record = json.loads(
        json.dumps(  # as the result file will hold it
            {
                "run_settings": settings or {},
                "task_settings": task_settings(task),
                "data": data_fingerprint(task, index_dir),
            },
            default=str,
        )
    )
    stored_all = _matching(_load_stored(store, task.name, strategy), record, strategy, task.name, store.path(task.name))
    stored, other_subsets = _split_by_subset(stored_all, task.hf_subset)
    if stored is not None and options.latency_sample is not None and not stored.extra.get("query_latency"):
        _remeasure(task.name, store.path(task.name), strategy)  # latency is asked: never silently absent
        stored = None
    fresh = stored is None or strategy == "always"
    splits = tuple(splits_to_run(stored, task.eval_splits, strategy, task.name, store.path(task.name)))
    reused = None
    if not splits and stored is not None:
        assert stored_all is not None  # stored is a part of it
        logger.info("%s: reusing stored result %s", task.name, store.path(task.name))
        reused = TaskOutcome(task, stored_all, store.path(task.name), reused=True)
    return _Prepared(task, record, stored_all, stored, other_subsets, fresh, splits, reused)


def _run_task(
    task: Task,
    encoder: Any,
    store: ResultStore,
    strategy: OverwriteStrategy,
    options: SearchOptions,
    save_predictions: bool,
    placement: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    index_dir: Path | None = None,
    prepared: _Prepared | None = None,
) -> TaskOutcome:
    ready = prepared if prepared is not None else _prepare_task(task, store, strategy, options, settings, index_dir)
    if ready.reused is not None:
        return ready.reused
    record, stored, other_subsets = ready.record, ready.stored, ready.other_subsets
    fresh, splits = ready.fresh, ready.splits
    within = getattr(task, "encoder_within", None)  # a screen's row proxy: its calls encoded within the full task's
    task_encoder = within(encoder, options) if within is not None else encoder  # (its calls learned untimed)
    started = time.perf_counter()
    used_before = api_usage(encoder)  # a model served by an API: what this task uses goes into its result
    counted_before = truncation_counts(encoder)  # texts the model itself encodes (cache hits are not counted)
    scores: dict[str, list[dict[str, Any]]] = dict(stored.scores) if stored and not fresh else {}
    predictions: dict[str, dict[str, dict[str, float]]] = {}
    timings: dict[str, float] = {}
    split_timings: list[tuple[str, dict[str, float]]] = []
    per_item: list[dict[str, Any]] = []
    latency: dict[str, Any] = {}
    stage_scores: dict[str, dict[str, list[dict[str, Any]]]] = {}
    stage_records: dict[str, list[dict[str, Any]]] = {}
    stage_items: dict[str, list[dict[str, Any]]] = {}
    for split in splits:
        with task_progress(task.name, get_task_type(task.type).document_label):
            outcome = task.evaluate_split(split, task_encoder, options)
        split_timings.append((split, outcome.timings))
        if outcome.latency is not None:
            latency[split] = dict(outcome.latency)
        if outcome.per_item is not None:
            per_item += item_rows(split, task.hf_subset, outcome.per_item)
        for key, value in outcome.timings.items():
            timings[key] = timings.get(key, 0.0) + value
        scores[split] = [score_entry(outcome.scores, task.main_score, task.hf_subset, task.languages)]
        if options.group_by is not None and outcome.per_item is not None:  # each query group's score, CI and n
            scores[split][0]["groups"] = split_groups(options.group_by, outcome.per_item, task.main_score)
        if save_predictions and outcome.run is not None:
            predictions[split] = outcome.run.to_dict()
        for st in outcome.stages:
            entry = score_entry(st.scores, task.main_score, task.hf_subset, task.languages)
            stage_records.setdefault(split, []).append(
                {"stage": st.stage, "name": st.name, "kind": st.kind, "main_score": entry["main_score"], **st.stats}
                | ({"failures": dict(st.failures)} if st.failures is not None else {})  # recall vs ranking losses
            )
            if "." not in st.stage:
                stage_scores.setdefault(st.stage, {})[split] = [entry]
                if st.per_item is not None:
                    stage_items.setdefault(st.stage, []).extend(item_rows(split, task.hf_subset, st.per_item))
    extra: dict[str, Any] = {"task_type": task.type, "main_metric": task.main_score, **(placement or {}), **record}
    if stage_records:
        extra["pipeline_stages"] = stage_records
    if latency:
        extra["query_latency"] = latency  # per split: retrieval.latency's sample (not a score, not a setting)
    if used_before is not None:
        extra["api_usage"] = usage_since(encoder, used_before)  # requests, tokens, spend, latency (not a setting)
    extra["compute"] = compute_record(encoder)  # thread budget and CPU as they stand at the task's end
    truncated = truncation_since(encoder, counted_before)
    if truncated is not None:
        extra["truncated"] = truncated  # per role: texts longer than the model's max length (not a setting)
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


def _remeasure(task_name: str, path: Path, strategy: OverwriteStrategy) -> None:
    """A stored result without the latency ``latency_sample`` asks for: run again (said in the log), or a one-line
    error when the strategy keeps stored results."""
    if strategy in ("never", "only-cache"):
        raise ConfigError(
            f"latency_sample: the stored result {path} has no latency measurement and --overwrite {strategy} keeps "
            "it; run with --overwrite always (or only-missing) to measure it, or drop latency_sample"
        )
    logger.warning(
        "%s: stored result %s has no latency measurement: running it again (latency_sample)", task_name, path
    )


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


_VERBOSITY = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def run(settings: RunSettings, *, record: bool = True) -> list[EvaluationReport]:
    """Evaluate every model of ``settings`` on its tasks (tasks are resolved and checked before any model loads);
    with a results store set, each model's results are recorded in it unless ``record`` is False (a screen's fast
    and proxy passes, which are not exact results)."""
    if settings.verbosity is not None:
        logging.getLogger("embedscope").setLevel(_VERBOSITY[settings.verbosity])
    try:
        tasks = resolve_tasks(settings)
        check_recording(settings, len(settings.model_runs()))
        cache = EmbeddingCache(settings.cache_dir) if settings.cache else None
        workloads = Workloads(settings)  # each task sized once, for the memory guard of every model
        return [
            _evaluate_model(entry, tasks, settings, cache, recording=record, workloads=workloads)
            for entry in settings.model_runs()
        ]
    except SettingError as e:  # the layers below name settings by key: name them as the user gave them
        raise ConfigError(e.named(getattr(settings, "display_name", str))) from None


def _evaluate_model(
    entry: ModelRun,
    tasks: list[Task] | None,
    settings: RunSettings,
    cache: EmbeddingCache | None,
    recording: bool = True,
    workloads: Workloads | None = None,
) -> EvaluationReport:
    started = time.perf_counter()
    model = build_model(entry, settings, cache, tasks)
    roles = model_roles(model)
    chosen = model_tasks(tasks, entry, roles, settings, getattr(model, "name", "the model"))
    encodes = "encoder" in roles  # else a pipeline: its fingerprint covers every stage, rerank depth included
    # top_k too for a pipeline: its first stage's candidates (not in its fingerprint)
    kwargs = settings.experiment_key(entry.options if isinstance(entry.model, (str, Mapping)) else None)
    store = ResultStore(settings.output_folder, model.name, model.revision, experiment_name(kwargs))
    placement = run_placement(model)
    dense = settings.dense_post_processing()
    if dense and not encodes:
        _check_dense_stage(model, settings, dense)
    if settings.latency_sample is not None and not encodes:
        raise SettingError(
            "latency_sample",
            f"{{latency_sample}}: per-query latency is measured for a dense encoder's search, and {model.name} is a "
            "pipeline; drop it for this model",
        )
    record = settings.result_record(model, pipeline=not encodes)
    experiment = {"experiment_kwargs": kwargs} if kwargs else {}
    options = settings.search_options(
        batch_size=entry.batch_size or settings.batch_size or _default_batch_size(placement),
        show_progress=progress_wanted(settings.show_progress),  # never into piped output or log files, as the CLI
    )
    index = cache.directory if cache is not None else None  # the data fingerprints' index lives in the cache folder
    prepared = [_prepare_task(t, store, settings.overwrite, options, record, index) for t in chosen]
    # before any task encodes: a run whose estimated peak memory is above what is available is refused in one line
    plan = plan_model(entry, settings, model, placement)
    running = [p.task for p in prepared if p.reused is None]
    memory = guard_memory(plan, running, settings, workloads or Workloads(settings))
    store.save_model_meta({**model_meta(model), **placement, **experiment, "run_settings": record})
    outcomes = [
        _run_task(
            p.task, model, store, settings.overwrite, options, settings.save_predictions, placement, record, index, p
        )
        for p in prepared
    ]
    seconds = time.perf_counter() - started
    recorded = record_run(settings, store.folder, [o.task.name for o in outcomes]) if recording else None
    return EvaluationReport(model.name, model.revision, outcomes, cache_stats(model), seconds, recorded, memory)


def _check_dense_stage(model: Any, settings: RunSettings, dense: dict[str, Any]) -> None:
    """Dense post-processing acts on a pipeline's dense retrievers; a pipeline without one is refused."""
    if not getattr(model, "dense_stages", ()):
        raise SettingError(
            next(iter(dense)),
            f"acts on dense retrieval, and {getattr(model, 'name', 'the pipeline')} has "
            "no dense retriever (BM25, FTS5, ColBERT and rerankers keep their own scores): drop it",
        )


def _default_batch_size(placement: dict[str, Any]) -> int | None:
    """The batch size a model gets when none is set: its device's default (MTEB's 32 on the CPU), worked out once
    per run; None for a pipeline, whose stages each take their own device's."""
    from embedscope.models.device import default_batch_size

    return default_batch_size(str(placement["device"]).split(",")[0]) if "device" in placement else None


def evaluate(
    model: Any = "minilm",
    tasks: Sequence[str | Path | Task] | None = None,
    **settings: Any,
) -> EvaluationReport:
    """Evaluate one model on tasks and write MTEB-format results.

    Args:
        model: a built-in alias (``minilm``, ``minilm-int8``, …), a local path, a hub id, a model behind an API
            (``openai:NAME``, ``cohere:NAME``, ``voyage:NAME``; ``model_options`` ``api_base``, ``dimensions`` …), an
            Encoder, a retriever
            spec (``bm25``, ``fts5``, ``colbert:minilm`` …), a :class:`~embedscope.retrieval.pipeline.Pipeline`
            (or the keyword arguments of ``Pipeline.build``), or a model object: a ``SentenceTransformer`` or
            ``CrossEncoder`` (on its own device), an mteb model, or anything with ``encode(list[str]) -> array``.
        tasks: registered task names, folders of custom data, or task objects (default: the built-in suite; for a
            retrieval pipeline, its retrieval tasks).
        **settings: any key of :class:`~embedscope.settings.RunSettings`, checked as a config file's:
            ``output_folder``, ``batch_size``, ``top_k``, ``overwrite``, ``save_predictions``, ``cache`` (True, False,
            a folder or an :class:`~embedscope.models.cache.EmbeddingCache`), ``limits``, ``corpus_chunk_size``,
            ``show_progress``, ``model_options``, ``data_dir``, ``device``, ``dtype``, ``engine`` with its options
            (``ray_address``, ``ray_workers``, …), ``fingerprint`` (for a model object embedscope cannot fingerprint),
            ``task_params``, ``splits``, ``task_types``, ``languages``, ``benchmark``.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
        ...                              output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> report.outcomes[0].result.main_score()
        1.0
        >>> print(report.table().splitlines()[0])
        model: fake/keyword-encoder (revision e9914ddb5904)
    """
    values = {**settings, "model": model}
    if isinstance(model, Mapping) and not isinstance(model, RunSettings):
        values["model"] = None
        values["pipeline"] = dict(model)
    if tasks is not None:
        values["tasks"] = list(tasks)
    cache = values.get("cache")
    if isinstance(cache, EmbeddingCache):
        values["cache"], values["cache_dir"] = True, str(cache.directory)
    elif cache is None and "cache" in values:
        values["cache"] = False
    (report,) = run(build_settings([Layer("evaluate()", values, "api")]))
    return report


def evaluate_config(config: str | Path | dict[str, Any], **overrides: Any) -> list[EvaluationReport]:
    """Run a YAML/JSON config file (embedscope's or EvalScope's ``eval_config`` schema); ``overrides`` (any
    :class:`~embedscope.settings.RunSettings` key) win over the file's values."""
    layers = [config_layer(config), Layer("evaluate_config()", overrides, "api")]
    with work_dir_session(layers):  # an EvalScope config's work_dir: its configuration and log
        return run(build_settings(layers))


def score_run(
    qrels: str | Path | dict,
    run: str | Path | dict,
    *,
    k_values: Sequence[int] | None = None,
    ignore_identical_ids: bool = False,
) -> dict[str, float]:
    """Metrics (MTEB key names) of a precomputed run against qrels, no model involved."""
    return rank_run(qrels, run, k_values=k_values, ignore_identical_ids=ignore_identical_ids).to_mteb()
