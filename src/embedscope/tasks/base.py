"""What every task type shares: the options a run passes down, and what scoring one split returns.

A task is declarative data (its :class:`TaskInfo`: name, languages, revision, subset, description, where
its data comes from; its type's protocol parameters, splits and main score) plus one method,
``evaluate_split(split, encoder, options) -> SplitOutcome``, that runs the task type's MTEB protocol on
one split. The runner needs nothing else, but one optional hook: a task whose ``encoder_within`` is set (a
screen's row proxy, :mod:`embedscope.tasks.proxy`) is given the encoder that hook makes of the run's.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from embedscope.models.base import Encoder, Similarity
from embedscope.models.recorder import CallRecorder
from embedscope.retrieval.base import SearchOptions
from embedscope.types import RankedRun


@dataclass(frozen=True)
class StageOutcome:
    """One pipeline stage's scores on a split, and what it cost (seconds, peak memory)."""

    stage: str
    name: str
    kind: str
    scores: dict[str, float]
    stats: dict[str, float] = field(default_factory=dict)
    per_item: Mapping[str, Sequence[Any]] | None = None
    failures: Mapping[str, float] | None = None
    """For a stage that ranks given candidates (a reranker, a fusion): the failure counts and the loss split of
    :meth:`embedscope.metrics.failures.LossSplit.as_dict`; its per-item rows hold each query's attribution."""


@dataclass(frozen=True)
class SplitOutcome:
    """What scoring one split produced: MTEB-keyed scores, timings, sizes and, for rankings, the run.

    ``per_item`` holds columns of equal length, ``id`` first: per query (rankings: every per-query metric
    and ``top_10`` doc ids) or per pair (STS and pair classification: each similarity and ``gold``);
    see :mod:`embedscope.results.per_item`.
    """

    scores: dict[str, float]
    run: RankedRun | None = None
    timings: dict[str, float] = field(default_factory=dict)
    n_queries: int = 0
    n_documents: int = 0
    stages: tuple[StageOutcome, ...] = ()
    per_item: Mapping[str, Sequence[Any]] | None = None
    latency: Mapping[str, Any] | None = None  # retrieval's per-query latency sample (retrieval.latency)


@dataclass(frozen=True)
class TaskInfo:
    """What names and describes a task, shared by every task type's dataclass (which extends it).

    ``name`` stays the first positional field; the others are keyword-only, so a task type's own fields
    follow ``name`` as before. ``type`` is the class's registered type name (see :mod:`embedscope.tasks.types`).
    """

    name: str
    _: KW_ONLY
    languages: tuple[str, ...] = ("eng-Latn",)
    dataset_revision: str = "custom"
    hf_subset: str = "default"
    description: str = ""
    source: str = ""
    encoder_within: Callable[[Any, SearchOptions], Any] | None = field(default=None, compare=False, repr=False)
    """Set on a screen's row proxy only (:func:`~embedscope.tasks.proxy.proxy_task`): the encoder its protocol is
    given, made from the run's, which encodes each call within the full task's call that holds its texts (so a full
    run of the model is served those vectors). Not a protocol parameter: never recorded."""
    type: ClassVar[str]


# The TaskInfo fields last, in this order, as in the stored ``task_settings`` of results written before
# TaskInfo existed (see :func:`embedscope.results.settings.task_settings`).
INFO_FIELDS = ("languages", "dataset_revision", "hf_subset", "description", "source", "type")


