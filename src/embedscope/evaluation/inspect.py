"""What a ranking result got wrong, query by query (``embedscope inspect``): the worst queries of one task with their
text, the documents judged relevant, what was retrieved instead and, for a pipeline, the failure class.

A result folder holds, beside each ``<Task>.json``, its per-item rows (:mod:`embedscope.results.per_item`): each
query's per-query metrics, ``top_10`` (the ten best doc ids, best first) and, for a stage that ranks given
candidates, ``candidates_recall``, ``ceiling_ndcg_at_10`` and ``failure``. The queries are ordered by the task's main
metric, worst first (ties by query id). Scores come from ``predictions/<Task>_predictions.json`` (``run
--save-predictions``) when it was saved and matches the rows; the ranks then reach as deep as the run kept, otherwise
only the top 10. Texts and relevance judgments are read from the task's data as the run read it: the folder its result
records (``data.location``), else the built-in or catalog task of that name (``data_dir``: local copies of catalog
data). When the data cannot be read, ids, ranks and scores are still shown, and a note says why there are no texts.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embedscope.compare.items import TaskItems, load_model_results
from embedscope.errors import DataFormatError, SettingError, UnknownNameError
from embedscope.messages import clip_text, listing
from embedscope.results.per_item import SUFFIX, per_item_path, read_per_item
from embedscope.results.schema import TaskResult

logger = logging.getLogger(__name__)

QUERY_CHARS = 200  # a query's text in the report
SNIPPET_CHARS = 120  # a document's text in the report
RELEVANT_SHOWN = 10  # relevant documents listed per query in the report (every one in to_dict and the Parquet file)
PARQUET_COLUMNS = (
    ("order", "int32"),
    ("task", "string"),
    ("split", "string"),
    ("hf_subset", "string"),
    ("query_id", "string"),
    ("query_text", "string"),
    ("group", "string"),
    ("metric", "string"),
    ("value", "float64"),
    ("failure", "string"),
    ("candidates_recall", "float64"),
    ("ceiling_ndcg_at_10", "float64"),
    ("doc_id", "string"),
    ("doc_text", "string"),
    ("rank", "int32"),
    ("score", "float64"),
    ("relevance", "int32"),
    ("relevant", "bool"),
    ("in_top_10", "bool"),
)


@dataclass(frozen=True)
class RetrievedDoc:
    """One of a query's top-ranked documents: its rank (1 = best), id, the run's score (None without predictions),
    relevance (0: not judged relevant; None: judgments unavailable) and text (None: unavailable)."""

    rank: int
    id: str
    score: float | None
    relevance: int | None
    text: str | None


@dataclass(frozen=True)
class RelevantDoc:
    """A document judged relevant to a query (relevance > 0): its rank in the run (None: not ranked as deep as known),
    the run's score (None: without predictions, or not ranked) and its text (None: unavailable)."""

    id: str
    relevance: int
    rank: int | None
    score: float | None
    text: str | None


@dataclass(frozen=True)
class InspectedQuery:
    """One query: its value of the main metric, text, group, failure attribution (pipelines), the documents judged
    relevant and the top documents retrieved. ``ranked``: how many of its documents have a known rank (the run's whole
    list with predictions, else the top 10); ``complete``: whether that is every document the run kept for it."""

    split: str
    hf_subset: str
    id: str
    value: float
    text: str | None
    group: str | None
    failure: str | None
    candidates_recall: float | None
    ceiling_ndcg_at_10: float | None
    relevant: tuple[RelevantDoc, ...] | None
    retrieved: tuple[RetrievedDoc, ...]
    ranked: int
    complete: bool


