"""One side of a gate: a result folder, or a run in a store (``run:ID``, ``tag:NAME``), as one model's results.

>>> side_kind("tag:baseline"), side_kind("run:3f2a9c"), side_kind("results/minilm")
('store', 'store', 'folder')
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.compare.items import ModelResults, TaskItems, items_of, load_model_results
from embedscope.errors import ConfigError, DataFormatError
from embedscope.history.folders import META, evaluation_record, system_record
from embedscope.results.per_item import SUFFIX, decode_rows
from embedscope.results.report import ResultRow
from embedscope.results.schema import TaskResult

STORE_PREFIXES = ("tag:", "run:")


@dataclass(frozen=True)
class Side:
    """One model's results, where they came from, and what each task's evaluation and the system were."""

    label: str
    results: ModelResults
    evaluations: dict[str, dict[str, Any]]
    system: dict[str, Any]
    run_id: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> dict[str, TaskItems]:
        return self.results.tasks


def side_kind(spec: str) -> str:
    """``store`` for ``tag:NAME`` / ``run:ID`` (a folder of that name wins), else ``folder``."""
    return "store" if spec.startswith(STORE_PREFIXES) and not Path(spec).exists() else "folder"


def load_side(spec: str, store: Any | None) -> Side:
    """The results ``spec`` names; ``store`` (a :class:`~embedscope.history.store.Store`, or None) serves
    ``tag:`` and ``run:`` specs."""
    if side_kind(spec) == "folder":
        return folder_side(spec)
    if store is None:
        raise ConfigError(f"{spec}: names a run in a results store; give the store (--store URL or $EMBEDSCOPE_STORE)")
    return store_side(spec, store)


def folder_side(spec: str) -> Side:
    """A result folder holding one model's results (``compare``'s rule: one model, its own settings)."""
    path = Path(spec)
    if not path.exists():
        raise ConfigError(f"{spec}: no such results folder (a run in a store is tag:NAME or run:ID)")
    results = load_model_results(path)
    parsed = {t: TaskResult.from_dict(json.loads(i.path.read_text(encoding="utf-8"))) for t, i in results.tasks.items()}
    meta_file = results.folder / META
    meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else None
    evaluations = {t: evaluation_record(r) for t, r in parsed.items()}
    notes = [results.note] if results.note else []
    return Side(spec, results, evaluations, system_record(meta, parsed.values()), None, notes)


def store_side(spec: str, store: Any) -> Side:
    """A run recorded in ``store``, its task results and per-item rows read from the recorded files."""
    run_id = store.resolve_run(spec)
    info = store.run_info(run_id)
    files = store.files(run_id)
    tasks: dict[str, TaskItems] = {}
    evaluations: dict[str, dict[str, Any]] = {}
    parsed = []
    for name in sorted(files):
        if "/" in name or not name.endswith(".json") or name == META:
            continue
        where = Path(f"run:{run_id[:12]}") / name
        try:
            result = TaskResult.from_dict(json.loads(files[name]))
        except (ValueError, KeyError, TypeError) as e:
            raise DataFormatError(f"{spec}: recorded result {name} is unreadable ({e})") from None
        items_name = name.removesuffix(".json") + SUFFIX
        rows = decode_rows(files[items_name], str(where.with_name(items_name))) if items_name in files else None
        tasks[result.task_name] = items_of(result, rows, where, where.with_name(items_name))
        evaluations[result.task_name] = evaluation_record(result)
        parsed.append(result)
    meta = json.loads(files[META]) if META in files else None
    model = ModelResults(info.model, Path(f"run:{run_id[:12]}"), tasks)
    return Side(f"{spec} (run {run_id[:12]}, {info.model})", model, evaluations, system_record(meta, parsed), run_id)


def open_for(specs: Sequence[str], store: Any | None) -> Any | None:
    """The store that ``specs`` need (a :class:`~embedscope.history.store.Store`, its URL, else
    ``$EMBEDSCOPE_STORE``), opened for reading; None when every spec is a folder. A store given that no spec reads is
    refused, never ignored."""
    needed = any(side_kind(s) == "store" for s in specs)
    if not needed:
        if store is not None:
            raise ConfigError("store: every side given is a result folder, so no store is read; drop it")
        return None
    if store is None:
        from embedscope.history.kinds import store_url_from

        store = store_url_from(None)
    if isinstance(store, str):
        from embedscope.history.store import Store

        store = Store(store, create=False)
    return store


def compared_models(specs: Sequence[str], store: Any | None = None) -> list[ModelResults]:
    """One model's results per spec (a result folder, ``tag:NAME`` or ``run:ID``), for ``compare``."""
    opened = open_for(specs, store)
    return [load_side(spec, opened).results for spec in specs]


def report_rows(specs: Sequence[str], store: Any | None = None) -> list[ResultRow]:
    """Every task result of ``specs`` (result folders, any depth, and runs in a store), for ``report``."""
    from embedscope.results.report import collect_results, distinct_models

    opened = open_for(specs, store)
    rows: list[ResultRow] = []
    for spec in specs:  # in the order given: the report's columns
        if side_kind(spec) == "folder":
            rows += collect_results([spec])
            continue
        side = store_side(spec, opened)
        for task, items in side.tasks.items():
            rows.append(ResultRow(side.results.name, task, items.task_type, items.metric, items.score, items.path))
    return distinct_models(rows)
