"""The store's read queries behind ``embedscope serve``: each a function of a :class:`Store` returning a dataclass
whose ``to_dict()`` is the JSON API's answer.

- :func:`leaderboard`: models × tasks, each model's newest result per task (one SQL query, a window over
  ``results`` ⋈ ``runs``, and one grouped count of runs), means per task type and overall, cost columns;
- :func:`task_view`: one task, each model's newest score with its interval (:func:`page_interval`) and the distribution of its
  per-item values (read from the two recorded files of that task only);
- :func:`model_history`: one model's runs (id, time, revision, experiment, tags) and its score over time per task;
- :func:`compare_runs`: two runs side by side: per shared task both scores, Δ, its CI and p-value (the gate's
  paired test, Holm across tasks) and the paired per-item values.

A model's row is the model and its experiment (a run with other settings is another system). Every query reads
through :func:`reading`: a connection that cannot write (SQLite ``query_only``, a PostgreSQL ``READ ONLY``
transaction). What a user can ask for that the store does not hold is a :class:`NotFound` (one line).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.core import CompareOptions, json_safe, score_interval
from embedscope.compare.items import TaskItems, items_of, paired_items
from embedscope.errors import EmbedscopeError
from embedscope.history import tables
from embedscope.history.gate import DEFAULT_TOLERANCE, GATE_OPTIONS, gate_sides
from embedscope.history.sides import Side, store_side
from embedscope.history.store import ID_PREFIX, Store, as_utc
from embedscope.messages import clip, clip_text
from embedscope.results.per_item import SUFFIX, decode_rows
from embedscope.results.schema import TaskResult
from embedscope.results.usage import total_usage

BINS = 20  # histogram bins of a task's per-item values
SCATTER_POINTS = 2000  # per-item pairs a scatter draws at most (every k-th beyond)


class NotFound(EmbedscopeError):
    """What a page asks for is not in the store: a task, model or run it does not hold (a 404, one line)."""


@contextmanager
def reading(store: Store, doing: str) -> Iterator[Any]:
    """A connection of ``store`` that cannot write (SQLite ``query_only``, a PostgreSQL ``READ ONLY``
    transaction); a database error is one line naming the store and ``doing``."""
    with store._errors(doing), store._engine.connect() as connection, store.kind.read_only(connection):
        yield connection


def _plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses as dicts (less their ``repr=False`` fields: bulky per-item arrays),
    tuples as lists, times in ISO form, NaN as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, np.generic):
        return _plain(value.item())
    return json_safe(value)


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, or None when empty or a value is missing (a model lacking a task gets no mean over it)."""
    if not values or any(v is None or math.isnan(v) for v in values):
        return None
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def _usage(cost: str | None) -> dict[str, Any] | None:
    """The API use a ``results.cost`` JSON text records (None without one)."""
    if not cost or "api_usage" not in cost:
        return None
    usage = json.loads(cost).get("api_usage")
    return usage if isinstance(usage, dict) else None


def _close(kind: str, name: str, known: Iterable[str]) -> NotFound:
    """``NotFound`` for ``name``, suggesting close matches among ``known``."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return NotFound(f"no {kind} {clip(name)} in the store{hint}")


# -- the leaderboard -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LeaderFilter:
    """Which results the leaderboard takes: a task type, models whose name contains ``model`` (any case), runs
    carrying one of ``tags``; every field optional."""

    task_type: str | None = None
    model: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cell:
    """One model's newest result on one task."""

    score: float | None
    run_id: str
    recorded_at: dt.datetime
    seconds: float | None
    usage: dict[str, Any] | None
    path: str = field(default="", repr=False)


@dataclass(frozen=True)
class TaskColumn:
    """A task of the leaderboard: its name, type and main metric."""

    name: str
    task_type: str
    metric: str


@dataclass(frozen=True)
class LeaderRow:
    """One model (and experiment): its newest score per task, means, runs recorded and cost."""

    model: str
    experiment: str | None
    runs: int
    newest: dt.datetime
    cells: dict[str, Cell]
    type_means: dict[str, float | None]
    mean_task: float | None
    mean_type: float | None
    seconds: float | None
    usage: dict[str, Any] | None


@dataclass(frozen=True)
class Leaderboard:
    """Models × tasks (see :func:`leaderboard`)."""

    where: LeaderFilter
    sort: str
    tasks: list[TaskColumn]
    types: list[str]
    rows: list[LeaderRow]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


