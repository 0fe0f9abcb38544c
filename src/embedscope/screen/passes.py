"""What a screen's passes share: one model's run through the runner, its mean score with bootstrap replicates, and
what is recorded of each screened model (:mod:`embedscope.screen.run` and :mod:`embedscope.screen.rounds` use them)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.core import CompareOptions
from embedscope.compare.items import TaskItems, pair_statistic, task_items
from embedscope.compare.stats import bootstrap_index_blocks
from embedscope.errors import ConfigError
from embedscope.results.usage import recorded_usage
from embedscope.settings import RunSettings
from embedscope.settings.run import ModelEntry, ModelOptions, ModelRun

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MeanScore:
    """A model's mean main score over tasks, its bootstrap interval and each task's score."""

    mean: float
    ci_low: float
    ci_high: float
    tasks: dict[str, float]

    def overlaps(self, other: MeanScore) -> bool:
        """Whether the two intervals share a point."""
        return self.ci_low <= other.ci_high and other.ci_low <= self.ci_high


def score_replicates(items: TaskItems, options: CompareOptions, seed: int) -> np.ndarray:
    """The task's main score on ``options.rounds`` resamples of its items (the statistic compare tests: the mean of
    per-item values, or the pair statistic recomputed); the score itself on every round when it has no items."""
    n = len(items.keys)
    if items.kind == "mean" and n >= 2:
        values = items.values
        return np.concatenate([values[idx].mean(axis=1) for idx in bootstrap_index_blocks(n, options.rounds, seed)])
    stat = pair_statistic(items.metric) if items.kind == "pairs" else None
    if stat is not None and n >= 2:
        columns = items.columns
        return np.concatenate([stat(columns, idx) for idx in bootstrap_index_blocks(n, options.rounds, seed)])
    return np.full(options.rounds, items.score)


def mean_replicates(tasks: Mapping[str, TaskItems], options: CompareOptions) -> np.ndarray:
    """The mean main score over ``tasks`` on each of ``options.rounds`` resamples (tasks resampled independently,
    task ``i`` in sorted order with seed ``options.seed + i``, so every model gets the same resamples: replicate
    ``r`` of two models is a paired draw)."""
    names = sorted(tasks)
    return np.mean([score_replicates(tasks[t], options, options.seed + i) for i, t in enumerate(names)], axis=0)


def mean_score(
    tasks: Mapping[str, TaskItems], options: CompareOptions, replicates: np.ndarray | None = None
) -> MeanScore:
    """Mean main score over ``tasks`` and the percentile interval of ``replicates`` (default: computed here by
    :func:`mean_replicates`; a caller that already has them passes them)."""
    names = sorted(tasks)
    scores = {t: tasks[t].score for t in names}
    means = mean_replicates(tasks, options) if replicates is None else replicates
    means = means[np.isfinite(means)]
    c = options.confidence
    low, high = np.quantile(means, [(1 - c) / 2, (1 + c) / 2]) if len(means) else (math.nan, math.nan)
    return MeanScore(float(np.mean(list(scores.values()))), float(low), float(high), scores)


def kendall_tau(fast: Sequence[float], exact: Sequence[float]) -> float:
    """Kendall's τ-b of the two rankings (``scipy.stats.kendalltau`` of the scores); nan for fewer than 2 models."""
    from scipy.stats import kendalltau

    if len(fast) < 2:
        return math.nan
    return float(kendalltau(fast, exact).statistic)


@dataclass
class ScreenedModel:
    """One model of a screen: its fast and (when confirmed) exact results."""

    model: str  # as given
    name: str = ""  # as its results are filed
    fast_applied: bool = True
    fast_path: str | None = None  # the fast path it ran on (None: exact, or a proxy screen on the exact path)
    fast_overrides: dict[str, Any] = field(default_factory=dict)  # that fast path's model options
    note: str = ""  # why the fast path did not apply, or why the first ones tried did not
    fast: MeanScore | None = None
    exact: MeanScore | None = None
    fast_folder: Path | None = None
    exact_folder: Path | None = None
    fast_seconds: float = 0.0
    exact_seconds: float = 0.0
    fidelity: list[dict[str, Any]] = field(default_factory=list)  # per task: shift with CI and agreement

    @property
    def shift(self) -> float:
        """Exact minus fast mean score (nan when not confirmed)."""
        return self.exact.mean - self.fast.mean if self.exact and self.fast else math.nan


