"""Where results live on disk, and how they are written: atomically, never silently overwritten.

Layout (MTEB's): ``<output>/<org__model>/<revision>/<Task>.json`` plus ``model_meta.json``;
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
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.results.per_item import encode_rows, merge_rows, per_item_path, read_per_item
from embedscope.results.schema import TaskResult

OverwriteStrategy = Literal["only-missing", "never", "always", "only-cache"]
OVERWRITE_STRATEGIES: tuple[str, ...] = ("only-missing", "never", "always", "only-cache")


def check_strategy(strategy: str) -> OverwriteStrategy:
    if strategy not in OVERWRITE_STRATEGIES:
        raise UnknownNameError("overwrite strategy", strategy, OVERWRITE_STRATEGIES)
    return strategy  # type: ignore[return-value]


def safe_name(name: str) -> str:
    """``org/model`` → ``org__model`` (MTEB's folder naming); other separators are replaced too."""
    return name.replace("/", "__").replace("\\", "__").replace(" ", "_") or "unnamed"


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to a temporary file in the same folder, fsync it, then rename it over ``path``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temporary file in the same folder, fsync it, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (see :func:`atomic_write_text`)."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=True) + "\n")


class ResultStore:
    """Results of one model (name + revision) under an output folder."""

    def __init__(self, output_folder: str | Path, model_name: str, revision: str) -> None:
        self.folder = Path(output_folder) / safe_name(model_name) / safe_name(revision or "no_revision_available")

    def sub(self, stage: str) -> ResultStore:
        """The store of one pipeline stage: ``<folder>/<stage>/`` (EvalScope's ``stage1/``, ``stage2/``)."""
        store = ResultStore.__new__(ResultStore)
        store.folder = self.folder / safe_name(stage)
        return store

    def path(self, task_name: str) -> Path:
        return self.folder / f"{task_name}.json"

    def predictions_path(self, task_name: str) -> Path:
        return self.folder / "predictions" / f"{task_name}_predictions.json"

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
        path = self.path(result.task_name)
        write_json_atomic(path, result.to_dict())
        return path

    def per_item_path(self, task_name: str) -> Path:
        return per_item_path(self.path(task_name))

    def save_per_item(self, task_name: str, rows: list[dict[str, Any]], keep_earlier: bool = True) -> Path:
        """Write the per-item rows atomically; with ``keep_earlier``, stored rows of other splits stay."""
        path = self.per_item_path(task_name)
        if keep_earlier and path.exists():
            rows = merge_rows(read_per_item(path), rows)
        atomic_write_bytes(path, encode_rows(rows))
        return path

    def save_model_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.folder / "model_meta.json", meta)

    def save_predictions(self, task_name: str, predictions: dict[str, dict[str, dict[str, dict[str, float]]]]) -> Path:
        path = self.predictions_path(task_name)
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
