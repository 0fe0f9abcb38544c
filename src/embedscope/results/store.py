"""Where results live on disk, and how they are written: atomically, never silently overwritten.

Layout (MTEB's): ``<output>/<org__model>/<revision>/<Task>.json`` plus ``model_meta.json``; a run whose
settings differ from the model's own (pooling, prompts, max length, dtype, top_k, limits …) goes to
MTEB's experiment folder ``<output>/<org__model>/<revision>/experiments/<settings-hash>/`` instead, its
``model_meta.json`` recording those settings as ``experiment_kwargs``;
with ``--save-predictions`` also ``predictions/<Task>_predictions.json`` (MTEB's prediction format,
``{subset: {split: {qid: {doc_id: score}}}}``), in a subfolder so that mteb's loader of a results
folder (``ResultCache.load_results``, which reads every ``<model>/<revision>/*.json``) sees only results;
per-item scores in ``<Task>.per_item.jsonl.gz`` (see :mod:`embedscope.results.per_item`).

Overwrite strategies (MTEB's names):

- ``only-missing`` (default): reuse a stored result; run only the splits it lacks.
- ``never``: reuse a stored result whatever splits it has; run only when there is none.
- ``always``: run and replace the stored result.
- ``only-cache``: never run; fail when there is no stored result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.files import atomic_write_bytes, resolved, write_json_atomic
from embedscope.results.per_item import encode_rows, merge_rows, per_item_path, read_per_item
from embedscope.results.schema import TaskResult

OverwriteStrategy = Literal["only-missing", "never", "always", "only-cache"]
OVERWRITE_STRATEGIES: tuple[str, ...] = ("only-missing", "never", "always", "only-cache")
EXPERIMENTS = "experiments"  # mteb's folder for runs with other settings than the model's own


def check_strategy(strategy: str) -> OverwriteStrategy:
    if strategy not in OVERWRITE_STRATEGIES:
        raise UnknownNameError("overwrite strategy", strategy, OVERWRITE_STRATEGIES)
    return strategy  # type: ignore[return-value]


def check_path_name(name: str, what: str, allow_slash: bool = False) -> str:
    """``name`` if it can be one component of a result path: no path separator (``/`` allowed as the
    ``org/model`` separator with ``allow_slash``), no ``.``/``..`` segment, not absolute; else ConfigError.

    >>> check_path_name("org/model", "model name", allow_slash=True)
    'org/model'
    """
    parts = name.split("/") if allow_slash else [name]
    bad = (
        not name
        or "\\" in name
        or "\0" in name
        or name.startswith("/")
        or any(p in ("", ".", "..") or "/" in p for p in parts)
    )
    if bad:
        raise ConfigError(
            f"{what} {name!r} cannot name a result file: use a plain name without path separators, "
            "'..' or a leading '/'"
        )
    return name


def safe_name(name: str) -> str:
    """``org/model`` → ``org__model`` (MTEB's folder naming); other separators are replaced too."""
    return name.replace("/", "__").replace("\\", "__").replace(" ", "_") or "unnamed"


class ResultStore:
    """Results of one model (name + revision) under an output folder."""

    def __init__(
        self, output_folder: str | Path, model_name: str, revision: str, experiment: str | None = None
    ) -> None:
        check_path_name(model_name, "model name", allow_slash=True)
        check_path_name(revision or "no_revision_available", "revision")
        self.root = Path(output_folder)
        resolved(self.root)  # a link loop fails now, not after the run
        self.folder = self.root / safe_name(model_name) / safe_name(revision or "no_revision_available")
        if experiment:
            self.folder = self.folder / EXPERIMENTS / check_path_name(experiment, "experiment")

    def sub(self, stage: str) -> ResultStore:
        """The store of one pipeline stage: ``<folder>/<stage>/`` (EvalScope's ``stage1/``, ``stage2/``)."""
        store = ResultStore.__new__(ResultStore)
        store.root = self.root
        store.folder = self.folder / safe_name(check_path_name(stage, "stage"))
        return store

    def inside(self, path: Path) -> Path:
        """``path`` if it resolves inside the output folder, else ConfigError (checked before every write)."""
        if not resolved(path).is_relative_to(resolved(self.root)):
            raise ConfigError(f"refusing to write {path}: it lies outside the output folder {self.root}")
        return path

    def path(self, task_name: str) -> Path:
        return self.folder / f"{check_path_name(task_name, 'task name')}.json"

    def predictions_path(self, task_name: str) -> Path:
        return self.folder / "predictions" / f"{check_path_name(task_name, 'task name')}_predictions.json"

    def load(self, task_name: str) -> TaskResult | None:
        path = self.path(task_name)
        if not path.exists():
            return None
        try:
            return TaskResult.from_dict(check_result_shape(json.loads(path.read_text(encoding="utf-8"))))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"Stored result {path} is unreadable ({e}). Delete it, or run with --overwrite always to replace it."
            ) from e

    def save(self, result: TaskResult) -> Path:
        path = self.inside(self.path(result.task_name))
        write_json_atomic(path, result.to_dict())
        return path

    def per_item_path(self, task_name: str) -> Path:
        return per_item_path(self.path(task_name))

    def save_per_item(self, task_name: str, rows: list[dict[str, Any]], keep_earlier: bool = True) -> Path:
        """Write the per-item rows atomically; with ``keep_earlier``, stored rows of other splits stay."""
        path = self.inside(self.per_item_path(task_name))
        if keep_earlier and path.exists():
            rows = merge_rows(read_per_item(path), rows)
        atomic_write_bytes(path, encode_rows(rows))
        return path

    def save_model_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.inside(self.folder / "model_meta.json"), meta)

    def load_model_meta(self) -> dict[str, Any] | None:
        """The ``model_meta.json`` of this folder, or None (absent or unreadable)."""
        try:
            data = json.loads((self.folder / "model_meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def save_predictions(self, task_name: str, predictions: dict[str, dict[str, dict[str, dict[str, float]]]]) -> Path:
        path = self.inside(self.predictions_path(task_name))
        write_json_atomic(path, predictions)
        return path


def check_result_shape(data: Any) -> dict[str, Any]:
    """``data`` if it has a result's shape (a task name, and scores per split as lists of objects), else ValueError."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    scores = data.get("scores")
    if not isinstance(data.get("task_name"), str) or not isinstance(scores, dict):
        raise ValueError("no 'task_name' string or no 'scores' object")
    for split, entries in scores.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ValueError(f"scores[{split!r}] is not a list of objects")
    return data


def splits_to_run(
    stored: TaskResult | None, wanted: tuple[str, ...], strategy: OverwriteStrategy, task_name: str, where: Path
) -> tuple[str, ...]:
    """Which splits must be evaluated, given what is stored and the overwrite strategy."""
    if strategy == "always" or stored is None:
        if strategy == "only-cache":
            raise ConfigError(f"overwrite strategy 'only-cache': no stored result for {task_name} at {where}")
        return wanted
    if strategy in ("never", "only-cache"):
        return ()
    return tuple(s for s in wanted if s not in stored.scores)