def _run_filters(where: LeaderFilter) -> list[Any]:
    """The SQL conditions on ``runs`` of ``where``'s model and tags."""
    from sqlalchemy import func, select

    r, t = tables.runs, tables.tags
    conditions: list[Any] = []
    if where.model:
        conditions.append(func.lower(r.c.model).contains(where.model.lower(), autoescape=True))
    if where.tags:
        conditions.append(r.c.id.in_(select(t.c.run_id).where(t.c.name.in_(where.tags))))
    return conditions


def newest_results(connection: Any, where: LeaderFilter, task: str | None = None) -> list[Any]:
    """Each model's (and experiment's) newest result per task that ``where`` (and ``task``) selects: one query, a
    window over ``results`` ⋈ ``runs`` partitioned by model, experiment and task (over the ids only: the sort stays
    narrow), then the chosen rows' columns."""
    from sqlalchemy import func, select

    r, res = tables.runs, tables.results
    joined = res.join(r, r.c.id == res.c.run_id)
    order = (r.c.recorded_at.desc(), r.c.id.desc(), res.c.id.desc())
    rank = func.row_number().over(partition_by=(r.c.model, r.c.experiment, res.c.task), order_by=order)
    inner = select(res.c.id, rank.label("rank")).select_from(joined)
    for condition in _run_filters(where):
        inner = inner.where(condition)
    if where.task_type:
        inner = inner.where(res.c.task_type == where.task_type)
    if task is not None:
        inner = inner.where(res.c.task == task)
    ranked = inner.subquery()
    columns = (
        r.c.model,
        r.c.experiment,
        r.c.recorded_at,
        res.c.run_id,
        res.c.task,
        res.c.task_type,
        res.c.metric,
        res.c.main_score,
        res.c.seconds,
        res.c.cost,
        res.c.path,
    )
    query = select(*columns).select_from(joined).where(res.c.id.in_(select(ranked.c.id).where(ranked.c.rank == 1)))
    return list(connection.execute(query))


def _run_counts(connection: Any, where: LeaderFilter) -> dict[tuple[str, str | None], tuple[int, dt.datetime]]:
    """Per model and experiment: the runs ``where`` selects and the newest one's time (one grouped query)."""
    from sqlalchemy import func, select

    r = tables.runs
    query = select(r.c.model, r.c.experiment, func.count(r.c.id), func.max(r.c.recorded_at))
    for condition in _run_filters(where):
        query = query.where(condition)
    rows = connection.execute(query.group_by(r.c.model, r.c.experiment))
    return {(m, e): (int(n), as_utc(newest)) for m, e, n, newest in rows}


def _leader_row(
    key: tuple[str, str | None], cells: dict[str, Cell], tasks: list[TaskColumn], runs: int, newest: dt.datetime
) -> LeaderRow:
    """One row's means (per type, over every task, over the type means) and cost totals."""
    types = list(dict.fromkeys(t.task_type for t in tasks))
    score = {t.name: cells[t.name].score if t.name in cells else None for t in tasks}
    type_means = {k: _mean([score[t.name] for t in tasks if t.task_type == k]) for k in types}
    seconds = [c.seconds for c in cells.values() if c.seconds is not None]
    return LeaderRow(
        key[0],
        key[1],
        runs,
        newest,
        cells,
        type_means,
        _mean(list(score.values())),
        _mean(list(type_means.values())),
        float(sum(seconds)) if seconds else None,
        total_usage([c.usage for c in cells.values()]),
    )


def _sort_key(row: LeaderRow, sort: str) -> tuple[Any, ...]:
    """Best first: a score descending (missing last), a name ascending."""
    if sort == "model":
        return (row.model.lower(), row.experiment or "")
    if sort == "newest":
        return (-row.newest.timestamp(), row.model)
    if sort == "runs":
        return (-row.runs, row.model)
    if sort.startswith("task:"):
        cell = row.cells.get(sort[5:])
        value = cell.score if cell is not None else None
    elif sort.startswith("type:"):
        value = row.type_means.get(sort[5:])
    else:
        value = row.mean_type if sort == "mean_type" else row.mean_task
    return (value is None, -(value or 0.0), -len(row.cells), row.model.lower(), row.experiment or "")


