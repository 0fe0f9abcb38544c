"""What every retrieval stage shares: run-wide options, the retriever and reranker interfaces,
and helpers to build and reorder runs.

A *retriever* turns queries and a corpus into a :class:`~embedscope.types.RankedRun` (BM25, FTS5,
dense, ColBERT). A *reranker* reorders the candidates of an existing run (cross-encoder,
bi-encoder, ColBERT); its scoring is one function, ``score_candidates``, that returns a score per
candidate slot, so the same reranker serves two-stage pipelines and MTEB reranking tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embedscope.data.documents import ChunkOptions
from embedscope.errors import ConfigError, DataFormatError
from embedscope.types import Corpus, EncodedWithin, Queries, RankedRun, Texts

RECORDED = "recorded"
"""A :class:`SearchOptions` field's metadata key: how results record it — ``always`` (every result, set or not),
``when set`` (only when it is not its default: results stored before it existed still match) or ``never`` (it
changes no score)."""
EVALUATION = "evaluation"
"""A :class:`SearchOptions` field's metadata key: True when the field defines the evaluation (which queries and
documents are scored, how deep) rather than the system under test, so that a gate refuses results that differ in it."""


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """Run-wide options; each stage uses the ones that apply to it. Built from the run settings
    (:meth:`embedscope.settings.RunSettings.search_options`), where each one's default lives; every field is a
    ``RunSettings`` key of the same name. A field that changes a score is recorded in each result and names its
    experiments folder (its ``recorded`` metadata says how)."""

    top_k: int = field(metadata={RECORDED: "always", EVALUATION: True})
    limits: int | None = field(metadata={RECORDED: "always", EVALUATION: True})
    corpus_chunk_size: int = field(metadata={RECORDED: "always"})
    filter_field: str | None = field(metadata={EVALUATION: True})
    """A metadata field (:class:`~embedscope.types.Texts`): each query searches only the documents whose
    value equals its own (compared as text). BM25 and FTS5 keep the statistics of the whole corpus (one
    index, filtered); dense and late-interaction search rank the matching documents as they would alone."""
    group_by: str | None = field(metadata={EVALUATION: True})
    """A metadata field of the queries: each query's value (as text) is its group; results hold each group's main
    score, bootstrap CI and query count, and each per-item row its ``group`` (:mod:`embedscope.compare.groups`)."""
    truncate_dim: int | None
    """Dense retrieval only (:mod:`~embedscope.retrieval.compression`): the first ``truncate_dim`` dimensions of each
    vector, as the embedding cache holds it (the encoder call is unchanged)."""
    precision: str  # dense retrieval only: fp32 | int8 | binary (compression.compressed_search)
    rescore_multiplier: int | None  # dense int8/binary: rescore the top r × top_k, float query
    index: Mapping[str, Any] | None  # dense only: an approximate index spec (retrieval.ann.parse_index)
    chunking: ChunkOptions | None
    """Documents → passages before search (retrieval tasks): the run's chunking, over a task's own default."""
    batch_size: int | None = field(metadata={RECORDED: "never"})  # None: the model's default for its device
    show_progress: bool = field(metadata={RECORDED: "never"})
    latency_sample: int | None = field(metadata={RECORDED: "never"})
    """Dense retrieval only (:mod:`~embedscope.retrieval.latency`): after the batch search, time this many sampled
    queries one at a time (query encode by the model + search); scores are unchanged."""

    @classmethod
    def recorded(cls, how: str) -> tuple[str, ...]:
        """The fields results record ``how`` (``always``, ``when set`` or ``never``), in their recorded order."""
        return tuple(f.name for f in fields(cls) if f.metadata.get(RECORDED, "when set") == how)

    @classmethod
    def evaluation_fields(cls) -> tuple[str, ...]:
        """The fields that define the evaluation rather than the system under test (``EVALUATION`` metadata).

        >>> SearchOptions.evaluation_fields()
        ('top_k', 'limits', 'filter_field', 'group_by')
        """
        return tuple(f.name for f in fields(cls) if f.metadata.get(EVALUATION))

    @property
    def post_processes(self) -> bool:
        """Whether dense search departs from MTEB's exact fp32 search (truncation, quantization or an index)."""
        return self.truncate_dim is not None or self.precision != "fp32" or self.index is not None


