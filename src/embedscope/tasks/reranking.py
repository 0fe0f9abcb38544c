"""Reranking: score each query's given candidates with the encoder; MTEB v2 or legacy v1 metrics.

**v2** (mteb 2.26, ``AbsTaskRetrieval`` with ``top_ranked``; ``SearchEncoderWrapper`` rerank path):

1. Drop queries with no qrels entry.
2. Encode all queries in one call (role ``query``), then the *whole* corpus in one call, in corpus
   order (role ``document``; text stripped, as mteb's corpus loader does with an empty title).
3. Per query: ``similarity(q, candidates)`` in float32 torch, keep ``topk(min(top_k, n))`` with
   ``top_k = max(k_values)``; a query without candidates gets an empty ranking.
4. Score with trec_eval semantics (:func:`embedscope.metrics.evaluate_ranking`); main score
   ``map_at_1000`` (the full-list AP when a query has ≤ 1000 candidates).

**v1** (mteb 1.x ``RerankingEvaluator``, used by C-MTEB / EvalScope's legacy reranking):

1. Skip queries without a relevant or without a non-relevant candidate.
2. Encode the kept queries in one call; concatenate every query's candidate texts (in candidate
   order) and encode each distinct text once, in first-occurrence order.
3. Per query: AP = ``sklearn.average_precision_score`` over the candidates, MRR@10 from
   ``torch.argsort(-scores)``; confidence ``max`` / ``std`` / ``diff1`` of the scores.
4. Keys ``map``, ``mrr`` (means) and ``nAUC_{map,mrr}_{max,std,diff1}`` (legacy nAUC); main score ``map``.

The v1 metrics are :mod:`embedscope.metrics.reranking` (nAUC: :mod:`embedscope.metrics.nauc`).

Data in the old row shape (``query``, ``positive`` list, ``negative`` list) becomes
:class:`RerankingData` with mteb's own conversion (:func:`reranking_data_from_rows`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from embedscope.errors import ConfigError, DataFormatError
from embedscope.metrics import DEFAULT_K_VALUES, evaluate_ranking
from embedscope.metrics.reranking import reranking_v1_per_query, reranking_v1_summary
from embedscope.models.base import Encoder, Similarity
from embedscope.retrieval.base import run_from_rows
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.params import positive_ints
from embedscope.tasks.proxy import reranking_proxy
from embedscope.tasks.types import TaskType, register_task_type
from embedscope.types import Corpus, Queries, RankedRun

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

Protocol = Literal["v2", "v1"]


@dataclass(frozen=True)
class RerankingData:
    """Queries, the documents they may see, relevance judgments and each query's candidate ids (in order)."""

    queries: Queries
    corpus: Corpus
    qrels: Mapping[str, Mapping[str, int]]
    candidates: Mapping[str, tuple[str, ...]]

    def head(self, n: int | None) -> RerankingData:
        """The first ``n`` queries with their judgments and candidates (the corpus is kept)."""
        if n is None or n >= len(self.queries):
            return self
        queries = self.queries.select(range(n))
        keep = set(queries.ids)
        return RerankingData(
            queries,
            self.corpus,
            {q: d for q, d in self.qrels.items() if q in keep},
            {q: c for q, c in self.candidates.items() if q in keep},
        )


def reranking_data_from_rows(rows: Iterable[Mapping[str, Any]], split: str = "test") -> RerankingData:
    """Old-format rows (``query``, ``positive`` list, ``negative`` list) as mteb 2.26 converts them.

    Rows lacking positives or negatives are dropped; the remaining row *i* becomes query
    ``{split}_query{i}`` whose candidates are ``apositive_{qid}_{j:05d}`` (relevance 1) then
    ``negative_{qid}_{j:05d}`` (relevance 0), each a separate corpus entry.
    """
    qids: list[str] = []
    qtexts: list[str] = []
    doc_ids: list[str] = []
    doc_texts: list[str] = []
    qrels: dict[str, dict[str, int]] = {}
    candidates: dict[str, tuple[str, ...]] = {}
    kept = (row for row in rows if len(row["positive"]) > 0 and len(row["negative"]) > 0)
    for i, row in enumerate(kept):
        qid = f"{split}_query{i}"
        ids = [f"apositive_{qid}_{j:05d}" for j in range(len(row["positive"]))]
        ids += [f"negative_{qid}_{j:05d}" for j in range(len(row["negative"]))]
        qids.append(qid)
        qtexts.append(row["query"])
        doc_ids.extend(ids)
        doc_texts.extend([*row["positive"], *row["negative"]])
        qrels[qid] = {d: int(d.startswith("apositive_")) for d in ids}
        candidates[qid] = tuple(ids)
    return RerankingData(
        Queries(tuple(qids), tuple(qtexts)), Corpus(tuple(doc_ids), tuple(doc_texts)), qrels, candidates
    )


