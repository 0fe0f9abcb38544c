"""Made-up result folders with per-item rows, written with embedscope's own result writers: the gate and store
tests control every score, setting and fingerprint."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.groups import split_groups
from embedscope.results.per_item import item_rows
from embedscope.results.schema import TaskResult, score_entry
from embedscope.results.store import ResultStore


def retrieval_values(n: int, mean: float, seed: int, spread: float = 0.2) -> np.ndarray:
    """``n`` per-query nDCG-like values in [0, 1] around ``mean``."""
    rng = np.random.default_rng(seed)
    return np.clip(mean + spread * rng.standard_normal(n), 0.0, 1.0)


def write_result(
    out: str | Path,
    model: str,
    task: str,
    values: np.ndarray | list[float] | None,
    *,
    revision: str = "r1",
    fingerprint: str | None = None,
    data: str = "data-1",
    dataset_revision: str = "d1",
    split: str = "test",
    limits: int | None = None,
    top_k: int = 100,
    task_settings: dict[str, Any] | None = None,
    truncate_dim: int | None = None,
    record: bool = True,
    experiment: str | None = None,
    groups: Sequence[str] | None = None,
    group_by: str = "topic",
    columns: dict[str, Sequence[Any]] | None = None,
    pipeline_stages: dict[str, list[dict[str, Any]]] | None = None,
) -> Path:
    """One Retrieval result of ``model`` on ``task`` whose ``ndcg_at_10`` is the mean of ``values`` (per-item rows
    beside it; ``values`` None: no per-item file); returns the model's revision folder.

    ``groups``: each query's group of ``group_by`` (recorded as the run's ``group_by``, in each row's ``group`` and as
    the split's group scores, as a run with ``--group-by`` writes them); ``columns``: more per-item columns (a
    pipeline's ``failure`` …); ``pipeline_stages``: the result's record of them."""
    store = ResultStore(out, model, revision, experiment)
    if values is None:
        values = [0.5, 0.7]
        write_items = False
    else:
        write_items = True
    values = np.asarray(values, dtype=np.float64)
    score = float(values.mean())
    run_settings: dict[str, Any] = {
        "model": {"fingerprint": fingerprint or f"fp-{model}", "prompts": {}, "similarity": "cosine"}
    }
    run_settings.update({"top_k": top_k, "limits": limits, "corpus_chunk_size": 50000})
    if truncate_dim is not None:
        run_settings["truncate_dim"] = truncate_dim
    if groups is not None:
        run_settings["group_by"] = group_by
    extra: dict[str, Any] = {"task_type": "Retrieval", "main_metric": "ndcg_at_10"}
    if record:
        extra.update(
            {
                "run_settings": run_settings,
                "task_settings": task_settings if task_settings is not None else {"k_values": [1, 10, 100]},
                "data": {"location": None, "fingerprint": data},
            }
        )
    if pipeline_stages is not None:
        extra["pipeline_stages"] = pipeline_stages
    entry = score_entry({"ndcg_at_10": score}, "ndcg_at_10", "default", ("eng-Latn",))
    item_columns: dict[str, Sequence[Any]] = {"ndcg_at_10": list(map(float, values)), **(columns or {})}
    if groups is not None:
        item_columns["group"] = list(groups)
        entry["groups"] = split_groups(group_by, item_columns, "ndcg_at_10")
    result = TaskResult(
        task, dataset_revision, {split: [entry]}, evaluation_time=1.5, date="2026-11-30T00:00:00+00:00", extra=extra
    )
    store.save_model_meta({"name": model, "revision": revision, "run_settings": run_settings})
    if write_items:
        ids = [f"q{i}" for i in range(len(values))]
        store.save_per_item(task, item_rows(split, "default", {"id": ids, **item_columns}))
    store.save(result)
    return store.folder
