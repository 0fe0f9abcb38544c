"""Aggregated tables over result folders, as the ruMTEB article shows them.

Per task (main score of each model), per task type (mean of the task scores of that type) and the
overall mean over tasks, several models side by side. Task scores follow MTEB's ``get_score``:
the plain mean of ``main_score`` over every (split, subset) entry. The type mean is the mean of
task scores of that type; "Mean (Task)" is the mean over all tasks and "Mean (TaskType)" the mean
of the type means (MTEB's two benchmark aggregates). A model missing a task gets an empty cell and
no aggregate over a set it does not fully cover. "Rank (Borda)" (shown for a benchmark) is mteb's leaderboard rank: in each task a
model earns ``n_models - rank`` points (ties share the average rank; a missing task earns nothing), and models
are ranked by their total (ties share the best rank). ``benchmark=`` keeps the tasks of one of mteb's benchmarks.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError
from embedscope.results.schema import TaskResult
from embedscope.results.table import markdown_table

METRIC_NAMES = {
    "ndcg_at_10": "NDCG@10",
    "map_at_1000": "MAP@1000",
    "map": "MAP",
    "mrr_at_10": "MRR@10",
    "cosine_spearman": "Spearman (cosine)",
    "cosine_pearson": "Pearson (cosine)",
    "accuracy": "Accuracy",
    "v_measure": "V-measure",
    "max_ap": "Average precision",
    "max_accuracy": "Accuracy",
    "lrap": "LRAP",
    "f1": "F1",
}


def type_main_metric(task_type: str) -> str | None:
    """The registered task type's usual main metric (``ndcg_at_10`` for Retrieval …), or None."""
    from embedscope.tasks.types import TASK_TYPES

    spec = TASK_TYPES.find(task_type)
    return spec.main_score if spec is not None else None


@dataclass(frozen=True)
class ResultRow:
    """One model's score on one task."""

    model: str
    task: str
    task_type: str
    main_metric: str
    score: float
    path: Path
    groups: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, compare=False)
    """Query groups (run option ``group_by``): ``(split, "FIELD=VALUE")`` → main score, CI and count."""


def _registered(task_name: str) -> Any:
    """The built-in task or catalog entry of that name (both have ``type`` and ``main_score``), or None."""
    from embedscope.tasks.catalog import catalog_entry, in_catalog
    from embedscope.tasks.registry import TASKS

    if task_name in TASKS:
        return TASKS.get(task_name)
    return catalog_entry(task_name) if in_catalog(task_name) else None


def load_result_json(path: Path) -> dict[str, Any] | None:
    """A task result file's JSON, or None for other files (model metadata, predictions, other JSON);
    invalid JSON is a :class:`DataFormatError` naming the file."""
    if path.name == "model_meta.json" or path.name.endswith("_predictions.json"):
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); remove or fix it") from e
    if not (isinstance(data, dict) and "task_name" in data and "scores" in data):
        return None
    from embedscope.results.store import check_result_shape

    try:
        return check_result_shape(data)
    except ValueError as e:
        raise DataFormatError(f"{path}: not a task result of the expected shape ({e}); remove or fix it") from None


def _recorded(result: TaskResult, key: str) -> str | None:
    """A non-empty string embedscope recorded in the result's extras, or None."""
    value = result.extra.get(key)
    return value if isinstance(value, str) and value else None


def infer_task_type(result: TaskResult) -> str:
    """The task type of a result: recorded by embedscope, else from the catalogs, else from its keys."""
    entry = _registered(result.task_name)
    recorded = _recorded(result, "task_type") or (entry.type if entry is not None else None)
    if recorded:
        return recorded
    keys = {k for entries in result.scores.values() for e in entries for k in e}
    from embedscope.tasks.types import TASK_TYPES

    found = TASK_TYPES.by_signature(keys)
    return found.name if found is not None else "Unknown"


def main_metric(result: TaskResult) -> str:
    """The name of the main metric: as recorded by embedscope, else the registered task's, else the first
    metric whose value equals ``main_score``."""
    entry = _registered(result.task_name)
    recorded = _recorded(result, "main_metric") or (entry.main_score if entry is not None else None)
    if recorded:
        return recorded
    equal = [
        k
        for entries in result.scores.values()
        for e in entries
        for k, v in e.items()
        if k != "main_score" and isinstance(v, float) and v == e.get("main_score")
    ]
    usual = type_main_metric(infer_task_type(result))
    if usual in equal:  # several metrics may tie with the main score (ndcg_at_3 == ndcg_at_10): take the type's own
        return usual
    return equal[0] if equal else "main_score"


def model_name(result_file: Path) -> str:
    """The model's name from ``model_meta.json`` beside the file, else from the folder name."""
    meta = result_file.parent / "model_meta.json"
    if meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("name")
            if isinstance(name, str) and name:
                return name
        except json.JSONDecodeError:
            pass
    return result_file.parent.parent.name.replace("__", "/")


