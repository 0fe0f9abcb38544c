"""Retrieval tasks: declarative specs, and the MTEB protocol that scores one split.

Protocol (MTEB v2, ``AbsTaskRetrieval``): drop queries with no qrels entry; encode the queries
in one call and the corpus in chunks of ``corpus_chunk_size`` in dataset order; keep the top
``top_k`` documents per query by the model's similarity; optionally drop a document whose id
equals the query id; score with trec_eval semantics (:func:`embedscope.metrics.evaluate_ranking`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from embedscope.data.chunked import chunk_retrieval_data
from embedscope.data.documents import ChunkOptions
from embedscope.data.fastbook_qa import fixed
from embedscope.errors import ConfigError, SettingError
from embedscope.metrics import DEFAULT_K_VALUES, evaluate_ranking
from embedscope.metrics.components import component_scores
from embedscope.metrics.failures import FAILURE_COLUMNS, candidate_failures, loss_split
from embedscope.metrics.ranking import RankingScores, top_doc_ids
from embedscope.models.base import Encoder
from embedscope.retrieval.dense import dense_search
from embedscope.retrieval.passages import best_passage_per_document
from embedscope.retrieval.roles import Searcher, as_searcher
from embedscope.retrieval.sparse import COST_KEYS as SPARSE_COSTS
from embedscope.tasks.base import SearchOptions, SplitOutcome, StageOutcome, TaskInfo
from embedscope.tasks.params import positive_int, positive_ints
from embedscope.tasks.proxy import retrieval_proxy
from embedscope.tasks.types import TaskType, register_task_type
from embedscope.types import Queries, RankedRun, RetrievalData

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrievalTask(TaskInfo):
    """A retrieval task as data: where its splits come from and how it is scored."""

    load_split: Callable[[str], RetrievalData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "ndcg_at_10"
    ignore_identical_ids: bool = False
    k_values: tuple[int, ...] = DEFAULT_K_VALUES
    top_k: int | None = None  # documents kept per query; None: the run's top_k (MTEB's 1000)
    chunking: ChunkOptions | None = None  # documents → passages when the run sets no chunking (QA over documents)
    type: ClassVar[str] = "Retrieval"

    def evaluate_split(self, split: str, encoder: Encoder | Searcher, options: SearchOptions) -> SplitOutcome:
        """Load ``split`` and score it with MTEB's retrieval protocol (``encoder`` may be a pipeline)."""
        t0 = time.perf_counter()
        data = self.load_split(split)
        load_seconds = time.perf_counter() - t0
        if self.top_k is not None:  # the task's own cutoff (task parameter top_k) over the run's
            options = replace(options, top_k=self.top_k)
        outcome = evaluate_retrieval_split(self, data, encoder, options)
        outcome.timings["load_data"] = load_seconds
        return outcome


def limit_queries(data: RetrievalData, limits: int) -> RetrievalData:
    """EvalScope's ``limits``: first ``limits`` queries, their qrels, and only the judged documents.

    Shrinking the corpus to judged documents makes retrieval far easier than on the full corpus,
    so scores are inflated; a warning says so.
    """
    keep = list(range(min(limits, len(data.queries))))
    queries = data.queries.select(keep)
    qrels = {qid: dict(data.qrels[qid]) for qid in queries.ids if qid in data.qrels}
    judged = {doc for docs in qrels.values() for doc in docs}
    doc_keep = [i for i, doc in enumerate(data.corpus.ids) if doc in judged]
    logger.warning(
        f"limits={limits}: kept {len(queries)} queries and only the {len(doc_keep)} documents judged for them "
        f"(of {len(data.corpus)}), as EvalScope does. Retrieval among judged documents only is much easier: "
        "scores are inflated and not comparable with full-corpus results."
    )
    return replace(data, corpus=data.corpus.select(doc_keep), queries=queries, qrels=qrels)


def evaluate_retrieval_split(
    task: RetrievalTask, data: RetrievalData, model: Encoder | Searcher, options: SearchOptions
) -> SplitOutcome:
    """Run MTEB's retrieval protocol on one split and return MTEB-keyed scores.

    ``model`` is anything :func:`~embedscope.retrieval.roles.as_searcher` takes: an encoder (dense search) or
    a pipeline, whose every stage is scored (``SplitOutcome.stages``); the final stage gives the scores.
    """
    data, options, as_documents, timings = _chunked(task, data, options)
    data = data.with_positives_only()
    groups = query_groups(data.queries, options.group_by) if options.group_by is not None else None
    search = as_searcher(model).search_stages(data.queries, data.corpus, options)
    stages = _stages(task, data, search.stages, [as_documents(s.run) for s in search.stages])
    timings.update(search.timings)
    run = as_documents(search.run)
    t0 = time.perf_counter()
    scores, per_item = _scored(task, data, run)
    if stages and stages[-1].failures is not None:  # the last stage's run is the run: its attribution is the run's
        last = stages[-1].per_item or {}
        assert list(last["id"]) == per_item["id"]
        per_item.update({column: list(last[column]) for column in FAILURE_COLUMNS})
    if groups is not None:  # each scored query's group (group_by), for the result's group scores and comparisons
        per_item["group"] = [groups[q] for q in per_item["id"]]
    for key in [k for k in timings if k.startswith("ann_recall_at_") or k in SPARSE_COSTS]:
        scores[key] = timings.pop(key)  # an approximate index's recall of exact search; a sparse model's costs
    timings["metrics"] = time.perf_counter() - t0
    latency = _latency(model, data, options, timings) if options.latency_sample else None
    return SplitOutcome(scores, run, timings, len(data.queries), len(data.corpus), stages, per_item, latency)


