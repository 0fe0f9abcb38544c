"""Model roles: what a task needs of the model it is given, and the adapters that provide it.

A model is an :class:`~embedscope.models.base.Encoder` (texts → vectors), a
:class:`~embedscope.retrieval.pipeline.Pipeline` (a :class:`Searcher` of numbered stages), or a candidate
scorer (a :class:`~embedscope.retrieval.base.Reranker`, such as a cross-encoder: a pipeline of that one
reranker). Retrieval tasks need a searcher and reranking tasks a candidate scorer or an encoder (mteb's
encoder protocols); :func:`as_searcher` and :func:`as_candidate_scorer` turn what was given into what is
needed, as mteb's ``SearchEncoderWrapper`` turns an encoder into a search model. Tasks ask for roles and
never test for a model's class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from embedscope.retrieval.base import Reranker, SearchOptions
from embedscope.types import Corpus, Queries, RankedRun

if TYPE_CHECKING:
    from embedscope.models.base import Encoder
    from embedscope.retrieval.pipeline import StageRun


@dataclass
class Search:
    """A searcher's output: the final run, what each phase took (seconds) and, for a pipeline, every stage's run
    (each scored on its own)."""

    run: RankedRun
    timings: dict[str, float]
    stages: tuple[StageRun, ...] = ()


@runtime_checkable
class Searcher(Protocol):
    """Queries + corpus → each query's ranked documents (what a retrieval task needs).

    Examples:
        >>> from embedscope import Pipeline, Searcher
        >>> from embedscope.retrieval.roles import as_searcher
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> isinstance(as_searcher(KeywordEncoder(["cat"])), Searcher), isinstance(Pipeline.build("fts5"), Searcher)
        (True, True)
    """

    name: str

    def search_stages(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> Search: ...


class EncoderSearcher:
    """An encoder as a searcher: MTEB's exact dense search, one stage (no per-stage scores)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name = encoder.name

    def search_stages(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> Search:
        from embedscope.retrieval.dense import dense_search

        timings: dict[str, float] = {}
        run = dense_search(self.encoder, queries, corpus, options, timings)
        return Search(run, timings)


def _has_method(model: Any, name: str) -> bool:
    """Asked of the class: an instance may forward unknown attributes to a model it would load first
    (:class:`~embedscope.models.lazy.LazyEncoder`)."""
    return callable(getattr(type(model), name, None))


def as_searcher(model: Encoder | Searcher) -> Searcher:
    """The model as a searcher: itself when it searches (a pipeline), else the encoder's dense search."""
    if _has_method(model, "search_stages"):
        return cast(Searcher, model)
    return EncoderSearcher(cast("Encoder", model))


def scores_candidates(model: Any) -> bool:
    """Whether the model scores given candidates itself (a pipeline, a cross-encoder) rather than being an
    encoder that a reranking task scores with mteb's encoder protocol."""
    return _has_method(model, "candidate_scorer")


def as_candidate_scorer(model: Any) -> Reranker:
    """What scores a reranking task's given candidates (see :func:`scores_candidates`)."""
    return model.candidate_scorer()


ROLE_METHODS = {"encoder": "encode", "searcher": "search_stages", "candidate_scorer": "candidate_scorer"}


def model_roles(model: Any) -> frozenset[str]:
    """The roles a model plays itself: ``encoder`` (texts → vectors), ``searcher`` (a pipeline), ``candidate_scorer``
    (it scores given candidates). A task type lists the roles it can evaluate (``TaskType.model_roles``).

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> sorted(model_roles(KeywordEncoder(["a"])))
    ['encoder']
    """
    roles = {role for role, method in ROLE_METHODS.items() if _has_method(model, method)}
    if "candidate_scorer" in roles and not getattr(model, "scores_candidates", True):
        roles.discard("candidate_scorer")
    if "searcher" in roles and not getattr(model, "searches", True):
        roles.discard("searcher")
    return frozenset(roles)