def collect_results(folders: list[str | Path]) -> list[ResultRow]:
    """Every task result under ``folders`` (``<org__model>/<revision>/<Task>.json``, any depth)."""
    rows: list[ResultRow] = []
    for folder in folders:
        root = Path(folder)
        if not root.exists():
            raise DataFormatError(f"{root}: no such results folder")
        if root.is_file() and (root.suffix.lower() != ".json" or load_result_json(root) is None):
            raise DataFormatError(
                f"{root}: not an MTEB task result (<Task>.json); report reads results folders (as written by "
                "'embedscope run' or mteb) or their task result JSON files"
            )
        files = [root] if root.is_file() else sorted(root.rglob("*.json"))
        for path in files:
            data = load_result_json(path)
            if data is None:
                continue  # not a task result (metadata, predictions, some other JSON file in the folder)
            result = TaskResult.from_dict(data)
            rows.append(
                ResultRow(
                    model_name(path),
                    result.task_name,
                    infer_task_type(result),
                    main_metric(result),
                    result.main_score(),
                    path,
                    query_groups(result),
                )
            )
    if not rows:
        raise DataFormatError(f"No task results found under {', '.join(map(str, folders))}")
    return distinct_models(rows)


def query_groups(result: TaskResult) -> dict[tuple[str, str], dict[str, Any]]:
    """The query groups a result holds (``scores[split][i]["groups"]``, run option ``group_by``), keyed by split (with
    its subset unless ``default``) and ``FIELD=VALUE``."""
    out = {}
    for split, entries in result.scores.items():
        for entry in entries:
            subset = entry.get("hf_subset", "default")
            where = split if subset == "default" else f"{split}/{subset}"
            for name, groups in (entry.get("groups") or {}).items():
                for value, g in groups.items():
                    out[(where, f"{name}={value}")] = g
    return out


def distinct_models(rows: list[ResultRow]) -> list[ResultRow]:
    """Results of different folders are different models: a name that several folders share gets the
    folder added (``name (path)``), so their scores never merge into one column."""
    folders: dict[str, list[Path]] = {}
    for r in rows:
        seen = folders.setdefault(r.model, [])
        if r.path.parent not in seen:
            seen.append(r.path.parent)
    return [r if len(folders[r.model]) == 1 else replace(r, model=f"{r.model} ({r.path.parent})") for r in rows]


@dataclass(frozen=True)
class ReportTables:
    """The three tables, as lists of rows (first row = header): ``table()`` is what ``embedscope report`` prints.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> out = tempfile.mkdtemp()
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat"]), [tiny_retrieval_task()], output_folder=out, cache=False,
        ...                         show_progress=False)
        >>> tables = embedscope.report([out])
        >>> tables.per_task[0]
        ['task', 'type', 'metric', 'fake/keyword-encoder']
        >>> tables.to_dict()["per_type"][-1][0]
        'Mean (TaskType)'
    """

    per_task: list[list[str]]
    per_type: list[list[str]]
    notes: list[str] = field(default_factory=list)
    per_group: list[list[str]] = field(default_factory=list)
    """Query groups (``group_by``), one row per task, split and group, a column per model (score and 95% CI);
    empty when no result holds groups."""

    def table(self) -> str:
        """What ``embedscope report`` prints (the verbs' return convention: ``table()`` and ``to_dict()``)."""
        return self.markdown()

    def to_dict(self) -> dict[str, Any]:
        """The tables as lists of rows (first row = header) and the notes."""
        groups = {"per_group": self.per_group} if self.per_group else {}
        return {"per_task": self.per_task, "per_type": self.per_type, **groups, "notes": list(self.notes)}

    def markdown(self) -> str:
        return "\n\n".join(
            [
                "## Per task",
                markdown_table(self.per_task[0], self.per_task[1:]),
                "## Per task type (mean over tasks) and overall",
                markdown_table(self.per_type[0], self.per_type[1:]),
                *(
                    ["## Per query group (score [95% CI])", markdown_table(self.per_group[0], self.per_group[1:])]
                    if self.per_group
                    else []
                ),
                *self.notes,
            ]
        )

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["table", *self.per_task[0]])
        for row in self.per_task[1:]:
            writer.writerow(["task", *row])
        writer.writerow(["table", *self.per_type[0]])
        for row in self.per_type[1:]:
            writer.writerow(["type", *row])
        if self.per_group:
            writer.writerow(["table", *self.per_group[0]])
            for row in self.per_group[1:]:
                writer.writerow(["group", *row])
        return out.getvalue()


