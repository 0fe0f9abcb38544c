"""The data types that cross stage boundaries: data → models → retrieval → metrics → results.

Everything here is plain, immutable data. Texts of documents are already merged the MTEB way,
``(title + " " + text).strip()``, by the loaders in :mod:`embedscope.data`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np

Role = Literal["query", "document"]
"""Which side of a retrieval pair a text is on; it selects prompts and is part of every cache key."""

Qrels = Mapping[str, Mapping[str, int]]
"""Relevance judgments: ``{query_id: {doc_id: relevance}}``; relevance >= 1 means relevant."""

RunDict = Mapping[str, Mapping[str, float]]
"""A run as a plain mapping: ``{query_id: {doc_id: score}}`` (higher is better)."""


def merge_title(title: str | None, text: str | None) -> str:
    """Document text as MTEB and BEIR build it.

    >>> merge_title("Title", "body ")
    'Title body'
    >>> merge_title("", " body")
    'body'
    """
    title = title or ""
    text = text or ""
    return f"{title} {text}".strip() if title else text.strip()


@dataclass(frozen=True)
class EncodedWithin:
    """Where a reduced set's texts sit in the full one: the full set's ``texts`` and each text's ``rows`` there. Dense
    search encodes each text in the batch that the full set's own call puts it in (per ``corpus_chunk_size`` chunk
    for a corpus), so a later full run is served those batches by the cache, and both runs hold the same vectors (a
    screen's proxy, :mod:`embedscope.tasks.proxy`)."""

    texts: tuple[str, ...]
    rows: tuple[int, ...]


@dataclass(frozen=True)
class Texts:
    """An ordered collection of identified texts (a corpus or a query set), with optional per-row
    ``metadata``: ``{field: (value of row 0, value of row 1, …)}`` (None where a row has no value), read
    from a BEIR ``metadata`` object or a table's other columns. Search can be filtered on a field
    (``SearchOptions.filter_field``). ``within``: the full set a reduced one is encoded within
    (:class:`EncodedWithin`; a selection of rows drops it, :meth:`RetrievalData.with_positives_only` keeps it)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    metadata: Mapping[str, tuple[Any, ...]] = field(default_factory=dict, compare=False)
    within: EncodedWithin | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.texts):
            raise ValueError(f"{len(self.ids)} ids but {len(self.texts)} texts")
        for name, values in self.metadata.items():
            if len(values) != len(self.ids):
                raise ValueError(f"metadata {name!r} has {len(values)} values for {len(self.ids)} rows")
        if self.within is not None:
            full, rows = self.within.texts, self.within.rows
            if len(rows) != len(self.texts) or any(full[r] != t for r, t in zip(rows, self.texts)):
                raise ValueError("texts encoded within others must be those rows' texts")

    def __len__(self) -> int:
        return len(self.ids)

    def select(self: _TextsT, keep: Sequence[int]) -> _TextsT:
        return type(self)(
            tuple(self.ids[i] for i in keep),
            tuple(self.texts[i] for i in keep),
            {name: tuple(values[i] for i in keep) for name, values in self.metadata.items()},
        )

    def as_dict(self) -> dict[str, str]:
        return dict(zip(self.ids, self.texts))


_TextsT = TypeVar("_TextsT", bound=Texts)


class Corpus(Texts):
    """Documents to search; ``texts`` already include the title."""


class Queries(Texts):
    """Queries to run against a corpus."""


@dataclass(frozen=True)
class RetrievalData:
    """One split of a retrieval dataset."""

    corpus: Corpus
    queries: Queries
    qrels: Mapping[str, Mapping[str, int]]
    name: str = "custom"
    split: str = "test"
    source: str = ""
    revision: str = "custom"
    contexts: Mapping[str, tuple[str, ...]] | None = field(default=None, compare=False)
    """QA data whose relevance is context strings (``{query_id: (context, …)}``): a text is relevant to a query when
    it holds one of its contexts (``qrels`` were computed so over ``corpus``); chunking recomputes them per passage."""
    components: Mapping[str, tuple[tuple[str, ...], ...]] | None = field(default=None, compare=False)
    """QA data whose answers have components: per question, each component's context strings (scored with
    Modified MRR@k / Recall@k, :mod:`embedscope.metrics.components`)."""
    documents: tuple[Any, ...] | None = field(default=None, compare=False)
    """The document files the corpus was read from (one document each, in corpus order), when they are files:
    chunking reads them again so that a notebook's cells reach the paragraph strategies."""

    def with_positives_only(self) -> RetrievalData:
        """Drop queries that have no qrels entry at all, as MTEB does before searching.

        Queries whose judgments are all 0 are kept (they count in MTEB's averages).
        """
        keep = [i for i, qid in enumerate(self.queries.ids) if len(self.qrels.get(qid, {})) > 0]
        qrels = {qid: dict(docs) for qid, docs in self.qrels.items() if len(docs) > 0}
        queries, within = self.queries.select(keep), self.queries.within
        if within is not None:  # the kept queries are still encoded within the same full set
            queries = replace(queries, within=EncodedWithin(within.texts, tuple(within.rows[i] for i in keep)))
        return replace(self, queries=queries, qrels=qrels)