@dataclass(frozen=True)
class Inspection:
    """The worst queries of one ranking result (:func:`inspect_result`); ``table()`` is what ``embedscope inspect``
    prints, ``to_dict()`` its ``--json``, ``rows()`` the flat rows of :meth:`write_parquet`.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import write_tiny_beir
        >>> root = tempfile.mkdtemp()
        >>> data = write_tiny_beir(f"{root}/tiny")
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat"]), [str(data)], output_folder=f"{root}/out", cache=False,
        ...                         save_predictions=True, show_progress=False)
        >>> found = embedscope.inspect(f"{root}/out", task="tiny", worst=1)
        >>> q = found.queries[0]
        >>> q.id, q.text, [(d.id, d.rank) for d in q.relevant], [d.id for d in q.retrieved][:2]
        ('q2', 'dog', [('d2', 2)], ['d1', 'd2'])
        >>> print(found.table().splitlines()[0])
        tiny (Retrieval): the worst query of 3 by ndcg_at_10
    """

    task: str
    task_type: str
    metric: str
    path: Path
    total: int
    queries: tuple[InspectedQuery, ...]
    group_field: str | None = None
    group: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def table(self) -> str:
        """The report: a header, the notes, then each query worst first."""
        return render(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: the task, metric, result file, notes and each query with its documents."""
        return {
            "task": self.task,
            "task_type": self.task_type,
            "metric": self.metric,
            "result": str(self.path),
            "queries_considered": self.total,
            "group_field": self.group_field,
            "group": self.group,
            "notes": list(self.notes),
            "queries": [asdict(q) for q in self.queries],
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per (query, document): each top-ranked document (``in_top_10``) and each relevant document
        not among them, with the query's columns repeated (:data:`PARQUET_COLUMNS`)."""
        return [row for n, q in enumerate(self.queries, 1) for row in _flat_rows(self, n, q)]

    def write_parquet(self, path: str | Path) -> Path:
        """:meth:`rows` as a Parquet file (columns and types of :data:`PARQUET_COLUMNS`), written atomically."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from embedscope.files import atomic_write_bytes

        schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in PARQUET_COLUMNS])
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(self.rows(), schema=schema), sink)
        atomic_write_bytes(path, sink.getvalue().to_pybytes())
        return Path(path)


def _flat_rows(found: Inspection, order: int, q: InspectedQuery) -> list[dict[str, Any]]:
    """The Parquet rows of one query: its top documents, then its relevant documents not among them (one row with
    no document when it has neither)."""
    base = {
        "order": order,
        "task": found.task,
        "split": q.split,
        "hf_subset": q.hf_subset,
        "query_id": q.id,
        "query_text": q.text,
        "group": q.group,
        "metric": found.metric,
        "value": q.value,
        "failure": q.failure,
        "candidates_recall": q.candidates_recall,
        "ceiling_ndcg_at_10": q.ceiling_ndcg_at_10,
    }
    judged = q.relevant is not None
    rows = [
        base
        | {"doc_id": d.id, "doc_text": d.text, "rank": d.rank, "score": d.score, "relevance": d.relevance}
        | {"relevant": (d.relevance or 0) > 0 if judged else None, "in_top_10": True}
        for d in q.retrieved
    ]
    top = {d.id for d in q.retrieved}
    rows += [
        base
        | {"doc_id": d.id, "doc_text": d.text, "rank": d.rank, "score": d.score, "relevance": d.relevance}
        | {"relevant": True, "in_top_10": False}
        for d in q.relevant or ()
        if d.id not in top
    ]
    empty = {"doc_id": None, "doc_text": None, "rank": None, "score": None, "relevance": None}
    return rows or [base | empty | {"relevant": None, "in_top_10": None}]


# -- choosing the result and its rows -------------------------------------------------------------------------------


def inspect_result(
    folder: str | Path,
    task: str | None = None,
    *,
    worst: int = 10,
    group: str | None = None,
    data_dir: str | Path | None = None,
) -> Inspection:
    """The ``worst`` queries (0: every one) of ``task``'s ranking result in ``folder`` (one model's results, or the
    result file itself; the task may be left out when only one ranking result there has per-item rows), only those of
    query ``group`` when given (a value of the run's ``group_by`` field, or ``FIELD=VALUE``). Errors name the argument
    at fault (:class:`SettingError`)."""
    if isinstance(worst, bool) or not isinstance(worst, int) or worst < 0:
        raise SettingError("worst", f"{{worst}} must be a whole number, 0 (every query) or more, not {worst!r}")
    path = Path(folder)
    if path.is_file() and path.suffix == ".json":  # a result file: its folder, and its task unless named
        path, task = path.parent, task or path.stem
    items = _task_items(path, task)
    result = TaskResult.from_dict(json.loads(items.path.read_text(encoding="utf-8")))
    rows = _ranking_rows(items)
    rows, group_value = _in_group(rows, items, group)
    shown = worst_rows(rows, items.metric, worst)
    notes: list[str] = []
    scores = _scores(items.path, items.task, shown, notes)
    texts = _texts(result, items.task_type, shown, data_dir, notes)
    queries = tuple(_query(r, items.metric, scores, texts) for r in shown)
    return Inspection(
        items.task, items.task_type, items.metric, items.path, len(rows), queries, items.group_field, group_value,
        tuple(notes),
    )  # fmt: skip


def _task_items(folder: Path, task: str | None) -> TaskItems:
    """The result of ``task`` among one model's results in ``folder`` (the only one with per-item rows when None)."""
    results = load_model_results(folder)
    with_rows = [
        n for n, items in results.tasks.items() if per_item_path(items.path).is_file() and _ranks(items.task_type)
    ]
    if task is None:
        if len(with_rows) == 1:
            return results.tasks[with_rows[0]]
        if not with_rows:
            raise DataFormatError(
                f"{results.folder}: no ranking result there has per-item rows (<Task>{SUFFIX}); embedscope run writes "
                "them beside each Retrieval and Reranking result"
            )
        raise SettingError(
            "task", f"{{task}}: {results.folder} holds {len(with_rows)} ranking results with per-item rows "
            f"({listing(sorted(with_rows))}); name one"
        )  # fmt: skip
    if task not in results.tasks:
        raise SettingError(
            "task", f"{{task}} {task!r}: no result of that task in {results.folder} (it holds: "
            f"{listing(sorted(results.tasks))})"
        )  # fmt: skip
    items = results.tasks[task]
    if not _ranks(items.task_type):
        raise DataFormatError(
            f"{items.path}: {items.task} ({items.task_type}) ranks no documents per query; inspect reads Retrieval "
            "and Reranking results"
        )
    if task not in with_rows:
        raise DataFormatError(
            f"{items.path}: no per-item rows beside it ({per_item_path(items.path).name}); run the task again with "
            "embedscope run --overwrite always to write them"
        )
    return items


def _ranks(task_type: str) -> bool:
    """Whether results of ``task_type`` rank documents per query (its protocol can search or score candidates); a
    type embedscope does not know may.

    >>> _ranks("Retrieval"), _ranks("Reranking"), _ranks("STS"), _ranks("Unknown")
    (True, True, False, True)
    """
    from embedscope.tasks.types import TASK_TYPES

    spec = TASK_TYPES.find(task_type)
    return spec is None or bool({"searcher", "candidate_scorer"} & set(spec.model_roles))


def _ranking_rows(items: TaskItems) -> list[dict[str, Any]]:
    """The per-item rows of a ranking result (each with ``top_10`` and the main metric); another kind is refused."""
    path = per_item_path(items.path)
    rows = read_per_item(path)
    if not rows:
        raise DataFormatError(f"{path}: no per-item rows in it; run the task again with embedscope run")
    if "top_10" not in rows[0]:
        raise DataFormatError(
            f"{path}: {items.task} ({items.task_type}) keeps no ranking per query (top_10) to inspect, as the legacy "
            "v1 reranking protocol does; inspect reads Retrieval and Reranking (v2) results"
        )
    missing = [r["id"] for r in rows if not isinstance(r.get(items.metric), (int, float)) or "top_10" not in r]
    if missing:
        raise DataFormatError(
            f"{path}: query {missing[0]!r} has no {items.metric} or top_10; run the task again with --overwrite always"
        )
    return rows


def _in_group(
    rows: list[dict[str, Any]], items: TaskItems, group: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """The rows of query ``group`` (``VALUE`` or ``FIELD=VALUE``) and the value chosen; all rows when None."""
    if group is None:
        return rows, None
    field_ = items.group_field
    if field_ is None or "group" not in rows[0]:
        raise SettingError(
            "group", f"{{group}} {group!r}: {items.task}'s result has no query groups (its run set no group_by)"
        )  # fmt: skip
    value = group.removeprefix(f"{field_}=")
    known = sorted({str(r["group"]) for r in rows})
    if value not in known:
        raise SettingError(
            "group", f"{{group}} {group!r}: no query of {items.task} is in that group; its {field_} groups are: "
            f"{listing(known)}"
        )  # fmt: skip
    return [r for r in rows if str(r["group"]) == value], value


def worst_rows(rows: Sequence[Mapping[str, Any]], metric: str, n: int) -> list[Mapping[str, Any]]:
    """The ``n`` rows (0: all) with the lowest ``metric``, worst first; ties by query id, then split and subset.

    >>> rows = [{"id": "b", "split": "test", "hf_subset": "default", "m": 0.5},
    ...         {"id": "a", "split": "test", "hf_subset": "default", "m": 0.5},
    ...         {"id": "c", "split": "test", "hf_subset": "default", "m": 0.1}]
    >>> [r["id"] for r in worst_rows(rows, "m", 2)]
    ['c', 'a']
    """
    ordered = sorted(rows, key=lambda r: (r[metric], str(r["id"]), str(r["split"]), str(r["hf_subset"])))
    return ordered[:n] if n else ordered


# -- scores from the saved predictions ------------------------------------------------------------------------------

Ranked = dict[tuple[str, str, str], list[tuple[str, float]]]


def _scores(path: Path, task: str, rows: Sequence[Mapping[str, Any]], notes: list[str]) -> Ranked | None:
    """Each shown query's ranked ``(doc, score)`` list from the saved predictions, best first; None (with a note)
    when none were saved, the file is unreadable or it does not match the per-item rows."""
    file = path.parent / "predictions" / f"{task}_predictions.json"
    if not file.is_file():
        notes.append(f"no predictions saved ({file.relative_to(path.parent)}): ranks without scores; run with "
                     "--save-predictions for scores")  # fmt: skip
        return None
    try:
        saved = json.loads(file.read_text(encoding="utf-8"))
        ranked = {_key(r): _ranked(_saved_run(saved, r).get(str(r["id"]), {})) for r in rows}
    except KeyError as e:
        notes.append(f"{file} holds no predictions of {e.args[0]}: ranks without scores")
        return None
    except (OSError, ValueError, TypeError, AttributeError) as e:
        notes.append(f"{file}: unreadable predictions ({clip_text(str(e), 120)}): ranks without scores")
        return None
    stale = [r["id"] for r in rows if [d for d, _ in ranked[_key(r)][: len(r["top_10"])]] != list(r["top_10"])]
    if stale:
        notes.append(f"{file} does not rank query {stale[0]!r} as its per-item rows do (saved by an earlier run?): "
                     "ranks without scores")  # fmt: skip
        return None
    if any(_tied(ranked[_key(r)][: len(r["top_10"])]) for r in rows):
        notes.append("tied scores among the top documents: they keep the run's order here, while the metrics break "
                     "ties by doc id, descending (trec_eval)")  # fmt: skip
    return ranked


def _tied(top: Sequence[tuple[str, float]]) -> bool:
    """Whether two of the top documents have equal scores as the metrics compare them (float32, as trec_eval).

    >>> _tied([("a", 0.5), ("b", 0.5 + 1e-12)]), _tied([("a", 0.5), ("b", 0.25)])
    (True, False)
    """
    import numpy as np

    scores = np.array([s for _, s in top], dtype=np.float32)
    return len(np.unique(scores)) < len(scores)


def _saved_run(saved: Any, row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``{qid: {doc: score}}`` run of the row's subset and split in a predictions file (``{subset: {split: run}}``);
    a KeyError names the split (and subset) it lacks."""
    subset, split = str(row["hf_subset"]), str(row["split"])
    run = saved.get(subset, {}).get(split)
    if run is None:
        raise KeyError(split if subset == "default" else f"{split}/{subset}")
    return run


def _key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(row["split"]), str(row["hf_subset"]), str(row["id"])


def _ranked(docs: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``{doc: score}`` best first; ties keep the saved order (the run's, as its ``top_10`` does)."""
    pairs = [(str(d), float(s)) for d, s in docs.items()]
    if any(math.isnan(s) for _, s in pairs):
        raise ValueError("a score is NaN")
    return sorted(pairs, key=lambda pair: -pair[1])


# -- texts and judgments from the task's data -----------------------------------------------------------------------


@dataclass(frozen=True)
class TaskTexts:
    """One split of a task's data: query and document texts by id, and the relevance judgments."""

    queries: Mapping[str, str]
    documents: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]


Texts = dict[tuple[str, str], TaskTexts]


def _texts(
    result: TaskResult, task_type: str, rows: Sequence[Mapping[str, Any]], data_dir: Any, notes: list[str]
) -> Texts | None:
    """The data of each (split, subset) of ``rows``, read as the run read it; None (with a note why) when it cannot be
    read."""
    out: Texts = {}
    for split, subset in dict.fromkeys((str(r["split"]), str(r["hf_subset"])) for r in rows):
        try:
            task = task_of(result, task_type, subset, data_dir)
            data = task.load_split(split)
        except Exception as e:  # any failure to read (offline hub, a moved folder …) leaves the ids, ranks and scores
            logger.debug("texts of %s unavailable", result.task_name, exc_info=True)
            notes.append(f"texts and relevance judgments unavailable: {clip_text(str(e) or type(e).__name__, 300)}")
            return None
        _check_fingerprint(result, task, notes)
        out[(split, subset)] = TaskTexts(data.queries.as_dict(), data.corpus.as_dict(), data.qrels)
    return out


def task_of(result: TaskResult, task_type: str, subset: str, data_dir: Any = None) -> Any:
    """The task whose data a result was computed on: its recorded data folder, else the built-in or catalog task of its
    name (``Name:subset`` for a subset); a :class:`DataFormatError` says why there is none."""
    from embedscope.tasks.registry import resolve_task

    recorded = result.extra.get("data")
    location = recorded.get("location") if isinstance(recorded, dict) else None
    if location:
        if not Path(location).exists():
            raise DataFormatError(f"the data folder the run read, {location}, is no longer there")
        from embedscope.tasks.custom import custom_task

        return custom_task(location, type=task_type, name=result.task_name)
    name = result.task_name if subset == "default" else f"{result.task_name}:{subset}"
    try:
        return resolve_task(name, data_dir=data_dir)
    except UnknownNameError:
        raise DataFormatError(
            f"{result.task_name} is neither a built-in nor a catalog task, and its result records no data folder "
            "(a task given as an object to evaluate())"
        ) from None


def _check_fingerprint(result: TaskResult, task: Any, notes: list[str]) -> None:
    """A note when the data read now differs from the data the run read (its recorded fingerprint)."""
    from embedscope.results.settings import data_fingerprint

    recorded = result.extra.get("data")
    before = recorded.get("fingerprint") if isinstance(recorded, dict) else None
    now = data_fingerprint(task).get("fingerprint")
    if before and now != before:
        note = f"the data changed since the run (fingerprint {before} → {now}): texts and judgments are today's"
        if note not in notes:
            notes.append(note)


# -- one query --------------------------------------------------------------------------------------------------------


def _query(row: Mapping[str, Any], metric: str, scores: Ranked | None, texts: Texts | None) -> InspectedQuery:
    """One shown query, from its per-item row, its ranked predictions and its split's data."""
    qid, top = str(row["id"]), [str(d) for d in row["top_10"]]
    ranked = scores[_key(row)] if scores is not None else [(d, math.nan) for d in top]
    data = texts.get((str(row["split"]), str(row["hf_subset"]))) if texts is not None else None
    judged = {d: int(v) for d, v in data.qrels.get(qid, {}).items()} if data is not None else None
    documents: Mapping[str, str] = data.documents if data is not None else {}
    return InspectedQuery(
        split=str(row["split"]),
        hf_subset=str(row["hf_subset"]),
        id=qid,
        value=float(row[metric]),
        text=data.queries.get(qid) if data is not None else None,
        group=None if row.get("group") is None else str(row["group"]),
        failure=row.get("failure"),
        candidates_recall=row.get("candidates_recall"),
        ceiling_ndcg_at_10=row.get("ceiling_ndcg_at_10"),
        relevant=None if judged is None else _relevant(judged, ranked if scores is not None else None, top, documents),
        retrieved=_retrieved(ranked[: len(top)], scores is not None, judged, documents),
        ranked=len(ranked),
        complete=scores is not None or len(top) < 10,
    )


def _retrieved(
    top: Sequence[tuple[str, float]], scored: bool, judged: Mapping[str, int] | None, documents: Mapping[str, str]
) -> tuple[RetrievedDoc, ...]:
    """The top documents in order, with their scores when ``scored``, relevance when ``judged`` and texts."""
    return tuple(
        RetrievedDoc(n, d, s if scored else None, None if judged is None else judged.get(d, 0), documents.get(d))
        for n, (d, s) in enumerate(top, 1)
    )


def _relevant(
    judged: Mapping[str, int],
    ranked: Sequence[tuple[str, float]] | None,
    top: Sequence[str],
    documents: Mapping[str, str],
) -> tuple[RelevantDoc, ...]:
    """The documents judged relevant (relevance > 0), ranked ones first by rank: each rank and score in the saved
    run (``ranked``), else the rank in the top 10 only."""
    rank_of = {d: n for n, d in enumerate([d for d, _ in ranked] if ranked is not None else top, 1)}
    score_of = dict(ranked or ())
    docs = [RelevantDoc(d, v, rank_of.get(d), score_of.get(d), documents.get(d)) for d, v in judged.items() if v > 0]
    return tuple(sorted(docs, key=lambda d: (d.rank is None, d.rank or 0, -d.relevance, d.id)))


# -- the report -------------------------------------------------------------------------------------------------------


def render(found: Inspection) -> str:
    """The text ``embedscope inspect`` prints: a header line, the notes, then each query worst first."""
    n = len(found.queries)
    which = "the worst query" if n == 1 else f"the {n} worst queries" if n < found.total else f"all {n} queries"
    group = f" in group {found.group_field}={found.group}" if found.group is not None else ""
    lines = [f"{found.task} ({found.task_type}): {which} of {found.total}{group} by {found.metric}"]
    lines += [f"result: {found.path}", *(f"note: {note}" for note in found.notes)]
    several = len({(q.split, q.hf_subset) for q in found.queries}) > 1
    for number, q in enumerate(found.queries, 1):
        lines += ["", *_query_lines(found.metric, number, q, several)]
    return "\n".join(lines)


def _one_line(text: str | None, limit: int) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` characters with an ellipsis.

    >>> _one_line("a\\n  b", 10), _one_line("abcdefgh", 5)
    ('a b', 'abcd…')
    """
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _query_lines(metric: str, number: int, q: InspectedQuery, several: bool) -> list[str]:
    """One query's block: its id and value, text, attribution, relevant documents and top documents."""
    where = f" ({q.split}/{q.hf_subset})" if several else ""
    head = f"{number}. {q.id}{where}: {metric} {q.value:.4f}"
    if q.group is not None:
        head += f", group {q.group}"
    if q.failure is not None:
        head += f", failure {q.failure}"
    if q.candidates_recall is not None and q.ceiling_ndcg_at_10 is not None:
        head += f" (candidates recall {q.candidates_recall:.2f}, ceiling nDCG@10 {q.ceiling_ndcg_at_10:.4f})"
    lines = [head]
    if q.text is not None:
        lines.append(f"   query: {_one_line(q.text, QUERY_CHARS)}")
    if q.relevant is not None:
        lines += _relevant_lines(q)
    lines.append("   retrieved:" if q.retrieved else "   retrieved: nothing")
    lines += _retrieved_lines(q)
    return lines


def _relevant_lines(q: InspectedQuery) -> list[str]:
    """The documents judged relevant: id, relevance, and rank or why none."""
    if not q.relevant:
        return ["   relevant: none judged relevant"]
    missing = "not retrieved" if q.complete else f"not in top {q.ranked}"
    lines = ["   relevant:"]
    for d in q.relevant[:RELEVANT_SHOWN]:
        rank = f"rank {d.rank}" if d.rank is not None else missing
        rank += f", score {d.score:.4f}" if d.score is not None else ""
        below = d.rank is None or d.rank > len(q.retrieved)  # a top document's text is shown among the retrieved
        text = f"  {_one_line(d.text, SNIPPET_CHARS)}" if d.text is not None and below else ""
        lines.append(f"     {d.id} (relevance {d.relevance}, {rank}){text}")
    if len(q.relevant) > RELEVANT_SHOWN:
        lines.append(f"     … and {len(q.relevant) - RELEVANT_SHOWN} more")
    return lines


def _retrieved_lines(q: InspectedQuery) -> list[str]:
    """The top documents as aligned columns: rank, id, score, relevance (where judged relevant) and text."""
    width = max((len(d.id) for d in q.retrieved), default=0)
    lines = []
    for d in q.retrieved:
        cells = [f"{d.rank:>5}", d.id.ljust(width)]
        if d.score is not None:
            cells.append(f"{d.score:>10.4f}")
        if d.relevance is not None:
            cells.append(f"rel {d.relevance}" if d.relevance > 0 else "     ")
        if d.text is not None:
            cells.append(_one_line(d.text, SNIPPET_CHARS))
        lines.append("  ".join(cells).rstrip())
    return lines