@runtime_checkable
class Task(Protocol):
    """The interface the runner uses; every task type's dataclass satisfies it.

    Examples:
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> task = tiny_retrieval_task()
        >>> task.type, task.main_score, task.eval_splits
        ('Retrieval', 'ndcg_at_10', ('test',))
    """

    # Read-only properties: task dataclasses are frozen, and ``type`` is a ClassVar.
    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def eval_splits(self) -> tuple[str, ...]: ...

    @property
    def main_score(self) -> str: ...

    @property
    def languages(self) -> tuple[str, ...]: ...

    @property
    def dataset_revision(self) -> str: ...

    @property
    def hf_subset(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def source(self) -> str: ...

    def evaluate_split(self, split: str, encoder: Any, options: SearchOptions) -> SplitOutcome:
        """Score one split. ``encoder`` is the model: an :class:`Encoder`, or a model that plays the roles this
        task type evaluates (``TaskType.model_roles``; see :mod:`embedscope.retrieval.roles`)."""
        ...


def recorded_protocol(task: Task, options: SearchOptions) -> CallRecorder:
    """A :class:`~embedscope.models.recorder.CallRecorder` run through the task's protocol on its eval splits (its
    scores discarded, warnings silenced): the calls the task makes and the texts it encodes, without a model.

    >>> from embedscope.testing.tiny import tiny_tasks_of_every_type
    >>> from embedscope.settings import RunSettings
    >>> sts = next(t for t in tiny_tasks_of_every_type() if t.type == "STS")
    >>> [(role, len(texts)) for role, texts, _ in recorded_protocol(sts, RunSettings().search_options()).calls]
    [('document', 24), ('document', 24)]
    """
    recorder = CallRecorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for split in task.eval_splits:
            task.evaluate_split(split, recorder, options)
    return recorder


def encode_columns(
    encoder: Encoder, first: Sequence[str], second: Sequence[str], options: SearchOptions
) -> tuple[Any, Any]:
    """The two text columns of a paired dataset (STS, pair classification, bitext mining), each encoded in one
    call as documents, as mteb encodes them."""
    kwargs: dict[str, Any] = {
        "role": "document",
        "batch_size": options.batch_size,
        "show_progress": options.show_progress,
    }
    return encoder.encode(list(first), **kwargs), encoder.encode(list(second), **kwargs)


class PhaseClock:
    """Seconds spent in each phase of scoring a split: ``lap(phase)`` closes the phase begun at the previous lap.

    >>> clock = PhaseClock()
    >>> clock.lap("load_data"); clock.lap("encode")
    >>> list(clock.timings)
    ['load_data', 'encode']
    """

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._mark = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + now - self._mark
        self._mark = now


def item_ids(n: int) -> list[str]:
    """The per-item ids of rows that have none of their own: their positions, as text."""
    return [str(i) for i in range(n)]


@dataclass(frozen=True)
class PairScores:
    """What a paired-text protocol computes from the two encoded columns: its scores, the per-item columns (besides
    ``id``) and, where the second column is a corpus of its own, its size."""

    scores: dict[str, float]
    columns: Mapping[str, Sequence[Any]]
    n_documents: int = 0


class PairedTexts(Protocol):
    """A split of two text columns (STS, pair classification, bitext mining): ``head`` keeps the first rows."""

    @property
    def sentence1(self) -> Sequence[str]: ...

    @property
    def sentence2(self) -> Sequence[str]: ...

    def __len__(self) -> int: ...

    def head(self, n: int | None) -> Any: ...


class PairedTextTask:
    """The shared part of a paired-text task's ``evaluate_split``: load the split (its first ``options.limits`` rows),
    encode both columns as documents (mteb's way), time each phase and number the items. A task type supplies its
    protocol, :meth:`score_pairs`, and ``load_split``."""

    load_split: Any

    def score_pairs(self, data: Any, first: Any, second: Any, similarity: Similarity) -> PairScores:
        raise NotImplementedError

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load ``split`` (its first ``options.limits`` rows if set) and score it with the type's protocol."""
        clock = PhaseClock()
        data: PairedTexts = self.load_split(split).head(options.limits)
        clock.lap("load_data")
        first, second = encode_columns(encoder, data.sentence1, data.sentence2, options)
        clock.lap("encode")
        scored = self.score_pairs(data, first, second, encoder.similarity)
        clock.lap("metrics")
        per_item = {"id": item_ids(len(data)), **scored.columns}
        return SplitOutcome(
            scored.scores,
            timings=clock.timings,
            n_queries=len(data),
            n_documents=scored.n_documents,
            per_item=per_item,
        )