@dataclass(frozen=True)
class RankedRun:
    """A run in array form: for query ``i``, ``doc_index[i, j]`` indexes ``doc_ids`` (−1 = empty slot).

    Scores are float64 as given; metrics that follow trec_eval compare them as float32, like
    trec_eval does. Rows need not be sorted.
    """

    query_ids: tuple[str, ...]
    doc_ids: tuple[str, ...]
    doc_index: np.ndarray  # int64 [n_queries, depth]
    scores: np.ndarray  # float64 [n_queries, depth]
    _lookup: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.doc_index.shape != self.scores.shape or self.doc_index.ndim != 2:
            raise ValueError(
                f"doc_index {self.doc_index.shape} and scores {self.scores.shape} must be equal 2-D shapes"
            )
        if self.doc_index.shape[0] != len(self.query_ids):
            raise ValueError(f"{len(self.query_ids)} query ids for {self.doc_index.shape[0]} rows")

    @classmethod
    def from_dict(cls, run: RunDict) -> RankedRun:
        """Build from ``{qid: {docid: score}}``; rows keep the mapping's order.

        >>> r = RankedRun.from_dict({"q1": {"d1": 0.5, "d2": 0.9}, "q2": {}})
        >>> r.doc_index.shape
        (2, 2)
        """
        query_ids = tuple(run)
        vocab: dict[str, int] = {}
        depth = max((len(d) for d in run.values()), default=0)
        index = np.full((len(query_ids), depth), -1, dtype=np.int64)
        scores = np.full((len(query_ids), depth), -np.inf, dtype=np.float64)
        for i, qid in enumerate(query_ids):
            docs = run[qid]
            n = len(docs)
            if n:
                index[i, :n] = [vocab.setdefault(d, len(vocab)) for d in docs]
                scores[i, :n] = np.fromiter(docs.values(), dtype=np.float64, count=n)
        return cls(query_ids, tuple(vocab), index, scores)

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for i, qid in enumerate(self.query_ids):
            row = self.doc_index[i]
            valid = row >= 0
            out[qid] = {self.doc_ids[j]: float(s) for j, s in zip(row[valid], self.scores[i][valid])}
        return out

    @property
    def depth(self) -> int:
        return int(self.doc_index.shape[1])


_SHORT_MASK = np.uint64((1 << 56) - 1)


@dataclass(frozen=True)
class KeyedRun:
    """A TREC run for scoring without a doc-id vocabulary: ``doc_index[i, j]`` is the 63-bit key of the
    doc at slot ``j`` of query ``i`` (−1 = empty slot; ``embedscope.data.runs.id_keys``). Equal ids have
    equal keys; an id of up to 7 bytes *is* its key (bytes and length), a longer one is hashed and
    kept as a string: ``long_docs[k]`` is the id at file row ``long_rows[k]`` (sorted rows). Two ids
    sharing a key are caught by comparing the strings (callers then fall back to a :class:`RankedRun`).

    ``position[i, j]`` is the file row of slot ``(i, j)`` (None: row ``i * depth + j``).
    """

    query_ids: tuple[str, ...]
    doc_index: np.ndarray  # int64 [n_queries, depth]
    scores: np.ndarray  # float64 [n_queries, depth]
    long_rows: np.ndarray  # int64, sorted
    long_docs: Any  # pyarrow string array
    position: np.ndarray | None = None

    @property
    def depth(self) -> int:
        return int(self.doc_index.shape[1])

    def docs_at(self, rows: np.ndarray, cols: np.ndarray) -> list[str]:
        """The doc ids at slots ``(rows[i], cols[i])``."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        keys = self.doc_index[rows, cols]
        out = [short_id(k) for k in keys.tolist()]
        long = np.flatnonzero(keys >> 59)
        if len(long):
            flat = (
                self.position[rows[long], cols[long]]
                if self.position is not None
                else rows[long] * self.depth + cols[long]
            )
            found = [self.long_docs[int(i)].as_py() for i in np.searchsorted(self.long_rows, flat)]
            for i, name in zip(long.tolist(), found):
                out[i] = name
        return out


def short_id(key: int) -> str:
    """The id of up to 7 bytes whose key is ``key`` (bytes little-endian, length in the top byte)."""
    return (key & ((1 << 56) - 1)).to_bytes(8, "little")[: key >> 56].decode("utf-8", errors="surrogateescape")


def short_order(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, length)`` of short-id keys: comparing them as tuples is comparing the ids as strings."""
    k = keys.view(np.uint64)
    return (k & _SHORT_MASK).byteswap(), k >> np.uint64(56)
