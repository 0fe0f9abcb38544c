"""Summarization with MTEB v2's protocol (``AbsTaskSummarization`` + ``SummarizationEvaluator``).

Protocol, exactly as mteb 2.26 runs it for one split:

1. Gold: each row's relevance scores normalised ``(x − min) / (max − min)`` (``min_score`` 0 and
   ``max_score`` 5 for SummEval).
2. Encode every human summary (all rows flattened, one call), then every machine summary (one call);
   no prompt type (embedscope role ``"document"``). The source text is not encoded.
3. Per machine summary: the maximum over the row's human summaries of the cosine, of the dot product
   and of the model's own similarity (float32 torch, as mteb's ``cos_sim`` / ``dot_score``).
4. A row whose gold scores, dot scores or cosine scores are all equal is skipped. Per remaining row,
   Spearman and Pearson (scipy) of the gold against each prediction; the mean over rows. Keys
   ``pearson``, ``spearman`` (model similarity), ``cosine_spearman``, ``cosine_pearson``,
   ``dot_pearson``, ``dot_spearman``; main score ``cosine_spearman``.

``protocol="v1"`` reproduces mteb's ``DeprecatedSummarizationEvaluator`` (SummEval, SummEvalFr before
``.v2``): the mean is taken over each row's (statistic, p-value) pair, the bug of mteb issue #1156.
``SummEvalSummarization.v2`` and ``SummEvalFrSummarization.v2`` use the fixed evaluator (the default).

The metrics are :mod:`embedscope.metrics.summarization`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from embedscope.errors import DataFormatError
from embedscope.metrics.summarization import Protocol, normalized_relevance, summarization_scores
from embedscope.models.base import Encoder, Similarity
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.proxy import rows_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

PREDICTIONS = ("cosine", "dot", "similarity")


@dataclass(frozen=True)
class SummarizationData:
    """Rows of a source text, its human (reference) summaries, machine summaries and their relevance."""

    texts: tuple[str, ...]
    human_summaries: tuple[tuple[str, ...], ...]
    machine_summaries: tuple[tuple[str, ...], ...]
    relevance: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.texts)
        if not len(self.human_summaries) == len(self.machine_summaries) == len(self.relevance) == n:
            raise ValueError("texts, human_summaries, machine_summaries and relevance must have the same length")
        for i, (machine, gold) in enumerate(zip(self.machine_summaries, self.relevance)):
            if len(machine) != len(gold):
                raise ValueError(f"row {i}: {len(machine)} machine summaries but {len(gold)} relevance scores")

    def __len__(self) -> int:
        return len(self.texts)

    def head(self, n: int | None) -> SummarizationData:
        """The first ``n`` rows (all when ``n`` is None)."""
        if n is None or n >= len(self):
            return self
        return SummarizationData(
            self.texts[:n], self.human_summaries[:n], self.machine_summaries[:n], self.relevance[:n]
        )


def _split(vectors: np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    return np.split(vectors, np.cumsum(lengths)[:-1])


def row_predictions(human: np.ndarray, machine: np.ndarray, similarity: Similarity) -> dict[str, list[float]]:
    """For each machine summary of a row: the best cosine, dot and model similarity to the human summaries."""
    import torch

    from embedscope.retrieval.dense import similarity_matrix

    h = torch.tensor(np.asarray(human), dtype=torch.float32)
    out: dict[str, list[float]] = {name: [] for name in PREDICTIONS}
    for m in np.asarray(machine):
        q = torch.tensor(m, dtype=torch.float32).reshape(1, -1)
        out["cosine"].append(torch.max(similarity_matrix(q, h, "cosine")).item())
        out["dot"].append(torch.max(similarity_matrix(q, h, "dot")).item())
        pairwise = [float(similarity_matrix(q, h[j].reshape(1, -1), similarity)) for j in range(len(h))]
        out["similarity"].append(torch.max(torch.tensor(pairwise)).item())
    return out


def summarization_rows(
    human: Sequence[np.ndarray], machine: Sequence[np.ndarray], gold: Sequence[Sequence[float]], similarity: Similarity
) -> tuple[list[int], dict[str, list[list[float]]]]:
    """Rows kept (not all-equal) and, per kept row, the gold and each prediction list."""
    kept: list[int] = []
    columns: dict[str, list[list[float]]] = {"gold": [], **{name: [] for name in PREDICTIONS}}
    for i, (h, m) in enumerate(zip(human, machine)):
        predicted = row_predictions(h, m, similarity)
        scores = list(gold[i])
        if len(set(scores)) == 1 or len(set(predicted["dot"])) == 1 or len(set(predicted["cosine"])) == 1:
            continue
        kept.append(i)
        columns["gold"].append(scores)
        for name in PREDICTIONS:
            columns[name].append(predicted[name])
    return kept, columns


@dataclass(frozen=True)
class SummarizationTask(TaskInfo):
    """A summarization task as data; ``protocol`` "v2" (fixed evaluator, default) or "v1" (deprecated)."""

    load_split: Callable[[str], SummarizationData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "cosine_spearman"
    min_score: float = 0
    max_score: float = 5
    protocol: Protocol = "v2"
    type: ClassVar[str] = "Summarization"

    def __post_init__(self) -> None:
        if self.protocol not in ("v2", "v1"):
            raise ValueError(f"protocol must be 'v2' or 'v1', not {self.protocol!r}")

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load ``split`` (its first ``options.limits`` rows if set) and score it with mteb's protocol."""
        t0 = time.perf_counter()
        data = self.load_split(split).head(options.limits)
        t1 = time.perf_counter()
        gold = normalized_relevance(data.relevance, self.min_score, self.max_score)
        kwargs: dict[str, Any] = {
            "role": "document",
            "batch_size": options.batch_size,
            "show_progress": options.show_progress,
        }
        human = encoder.encode([s for row in data.human_summaries for s in row], **kwargs)
        machine = encoder.encode([s for row in data.machine_summaries for s in row], **kwargs)
        t2 = time.perf_counter()
        kept, columns = summarization_rows(
            _split(np.asarray(human), [len(r) for r in data.human_summaries]),
            _split(np.asarray(machine), [len(r) for r in data.machine_summaries]),
            gold,
            encoder.similarity,
        )
        if not kept:
            raise DataFormatError(
                f"{self.name} {split}: every row has equal gold or predicted scores; nothing to correlate"
            )
        scores = summarization_scores(columns, self.protocol)
        timings = {"load_data": t1 - t0, "encode": t2 - t1, "metrics": time.perf_counter() - t2}
        per_item: dict[str, Sequence[Any]] = {
            "id": [str(i) for i in kept],
            **{name: columns[name] for name in PREDICTIONS},
            "gold": columns["gold"],
        }
        return SplitOutcome(scores, timings=timings, n_queries=len(data), per_item=per_item)