@runtime_checkable
class Retriever(Protocol):
    """Queries + corpus → each query's top ``options.top_k`` documents (every query gets a row)."""

    name: str
    fingerprint: str

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores given (query, candidate) pairs; higher is better."""

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def score_candidates(
        self, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
    ) -> np.ndarray:
        """float64 ``[n_queries, depth]`` scores for ``candidates.doc_index`` (ignored where it is −1).

        ``candidates.doc_ids`` must be ``corpus.ids`` (the run indexes the corpus).
        """
        ...


def run_from_rows(
    query_ids: tuple[str, ...],
    doc_ids: tuple[str, ...],
    rows: Sequence[tuple[np.ndarray | Sequence[int], np.ndarray | Sequence[float]]],
) -> RankedRun:
    """A run from per-query ``(doc_index, scores)`` rows of any lengths (padded with −1 / −inf).

    >>> run = run_from_rows(("q1", "q2"), ("d1", "d2"), [(np.array([1]), np.array([0.5])), (np.array([]), np.array([]))])
    >>> run.doc_index.tolist()
    [[1], [-1]]
    """
    depth = max((len(idx) for idx, _ in rows), default=0)
    index = np.full((len(rows), depth), -1, dtype=np.int64)
    scores = np.full((len(rows), depth), -np.inf, dtype=np.float64)
    for i, (idx, values) in enumerate(rows):
        index[i, : len(idx)] = idx
        scores[i, : len(idx)] = values
    return RankedRun(tuple(query_ids), tuple(doc_ids), index, scores)


def sort_and_cut(run: RankedRun, top_k: int) -> RankedRun:
    """Each row sorted by score (descending, ties by corpus order; empty slots last), first ``top_k`` kept.

    >>> run = RankedRun(("q",), ("a", "b", "c"), np.array([[0, 2, -1]]), np.array([[0.1, 0.9, -np.inf]]))
    >>> sort_and_cut(run, 1).doc_index.tolist()
    [[2]]
    """
    scores = np.where(run.doc_index >= 0, run.scores, -np.inf)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    # lexsort: last key is primary → score descending, then doc index ascending, empty slots last.
    empty = run.doc_index < 0
    order = np.lexsort((np.where(empty, np.iinfo(np.int64).max, run.doc_index), -scores, empty), axis=1)
    order = order[:, : min(top_k, run.depth)]
    index = np.take_along_axis(run.doc_index, order, axis=1)
    values = np.take_along_axis(scores, order, axis=1)
    values[index < 0] = -np.inf
    return RankedRun(run.query_ids, run.doc_ids, index, values)


def rerank(
    reranker: Reranker, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
) -> RankedRun:
    """Reorder ``candidates`` by the reranker's scores and keep the top ``options.top_k``.

    Queries whose relevant documents are not among the candidates stay misses: nothing outside
    the candidates can be ranked.
    """
    if tuple(candidates.doc_ids) != tuple(corpus.ids):
        raise ValueError("candidates must index the corpus (run.doc_ids == corpus.ids)")
    scores = reranker.score_candidates(queries, corpus, candidates, options)
    if scores.shape != candidates.doc_index.shape:
        raise ValueError(f"{reranker.name}: {scores.shape} scores for {candidates.doc_index.shape} candidates")
    scored = RankedRun(candidates.query_ids, candidates.doc_ids, candidates.doc_index, scores.astype(np.float64))
    return sort_and_cut(scored, options.top_k)


def unique_candidates(doc_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct corpus indices among candidate slots, and each slot's position in that list (−1 = empty).

    >>> uniq, pos = unique_candidates(np.array([[1, 1, -1]]))
    >>> uniq.tolist(), pos.tolist()
    ([1], [[0, 0, -1]])
    """
    valid = doc_index >= 0
    uniq, inverse = np.unique(doc_index[valid], return_inverse=True)
    pos = np.full(doc_index.shape, -1, dtype=np.int64)
    pos[valid] = inverse
    return uniq, pos


@dataclass(frozen=True)
class FilterGroup:
    """The queries that share a filter value, and the corpus rows that hold it."""

    value: str
    query_rows: np.ndarray
    doc_rows: np.ndarray


def filter_values(texts: Texts, name: str, kind: str) -> list[str | None]:
    """Each row's value of metadata field ``name`` as text (None where it has none); a ConfigError
    when no row has the field."""
    values = texts.metadata.get(name)
    if values is None:
        known = ", ".join(sorted(texts.metadata)) or "none"
        raise ConfigError(
            f"filter field {name!r}: the {kind} have no metadata field of that name (their fields: {known}); "
            "add it to each row (a column, or BEIR's metadata object)"
        )
    _one_value_type(values, name, kind)
    return [None if v is None else str(v) for v in values]


def _one_value_type(values: Sequence[object], name: str, kind: str) -> None:
    """A ConfigError when the field's values are of more than one type (``1`` and ``"1"`` compare as text, so a
    mix would match or miss silently), naming an example of each."""
    examples: dict[str, object] = {}
    for v in values:
        if v is not None:
            examples.setdefault(type(v).__name__, v)
    if len(examples) > 1:
        shown = ", ".join(f"{kind_!s} {v!r}" for kind_, v in examples.items())
        raise ConfigError(f"filter field {name!r}: the {kind} mix value types ({shown}); give every row the same type")


