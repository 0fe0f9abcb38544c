"""What a comparison reads from one model's result folder: each task's main score and per-item values.

Per-item values come from ``<Task>.per_item.jsonl.gz`` (rankings: one value per query; STS and pair
classification: each pair's predictions and gold) or, for classification, multilabel classification and
clustering, from the per-experiment scores in the result JSON (``scores_per_experiment``,
``v_measures``, ``ami_scores``). Items are keyed ``(split, hf_subset, id)``.

A per-item file is checked against the result it sits beside: every value must be a finite number, no
item may occur twice, and for each split and subset the statistic of its rows (the mean, or the pair
statistic of all pairs) must reproduce the stored main score within ``SCORE_TOLERANCE``, unrounded or
rounded to 5 decimals as mteb stores trec_eval means. Otherwise a :class:`DataFormatError` names the file.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np

from embedscope.compare.stats import average_precision_rows, pearson_rows, spearman_rows
from embedscope.errors import ConfigError, DataFormatError
from embedscope.results.per_item import per_item_path, read_per_item
from embedscope.results.report import infer_task_type, main_metric, model_name
from embedscope.results.schema import TaskResult
from embedscope.results.store import EXPERIMENTS

Kind = Literal["mean", "pairs", "none"]
ItemKey = tuple[str, str, str]
EXPERIMENT_LISTS = {"v_measure": "v_measures", "ami": "ami_scores"}
LOWER_IS_SIMILAR = ("manhattan", "euclidean")  # pair-classification distances
SCORE_TOLERANCE = 1e-9
# what two results must share to be compared: the record's keys, less the model's identity (which differs)
COMPARED_SETTINGS = ("run_settings", "task_settings", "data")
PairStatistic = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]


def pair_statistic_type(task_type: str) -> bool:
    """Whether ``task_type``'s main score is a statistic of all its pairs (Spearman, average precision), so its
    per-item rows are pair columns tested by a bootstrap over pairs, rather than values whose mean is the score.

    Read from the task-type registry (``TaskType.pairwise_score``); a type embedscope does not know is not.

    >>> pair_statistic_type("STS"), pair_statistic_type("Retrieval"), pair_statistic_type("Unknown")
    (True, False, False)
    """
    from embedscope.tasks.types import TASK_TYPES

    found = TASK_TYPES.find(task_type)
    return found is not None and found.pairwise_score


def pair_statistic(metric: str) -> PairStatistic | None:
    """Row-wise statistic of pair columns for a main metric: ``{fn}_spearman``/``{fn}_pearson`` (STS; the bare
    names use ``similarity``), ``{fn}_ap`` or ``max_ap`` (pair classification); None if not supported.

    The function takes the columns and an index block ``(R, n)`` and returns one value per row.
    """

    def correlation(column: str, rows: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> PairStatistic:
        return lambda cols, idx: rows(cols[column][idx], cols["gold"][idx])

    def ap(column: str) -> PairStatistic:
        sign = -1.0 if column in LOWER_IS_SIMILAR else 1.0
        return lambda cols, idx: average_precision_rows(sign * cols[column][idx], cols["gold"][idx])

    for suffix, rows in (("spearman", spearman_rows), ("pearson", pearson_rows)):
        if metric == suffix:
            return correlation("similarity", rows)
        if metric.endswith(f"_{suffix}"):
            return correlation(metric.removesuffix(f"_{suffix}"), rows)
    if metric == "max_ap":
        fns = ("similarity", "cosine", "manhattan", "euclidean", "dot")
        return lambda cols, idx: np.max([ap(f)(cols, idx) for f in fns if f in cols], axis=0)
    if metric.endswith("_ap"):
        return ap(metric.removesuffix("_ap"))
    return None


@dataclass(frozen=True)
class TaskItems:
    """One task of one model: main score and per-item values.

    ``kind`` is ``"mean"`` when the score is the mean of ``values`` (one per item), ``"pairs"`` when it is a
    statistic of the pair columns in ``columns`` (``gold`` and each prediction), ``"none"`` without items.
    ``top`` holds each ranked item's best doc ids (for rank agreement), when stored.
    """

    task: str
    task_type: str
    metric: str
    score: float
    kind: Kind
    keys: tuple[ItemKey, ...] = ()
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    top: tuple[tuple[str, ...], ...] = ()
    path: Path = Path()
    item_file: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    group_field: str | None = None  # the run's group_by (its queries' metadata field), when it set one
    groups: tuple[str, ...] = ()  # each item's group (the per-item rows' ``group``), with group_field


class _ResultFields(TypedDict):
    """The :class:`TaskItems` fields read from the result JSON itself."""

    task: str
    task_type: str
    metric: str
    score: float
    path: Path
    settings: dict[str, Any]


@dataclass(frozen=True)
class ModelResults:
    """Every task result of one model (one ``<org__model>/<revision>`` folder)."""

    name: str
    folder: Path
    tasks: dict[str, TaskItems]
    note: str = ""
    """What was chosen when the folder held more (a revision folder's own results beside its experiments)."""


def revision_folders(path: Path) -> list[Path]:
    """Folders holding one model's results under ``path``: those with ``model_meta.json`` (or ``path`` itself)."""
    found = sorted({p.parent for p in path.rglob("model_meta.json")})
    return found or [path]


def result_paths(folder: Path) -> list[Path]:
    """Task result files directly in ``folder`` (not stage subfolders, predictions or metadata)."""
    from embedscope.results.report import load_result_json

    return [p for p in sorted(folder.glob("*.json")) if load_result_json(p) is not None]


def load_model_results(path: str | Path) -> ModelResults:
    """One model's results from a results folder holding exactly one model (or its revision folder)."""
    root = Path(path)
    if not root.is_dir():
        raise DataFormatError(f"{root}: no such results folder")
    folders = [f for f in revision_folders(root) if result_paths(f)]
    if not folders:
        raise DataFormatError(f"{root}: no task results found (expected <org__model>/<revision>/<Task>.json)")
    folder, note = _one_folder(root, folders)
    files = result_paths(folder)
    tasks = {}
    for p in files:
        items = task_items(p)
        tasks[items.task] = items
    return ModelResults(model_name(files[0]), folder, tasks, note)


def _experiments_of(folder: Path, others: list[Path]) -> list[Path]:
    """The folders of ``others`` inside ``folder``'s experiments folder (its runs with other settings)."""
    return [f for f in others if f != folder and f.is_relative_to(folder / EXPERIMENTS)]


def _one_folder(root: Path, folders: list[Path]) -> tuple[Path, str]:
    """The one revision folder to compare among those holding results under ``root``, and a note when it was
    chosen among several: a revision folder's own results (its default settings) when the others are its
    experiments (a sweep's default point, a screen's exact result). Otherwise more than one is refused, naming
    them."""
    if len(folders) == 1:
        return folders[0], ""
    names = ", ".join(str(f.relative_to(root)) or "." for f in folders)
    for folder in folders:
        experiments = _experiments_of(folder, folders)
        if len(experiments) == len(folders) - 1:
            which = "its own results" if folder == root else f"the results in {folder.relative_to(root)}"
            return folder, (
                f"{root}: compared {which} (the model's own settings), not the {len(experiments)} run(s) with other "
                f"settings in {folder / EXPERIMENTS}; give one of those folders to compare it"
            )
    parents = {f.parent.parent for f in folders if f.parent.name == EXPERIMENTS}
    if len(parents) == 1 and all(f.parent.name == EXPERIMENTS for f in folders):
        raise ConfigError(
            f"{root} holds {len(folders)} experiments of one model ({names}) and no results of its own settings; "
            "give one experiment's folder"
        )
    raise ConfigError(f"{root} holds results of {len(folders)} models ({names}); give one model's folder each")


def task_items(path: Path) -> TaskItems:
    """Main score and per-item values of one result file (see the module docstring)."""
    item_file = per_item_path(path)
    rows = read_per_item(item_file) if item_file.exists() else None
    return items_of(TaskResult.from_dict(json.loads(path.read_text(encoding="utf-8"))), rows, path, item_file)


def items_of(result: TaskResult, rows: list[dict[str, Any]] | None, path: Path, item_file: Path) -> TaskItems:
    """Main score and per-item values of a result and its per-item ``rows`` (None: no per-item file); ``path`` and
    ``item_file`` name where they were read (a folder's files, or a store's records)."""
    task_type = infer_task_type(result)
    metric = main_metric(result)
    base = _ResultFields(
        task=result.task_name,
        task_type=task_type,
        metric=metric,
        score=result.main_score(),
        path=path,
        settings=compared_settings(result.extra),
    )
    if rows is not None:
        keys = item_keys(rows, item_file)
        top = tuple(tuple(r["top_10"]) for r in rows) if rows and "top_10" in rows[0] else ()
        items: TaskItems | None = None
        if pair_statistic_type(task_type) and rows and "gold" in rows[0]:
            names = [c for c in rows[0] if c not in ("split", "hf_subset", "id")]
            columns = {c: finite_column(rows, c, keys, item_file) for c in names}
            items = TaskItems(**base, kind="pairs", keys=keys, columns=columns, item_file=item_file)
        elif rows and metric in rows[0]:
            values = finite_column(rows, metric, keys, item_file)
            field_ = _group_field(result.extra)
            groups = tuple(str(r.get("group")) for r in rows) if field_ is not None and "group" in rows[0] else ()
            items = TaskItems(
                **base,
                kind="mean",
                keys=keys,
                values=values,
                top=top,
                item_file=item_file,
                group_field=field_ if groups else None,
                groups=groups,
            )
        if items is not None:
            check_score(items, result)
            return items
    experiment_keys, experiment_scores = experiment_values(result.scores, metric)
    if experiment_keys:
        return TaskItems(
            **base, kind="mean", keys=experiment_keys, values=np.array(experiment_scores, dtype=np.float64)
        )
    return TaskItems(**base, kind="none")


def _group_field(extra: dict[str, Any]) -> str | None:
    """The ``group_by`` field a result's run recorded (None without one)."""
    run = extra.get("run_settings")
    value = run.get("group_by") if isinstance(run, dict) else None
    return value if isinstance(value, str) and value else None


def compared_settings(extra: dict[str, Any]) -> dict[str, Any]:
    """What a result records that another must share to be compared with it: ``run_settings`` less the
    model's identity, ``task_settings`` and the data's fingerprint (not its location); {} when not recorded.

    >>> compared_settings({"run_settings": {"model": {"fingerprint": "f"}, "limits": 5}, "data": {"location": "/d",
    ...     "fingerprint": "ab"}})
    {'run_settings': {'limits': 5}, 'data': {'fingerprint': 'ab'}}
    """
    out: dict[str, Any] = {}
    run = extra.get("run_settings")
    if isinstance(run, dict):
        out["run_settings"] = {k: v for k, v in run.items() if k != "model"}
    if "task_settings" in extra:
        out["task_settings"] = extra["task_settings"]
    data = extra.get("data")
    if isinstance(data, dict) and "fingerprint" in data:
        out["data"] = {"fingerprint": data["fingerprint"]}
    return out


def item_keys(rows: list[dict[str, Any]], item_file: Path) -> tuple[ItemKey, ...]:
    """Each row's ``(split, hf_subset, id)``; an item that occurs twice is a :class:`DataFormatError`."""
    keys = tuple((str(r["split"]), str(r["hf_subset"]), str(r["id"])) for r in rows)
    if len(set(keys)) != len(keys):
        twice = next(k for k, count in Counter(keys).items() if count > 1)
        raise DataFormatError(
            f"{item_file}: item {'/'.join(twice)} occurs twice; re-run the task with --overwrite always"
        )
    return keys


def finite_column(rows: list[dict[str, Any]], column: str, keys: tuple[ItemKey, ...], item_file: Path) -> np.ndarray:
    """One column of the rows as float64; a missing, non-numeric or non-finite value is a :class:`DataFormatError`
    naming the file and the item."""
    values = [row.get(column) for row in rows]
    if set(map(type, values)) <= {int, float}:  # the usual case at C speed: plain numbers, then only their finiteness
        out = np.array(values, dtype=np.float64)
        if np.isfinite(out).all():
            return out
    out = np.empty(len(rows), dtype=np.float64)
    for i, row in enumerate(rows):
        value = row.get(column)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataFormatError(
                f"{item_file}: item {'/'.join(keys[i])} has {column} = {value!r}, not a finite number; "
                "re-run the task with --overwrite always"
            )
        out[i] = value
    return out


def group_statistic(items: TaskItems, index: np.ndarray) -> float:
    """The main metric over the items at ``index``: their mean, or the pair statistic of those pairs."""
    if items.kind == "mean":
        return float(items.values[index].mean())
    stat = pair_statistic(items.metric)
    return math.nan if stat is None else float(stat(items.columns, index[None, :])[0])


def check_score(items: TaskItems, result: TaskResult) -> None:
    """Refuse a per-item file that does not reproduce the result beside it: per split and subset, the
    statistic of its rows must equal the stored main score (within ``SCORE_TOLERANCE``, unrounded or rounded to
    5 decimals), and every scored split and subset must have rows."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (split, subset, _) in enumerate(items.keys):
        groups.setdefault((split, subset), []).append(i)
    stored = {(s, str(e.get("hf_subset", "default"))): e for s, es in result.scores.items() for e in es}
    where = f"{items.item_file} does not match {items.path.name}"
    for (split, subset), entry in stored.items():
        if (split, subset) not in groups and isinstance(entry.get("main_score"), (int, float)):
            raise DataFormatError(
                f"{where}: no rows for split {split!r}, subset {subset!r}; re-run the task with --overwrite always"
            )
    for (split, subset), index in groups.items():
        if (split, subset) not in stored:
            raise DataFormatError(
                f"{where}: rows of split {split!r}, subset {subset!r}, which the result has no score for"
            )
        expected = stored[(split, subset)].get("main_score")
        actual = group_statistic(items, np.array(index, dtype=np.int64))
        if math.isnan(actual) or not isinstance(expected, (int, float)):
            continue  # a metric compare cannot recompute: no check, as no test
        if min(abs(expected - actual), abs(expected - round(actual, 5))) > SCORE_TOLERANCE:
            raise DataFormatError(
                f"{where}: its {items.metric} on {split}/{subset} is {actual:.6f}, the stored score {expected:.6f}; "
                "re-run the task with --overwrite always"
            )


def experiment_values(scores: dict[str, list[dict[str, Any]]], metric: str) -> tuple[tuple[ItemKey, ...], list[float]]:
    """Per-experiment values of ``metric`` stored in the scores: ``scores_per_experiment`` (classification,
    multilabel) or ``v_measures`` / ``ami_scores`` (clustering; per level, or a plain list in the legacy protocol).

    >>> experiment_values({"test": [{"hf_subset": "default", "v_measures": {"Level 0": [0.5, 0.7]}}]}, "v_measure")
    ((('test', 'default', 'Level 0/0'), ('test', 'default', 'Level 0/1')), [0.5, 0.7])
    """
    keys: list[ItemKey] = []
    values: list[float] = []
    for split, entries in scores.items():
        for entry in entries:
            subset = str(entry.get("hf_subset", "default"))
            per_exp = entry.get("scores_per_experiment")
            listed = entry.get(EXPERIMENT_LISTS.get(metric, ""))
            if isinstance(per_exp, list) and per_exp and all(metric in e for e in per_exp):
                pairs = [(f"experiment {i}", e[metric]) for i, e in enumerate(per_exp)]
            elif isinstance(listed, dict):
                pairs = [(f"{level}/{i}", v) for level, vs in listed.items() for i, v in enumerate(vs)]
            elif isinstance(listed, list):
                pairs = [(f"set {i}", v) for i, v in enumerate(listed)]
            else:
                return (), []
            for name, value in pairs:
                keys.append((split, subset, name))
                values.append(float(value))
    return tuple(keys), values


def paired_items(a: TaskItems, b: TaskItems) -> tuple[np.ndarray, np.ndarray]:
    """Row indices into ``a`` and ``b`` of the items both scored, in ``a``'s order."""
    where = {k: i for i, k in enumerate(b.keys)}
    ia = [i for i, k in enumerate(a.keys) if k in where]
    return np.array(ia, dtype=np.int64), np.array([where[a.keys[i]] for i in ia], dtype=np.int64)
