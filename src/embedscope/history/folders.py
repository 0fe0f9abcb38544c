"""A result folder as a run to record, and a recorded run written back as a result folder.

A run is one model's results in one folder (``<org__model>/<revision>/`` or one of its ``experiments/<hash>/``):
its task result files, their per-item rows (``<Task>.per_item.jsonl.gz``), its pipeline stages' results
(``stage1/``, ``stage2/`` …) and ``model_meta.json``, kept byte for byte. Predictions (``predictions/``) are not
recorded: they are runs of every query, not scores, and stay in the folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.compare.items import compared_settings, result_paths, revision_folders
from embedscope.errors import DataFormatError
from embedscope.files import atomic_write_bytes, resolved
from embedscope.results.per_item import SUFFIX, per_item_path
from embedscope.results.report import infer_task_type, main_metric, model_name
from embedscope.results.schema import TaskResult
from embedscope.results.store import EXPERIMENTS, check_path_name
from embedscope.results.usage import recorded_usage
from embedscope.retrieval.base import SearchOptions

META = "model_meta.json"
NOT_RECORDED = (EXPERIMENTS, "predictions")  # subfolders of a run's folder that are not part of it
SYSTEM_TASK_SETTINGS = ("chunking",)  # task fields that are the system's choice (a QA task's chunking), not the data's


@dataclass(frozen=True)
class ResultRecord:
    """One task of a run, as the store's ``results`` row holds it."""

    task: str
    task_type: str
    metric: str
    main_score: float | None
    evaluation: dict[str, Any]
    seconds: float | None
    cost: dict[str, Any]
    items: int
    path: str


@dataclass(frozen=True)
class RunRecord:
    """One model's results to record: identity, what the system is, each task, and every file byte for byte."""

    model: str
    revision: str
    experiment: str | None
    fingerprint: str | None
    system: dict[str, Any]
    results: tuple[ResultRecord, ...]
    files: Mapping[str, bytes]
    evaluated_at: str | None
    embedscope_version: str | None
    host: dict[str, Any] | None = None
    source: str = "import"
    tags: tuple[str, ...] = field(default=())

    @property
    def content_key(self) -> str:
        """sha256 of the identity and every file's path and content: the same folder records once."""
        digest = hashlib.sha256()
        digest.update(json.dumps([self.model, self.revision, self.experiment]).encode())
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(self.files[path]).digest())
        return digest.hexdigest()


def evaluation_record(result: TaskResult) -> dict[str, Any]:
    """What defines a result's evaluation, so that two results are like-for-like only when it is equal: the data's
    fingerprint, the task's revision, its protocol parameters, the splits and subsets scored, the protocol, and the
    search settings that define the evaluation (``SearchOptions.evaluation_fields``: ``limits``, ``top_k`` …)."""
    recorded = compared_settings(result.extra)
    run = recorded.get("run_settings", {})
    task_settings = {k: v for k, v in recorded.get("task_settings", {}).items() if k not in SYSTEM_TASK_SETTINGS}
    return {
        "data": recorded.get("data", {}).get("fingerprint"),
        "dataset_revision": result.dataset_revision,
        "protocol": result.protocol,
        "task_settings": task_settings,
        "settings": {k: run.get(k) for k in SearchOptions.evaluation_fields() if k in run},
        "splits": sorted(f"{s}/{e.get('hf_subset', 'default')}" for s, es in result.scores.items() for e in es),
        "recorded": bool(recorded),
    }


def system_record(meta: Mapping[str, Any] | None, results: Iterable[TaskResult]) -> dict[str, Any]:
    """What the system under test is: the model's identity and options, the search settings that are the system's
    (everything a result records beyond the evaluation), the placement and the model's metadata."""
    evaluation = set(SearchOptions.evaluation_fields())
    run: dict[str, Any] = {}
    for result in results:
        recorded = result.extra.get("run_settings")
        if isinstance(recorded, dict):
            run = recorded
            break
    meta = dict(meta or {})
    meta.pop("run_settings", None)
    return {
        "model": run.get("model"),
        "settings": {k: v for k, v in run.items() if k != "model" and k not in evaluation},
        "experiment_kwargs": meta.pop("experiment_kwargs", None),
        "meta": meta,
    }