def _count(counts: Mapping[Any, tuple[int, dt.datetime]], key: Any, cells: dict[str, Cell]) -> tuple[int, dt.datetime]:
    """A row's runs and newest time (from its cells when recorded between the two queries, as PostgreSQL allows)."""
    newest = max(c.recorded_at for c in cells.values())
    return counts.get(key, (len({c.run_id for c in cells.values()}), newest))


def leaderboard(store: Store, where: LeaderFilter = LeaderFilter(), sort: str = "mean") -> Leaderboard:
    """Models × tasks: each model's newest result per task (see the module docstring); rows best first by ``sort``
    (``mean``, ``mean_type``, ``model``, ``newest``, ``runs``, ``task:NAME`` or ``type:NAME``)."""
    with reading(store, "reading the leaderboard") as connection:
        found = newest_results(connection, where)
        counts = _run_counts(connection, where)
    tasks: dict[str, TaskColumn] = {}
    cells: dict[tuple[str, str | None], dict[str, Cell]] = {}
    for row in found:
        tasks.setdefault(row.task, TaskColumn(row.task, row.task_type or "Unknown", row.metric or "main_score"))
        cell = Cell(row.main_score, row.run_id, as_utc(row.recorded_at), row.seconds, _usage(row.cost), row.path)
        cells.setdefault((row.model, row.experiment), {})[row.task] = cell
    columns = sorted(tasks.values(), key=lambda t: (t.task_type, t.name))
    rows = [_leader_row(key, by_task, columns, *_count(counts, key, by_task)) for key, by_task in cells.items()]
    rows.sort(key=lambda r: _sort_key(r, sort))
    return Leaderboard(where, sort, columns, list(dict.fromkeys(t.task_type for t in columns)), rows)


def choices(store: Store) -> dict[str, list[str]]:
    """What the leaderboard's filters offer: every task type and tag in the store."""
    from sqlalchemy import select

    with reading(store, "reading task types and tags") as connection:
        types = connection.execute(select(tables.results.c.task_type).distinct()).scalars()
        tags = connection.execute(select(tables.tags.c.name).order_by(tables.tags.c.name)).scalars()
        return {"task_types": sorted(t for t in types if t), "tags": list(tags)}


# -- one task --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Items:
    """What a task page shows of one recorded result: its per-item values and the score's interval."""

    kind: str
    n: int
    values: np.ndarray
    ci_low: float
    ci_high: float
    note: str = ""


@dataclass(frozen=True)
class TaskEntry:
    """One model's newest result on the task: score, interval, per-item distribution."""

    model: str
    experiment: str | None
    run_id: str
    recorded_at: dt.datetime
    score: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    kind: str
    histogram: list[int]
    note: str = ""
    values: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)


@dataclass(frozen=True)
class TaskView:
    """One task across models, best first; ``edges`` are the histograms' shared bin edges."""

    task: str
    task_type: str
    metric: str
    confidence: float
    edges: list[float]
    entries: list[TaskEntry]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


class Memo:
    """What recorded results gave (runs never change), the ``size`` newest kept; safe to share between threads."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            return self._values.get(key)

    def remember(self, key: Any, value: Any) -> Any:
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value


def _result_files(store: Store, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
    """The recorded files ``(run id, path)`` of ``wanted`` that exist, in one query."""
    from sqlalchemy import select

    f = tables.files
    keys = set(wanted)
    runs, paths = {r for r, _ in keys}, {p for _, p in keys}
    with reading(store, "reading recorded results") as connection:
        query = select(f.c.run_id, f.c.path, f.c.content).where(f.c.run_id.in_(runs), f.c.path.in_(paths))
        return {(r, p): bytes(c) for r, p, c in connection.execute(query) if (r, p) in keys}


def _items(run_id: str, path: str, files: Mapping[tuple[str, str], bytes], options: CompareOptions) -> Items:
    """One recorded result's per-item values and score interval (a damaged record is a note, not an error)."""
    where = Path(f"run:{run_id[:12]}") / path
    item_path = path.removesuffix(".json") + SUFFIX
    if (run_id, path) not in files:
        return Items("none", 0, np.zeros(0), math.nan, math.nan, f"{path} is not among the run's recorded files")
    try:
        result = TaskResult.from_dict(json.loads(files[(run_id, path)]))
        content = files.get((run_id, item_path))
        rows = decode_rows(content, str(where.with_name(item_path))) if content is not None else None
        items = items_of(result, rows, where, where.with_name(item_path))
    except (EmbedscopeError, KeyError, TypeError, ValueError) as e:
        return Items("none", 0, np.zeros(0), math.nan, math.nan, f"unreadable record: {clip_text(str(e), 200)}")
    low, high = page_interval(items, options)
    values = items.values if items.kind == "mean" else np.zeros(0)
    note = {"pairs": "a statistic of all pairs: no per-item values", "none": "no per-item rows recorded"}
    return Items(items.kind, len(items.keys), values, low, high, note.get(items.kind, ""))