SUMMARIZATION_COLUMNS = {
    "text": ["text"],
    "human_summaries": ["human_summaries", "references"],
    "machine_summaries": ["machine_summaries", "summaries"],
    "relevance": ["relevance", "scores"],
}


def _list_of(value: Any, where: str, column: str, kind: type) -> list[Any]:
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(v, kind) or (kind is float and isinstance(v, int) and not isinstance(v, bool)) for v in value
    )
    if not ok:
        raise DataFormatError(
            f"{where}: {column!r} must be a list of {'texts' if kind is str else 'numbers'} "
            f"(in CSV/TSV a JSON list), got {str(value)[:80]!r}"
        )
    return list(value)


def summarization_data_from_rows(rows: Sequence[tuple[str, Any]], names: dict[str, list[str]]) -> SummarizationData:
    """Rows ``(where, row)`` with a text, human and machine summary lists and a relevance list."""
    from embedscope.data.validate import pick

    texts, human, machine, relevance = [], [], [], []
    for where, row in rows:
        texts.append(str(pick(row, names["text"], where, "text")))
        human.append(
            tuple(
                _list_of(pick(row, names["human_summaries"], where, "human_summaries"), where, "human_summaries", str)
            )
        )
        machine_row = _list_of(
            pick(row, names["machine_summaries"], where, "machine_summaries"), where, "machine_summaries", str
        )
        gold = _list_of(pick(row, names["relevance"], where, "relevance"), where, "relevance", float)
        if len(machine_row) != len(gold):
            raise DataFormatError(f"{where}: {len(machine_row)} machine summaries but {len(gold)} relevance scores")
        machine.append(tuple(machine_row))
        relevance.append(tuple(float(x) for x in gold))
    return SummarizationData(tuple(texts), tuple(human), tuple(machine), tuple(relevance))


def load_summarization_file(path: str | Path, columns: dict[str, str] | None = None) -> SummarizationData:
    """Rows of ``text``, ``human_summaries`` (list), ``machine_summaries`` (list) and ``relevance`` (list of
    numbers, one per machine summary) from JSONL / CSV / TSV / Parquet; ``columns`` renames them."""
    from embedscope.data.tables import read_rows

    path = Path(path)
    names = {k: [columns[k]] if columns and k in columns else v for k, v in SUMMARIZATION_COLUMNS.items()}
    data = summarization_data_from_rows(list(read_rows(path)), names)
    if len(data) < 1:
        raise DataFormatError(f"{path}: a summarization file needs at least one row")
    return data


__all__ = [
    "SummarizationData",
    "SummarizationTask",
    "load_summarization_file",
    "summarization_data_from_rows",
    "summarization_rows",
]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> SummarizationTask:
    from embedscope.tasks.custom import per_split

    return SummarizationTask(load_split=per_split(folder, lambda p: load_summarization_file(p, columns)), **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> SummarizationTask:
    from embedscope.tasks.from_catalog import catalog_fields, subset_table, table_columns

    def load(split: str) -> SummarizationData:
        ds = subset_table(entry, subset, location, split)
        text, human, machine, relevance = table_columns(
            ds, "text", "human_summaries", "machine_summaries", "relevance", where=f"{entry.name} {split}"
        )
        return SummarizationData(
            tuple(map(str, text)),
            tuple(tuple(map(str, h)) for h in human),
            tuple(tuple(map(str, m)) for m in machine),
            tuple(tuple(float(x) for x in r) for r in relevance),
        )

    params = entry.params
    # mteb 2.26: SummEval and SummEvalFr keep the deprecated evaluator (mteb #1156); their .v2 use the fixed one
    protocol = params.get("summarization_protocol", "v2" if entry.name.endswith(".v2") else "v1")
    return SummarizationTask(
        load_split=load,
        min_score=params.get("min_score", 0),
        max_score=params.get("max_score", 5),
        protocol=protocol,
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "Summarization",
        SummarizationTask,
        main_score="cosine_spearman",
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskSummarization", "summarization"),),
        proxy=rows_proxy(lambda data: None),
    )
)