# --------------------------------------------------------------------------------------------
# v2: rerank candidates, then trec_eval metrics
# --------------------------------------------------------------------------------------------


def _similarities(query: np.ndarray, docs: np.ndarray, similarity: Similarity):
    """float32 torch scores ``[1, n]`` of one query against ``docs``, as mteb's ``similarity`` computes them."""
    import torch

    from embedscope.retrieval.dense import similarity_matrix

    q = torch.as_tensor(np.ascontiguousarray(query, dtype=np.float32)).reshape(1, -1)
    d = torch.as_tensor(np.ascontiguousarray(docs, dtype=np.float32))
    return similarity_matrix(q, d, similarity)


def _candidate_indices(data: RerankingData, qid: str, lookup: Mapping[str, int]) -> list[int]:
    seen: dict[str, None] = dict.fromkeys(data.candidates.get(qid, ()))  # ordered, duplicates dropped
    missing = [d for d in seen if d not in lookup]
    if missing:
        raise DataFormatError(
            f"query {qid!r}: candidate ids {missing[:3]} are not in the corpus; "
            "every candidate must be a corpus document id"
        )
    return [lookup[d] for d in seen]


def rerank_candidates(
    q_vectors: np.ndarray, d_vectors: np.ndarray, data: RerankingData, similarity: Similarity, top_k: int
) -> RankedRun:
    """Each query's candidates ordered by similarity, its top ``top_k`` kept (row ``i`` = query ``i``)."""
    import torch

    lookup = {d: i for i, d in enumerate(data.corpus.ids)}
    rows: list[tuple[list[int], list[float]]] = []
    for i, qid in enumerate(data.queries.ids):
        idx = _candidate_indices(data, qid, lookup)
        if not idx:
            rows.append(([], []))
            continue
        scores = _similarities(q_vectors[i], d_vectors[idx], similarity)
        if torch.isnan(scores).any():
            raise ValueError(f"query {qid!r}: NaN similarity scores (a zero or non-finite embedding?)")
        values, pos = torch.topk(scores, min(top_k, len(idx)), dim=1, largest=True)
        rows.append(([idx[p] for p in pos[0].tolist()], values[0].tolist()))
    return run_from_rows(tuple(data.queries.ids), tuple(data.corpus.ids), rows)


def _with_judged_queries(data: RerankingData) -> RerankingData:
    keep = [i for i, qid in enumerate(data.queries.ids) if len(data.qrels.get(qid, {})) > 0]
    qrels = {q: dict(d) for q, d in data.qrels.items() if len(d) > 0}
    queries = data.queries.select(keep)
    return RerankingData(queries, data.corpus, qrels, data.candidates)


def evaluate_reranking_v2(
    data: RerankingData, encoder: Encoder, options: SearchOptions, k_values: Sequence[int] = DEFAULT_K_VALUES
) -> SplitOutcome:
    """mteb 2.26's reranking protocol on one split (see the module docstring)."""
    data = _with_judged_queries(data)
    kwargs: dict[str, Any] = {"batch_size": options.batch_size, "show_progress": options.show_progress}
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    q_vectors = encoder.encode(list(data.queries.texts), role="query", **kwargs)
    t1 = time.perf_counter()
    d_vectors = encoder.encode([t.strip() for t in data.corpus.texts], role="document", **kwargs)
    t2 = time.perf_counter()
    run = rerank_candidates(q_vectors, d_vectors, data, encoder.similarity, max(k_values))
    t3 = time.perf_counter()
    ranking = evaluate_ranking(data.qrels, run, tuple(k_values))
    scores = ranking.to_mteb()
    timings.update(encode_queries=t1 - t0, encode_corpus=t2 - t1, search=t3 - t2, metrics=time.perf_counter() - t3)
    return SplitOutcome(scores, run, timings, len(data.queries), len(data.corpus), per_item=ranking.per_item(run))


def candidates_run(data: RerankingData) -> RankedRun:
    """The task's candidate lists as a run over its corpus (order kept, duplicates dropped)."""
    lookup = {d: i for i, d in enumerate(data.corpus.ids)}
    rows = []
    for qid in data.queries.ids:
        idx = np.asarray(_candidate_indices(data, qid, lookup), dtype=np.int64)
        rows.append((idx, np.zeros(len(idx))))
    return run_from_rows(tuple(data.queries.ids), tuple(data.corpus.ids), rows)


