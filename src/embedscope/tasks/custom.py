"""Custom tasks of every type from local files, for the CLI (``TYPE:PATH``), config files and the API.

>>> task_type_of("sts")
'STS'
>>> split_type_prefix("pairclassification:./pairs.csv")
('PairClassification', './pairs.csv')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.tasks.base import Task
from embedscope.tasks.types import TASK_TYPES


def task_type_of(name: str) -> str:
    """The canonical task type for a user's spelling (case-insensitive), from the registered types."""
    return TASK_TYPES.get(name).name


def split_type_prefix(spec: str) -> tuple[str, str] | None:
    """``"sts:./pairs.csv"`` → ``("STS", "./pairs.csv")``; None when ``spec`` has no type prefix."""
    prefix, sep, rest = spec.partition(":")
    task_type = TASK_TYPES.find(prefix) if sep else None
    return (task_type.name, rest) if task_type is not None else None


def _concat(parts: list[Any]) -> Any:
    """Several shards' loaded data (dataclasses of equal-length tuples) as one."""
    if len(parts) == 1:
        return parts[0]
    import dataclasses

    return dataclasses.replace(
        parts[0],
        **{f.name: tuple(x for part in parts for x in getattr(part, f.name)) for f in dataclasses.fields(parts[0])},
    )


def per_split(path: Path, loader: Callable[[Path], Any]) -> Callable[[str], Any]:
    """A file serves every split asked for; a folder holds one file per split (``test.csv``, …) or is a hub
    download (``data/test-00000-of-00001.parquet``, README configs, …; see :mod:`embedscope.data.hub_files`)."""

    def load(split: str) -> Any:
        if path.is_dir():
            matches = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and p.name.split(".")[0] == split and not p.name.startswith(".")
            )
            if not matches:
                from embedscope.data.hub_files import split_files

                return _concat([loader(p) for p in split_files(path, split)])
            return loader(matches[0])
        return loader(path)

    return load


def custom_task(
    path: str | Path,
    *,
    type: str = "Retrieval",
    name: str | None = None,
    eval_splits: tuple[str, ...] = ("test",),
    columns: Mapping[str, str] | None = None,
    main_score: str | None = None,
    **params: Any,
) -> Task:
    """A task of ``type`` over local files, read by the registered type's ``read_files`` (see its module for the
    expected columns)."""
    task_type = TASK_TYPES.get(type)
    if task_type.read_files is None:
        raise ConfigError(f"{task_type.name} tasks cannot be read from local files")
    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"Task data {str(path)!r} does not exist (no such file or folder)")
    fields: dict[str, Any] = {
        "name": name or folder.stem or task_type.name,
        "eval_splits": tuple(eval_splits),
        "source": str(folder),
        **params,
    }
    if main_score:
        fields["main_score"] = main_score
    return task_type.read_files(folder, dict(columns) if columns else None, fields)