PAGE_ROUNDS = 1000  # bootstrap rounds of a pair statistic's interval on the task page (one per model shown)


def page_interval(items: TaskItems, options: CompareOptions) -> tuple[float, float]:
    """A score's interval on the task page, cheap enough for a hundred models in well under a second: the Student t
    interval of the mean of per-item values, ``x̄ ± t_{(1+c)/2, n−1} · s / √n`` (as scipy's
    ``t.interval(c, n − 1, x̄, sem)``); for a statistic of all pairs, :func:`score_interval`'s bootstrap over pairs
    with at most ``PAGE_ROUNDS`` rounds."""
    if items.kind == "mean" and len(items.values) >= 2:
        from scipy.stats import t as student_t

        n = len(items.values)
        mean, sem = float(items.values.mean()), float(items.values.std(ddof=1) / math.sqrt(n))
        half = float(student_t.ppf((1 + options.confidence) / 2, n - 1) * sem)
        return mean - half, mean + half
    return score_interval(items, replace(options, rounds=min(options.rounds, PAGE_ROUNDS)))


def _edges(entries: Sequence[Items]) -> np.ndarray:
    """Histogram bin edges shared by every model: [0, 1] when the values lie there, else their range."""
    values = [e.values for e in entries if len(e.values)]
    if not values:
        return np.linspace(0.0, 1.0, BINS + 1)
    low, high = min(float(v.min()) for v in values), max(float(v.max()) for v in values)
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0
    if high <= low:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, BINS + 1)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def task_view(
    store: Store,
    task: str,
    where: LeaderFilter = LeaderFilter(),
    options: CompareOptions = CompareOptions(),
    memo: Memo | None = None,
) -> TaskView:
    """``task`` across models: each one's newest score, its interval (:func:`page_interval`) and its per-item values'
    histogram; best first. ``memo`` keeps what each recorded result gave (runs never change)."""
    with reading(store, "reading a task's results") as connection:
        found = newest_results(connection, where, task)
    if not found:
        raise _close("task", task, known_tasks(store))
    memo = memo if memo is not None else Memo()
    key = (options.rounds, options.seed, options.confidence)
    known = {(r.run_id, r.path): memo.get((r.run_id, r.path, key)) for r in found}
    missing = [k for k, v in known.items() if v is None]
    wanted = [p for run_id, path in missing for p in ((run_id, path), (run_id, path.removesuffix(".json") + SUFFIX))]
    files = _result_files(store, wanted) if wanted else {}
    for run_id, path in missing:
        known[(run_id, path)] = memo.remember((run_id, path, key), _items(run_id, path, files, options))
    items = [known[(r.run_id, r.path)] for r in found]
    edges = _edges(items)
    entries = [_entry(r, i, edges) for r, i in zip(found, items)]
    entries.sort(key=lambda e: (e.score is None, -(e.score or 0.0), e.model.lower()))
    first = found[0]
    return TaskView(
        task,
        first.task_type or "Unknown",
        first.metric or "main_score",
        options.confidence,
        [float(e) for e in edges],
        entries,
    )


def _entry(row: Any, items: Items, edges: np.ndarray) -> TaskEntry:
    counts = np.histogram(items.values, edges)[0] if len(items.values) else np.zeros(0, dtype=np.int64)
    return TaskEntry(
        row.model,
        row.experiment,
        row.run_id,
        as_utc(row.recorded_at),
        row.main_score,
        _finite(items.ci_low),
        _finite(items.ci_high),
        items.n,
        items.kind,
        [int(c) for c in counts],
        items.note,
        items.values,
    )


def known_tasks(store: Store) -> list[str]:
    """Every task the store holds a result of."""
    from sqlalchemy import select

    with reading(store, "reading tasks") as connection:
        return list(connection.execute(select(tables.results.c.task).distinct()).scalars())