def evaluate_reranking_with_scorer(
    data: RerankingData, scorer: Any, options: SearchOptions, k_values: Sequence[int] = DEFAULT_K_VALUES
) -> SplitOutcome:
    """The v2 protocol with a reranker (cross-encoder, ColBERT …) scoring each query's candidates."""
    from embedscope.retrieval.base import rerank

    data = _with_judged_queries(data)
    t0 = time.perf_counter()
    run = rerank(scorer, data.queries, data.corpus, candidates_run(data), replace(options, top_k=max(k_values)))
    t1 = time.perf_counter()
    ranking = evaluate_ranking(data.qrels, run, tuple(k_values))
    scores = ranking.to_mteb()
    timings = {f"rerank:{scorer.name}": t1 - t0, "metrics": time.perf_counter() - t1}
    return SplitOutcome(scores, run, timings, len(data.queries), len(data.corpus), per_item=ranking.per_item(run))


# --------------------------------------------------------------------------------------------
# v1 (legacy RerankingEvaluator)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegacySample:
    """One query of the legacy protocol: its text, candidate texts and which are relevant."""

    query_id: str
    query: str
    documents: tuple[str, ...]
    is_relevant: tuple[bool, ...]


def legacy_samples(data: RerankingData) -> list[LegacySample]:
    """Queries in order, skipping those without a relevant or without a non-relevant candidate."""
    texts = data.corpus.as_dict()
    out = []
    for qid, query in zip(data.queries.ids, data.queries.texts):
        docs = data.candidates.get(qid, ())
        missing = [d for d in docs if d not in texts]
        if missing:
            raise DataFormatError(f"query {qid!r}: candidate ids {missing[:3]} are not in the corpus")
        judged = data.qrels.get(qid, {})
        relevant = tuple(judged.get(d, 0) > 0 for d in docs)
        if any(relevant) and not all(relevant):
            out.append(LegacySample(qid, query, tuple(texts[d] for d in docs), relevant))
    return out


def unique_texts(texts: Sequence[str]) -> tuple[list[str], list[int]]:
    """Distinct texts in first-occurrence order, and each input's position among them.

    >>> unique_texts(["a", "b", "a"])
    (['a', 'b'], [0, 1, 0])
    """
    first: dict[str, int] = {}
    index = [first.setdefault(t, len(first)) for t in texts]
    return list(first), index


def evaluate_reranking_v1(
    data: RerankingData, encoder: Encoder, options: SearchOptions, mrr_k: int = 10
) -> SplitOutcome:
    """The legacy (mteb 1.x) reranking protocol on one split (see the module docstring)."""
    samples = legacy_samples(data)
    if not samples:
        raise DataFormatError("no query has both a relevant and a non-relevant candidate; nothing to rerank")
    kwargs: dict[str, Any] = {"batch_size": options.batch_size, "show_progress": options.show_progress}
    t0 = time.perf_counter()
    q_vectors = encoder.encode([s.query for s in samples], role="query", **kwargs)
    t1 = time.perf_counter()
    distinct, where = unique_texts([d for s in samples for d in s.documents])
    d_vectors = np.asarray(encoder.encode(distinct, role="document", **kwargs))[where]
    t2 = time.perf_counter()
    per_query, start = [], 0
    for i, s in enumerate(samples):
        block = d_vectors[start : start + len(s.documents)]
        start += len(s.documents)
        per_query.append(_similarities(q_vectors[i], block, encoder.similarity).amax(dim=0).tolist())
    t3 = time.perf_counter()
    relevance = [s.is_relevant for s in samples]
    items, conf = reranking_v1_per_query(per_query, relevance, mrr_k)
    scores = reranking_v1_summary(items, conf)
    timings = {
        "encode_queries": t1 - t0,
        "encode_corpus": t2 - t1,
        "search": t3 - t2,
        "metrics": time.perf_counter() - t3,
    }
    return SplitOutcome(
        scores, None, timings, len(samples), len(distinct), per_item={"id": [s.query_id for s in samples], **items}
    )


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------

MAIN_SCORES: dict[str, str] = {"v2": "map_at_1000", "v1": "map"}


