"""Instruction retrieval and instruction reranking with MTEB v2's protocol (``AbsTaskRetrieval`` with an
``instruction`` subset, and the tasks' ``task_specific_scores``).

Protocol, as mteb 2.26 runs it for one split:

1. Each query reads ``text + " " + instruction`` (mteb's ``_combine_queries_with_instruction_text``; a
   query whose instruction is None keeps its text). Queries without judgments are dropped.
2. **InstructionReranking** (FollowIR: Core17/News21/Robust04InstructionRetrieval, mFollowIR): each
   query's ``top_ranked`` candidates are reranked by the model, as :mod:`embedscope.tasks.reranking` v2
   does. **InstructionRetrieval** (IFIR*, InstructIR): dense retrieval over the whole corpus, as
   :mod:`embedscope.tasks.retrieval` does.
3. The retrieval keys of ``make_score_dict`` (trec_eval means rounded to 5 decimals, MRR, nAUC, hit
   rate), then the task's own scores (their formulas: :mod:`embedscope.metrics.instructions`):

   - ``p-MRR`` (FollowIR): queries come in pairs ``{id}-og`` (original instruction) and ``{id}-changed``
     (the changed instruction, which made the documents in ``qrel_diff[id]`` non-relevant). For each such
     document its rank in the ``-og`` run and in the ``-changed`` run (ties by doc id descending; absent:
     one past the end); ``p-MRR`` of a document is ``(1/og)/(1/new) − 1`` when it rose or stayed (≤ 0),
     else ``1 − (1/new)/(1/og)`` (> 0); mean per query, then over queries (pandas, as mteb). Also ``og`` and
     ``changed``: the full retrieval score dicts of the ``-og`` and of the other queries alone.
   - ``level_scores`` (IFIR): mean ``ndcg@20`` of the queries whose id contains ``v1`` / ``v2`` / ``v3``.
   - ``robustness_at_10`` (InstructIR): queries grouped by the id part before ``_``; mean over groups of
     the lowest ``ndcg@10``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from embedscope.data.hf import config_rows
from embedscope.errors import DataFormatError
from embedscope.metrics import DEFAULT_K_VALUES
from embedscope.metrics.instructions import followir_scores, level_scores, robustness_at_10
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.reranking import RerankingData
from embedscope.tasks.types import TaskType, register_task_type
from embedscope.types import Queries, RetrievalData

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

TaskScores = Literal["p-MRR", "level_scores", "robustness_at_10", "none"]
TASK_SCORES: tuple[str, ...] = ("p-MRR", "level_scores", "robustness_at_10", "none")


def with_instructions(queries: Queries, instructions: Mapping[str, str | None] | None) -> Queries:
    """Queries reading ``text + " " + instruction`` (unchanged without instructions).

    >>> with_instructions(Queries(("q1",), ("cats",)), {"q1": "only lions"}).texts
    ('cats only lions',)
    """
    if not instructions:
        return queries
    missing = [q for q in queries.ids if q not in instructions]
    if missing:
        raise DataFormatError(
            f"queries {missing[:3]} have no instruction; the instruction subset must cover every query"
        )
    texts = tuple(
        t + " " + instructions[q] if instructions[q] is not None else t  # type: ignore[operator]
        for q, t in zip(queries.ids, queries.texts)
    )
    return Queries(queries.ids, texts)


@dataclass(frozen=True)
class InstructionData:
    """One split: the retrieval or reranking data, each query's instruction, and FollowIR's ``qrel_diff``
    (query id without ``-og`` / ``-changed`` → the documents whose relevance the changed instruction removed)."""

    data: RetrievalData | RerankingData
    instructions: Mapping[str, str | None] | None = None
    changed_qrels: Mapping[str, Sequence[str]] | None = None


# --------------------------------------------------------------------------------------------
# Task-specific scores
# --------------------------------------------------------------------------------------------


def task_specific_scores(
    kind: str,
    qrels: Mapping[str, Mapping[str, int]],
    outcome: SplitOutcome,
    changed_qrels: Mapping[str, Sequence[str]] | None,
    k_values: Sequence[int],
) -> dict[str, Any]:
    """The scores mteb's task adds after the retrieval keys."""
    if kind == "none":
        return {}
    if kind == "p-MRR":
        if changed_qrels is None:
            raise DataFormatError(
                "p-MRR needs the dataset's 'qrel_diff' subset (which documents the changed "
                "instructions made non-relevant)"
            )
        assert outcome.run is not None
        return followir_scores(qrels, outcome.run.to_dict(), changed_qrels, k_values)
    assert outcome.per_item is not None
    if kind == "level_scores":
        return level_scores(outcome.per_item)
    if kind == "robustness_at_10":
        return {"robustness_at_10": robustness_at_10(qrels, outcome.per_item)}
    raise ValueError(f"task_scores must be one of {', '.join(TASK_SCORES)}, not {kind!r}")