def one_model(settings: RunSettings, run: ModelRun, overrides: Mapping[str, Any]) -> RunSettings:
    """``settings`` with ``run`` as its only model, its options with ``overrides``."""
    entry = ModelEntry.model_validate(
        {"model": run.model, **run.options, **overrides, "tasks": run.tasks, "batch_size": run.batch_size}
    )
    return settings.model_copy(
        update={"model": None, "models": [entry], "pipeline": None, "pipelines": [], "model_options": ModelOptions()}
    )


@dataclass
class Pass:
    """One model's run: each task's items and task object, its results folder and name, its wall time."""

    items: dict[str, TaskItems]
    tasks: dict[str, Any]
    folder: Path
    name: str
    seconds: float
    # per task: the seconds of each measured phase but loading its data (:func:`work_phases`)
    work: dict[str, dict[str, float]] = field(default_factory=dict)
    # per task: the tokens its texts cost a model behind an API (None: the model calls no API)
    tokens: dict[str, float | None] = field(default_factory=dict)


def work_phases(result: Any) -> dict[str, float]:
    """A task result's measured seconds per phase (``evaluation_phases`` summed by name over splits) but loading
    its data: encoding, search, scoring; its whole ``evaluation_time`` as phase ``"*"`` when it has no phases.

    >>> from types import SimpleNamespace
    >>> phases = [{"name": "encode_queries", "start": 0.0, "end": 2.0}, {"name": "load_data", "start": 2.0, "end": 9.0}]
    >>> work_phases(SimpleNamespace(evaluation_phases=phases, evaluation_time=9.0))
    {'encode_queries': 2.0}
    """
    phases = result.evaluation_phases or []
    if not phases:
        return {"*": float(result.evaluation_time or 0.0)}
    out: dict[str, float] = {}
    for p in phases:
        if p["name"] != "load_data":
            out[p["name"]] = out.get(p["name"], 0.0) + float(p["end"] - p["start"])
    return out


def needed_tokens(result: Any) -> float | None:
    """The tokens a task result's texts cost a model behind an API: those billed plus those the cache spared (its
    recorded ``api_usage``), so a re-run served from the cache estimates the same; None for a model with no API."""
    usage = recorded_usage(result.extra)
    if usage is None:
        return None
    return float(usage.get("tokens") or 0) + float(usage.get("avoided_tokens") or 0)


def run_one(settings: RunSettings, confirms: bool = False) -> Pass:
    """Run the one model of ``settings`` through the runner (stored results and the cache are reused); only a
    confirming run (exact, on the full tasks) is recorded in the results store, when one is set."""
    from embedscope.evaluation.runner import run

    started = time.perf_counter()
    (report,) = run(settings, record=confirms)
    if report.recorded is not None and report.recorded.error:
        logger.warning("%s", report.recorded.error)
    seconds = time.perf_counter() - started
    if not report.outcomes:
        raise ConfigError(f"screen: none of the tasks applies to {report.model_name}")
    items = {o.task.name: task_items(o.path) for o in report.outcomes}
    tasks = {o.task.name: o.task for o in report.outcomes}
    work = {o.task.name: work_phases(o.result) for o in report.outcomes}
    tokens = {o.task.name: needed_tokens(o.result) for o in report.outcomes}
    return Pass(items, tasks, report.outcomes[0].path.parent, report.model_name, seconds, work, tokens)


def mean_of(score: MeanScore | None) -> float:
    return score.mean if score is not None else math.nan


def built_model(settings: RunSettings, run: ModelRun, overrides: Mapping[str, Any], cache: Any = None) -> Any:
    """The model of ``run`` with ``overrides`` as the runner builds it (an encoder loads lazily)."""
    from embedscope.evaluation.models import build_model

    one = one_model(settings, run, overrides)
    return build_model(one.model_runs()[0], one, cache)