def filter_groups(queries: Queries, corpus: Corpus, name: str) -> list[FilterGroup]:
    """The queries grouped by their value of ``name`` (in order of first appearance), each with the corpus
    rows of equal value. A query without a value is a DataFormatError naming it."""
    query_values = filter_values(queries, name, "queries")
    doc_values = filter_values(corpus, name, "documents")
    missing = [q for q, v in zip(queries.ids, query_values) if v is None]
    if missing:
        raise DataFormatError(
            f"filter field {name!r}: query {missing[0]!r} has no value ({len(missing)} queries without one); "
            "give every query a value or search without the filter"
        )
    docs_by_value: dict[str, list[int]] = {}
    for i, v in enumerate(doc_values):
        if v is not None:
            docs_by_value.setdefault(v, []).append(i)
    queries_by_value: dict[str, list[int]] = {}
    for i, v in enumerate(query_values):
        queries_by_value.setdefault(str(v), []).append(i)
    return [
        FilterGroup(v, np.asarray(rows, dtype=np.int64), np.asarray(docs_by_value.get(v, []), dtype=np.int64))
        for v, rows in queries_by_value.items()
    ]


def assemble_groups(
    queries: Queries, corpus: Corpus, parts: Sequence[tuple[FilterGroup, np.ndarray, np.ndarray]]
) -> RankedRun:
    """One run over the whole corpus from per-group ``(group, doc_index, scores)``, where ``doc_index``
    indexes the whole corpus (−1 = empty slot); query rows in the order of ``queries``."""
    rows: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0, dtype=np.int64), np.zeros(0))] * len(queries)
    for group, index, scores in parts:
        for r, q in enumerate(group.query_rows.tolist()):
            keep = index[r] >= 0
            rows[q] = (index[r][keep], scores[r][keep])
    return run_from_rows(tuple(queries.ids), tuple(corpus.ids), rows)


def search_each_group(
    retrieve: Callable[[Queries, Corpus, SearchOptions], RankedRun],
    queries: Queries,
    corpus: Corpus,
    options: SearchOptions,
) -> RankedRun:
    """``options.filter_field`` by restriction: each group of queries is searched (``retrieve``, without the
    filter) over the matching documents alone, so a document's score and rank are those it has among them
    (dense and late-interaction search, whose scores do not depend on the other documents)."""
    assert options.filter_field is not None
    plain = replace(options, filter_field=None)
    parts: list[tuple[FilterGroup, np.ndarray, np.ndarray]] = []
    for group in filter_groups(queries, corpus, options.filter_field):
        if not len(group.doc_rows):
            continue
        run = retrieve(queries.select(group.query_rows.tolist()), corpus.select(group.doc_rows.tolist()), plain)
        index = np.where(run.doc_index >= 0, group.doc_rows[np.maximum(run.doc_index, 0)], -1)
        parts.append((group, index, run.scores))
    return assemble_groups(queries, corpus, parts)


def merge_top_k(best_scores, best_idx, scores, idx, top_k: int):  # torch tensors
    """The ``top_k`` best of the union of a running top-k (None at first) and a chunk's: how dense and sparse search
    merge corpus chunks (``torch.topk`` of the concatenation, so ties keep MTEB's order)."""
    import torch

    if best_scores is None:
        all_scores, all_idx = scores, idx
    else:
        all_scores = torch.cat([best_scores, scores], dim=1)
        all_idx = torch.cat([best_idx, idx], dim=1)
    k = min(top_k, all_scores.shape[1])
    top_scores, pos = torch.topk(all_scores, k, dim=1, largest=True, sorted=True)
    return top_scores, torch.gather(all_idx, 1, pos)


def encoded_within(encoder: Any, within: EncodedWithin, rows: Sequence[int], options: SearchOptions) -> np.ndarray:
    """The vectors of the full corpus' ``rows`` as its own chunked calls make them (a proxy's documents, see
    :class:`~embedscope.types.EncodedWithin`): per chunk of the full corpus, only the batches holding a row."""
    from embedscope.models.base import encode_rows

    size = options.corpus_chunk_size
    out: np.ndarray | None = None
    for chunk in sorted({r // size for r in rows}):
        picked = [i for i, r in enumerate(rows) if r // size == chunk]
        full = within.texts[chunk * size : (chunk + 1) * size]
        vectors = encode_rows(
            encoder,
            full,
            [rows[i] - chunk * size for i in picked],
            role="document",
            batch_size=options.batch_size,
            show_progress=options.show_progress,
        )
        if out is None:
            out = np.empty((len(rows), vectors.shape[1]), dtype=np.float32)
        out[picked] = vectors
    assert out is not None
    return out
