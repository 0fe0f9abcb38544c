"""Catalog entries → runnable tasks, with data from a local copy in the hub's layout or the hub.

``catalog_task("SciFact", data_dir="data")`` finds ``data/SciFact`` (or ``data/mteb/scifact``,
``data/scifact``), a copy of the dataset repository as ``huggingface-cli download`` leaves it, and
builds the task type's object with mteb's protocol parameters from the catalog. Online, without a
local copy, the dataset comes from the hub at the pinned revision. Tasks with several subsets
(languages) are named ``Task:subset``, e.g. ``STS22:ru``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from embedscope.data.hf import load_hf_table
from embedscope.errors import ConfigError, DataFormatError
from embedscope.tasks.base import Task
from embedscope.tasks.catalog import CatalogEntry, catalog_entry, locate_data


def split_name_and_subset(spec: str) -> tuple[str, str | None]:
    """``"STS22:ru"`` → ``("STS22", "ru")``.

    >>> split_name_and_subset("SciFact")
    ('SciFact', None)
    """
    name, sep, subset = spec.partition(":")
    return name, (subset or None) if sep else None


def choose_subset(entry: CatalogEntry, subset: str | None) -> str:
    """The hf subset to evaluate: the only one, or the one asked for (checked)."""
    subsets = list(entry.hf_subsets)
    if subset is None:
        if len(subsets) == 1:
            return subsets[0]
        raise ConfigError(
            f"{entry.name} has {len(subsets)} subsets; name one as {entry.name}:SUBSET (subsets: {', '.join(subsets)})"
        )
    if subset not in entry.hf_subsets:
        raise ConfigError(f"{entry.name} has no subset {subset!r}; subsets: {', '.join(subsets)}")
    return subset


def table_columns(ds, *names: str, where: str) -> list[list[Any]]:
    """The named columns of a loaded table; a missing one is a :class:`DataFormatError` naming ``where``."""
    missing = [n for n in names if n not in ds.column_names]
    if missing:
        raise DataFormatError(f"{where}: column(s) {missing} not found; columns are {ds.column_names}")
    return [ds[n] for n in names]


def catalog_task(spec: str, *, data_dir: str | Path | None = None, path: str | Path | None = None) -> Task:
    """The runnable task for a catalog name (``Name`` or ``Name:subset``), built by its registered task type."""
    from embedscope.tasks.types import TASK_TYPES

    name, subset = split_name_and_subset(spec)
    entry = catalog_entry(name)
    subset = choose_subset(entry, subset)
    task_type = TASK_TYPES.find(entry.type)
    if task_type is None or task_type.from_catalog is None:
        raise ConfigError(f"{entry.name}: task type {entry.type} is not supported yet")
    location = locate_data(entry, data_dir=data_dir, path=path)
    task = task_type.from_catalog(entry, subset, location)
    if Path(location).exists() and dataclasses.is_dataclass(task) and not isinstance(task, type):
        # a local copy (--data-dir): the source names it, so the data fingerprint hashes its files
        task = dataclasses.replace(task, source=str(location))
    return task


def catalog_fields(entry: CatalogEntry, subset: str) -> dict[str, Any]:
    """The task fields every type takes from a catalog entry (name, splits, main score, subset, languages …)."""
    return {
        "name": entry.name,
        "eval_splits": entry.eval_splits,
        "main_score": entry.main_score,
        "languages": entry.hf_subsets[subset],
        "dataset_revision": entry.dataset_revision,
        "hf_subset": subset,
        "description": entry.description,
        "source": entry.dataset_path,
    }


def text_label_columns(entry: CatalogEntry, text: str, label: str) -> tuple[str, str]:
    """The text and label column names: mteb's ``input_column_name`` / ``label_column_name`` or the defaults."""
    return str(entry.params.get("input_column_name", text)), str(entry.params.get("label_column_name", label))


def k_values(entry: CatalogEntry) -> tuple[int, ...]:
    """The ranking cutoffs of a catalog entry (mteb's default when it sets none)."""
    return tuple(entry.params.get("k_values", (1, 3, 5, 10, 20, 100, 1000)))


def subset_table(entry: CatalogEntry, subset: str, location: str, split: str):
    """The subset's table: its own config, else (mteb's ``fast_loading`` and parallel datasets) the default
    config, filtered to rows whose ``lang`` is the subset when it has that column (``lang`` dropped)."""
    shared = bool(entry.params.get("fast_loading") or entry.params.get("parallel_subsets"))
    if subset == "default" or not shared:
        try:
            return load_hf_table(location, entry, subset, split)
        except (DataFormatError, ValueError, FileNotFoundError):
            if subset == "default":
                raise
    ds = load_hf_table(location, entry, "default", split)
    if "lang" in ds.column_names:
        ds = ds.filter(lambda row: row["lang"] == subset).remove_columns("lang")
    return ds