def _mean(values: list[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return float(sum(values) / len(values))  # type: ignore[arg-type]


def borda_ranks(scores: dict[tuple[str, str], float], models: list[str], tasks: list[str]) -> dict[str, int]:
    """mteb's ``Rank (Borda)`` (``mteb.benchmarks._create_table._borda_rank_from_long``) for ``models``."""
    points = {m: 0.0 for m in models}
    for task in tasks:
        ran = sorted(
            (scores[(m, task)], m)
            for m in models
            if scores.get((m, task)) is not None and not math.isnan(scores[(m, task)])
        )
        ran.reverse()  # best first
        i = 0
        while i < len(ran):
            j = i
            while j + 1 < len(ran) and ran[j + 1][0] == ran[i][0]:
                j += 1
            average_rank = (i + 1 + j + 1) / 2
            for _, m in ran[i : j + 1]:
                points[m] += len(models) - average_rank
            i = j + 1
    return {m: 1 + sum(1 for other in models if points[other] > points[m]) for m in models}


def restrict_to_benchmark(rows: list[ResultRow], benchmark: str) -> list[ResultRow]:
    """The rows of ``benchmark``'s tasks (mteb's benchmarks, e.g. ``MTEB(eng, v2)``), in its task order."""
    from embedscope.tasks.catalog import benchmark_tasks

    order = {name: i for i, name in enumerate(benchmark_tasks(benchmark))}
    kept = sorted((r for r in rows if r.task in order), key=lambda r: order[r.task])
    if not kept:
        raise DataFormatError(f"No results for a task of {benchmark} in these folders")
    return kept


def build_report(rows: list[ResultRow], digits: int = 3, borda: bool = False) -> ReportTables:
    """Per-task and per-type tables with models as columns (with ``borda``, also mteb's ``Rank (Borda)``).

    >>> from pathlib import Path
    >>> rows = [ResultRow("m1", "A", "STS", "cosine_spearman", 0.5, Path()),
    ...         ResultRow("m1", "B", "Retrieval", "ndcg_at_10", 0.25, Path())]
    >>> build_report(rows).per_type[-1]
    ['Mean (TaskType)', '', '0.375']
    """
    models = list(dict.fromkeys(r.model for r in rows))
    tasks = list(dict.fromkeys((r.task_type, r.task) for r in sorted(rows, key=lambda r: (r.task_type, r.task))))
    score = {(r.model, r.task): r.score for r in rows}
    metric = {r.task: r.main_metric for r in rows}
    fmt = lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"  # noqa: E731
    per_task = [["task", "type", "metric", *models]]
    for kind, task in tasks:
        per_task.append(
            [task, kind, METRIC_NAMES.get(metric[task], metric[task]), *[fmt(score.get((m, task))) for m in models]]
        )
    types = list(dict.fromkeys(kind for kind, _ in tasks))
    per_type = [["task type", "metric", *models]]
    type_means: dict[tuple[str, str], float | None] = {}
    for kind in types:
        names = [t for k, t in tasks if k == kind]
        metrics = sorted({METRIC_NAMES.get(metric[t], metric[t]) for t in names})
        for m in models:
            type_means[(m, kind)] = _mean([score.get((m, t)) for t in names])
        per_type.append([f"{kind} ({len(names)})", ", ".join(metrics), *[fmt(type_means[(m, kind)]) for m in models]])
    per_type.append(["Mean (Task)", "", *[fmt(_mean([score.get((m, t)) for _, t in tasks])) for m in models]])
    per_type.append(["Mean (TaskType)", "", *[fmt(_mean([type_means[(m, k)] for k in types])) for m in models]])
    if borda:
        ranks = borda_ranks(score, models, [t for _, t in tasks])
        per_type.append(["Rank (Borda)", "", *[str(ranks[m]) for m in models]])
    return ReportTables(per_task, per_type, _blank_notes(models, tasks, score), group_table(rows, models, digits))


def group_table(rows: list[ResultRow], models: list[str], digits: int = 3) -> list[list[str]]:
    """Query groups side by side: one row per task, split and group (with its query count), each model's score and
    95% bootstrap CI (none for a group of fewer than two queries); [] when no result holds groups."""
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for r in sorted(rows, key=lambda r: r.task):
        for (split, group), g in r.groups.items():
            key = (r.task, split, group)
            low, high = g.get("ci_low"), g.get("ci_high")
            ci = (
                f" [{low:.{digits}f}, {high:.{digits}f}]" if low is not None and high is not None else " (n < 2: no CI)"
            )
            cells.setdefault(key, {})[r.model] = f"{g['main_score']:.{digits}f}{ci}"
            counts[key] = int(g.get("n", 0))
    if not cells:
        return []
    header = ["task", "split", "group", "n", *models]
    return [header, *[[*key, str(counts[key]), *[cells[key].get(m, "") for m in models]] for key in cells]]


def _blank_notes(models: list[str], tasks: list[tuple[str, str]], score: dict[tuple[str, str], float]) -> list[str]:
    """Why a model's means are blank: the tasks it has no (finite) score for."""
    notes = []
    for m in models:
        missing = [t for _, t in tasks if score.get((m, t)) is None]
        invalid = [t for _, t in tasks if isinstance(score.get((m, t)), float) and math.isnan(score[(m, t)])]
        if missing or invalid:
            why = "; ".join(
                part
                for part in (
                    f"no result for {', '.join(missing)}" if missing else "",
                    f"no finite score for {', '.join(invalid)}" if invalid else "",
                )
                if part
            )
            notes.append(f"Blank means for {m}: {why} (a mean is shown only over a set of tasks it fully covers).")
    return notes