# --------------------------------------------------------------------------------------------
# The tasks
# --------------------------------------------------------------------------------------------


def _judged(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {q: dict(d) for q, d in qrels.items() if len(d) > 0}


@dataclass(frozen=True)
class InstructionRerankingTask(TaskInfo):
    """FollowIR-style instruction reranking as data; main score ``p-MRR``."""

    load_split: Callable[[str], InstructionData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "p-MRR"
    task_scores: TaskScores = "p-MRR"
    k_values: tuple[int, ...] = DEFAULT_K_VALUES
    type: ClassVar[str] = "InstructionReranking"

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Rerank each query's candidates (instruction appended) and add the task's scores."""
        from embedscope.tasks.reranking import evaluate_reranking_v2

        t0 = time.perf_counter()
        given = self.load_split(split)
        data = given.data
        if not isinstance(data, RerankingData):
            raise DataFormatError(f"{self.name}: instruction reranking needs each query's candidates (top_ranked)")
        data = RerankingData(
            with_instructions(data.queries, given.instructions), data.corpus, data.qrels, data.candidates
        ).head(options.limits)
        load_seconds = time.perf_counter() - t0
        outcome = evaluate_reranking_v2(data, encoder, options, self.k_values)
        t1 = time.perf_counter()
        extra = task_specific_scores(self.task_scores, _judged(data.qrels), outcome, given.changed_qrels, self.k_values)
        outcome.scores.update(extra)
        outcome.timings.update(load_data=load_seconds, task_scores=time.perf_counter() - t1)
        return outcome


@dataclass(frozen=True)
class InstructionRetrievalTask(TaskInfo):
    """Instruction retrieval (IFIR, InstructIR) as data: dense retrieval with instructions, plus
    ``task_scores`` (``level_scores`` for IFIR, ``robustness_at_10`` for InstructIR, or ``p-MRR``)."""

    load_split: Callable[[str], InstructionData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "ndcg_at_20"
    task_scores: TaskScores = "level_scores"
    k_values: tuple[int, ...] = DEFAULT_K_VALUES
    ignore_identical_ids: bool = False
    type: ClassVar[str] = "InstructionRetrieval"

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Retrieve with each query's instruction appended, and add the task's scores."""
        from embedscope.tasks.retrieval import RetrievalTask, evaluate_retrieval_split

        t0 = time.perf_counter()
        given = self.load_split(split)
        data = given.data
        if not isinstance(data, RetrievalData):
            raise DataFormatError(f"{self.name}: instruction retrieval needs corpus, queries and qrels")
        data = RetrievalData(
            data.corpus,
            with_instructions(data.queries, given.instructions),
            data.qrels,
            data.name,
            data.split,
            data.source,
            data.revision,
        )
        load_seconds = time.perf_counter() - t0
        spec = RetrievalTask(
            self.name, lambda s: data, k_values=self.k_values, ignore_identical_ids=self.ignore_identical_ids
        )
        outcome = evaluate_retrieval_split(spec, data, encoder, options)
        t1 = time.perf_counter()
        extra = task_specific_scores(self.task_scores, _judged(data.qrels), outcome, given.changed_qrels, self.k_values)
        outcome.scores.update(extra)
        outcome.timings.update(load_data=load_seconds, task_scores=time.perf_counter() - t1)
        return outcome


__all__ = [
    "InstructionData",
    "InstructionRerankingTask",
    "InstructionRetrievalTask",
    "task_specific_scores",
    "with_instructions",
]


# --------------------------------------------------------------------------------------------
# Loading (a local copy in the hub's layout, or the hub id)
# --------------------------------------------------------------------------------------------


def _instructions(repo: str, config: str, split: str, revision: str | None) -> dict[str, str | None] | None:
    rows = config_rows(repo, config, split, revision)
    if rows is None:
        return None
    out: dict[str, str | None] = {}
    for where, row in rows:
        if "query-id" not in row or "instruction" not in row:
            raise DataFormatError(f"{where}: instruction rows need 'query-id' and 'instruction'")
        value = row["instruction"]
        out[str(row["query-id"])] = None if value is None else str(value)
    return out


def _id_lists(repo: str, config: str, split: str, revision: str | None) -> dict[str, list[str]] | None:
    """``query-id`` → ``corpus-ids`` rows (``top_ranked``, ``qrel_diff``)."""
    rows = config_rows(repo, config, split, revision)
    if rows is None:
        return None
    out: dict[str, list[str]] = {}
    for where, row in rows:
        ids = row.get("corpus-ids")
        if "query-id" not in row or not isinstance(ids, (list, tuple)):
            raise DataFormatError(f"{where}: {config} rows need 'query-id' and a list 'corpus-ids'")
        out[str(row["query-id"])] = [str(d) for d in ids]
    return out


def _required(
    rows: list[tuple[str, Mapping[str, Any]]] | None, repo: str, config: str
) -> list[tuple[str, Mapping[str, Any]]]:
    if rows is None:
        raise DataFormatError(f"{repo}: no subset {config!r}")
    return rows


def _suffixed_retrieval(repo: str, lang: str, split: str, revision: str | None) -> RetrievalData:
    """mFollowIR's layout: configs ``corpus-{lang}``, ``queries-{lang}``, ``default-{lang}`` (qrels)."""
    from embedscope.data.tabular import build_split, qrels_from_rows, texts_from_rows

    corpus = texts_from_rows(
        _required(config_rows(repo, f"corpus-{lang}", split, revision), repo, f"corpus-{lang}"),
        f"{repo} corpus-{lang}",
        "corpus",
        allow_empty=True,
    )
    queries = texts_from_rows(
        _required(config_rows(repo, f"queries-{lang}", split, revision), repo, f"queries-{lang}"),
        f"{repo} queries-{lang}",
        "queries",
        allow_empty=True,
    )
    qrels, places = qrels_from_rows(
        _required(config_rows(repo, f"default-{lang}", split, revision), repo, f"default-{lang}")
    )
    return build_split(
        corpus,
        queries,
        qrels,
        places,
        f"{repo} default-{lang}",
        name=repo.rsplit("/", 1)[-1],
        split=split,
        source=repo,
        revision=revision or "local",
    )


def load_instruction_split(
    location: str,
    split: str = "test",
    *,
    subset: str | None = None,
    revision: str | None = None,
    reranking: bool = False,
    suffixed: bool = False,
) -> InstructionData:
    """One split of an instruction dataset in the hub's layout (mteb's configs): ``corpus``, ``queries``,
    qrels (``default``), and when present ``instruction``, ``top_ranked`` and ``qrel_diff``; a subset's
    configs are ``{subset}-corpus`` …, or with ``suffixed`` (mFollowIR) ``corpus-{lang}`` … where ``lang`` is
    the subset's last part (``eng-fas`` → ``fas``, as mteb loads the cross-lingual task). ``reranking``
    requires ``top_ranked``."""
    from embedscope.data.detect import load_retrieval

    sub = None if subset in (None, "default") else subset
    if suffixed:
        if sub is None:
            raise DataFormatError(f"{location}: a language subset is needed (configs are named corpus-LANG, …)")
        lang = sub.split("-")[-1]
        data = _suffixed_retrieval(location, lang, split, revision)
        names = {kind: f"{kind}-{lang}" for kind in ("instruction", "top_ranked", "qrel_diff")}
    else:
        data = load_retrieval(location, split=split, revision=revision, subset=sub)
        names = {kind: f"{sub}-{kind}" if sub else kind for kind in ("instruction", "top_ranked", "qrel_diff")}
    instructions = _instructions(location, names["instruction"], split, revision)
    changed = _id_lists(location, names["qrel_diff"], "qrel_diff", revision)
    if not reranking:
        return InstructionData(data, instructions, changed)
    top = _id_lists(location, names["top_ranked"], split, revision)
    if top is None:
        raise DataFormatError(f"{location}: no {names['top_ranked']!r} subset, which instruction reranking needs")
    return InstructionData(
        RerankingData(data.queries, data.corpus, data.qrels, {q: tuple(d) for q, d in top.items()}),
        instructions,
        changed,
    )


def _instruction_reader(kind: str) -> Callable[[Path, dict[str, str] | None, dict[str, Any]], Any]:
    """Reads an instruction task over a folder in the hub's layout (corpus, queries, qrels, instruction, and
    top_ranked / qrel_diff as the task needs): reranking scores p-MRR, retrieval ``task_scores`` as given."""
    reranking = kind == "InstructionReranking"

    def read(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> Any:
        def load(split: str) -> InstructionData:
            return load_instruction_split(str(folder), split, reranking=reranking)

        if reranking:
            return InstructionRerankingTask(load_split=load, **fields)
        fields = {"task_scores": "none", **fields}
        fields.setdefault(
            "main_score",
            "ndcg_at_10"
            if fields["task_scores"] == "none"
            else {"level_scores": "ndcg_at_20", "robustness_at_10": "robustness_at_10", "p-MRR": "p-MRR"}[
                fields["task_scores"]
            ],
        )
        return InstructionRetrievalTask(load_split=load, **fields)

    return read


def _instruction_task_scores(entry: CatalogEntry) -> str:
    """Which ``task_specific_scores`` mteb's task adds: p-MRR (FollowIR), robustness@10 (InstructIR), IFIR levels."""
    if "task_scores" in entry.params:
        return str(entry.params["task_scores"])
    if entry.main_score in ("p-MRR", "robustness_at_10"):
        return entry.main_score
    return "level_scores" if entry.name.startswith("IFIR") else "none"


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> Any:
    from embedscope.tasks.from_catalog import catalog_fields, k_values

    reranking = entry.type == "InstructionReranking"

    def load(split: str) -> InstructionData:
        revision = None if Path(location).exists() else entry.dataset_revision
        # mFollowIR's own load_data reads configs named corpus-LANG, queries-LANG, … (mteb 2.26)
        suffixed = bool(entry.params.get("suffixed_configs", entry.name.startswith("mFollowIR")))
        return load_instruction_split(
            location, split, subset=subset, revision=revision, reranking=reranking, suffixed=suffixed
        )

    kind = InstructionRerankingTask if reranking else InstructionRetrievalTask
    return kind(
        load_split=load,
        task_scores=_instruction_task_scores(entry),  # type: ignore[arg-type]
        k_values=k_values(entry),
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "InstructionRetrieval",
        InstructionRetrievalTask,
        main_score="ndcg_at_20",
        aliases=("instruction-retrieval",),
        read_files=_instruction_reader("InstructionRetrieval"),
        from_catalog=_from_catalog,
    )
)
register_task_type(
    TaskType(
        "InstructionReranking",
        InstructionRerankingTask,
        main_score="p-MRR",
        aliases=("instruction-reranking",),
        read_files=_instruction_reader("InstructionReranking"),
        from_catalog=_from_catalog,
    )
)
