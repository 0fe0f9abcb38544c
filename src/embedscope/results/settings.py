"""What a stored result was computed with, so that it is reused only for the same settings and data.

Each result records ``run_settings`` (the encoder's fingerprint, prompts and similarity, or the
pipeline's fingerprint; the search settings that change a score, computed by the run settings), ``task_settings`` (the task's
protocol parameters) and ``data`` (where the data is, and a hash of the content of every file the task
reads). A stored result whose record differs is not reused (see
:func:`settings_difference`).

>>> settings_difference({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}})
'b.c: 2 → 3'
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embedscope.data.builtin import builtin_data_files
from embedscope.data.fingerprint import file_hashes
from embedscope.models.api import TRANSPORT_OPTIONS
from embedscope.models.fingerprint import hash_dict, short
from embedscope.tasks.base import INFO_FIELDS, TaskInfo

# model_options that do not change a vector, or that already name the result folder (an API model's transport and
# key: its fingerprint has the base URL)
NOT_SETTINGS = ("device", "devices", "revision", "name", *TRANSPORT_OPTIONS)


def run_settings(model: Any, search: Mapping[str, Any], pipeline: bool = False) -> dict[str, Any]:
    """Everything about the model (or ``pipeline``) and the search that changes a vector or a score: the model's
    identity, then ``search`` (the settings that change a score, :meth:`embedscope.settings.RunSettings.score_settings`).
    Only identity attributes are read, so a lazily loaded model stays unloaded."""
    if pipeline:  # its fingerprint covers every stage
        identity: dict[str, Any] = {"pipeline": model.fingerprint}
    else:
        identity = {"fingerprint": model.fingerprint, "prompts": dict(model.prompts), "similarity": model.similarity}
    return {"model": identity, **search}


def model_kwargs(model_options: Mapping[str, Any] | None, dtype: str | None) -> dict[str, Any]:
    """The model options that change a vector (MTEB's ``experiment_kwargs`` of the model; the run's part is
    :meth:`embedscope.settings.RunSettings.experiment_key`): set ones, fp32 left out.

    >>> model_kwargs({"pooling": "cls", "device": "cpu"}, None)
    {'pooling': 'cls'}
    >>> model_kwargs(None, "fp16")
    {'dtype': 'fp16'}
    """
    kwargs = {k: v for k, v in (model_options or {}).items() if k not in NOT_SETTINGS and v is not None}
    if dtype not in (None, "fp32", "float32"):
        kwargs.setdefault("dtype", dtype)
    if kwargs.get("dtype") in ("fp32", "float32"):
        del kwargs["dtype"]
    return kwargs


def experiment_name(kwargs: dict[str, Any]) -> str | None:
    """The experiment folder's name: a short hash of ``kwargs`` (None for a plain run)."""
    return short(hash_dict(kwargs)) if kwargs else None


def task_settings(task: Any) -> dict[str, Any]:
    """The task's protocol parameters: its dataclass fields that are plain values (not the splits to run,
    the description, the subset and its languages, or the data location, which :func:`data_fingerprint` covers)."""
    skip = {"eval_splits", "description", "source", "name", "hf_subset", "languages"}  # per subset: one file, as mteb
    fields = (
        [f.name for f in dataclasses.fields(task)]
        if dataclasses.is_dataclass(task)
        else ["type", "main_score", "dataset_revision", "hf_subset"]
    )
    if isinstance(task, TaskInfo):  # the shared fields last, in their stored order (and the class's type)
        fields = [f for f in fields if f not in INFO_FIELDS] + list(INFO_FIELDS)
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(task, name, None)
        if name in skip or (value is None and name in _RECORDED_WHEN_SET):
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # e.g. a QA task's default chunking
            out[name] = dataclasses.asdict(value)
        elif isinstance(value, (str, int, float, bool, tuple, list, type(None))):
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


# task fields added after results were stored: unset (None) is not recorded, so those results still match
_RECORDED_WHEN_SET = ("chunking", "encoder_within")  # encoder_within: a callable when set, never recorded


def data_fingerprint(task: Any, index_dir: str | Path | None = None) -> dict[str, Any]:
    """``{"location", "fingerprint"}`` of the task's data: a hash of the content of every file the task reads,
    with its relative path (local files: ``location`` is their resolved folder or file; built-in data: the
    package files, ``location`` None); for data on the hub, a hash of the source and its pinned revision.

    Content hashes come from :func:`embedscope.data.fingerprint.file_hashes`, whose index in ``index_dir``
    (None: in memory) spares reading unchanged files again.
    """
    source = str(getattr(task, "source", "") or "")
    path = Path(source) if source else None
    if path is not None and path.exists():
        root = path.resolve()
        if root.is_file():
            return {"location": str(root), "fingerprint": _content_fingerprint(root.parent, [root.name], index_dir)}
        return {"location": str(root), "fingerprint": _content_fingerprint(root, _data_files(root), index_dir)}
    builtin = builtin_data_files(source) if source else None
    if builtin is not None:
        return {"location": None, "fingerprint": _content_fingerprint(*builtin, index_dir)}
    return {
        "location": None,
        "fingerprint": short(hash_dict({"source": source, "revision": getattr(task, "dataset_revision", "")})),
    }


def _data_files(root: Path) -> list[str]:
    """Every file under ``root`` outside hidden folders (``.git``, ``.cache`` of a hub copy), as sorted
    names relative to ``root``."""
    names: list[str] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        prefix = os.path.relpath(folder, root).replace(os.sep, "/")
        names += [n if prefix == "." else f"{prefix}/{n}" for n in files if not n.startswith(".")]
    return sorted(names)


def _content_fingerprint(root: Path, names: list[str], index_dir: str | Path | None) -> str:
    """Short hash of ``[relative name, content hash]`` of each file."""
    hashes = file_hashes([os.path.join(root, n) for n in names], index_dir)
    return short(hash_dict({"content": [[n, h] for n, h in zip(names, hashes)]}))


def settings_difference(stored: Any, current: Any, prefix: str = "") -> str:
    """The keys whose values differ, as ``key: old → new`` (first five), or "" when equal."""
    if isinstance(stored, dict) and isinstance(current, dict):
        parts = [
            settings_difference(stored.get(k), current.get(k), f"{prefix}{k}.")
            for k in sorted(set(stored) | set(current), key=str)
        ]
        return "; ".join([p for p in parts if p][:5])
    if stored == current:
        return ""
    return f"{prefix.rstrip('.')}: {stored!r} → {current!r}"