# -- one model's history -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRow:
    """A recorded run, as a model's page lists it."""

    id: str
    model: str
    recorded_at: dt.datetime
    evaluated_at: str | None
    revision: str
    experiment: str | None
    source: str
    tags: tuple[str, ...]
    tasks: int


@dataclass(frozen=True)
class Point:
    """One run's score on a task."""

    run_id: str
    recorded_at: dt.datetime
    experiment: str | None
    score: float | None


@dataclass(frozen=True)
class ModelHistory:
    """One model's runs, oldest first, and per task its score in each run."""

    model: str
    runs: list[RunRow]
    series: dict[str, list[Point]]
    metrics: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


def model_history(store: Store, model: str) -> ModelHistory:
    """Every run of ``model`` (oldest first) with its tags, and per task its score in each run (three queries)."""
    from sqlalchemy import func, select

    r, res, t = tables.runs, tables.results, tables.tags
    with reading(store, "reading a model's runs") as connection:
        runs = list(
            connection.execute(
                select(
                    r.c.id,
                    r.c.recorded_at,
                    r.c.evaluated_at,
                    r.c.revision,
                    r.c.experiment,
                    r.c.source,
                    func.count(res.c.id).label("tasks"),
                )
                .select_from(r.outerjoin(res, res.c.run_id == r.c.id))
                .where(r.c.model == model)
                .group_by(r.c.id, r.c.recorded_at, r.c.evaluated_at, r.c.revision, r.c.experiment, r.c.source)
                .order_by(r.c.recorded_at, r.c.id)
            )
        )
        if not runs:
            raise _close("model", model, connection.execute(select(r.c.model).distinct()).scalars())
        scores = list(
            connection.execute(
                select(res.c.run_id, res.c.task, res.c.metric, res.c.main_score)
                .select_from(res.join(r, r.c.id == res.c.run_id))
                .where(r.c.model == model)
                .order_by(r.c.recorded_at, r.c.id, res.c.task)
            )
        )
        tagged = connection.execute(
            select(t.c.run_id, t.c.name).join(r, r.c.id == t.c.run_id).where(r.c.model == model).order_by(t.c.name)
        )
        tags: dict[str, list[str]] = {}
        for run_id, name in tagged:
            tags.setdefault(run_id, []).append(name)
    rows = [
        RunRow(
            x.id,
            model,
            as_utc(x.recorded_at),
            x.evaluated_at,
            x.revision,
            x.experiment,
            x.source,
            tuple(tags.get(x.id, ())),
            int(x.tasks),
        )
        for x in runs
    ]
    by_id = {x.id: x for x in rows}
    series: dict[str, list[Point]] = {}
    metrics: dict[str, str] = {}
    for run_id, task, metric, score in scores:
        run = by_id[run_id]
        series.setdefault(task, []).append(Point(run_id, run.recorded_at, run.experiment, score))
        metrics.setdefault(task, metric or "main_score")
    return ModelHistory(model, rows, dict(sorted(series.items())), metrics)


# -- two runs side by side ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComparedTask:
    """One shared task of two runs: ``delta = b − a``, its CI and p-values (Holm across the tested tasks), the
    gate's verdict; ``xs``/``ys`` the paired per-item values (a, b) the scatter draws."""

    task: str
    task_type: str
    metric: str
    score_a: float
    score_b: float
    delta: float
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    test: str = ""
    n: int = 0
    verdict: str = "untested"
    reason: str = ""
    xs: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    ys: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)


@dataclass(frozen=True)
class RunComparison:
    """Two runs (``b`` against ``a``) on the tasks they share, and what only one of them has."""

    a: RunRow
    b: RunRow
    tasks: list[ComparedTask]
    only_a: list[str]
    only_b: list[str]
    mismatches: list[str]
    system_differences: list[str]
    notes: list[str]
    options: CompareOptions
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _plain(self)
        return out