def query_groups(queries: Queries, name: str) -> dict[str, str]:
    """Each query's value of metadata field ``name`` as text (``group_by``); a SettingError when no query has the
    field (naming the fields they have) or some lack it (how many of how many).

    >>> from embedscope.types import Queries
    >>> query_groups(Queries(("q1", "q2"), ("a", "b"), {"lang": ("en", "de")}), "lang")
    {'q1': 'en', 'q2': 'de'}
    """
    values = queries.metadata.get(name)
    if values is None or all(v is None for v in values):
        have = sorted(k for k, vs in queries.metadata.items() if any(v is not None for v in vs))
        raise SettingError(
            "group_by",
            f"{{group_by}} {name!r}: no query has that metadata field (the queries have: {', '.join(have) or 'none'}); "
            "name one of them, or add it to each query (a column, or BEIR's metadata object)",
        )
    missing = [q for q, v in zip(queries.ids, values) if v is None]
    if missing:
        raise SettingError(
            "group_by",
            f"{{group_by}} {name!r}: {len(missing)} of {len(queries)} queries have no value (first: {missing[0]!r}); "
            "give every query a value, or drop it",
        )
    return {q: str(v) for q, v in zip(queries.ids, values)}


def _latency(
    model: Encoder | Searcher, data: RetrievalData, options: SearchOptions, timings: dict[str, float]
) -> dict[str, Any] | None:
    """``latency_sample``: per-query latency of an encoder's dense search (:mod:`embedscope.retrieval.latency`),
    after the batch search and apart from it; a pipeline is refused."""
    from embedscope.retrieval.latency import measure_latency
    from embedscope.retrieval.roles import EncoderSearcher

    searcher = as_searcher(model)
    if not isinstance(searcher, EncoderSearcher):
        raise ConfigError(
            f"latency_sample: per-query latency is measured for a dense encoder's search, and {searcher.name} is a "
            "pipeline; drop latency_sample for it"
        )
    t0 = time.perf_counter()
    latency = measure_latency(searcher.encoder, data.queries, data.corpus, options)
    timings["latency_sample"] = time.perf_counter() - t0
    return latency


def _chunked(
    task: RetrievalTask, data: RetrievalData, options: SearchOptions
) -> tuple[RetrievalData, SearchOptions, Callable[[RankedRun], RankedRun], dict[str, float]]:
    """The data to search (chunked into passages by the run's or the task's chunking, and limited), the options to
    search it with, how a passage run becomes the run to score, and the chunking's time."""
    chunking = options.chunking or task.chunking
    by_context = data.contexts is not None
    if options.limits is not None and not (chunking is not None and by_context):
        data = limit_queries(data, options.limits)  # QA data: after chunking, among the passages then judged
    if chunking is None:
        return data, options, _unchanged, {}
    t0 = time.perf_counter()
    chunked = chunk_retrieval_data(data, chunking)
    data = chunked.data
    if by_context and options.limits is not None:
        data = limit_queries(data, options.limits)
    as_documents: Callable[[RankedRun], RankedRun] = _unchanged
    if chunked.by_document:
        parent_of = dict(zip(data.corpus.ids, chunked.parents))
        as_documents = partial(best_passage_per_document, parent_of=parent_of, top_k=options.top_k)
        options = replace(options, top_k=chunked.search_depth(options.top_k))
    return data, options, as_documents, {"chunk_corpus": time.perf_counter() - t0}


def _stages(
    task: RetrievalTask, data: RetrievalData, stages: Sequence[Any], runs: Sequence[RankedRun]
) -> tuple[StageOutcome, ...]:
    """Each stage's scores and per-query rows; a stage that ranks given candidates also attributes each query's loss
    to its candidates or its ranking (:mod:`embedscope.metrics.failures`)."""
    out = []
    for n, (stage, run) in enumerate(zip(stages, runs)):
        scores, per_item = _scored(task, data, run)
        failures = None
        candidates = _candidates(stages, runs, n)
        if candidates:
            ndcg = per_item.get("ndcg_at_10")
            if ndcg is None:  # the task's cutoffs lack 10
                ndcg = _ranking(replace(task, k_values=(10,)), data, run).per_query["ndcg_at_10"].tolist()
            found = candidate_failures(
                data.qrels, per_item["id"], candidates, ndcg, ignore_identical_ids=task.ignore_identical_ids
            )
            per_item.update(found.columns())
            failures = loss_split(found.ndcg_at_10, found.ceiling_ndcg_at_10, found.failure).as_dict()
        out.append(StageOutcome(stage.stage, stage.name, stage.kind, scores, stage.stats.as_dict(), per_item, failures))
    return tuple(out)


