"""What every task type shares: the options a run passes down, and what scoring one split returns.

A task is declarative data (its :class:`TaskInfo`: name, languages, revision, subset, description, where
its data comes from; its type's protocol parameters, splits and main score) plus one method,
``evaluate_split(split, encoder, options) -> SplitOutcome``, that runs the task type's MTEB protocol on
one split. The runner needs nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from embedscope.models.base import Encoder
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
    type: ClassVar[str]


# The TaskInfo fields last, in this order, as in the stored ``task_settings`` of results written before
# TaskInfo existed (see :func:`embedscope.results.settings.task_settings`).
INFO_FIELDS = ("languages", "dataset_revision", "hf_subset", "description", "source", "type")


@runtime_checkable
class Task(Protocol):
    """The interface the runner uses; every task type's dataclass satisfies it."""

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

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome: ...


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
