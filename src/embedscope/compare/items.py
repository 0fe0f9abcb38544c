"""What a comparison reads from one model's result folder: each task's main score and per-item values.

Per-item values come from ``<Task>.per_item.jsonl.gz`` (rankings: one value per query; STS and pair
classification: each pair's predictions and gold) or, for classification, multilabel classification and
clustering, from the per-experiment scores in the result JSON (``scores_per_experiment``,
``v_measures``, ``ami_scores``). Items are keyed ``(split, hf_subset, id)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np

from embedscope.errors import ConfigError, DataFormatError
from embedscope.results.per_item import per_item_path, read_per_item
from embedscope.results.report import infer_task_type, main_metric, model_name
from embedscope.results.schema import TaskResult

Kind = Literal["mean", "pairs", "none"]
ItemKey = tuple[str, str, str]
PAIR_TYPES = ("STS", "PairClassification")
EXPERIMENT_LISTS = {"v_measure": "v_measures", "ami": "ami_scores"}


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


class _ResultFields(TypedDict):
    """The :class:`TaskItems` fields read from the result JSON itself."""

    task: str
    task_type: str
    metric: str
    score: float
    path: Path


@dataclass(frozen=True)
class ModelResults:
    """Every task result of one model (one ``<org__model>/<revision>`` folder)."""

    name: str
    folder: Path
    tasks: dict[str, TaskItems]


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
    if len(folders) > 1:
        names = ", ".join(str(f.relative_to(root)) for f in folders)
        raise ConfigError(f"{root} holds results of {len(folders)} models ({names}); give one model's folder each")
    folder = folders[0]
    files = result_paths(folder)
    tasks = {}
    for p in files:
        items = task_items(p)
        tasks[items.task] = items
    return ModelResults(model_name(files[0]), folder, tasks)


def task_items(path: Path) -> TaskItems:
    """Main score and per-item values of one result file (see the module docstring)."""
    result = TaskResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    task_type = infer_task_type(result)
    metric = main_metric(result)
    base = _ResultFields(
        task=result.task_name,
        task_type=task_type,
        metric=metric,
        score=result.main_score(),
        path=path,
    )
    item_file = per_item_path(path)
    if item_file.exists():
        rows = read_per_item(item_file)
        keys = tuple((str(r["split"]), str(r["hf_subset"]), str(r["id"])) for r in rows)
        top = tuple(tuple(r["top_10"]) for r in rows) if rows and "top_10" in rows[0] else ()
        if task_type in PAIR_TYPES and rows and "gold" in rows[0]:
            names = [c for c in rows[0] if c not in ("split", "hf_subset", "id")]
            columns = {c: np.array([r[c] for r in rows], dtype=np.float64) for c in names}
            return TaskItems(**base, kind="pairs", keys=keys, columns=columns)
        if rows and metric in rows[0]:
            values = np.array([r[metric] for r in rows], dtype=np.float64)
            return TaskItems(**base, kind="mean", keys=keys, values=values, top=top)
    experiment_keys, experiment_scores = experiment_values(result.scores, metric)
    if experiment_keys:
        return TaskItems(
            **base, kind="mean", keys=experiment_keys, values=np.array(experiment_scores, dtype=np.float64)
        )
    return TaskItems(**base, kind="none")


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