@dataclass(frozen=True)
class RerankingTask(TaskInfo):
    """A reranking task as data; ``protocol`` picks MTEB v2 (default) or the legacy v1 metrics."""

    load_split: Callable[[str], RerankingData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = ""  # "" = the protocol's main score (map_at_1000 for v2, map for v1)
    protocol: Protocol = "v2"
    k_values: tuple[int, ...] = DEFAULT_K_VALUES
    mrr_at_k: int = 10
    type: ClassVar[str] = "Reranking"

    def __post_init__(self) -> None:
        if self.protocol not in MAIN_SCORES:
            raise ValueError(f"protocol must be 'v2' or 'v1', not {self.protocol!r}")
        if not self.main_score:
            object.__setattr__(self, "main_score", MAIN_SCORES[self.protocol])

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load ``split`` (its first ``options.limits`` queries if set) and score it."""
        t0 = time.perf_counter()
        data = self.load_split(split).head(options.limits)
        load_seconds = time.perf_counter() - t0
        from embedscope.retrieval.roles import as_candidate_scorer, scores_candidates

        if scores_candidates(encoder):
            if self.protocol == "v1":
                raise ConfigError(
                    f"{self.name}: the legacy v1 reranking protocol scores embeddings only; "
                    f"{encoder.name} is a pipeline (use protocol v2)"
                )
            outcome = evaluate_reranking_with_scorer(data, as_candidate_scorer(encoder), options, self.k_values)
        elif self.protocol == "v1":
            outcome = evaluate_reranking_v1(data, encoder, options, self.mrr_at_k)
        else:
            outcome = evaluate_reranking_v2(data, encoder, options, self.k_values)
        outcome.timings["load_data"] = load_seconds
        return outcome


# --------------------------------------------------------------------------------------------
# Loading local files
# --------------------------------------------------------------------------------------------

RERANKING_COLUMNS = {
    "query": ["query", "question"],
    "positive": ["positive", "positives", "pos"],
    "negative": ["negative", "negatives", "neg"],
}


def _text_list(value: Any, where: str, column: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise DataFormatError(
            f"{where}: {column!r} must be a list of texts (in CSV/TSV a JSON list such as "
            f'["first text", "second text"]), got {str(value)[:80]!r}'
        )
    return list(value)


def load_reranking_file(
    path: str | Path, columns: Mapping[str, str] | None = None, split: str = "test"
) -> RerankingData:
    """Rows of ``query``, ``positive`` (list) and ``negative`` (list) from JSONL / CSV / TSV / Parquet.

    ``columns`` maps those names to the file's, e.g. ``{"positive": "pos", "negative": "neg"}``.
    The rows are converted as mteb converts old-format reranking datasets.
    """
    from embedscope.data.tables import read_rows
    from embedscope.data.validate import pick

    path = Path(path)
    names = {k: [columns[k]] if columns and k in columns else v for k, v in RERANKING_COLUMNS.items()}
    rows = []
    for where, row in read_rows(path):
        query = pick(row, names["query"], where, "query")
        if not isinstance(query, str):
            raise DataFormatError(f"{where}: 'query' must be a text, got {type(query).__name__}")
        rows.append(
            {
                "query": query,
                "positive": _text_list(pick(row, names["positive"], where, "positive"), where, "positive"),
                "negative": _text_list(pick(row, names["negative"], where, "negative"), where, "negative"),
            }
        )
    data = reranking_data_from_rows(rows, split)
    if len(data.queries) == 0:
        raise DataFormatError(f"{path}: no row has both a positive and a negative; reranking needs both")
    return data


__all__ = [
    "RerankingData",
    "RerankingTask",
    "evaluate_reranking_v1",
    "evaluate_reranking_v2",
    "legacy_samples",
    "load_reranking_file",
    "rerank_candidates",
    "reranking_data_from_rows",
    "unique_texts",
]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> RerankingTask:
    from embedscope.tasks.custom import per_split

    def load(split: str) -> RerankingData:
        return per_split(folder, lambda p: load_reranking_file(p, columns, split=split))(split)

    return RerankingTask(load_split=load, **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> RerankingTask:
    from embedscope.data.detect import load_retrieval
    from embedscope.data.hf import load_top_ranked
    from embedscope.tasks.from_catalog import catalog_fields, k_values

    def load(split: str) -> RerankingData:
        revision = None if Path(location).exists() else entry.dataset_revision
        sub = None if subset == "default" else subset
        data = load_retrieval(location, split=split, revision=revision, subset=sub)
        top = load_top_ranked(location, split=split, revision=revision, subset=sub)
        if top is None:
            raise DataFormatError(f"{entry.name}: {location} has no 'top_ranked' subset, which reranking needs")
        return RerankingData(data.queries, data.corpus, data.qrels, {q: tuple(d) for q, d in top.items()})

    return RerankingTask(load_split=load, protocol="v2", k_values=k_values(entry), **catalog_fields(entry, subset))


register_task_type(
    TaskType(
        "Reranking",
        RerankingTask,
        model_roles=("encoder", "candidate_scorer"),
        signature_score="map",
        signature_rank=6,
        document_label="corpus",
        main_score="map_at_1000",
        read_files=_read_files,
        from_catalog=_from_catalog,
        params={"k": ("k_values", positive_ints)},
        proxy=reranking_proxy,
    )
)