def resolve(store: Store, spec: str) -> str:
    """The id of the run ``spec`` names: ``tag:NAME``, ``run:ID`` or an id (a unique prefix of at least
    ``ID_PREFIX`` hex digits); :class:`NotFound` otherwise."""
    from sqlalchemy import select

    r, t = tables.runs, tables.tags
    spec = spec.strip()
    with reading(store, "reading runs") as connection:
        if spec.startswith("tag:"):
            found = connection.execute(select(t.c.run_id).where(t.c.name == spec[4:])).scalar()
            if found is None:
                raise _close("tag", spec[4:], connection.execute(select(t.c.name)).scalars())
            return str(found)
        prefix = spec.removeprefix("run:").lower()
        if len(prefix) < ID_PREFIX or any(c not in "0123456789abcdef" for c in prefix):
            raise NotFound(f"{clip(spec)}: name a run by tag:NAME or run:ID (at least {ID_PREFIX} hex digits)")
        ids = list(connection.execute(select(r.c.id).where(r.c.id.startswith(prefix, autoescape=True)).limit(2)))
    if len(ids) != 1:
        raise NotFound(f"run {prefix!r}: " + ("no run has that id" if not ids else "several runs share that prefix"))
    return str(ids[0][0])


def run_row(store: Store, run_id: str) -> RunRow:
    """One run as :class:`RunRow` (its id in full)."""
    from sqlalchemy import func, select

    r, res, t = tables.runs, tables.results, tables.tags
    with reading(store, "reading runs") as connection:
        x = connection.execute(select(r).where(r.c.id == run_id)).one()
        tags = tuple(connection.execute(select(t.c.name).where(t.c.run_id == run_id).order_by(t.c.name)).scalars())
        tasks = int(
            connection.execute(select(func.count()).select_from(res).where(res.c.run_id == run_id)).scalar() or 0
        )
    return RunRow(x.id, x.model, as_utc(x.recorded_at), x.evaluated_at, x.revision, x.experiment, x.source, tags, tasks)


def _only(side: Side, tasks: Sequence[str]) -> Side:
    """``side`` with only ``tasks``."""
    results = dataclasses.replace(side.results, tasks={t: side.tasks[t] for t in tasks})
    return dataclasses.replace(side, results=results)


def _paired(a: TaskItems, b: TaskItems) -> tuple[np.ndarray, np.ndarray]:
    """The per-item values both runs scored (a's, b's), every k-th beyond :data:`SCATTER_POINTS`."""
    if a.kind != "mean" or b.kind != "mean":
        return np.zeros(0), np.zeros(0)
    ia, ib = paired_items(a, b)
    step = max(1, math.ceil(len(ia) / SCATTER_POINTS))
    return a.values[ia][::step], b.values[ib][::step]


def compare_runs(
    store: Store, a: str, b: str, options: CompareOptions = GATE_OPTIONS, tolerance: float = DEFAULT_TOLERANCE
) -> RunComparison:
    """Run ``b`` against run ``a`` (each ``tag:NAME``, ``run:ID`` or an id prefix) on their shared tasks: the gate's
    paired test per task with per-item values on both sides, p-values Holm-adjusted across those tasks."""
    ida, idb = resolve(store, a), resolve(store, b)
    side_a, side_b = store_side(f"run:{ida}", store), store_side(f"run:{idb}", store)
    shared = [t for t in side_a.tasks if t in side_b.tasks]
    tested = [t for t in shared if side_a.tasks[t].kind != "none" and side_b.tasks[t].kind != "none"]
    gated = gate_sides(_only(side_a, tested), _only(side_b, tested), tolerance, options)
    rows = {r.task: r for r in gated.rows}
    tasks = []
    for name in shared:
        ta, tb = side_a.tasks[name], side_b.tasks[name]
        row = ComparedTask(name, ta.task_type, ta.metric, ta.score, tb.score, tb.score - ta.score)
        if name in rows:
            g = rows[name]
            xs, ys = _paired(ta, tb)
            row = dataclasses.replace(
                row,
                ci_low=_finite(g.ci_low),
                ci_high=_finite(g.ci_high),
                p_value=_finite(g.p_value),
                p_adjusted=_finite(g.p_adjusted),
                test=g.test,
                n=g.n,
                verdict=g.verdict,
                reason=g.reason,
                xs=xs,
                ys=ys,
            )
        else:
            row = dataclasses.replace(row, reason="no per-item rows on both sides: not tested")
        tasks.append(row)
    only_a = [t for t in side_a.tasks if t not in side_b.tasks]
    only_b = [t for t in side_b.tasks if t not in side_a.tasks]
    return RunComparison(
        run_row(store, ida),
        run_row(store, idb),
        tasks,
        only_a,
        only_b,
        gated.mismatches,
        gated.system_differences,
        gated.notes,
        options,
        tolerance,
    )
