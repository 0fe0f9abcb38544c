"""What a task makes a model do, learned without a model: the texts it encodes per role, in which calls, and the
queries and corpus a retrieval task searches (the memory guard's and ``run --dry-run``'s input).

:func:`task_workload` runs the task's protocol on :class:`SizingModel`, an encoder and a searcher that records and
computes nothing: an encode call is answered with vectors of no width, a search with an empty ranking. A retrieval
task so neither encodes its corpus nor scores it; every other protocol runs until it has made its encode calls and
begins to score, where vectors of no width stop it at once (that error is expected, and dropped; an error before
any call is the task's own, and raised). A protocol that scores between calls (legacy clustering, set by set) is
sized by the calls it makes before its first scoring. The task's data is read as the run reads it (chunking and
``limits`` applied); warnings and log lines are silenced (the run says them).

>>> from embedscope.settings import RunSettings
>>> from embedscope.testing.tiny import tiny_retrieval_task
>>> work = task_workload(tiny_retrieval_task(), RunSettings().search_options(show_progress=False))
>>> work.texts(), work.search is not None
({'query': 3, 'document': 4}, True)
"""

from __future__ import annotations

import heapq
import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from embedscope.retrieval.base import SearchOptions
from embedscope.retrieval.roles import Search
from embedscope.tasks.base import Task
from embedscope.types import Corpus, Queries, RankedRun, Role


@dataclass(frozen=True)
class Searched:
    """A retrieval task's search: its queries and the corpus they search (texts as the run encodes them)."""

    queries: tuple[str, ...]
    documents: tuple[str, ...]


Call = tuple[Role, tuple[str, ...], bool]
"""An encode call: its role, its texts, and whether it is a searched corpus (encoded ``corpus_chunk_size`` texts a
call by dense search)."""


@dataclass
class TaskWorkload:
    """The encode calls (role, texts) a task makes and its searches, split by split; :meth:`calls` gives a retrieval
    task's search as its query call and its corpus call."""

    task: str
    splits: list[tuple[list[tuple[Role, tuple[str, ...]]], list[Searched]]] = field(default_factory=list)

    @property
    def encoded(self) -> list[tuple[Role, tuple[str, ...]]]:
        """Every encode call the protocol made itself, split after split."""
        return [call for encoded, _ in self.splits for call in encoded]

    @property
    def searches(self) -> list[Searched]:
        return [s for _, searches in self.splits for s in searches]

    @property
    def search(self) -> Searched | None:
        """The largest search (one per split)."""
        return max(self.searches, key=lambda s: len(s.queries) * len(s.documents), default=None)

    def split_calls(self) -> list[list[Call]]:
        """Each split's encode calls: the protocol's own, and each search's query and corpus calls."""
        out = []
        for encoded, searches in self.splits:
            calls: list[Call] = [(role, texts, False) for role, texts in encoded]
            for s in searches:
                calls += [("query", s.queries, False), ("document", s.documents, True)]
            out.append(calls)
        return out

    def calls(self) -> list[Call]:
        """Every encode call, split after split."""
        return [call for calls in self.split_calls() for call in calls]

    def distinct(self) -> dict[Role, list[str]]:
        """The distinct texts per role, in first-seen order."""
        seen: dict[Role, dict[str, None]] = {}
        for role, texts, _ in self.calls():
            seen.setdefault(role, {}).update(dict.fromkeys(texts))
        return {role: list(texts) for role, texts in seen.items()}

    def texts(self) -> dict[Role, int]:
        """How many distinct texts each role has."""
        return {role: len(texts) for role, texts in self.distinct().items()}


LONGEST = 16  # the longest texts (by characters) a summary keeps of each call, whose tokens are counted
TEXT_OVERHEAD = 100  # a text's Python object and its id, beside its characters


@dataclass(frozen=True)
class CallSummary:
    """One encode call as the memory estimate needs it: its role, how many texts, its :data:`LONGEST` longest texts
    by characters, and whether it is a searched corpus."""

    role: Role
    texts: int
    longest: tuple[str, ...]
    chunked: bool


@dataclass(frozen=True)
class WorkSummary:
    """A :class:`TaskWorkload` without its texts (a run keeps one per task while its models run): each split's
    calls, the characters of its distinct texts (plus :data:`TEXT_OVERHEAD` each), and its largest search's
    queries and documents."""

    task: str
    splits: tuple[tuple[CallSummary, ...], ...]
    text_bytes: int
    queries: int
    documents: int


def summarize(work: TaskWorkload) -> WorkSummary:
    """``work`` without its texts (see :class:`WorkSummary`)."""
    splits = tuple(
        tuple(
            CallSummary(role, len(texts), tuple(heapq.nlargest(LONGEST, texts, key=len)), chunked)
            for role, texts, chunked in calls
        )
        for calls in work.split_calls()
    )
    text_bytes = sum(len(t) + TEXT_OVERHEAD for texts in work.distinct().values() for t in texts)
    search = work.search
    queries, documents = (len(search.queries), len(search.documents)) if search is not None else (0, 0)
    return WorkSummary(work.task, splits, text_bytes, queries, documents)


class SizingModel:
    """An encoder and a searcher that records the calls a protocol makes (see the module docstring)."""

    name = "embedscope/sizing"
    revision = "0"
    fingerprint = "embedscope-sizing"
    similarity = "cosine"
    embed_dim = 0

    def __init__(self) -> None:
        self.encoded: list[tuple[Role, tuple[str, ...]]] = []
        self.searches: list[Searched] = []
        self.prompts: dict[str, str] = {}

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        texts = tuple(texts)
        self.encoded.append((role, texts))
        return np.zeros((len(texts), 0), dtype=np.float32)  # no width: the protocol's scoring stops at once

    def search_stages(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> Search:
        self.searches.append(Searched(tuple(queries.texts), tuple(corpus.texts)))
        n = len(queries)
        empty = RankedRun(tuple(queries.ids), tuple(corpus.ids), np.zeros((n, 0), np.int64), np.zeros((n, 0)))
        return Search(empty, {})


@contextmanager
def quiet() -> Iterator[None]:
    """No warnings and no log lines below errors while a protocol is sized (the run itself says them)."""
    manager = logging.root.manager
    before = manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


def task_workload(task: Task, options: SearchOptions) -> TaskWorkload:
    """What ``task`` makes a model encode and search on its eval splits (see the module docstring)."""
    work = TaskWorkload(task.name)
    options = replace(options, latency_sample=None, show_progress=False)
    with quiet():
        for split in task.eval_splits:
            sizing: Any = SizingModel()
            try:
                task.evaluate_split(split, sizing, options)
            except Exception:
                if not sizing.encoded and not sizing.searches:
                    raise  # not the scoring of vectors of no width: the task's own error, as the run would meet it
            work.splits.append((sizing.encoded, sizing.searches))
    return work