def _candidates(stages: Sequence[Any], runs: Sequence[RankedRun], n: int) -> list[RankedRun]:
    """The runs whose rows hold the candidates stage ``n`` ranked (none when it retrieves from the corpus).

    A reranker received the previous stage's top documents (cut to its own ``top_k``) and returns every one of them
    reordered (its depth never exceeds the run's ``top_k``), so its own run's rows are its candidates. A fusion ranked
    the union of its retrievers' runs (the ``stage1.<name>`` stages before it).
    """
    if stages[n].kind == "reranker":
        return [runs[n]]
    if stages[n].kind == "fusion":
        return [runs[i] for i in range(n) if stages[i].stage.startswith("stage1.")]
    return []


def _scored(task: RetrievalTask, data: RetrievalData, run: RankedRun) -> tuple[dict[str, float], dict[str, list]]:
    """MTEB's ranking scores and per-query columns; for answers with components, also the fastbook benchmark's
    Modified MRR@k / Recall@k."""
    ranking = _ranking(task, data, run)
    scores, per_item = ranking.to_mteb(), ranking.per_item(run)
    if data.components is not None:
        means, columns = _component_scores(task, data, run, ranking.query_ids)
        scores.update(means)
        per_item.update(columns)
    return scores, per_item


def _component_scores(
    task: RetrievalTask, data: RetrievalData, run: RankedRun, query_ids: Sequence[str]
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Modified MRR@k / Recall@k of each scored question (in ``query_ids`` order) over its ranked passages."""
    texts = data.corpus.as_dict()
    row = {q: i for i, q in enumerate(run.query_ids)}
    ranked = top_doc_ids(run, np.array([row[q] for q in query_ids], dtype=np.int64), max(task.k_values))
    components = data.components or {}
    means, columns = component_scores(
        [components.get(q, ()) for q in query_ids],
        [[texts[d] for d in docs] for docs in ranked],
        task.k_values,
        normalize=fixed,
    )
    return {k: round(v, 5) for k, v in means.items()}, columns


def _unchanged(run: RankedRun) -> RankedRun:
    return run


def _ranking(task: RetrievalTask, data: RetrievalData, run: RankedRun) -> RankingScores:
    return evaluate_ranking(data.qrels, run, task.k_values, ignore_identical_ids=task.ignore_identical_ids)


__all__ = [
    "RetrievalTask",
    "SearchOptions",
    "SplitOutcome",
    "custom_retrieval_task",
    "dense_search",
    "evaluate_retrieval_split",
    "limit_queries",
    "query_groups",
]


def custom_retrieval_task(
    path: str | Path,
    *,
    name: str | None = None,
    eval_splits: tuple[str, ...] = ("test",),
    columns: dict[str, str] | None = None,
    **spec: Any,
) -> RetrievalTask:
    """A retrieval task over local data (BEIR folder, EvalScope folder, HF layout, tables).

    EvalScope's custom tasks use MTEB's defaults: main score ``ndcg_at_10``, identical ids kept.
    """
    from embedscope.data.detect import load_retrieval
    from embedscope.data.documents import STUDY_REFERENCE
    from embedscope.data.qa import is_qa_folder

    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"Task data {str(path)!r} does not exist (no such file or folder)")

    def load(split: str) -> RetrievalData:
        return load_retrieval(folder, split=split, columns=columns)

    if "chunking" not in spec and folder.is_dir() and is_qa_folder(folder):
        spec["chunking"] = STUDY_REFERENCE  # QA over whole documents: passages unless the run chunks otherwise
    task_name = name or folder.name or "CustomRetrieval"
    return RetrievalTask(name=task_name, load_split=load, eval_splits=eval_splits, source=str(folder), **spec)


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> RetrievalTask:
    """A retrieval task over a user's folder or table (BEIR, EvalScope, hub layouts …)."""
    return custom_retrieval_task(folder, columns=columns, **{k: v for k, v in fields.items() if k != "source"})


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> RetrievalTask:
    from embedscope.data.detect import load_retrieval
    from embedscope.tasks.from_catalog import catalog_fields, k_values

    def load(split: str) -> RetrievalData:
        kwargs: dict[str, Any] = {"split": split}
        if not Path(location).exists():
            kwargs["revision"] = entry.dataset_revision
        if subset != "default":
            kwargs["subset"] = subset
        return load_retrieval(location, **kwargs)

    return RetrievalTask(
        load_split=load,
        ignore_identical_ids=bool(entry.params.get("ignore_identical_ids", False)),
        k_values=k_values(entry),
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "Retrieval",
        RetrievalTask,
        model_roles=("encoder", "searcher"),
        signature_score="ndcg_at_10",
        signature_rank=5,
        document_label="corpus",
        main_score="ndcg_at_10",
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskRetrieval", "retrieval"),),
        params={"k": ("k_values", positive_ints), "top_k": ("top_k", positive_int)},
        proxy=retrieval_proxy,
    )
)