def result_record(result: TaskResult, path: str, rows: int) -> ResultRecord:
    """The ``results`` row of one task result file (``path`` inside the run's folder)."""
    try:
        score: float | None = result.main_score()
    except (KeyError, TypeError, ValueError):
        score = None
    cost: dict[str, Any] = {}
    usage = recorded_usage(result.extra)
    if usage:
        cost["api_usage"] = usage
    if result.evaluation_phases:
        cost["phases"] = {p["name"]: p["end"] - p["start"] for p in result.evaluation_phases if "name" in p}
    for key in ("pipeline_stages", "query_latency"):
        if key in result.extra:
            cost[key] = result.extra[key]
    return ResultRecord(
        task=result.task_name,
        task_type=infer_task_type(result),
        metric=main_metric(result),
        main_score=score,
        evaluation=evaluation_record(result),
        seconds=result.evaluation_time,
        cost=cost,
        items=rows,
        path=path,
    )


def count_rows(content: bytes) -> int:
    """The number of rows of a per-item file's bytes."""
    import gzip

    return sum(1 for line in gzip.decompress(content).split(b"\n") if line.strip())


def run_folders(paths: Iterable[str | Path]) -> list[Path]:
    """Every folder holding one model's results under ``paths`` (a revision folder, an experiment, or an output
    folder of several models); a path that holds none is a :class:`DataFormatError`."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            raise DataFormatError(f"{path}: no such results folder")
        folders = [f for f in revision_folders(path) if result_paths(f)]
        if not folders:
            raise DataFormatError(f"{path}: no task results found (expected <org__model>/<revision>/<Task>.json)")
        found += [f for f in folders if f not in found]
    return found


def read_run(folder: Path, tasks: Iterable[str] | None = None, source: str = "import") -> RunRecord:
    """The run in ``folder`` (only ``tasks`` when given: what a run just wrote), its files byte for byte."""
    wanted = set(tasks) if tasks is not None else None
    files: dict[str, bytes] = {}
    records: list[ResultRecord] = []
    parsed: list[TaskResult] = []
    paths = result_paths(folder)
    for path in paths:
        result = TaskResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        if wanted is not None and result.task_name not in wanted:
            continue
        files[path.name] = path.read_bytes()
        items = per_item_path(path)
        rows = 0
        if items.is_file():
            files[items.name] = items.read_bytes()
            rows = count_rows(files[items.name])
        records.append(result_record(result, path.name, rows))
        parsed.append(result)
        for stage in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in NOT_RECORDED):
            for name in (f"{path.stem}.json", f"{path.stem}{SUFFIX}"):
                if (stage / name).is_file():
                    files[f"{stage.name}/{name}"] = (stage / name).read_bytes()
    if not records:
        raise DataFormatError(f"{folder}: no task results to record")
    meta_bytes = (folder / META).read_bytes() if (folder / META).is_file() else None
    meta = json.loads(meta_bytes) if meta_bytes else None
    if meta_bytes is not None:
        files[META] = meta_bytes
    experiment = folder.name if folder.parent.name == EXPERIMENTS else None
    revision_folder = folder.parent.parent if experiment else folder
    revision = str((meta or {}).get("revision") or revision_folder.name)
    system = system_record(meta, parsed)
    identity = system.get("model") or {}
    fingerprint = identity.get("fingerprint") or identity.get("pipeline") if isinstance(identity, dict) else None
    return RunRecord(
        model=model_name(paths[0]),
        revision=revision,
        experiment=experiment,
        fingerprint=fingerprint,
        system=system,
        results=tuple(records),
        files=files,
        evaluated_at=max((r.date for r in parsed if r.date), default=None),
        embedscope_version=next((r.embedscope_version for r in parsed if r.embedscope_version), None),
        source=source,
    )


def run_folder_name(model: str, revision: str, experiment: str | None) -> Path:
    """``<org__model>/<revision>[/experiments/<hash>]``: where a run's files go under an output folder."""
    from embedscope.results.store import safe_name

    check_path_name(model, "model name", allow_slash=True)
    folder = Path(safe_name(model)) / safe_name(revision or "no_revision_available")
    return folder / EXPERIMENTS / check_path_name(experiment, "experiment") if experiment else folder


def write_run(output: Path, model: str, revision: str, experiment: str | None, files: Mapping[str, bytes]) -> Path:
    """Write a recorded run's files under ``output`` in the MTEB layout (atomically, each inside ``output``)."""
    folder = output / run_folder_name(model, revision, experiment)
    root = resolved(output)
    for name, content in files.items():
        target = folder / name
        if not resolved(target).is_relative_to(root) or any(p in ("", "..") for p in Path(name).parts):
            raise DataFormatError(f"store: a recorded file name {name!r} would leave {output}; not written")
        atomic_write_bytes(target, content)
    return folder
