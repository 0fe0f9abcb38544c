"""The feature-extraction / sentence-similarity evaluator of the ONNX-export seed.

Shuffle the pairs with seed 42 (when sampling), encode both sentences (mask-weighted mean pooling
for models that emit token embeddings), cosine similarity per pair, Spearman ×100 against the gold
scores as ``cosine_spearman``. The JSON it prints and writes has the seed's exact shape::

    {"model_id": ..., "model_path": ..., "task": "feature-extraction", "device": "cpu",
     "dataset": {"path": ..., "split": "test", "samples": 1000, "shuffle": true, "seed": 42,
                 "columns_mapping": {"input_column_1": "sentence1", ...}},
     "metrics": {"cosine_spearman": 82.05}}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, DataFormatError
from embedscope.models.base import Encoder

TASKS = ("feature-extraction", "sentence-similarity")
DEFAULT_COLUMNS = {"input_column_1": "sentence1", "input_column_2": "sentence2", "score_column": "score"}
SEED = 42


def parse_column_mapping(items: list[str] | None) -> dict[str, str]:
    """``["input_column_1=s1", ...]`` → the full mapping, defaults filled in; unknown keys rejected.

    >>> parse_column_mapping(["score_column=label"])["score_column"]
    'label'
    """
    mapping = dict(DEFAULT_COLUMNS)
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise ConfigError(f"--column {item!r}: expected KEY=COLUMN, e.g. --column score_column=score")
        if key not in DEFAULT_COLUMNS:
            raise ConfigError(f"--column {item!r}: unknown key {key!r}; valid keys: {', '.join(DEFAULT_COLUMNS)}")
        mapping[key] = value
    return mapping


def load_pairs(dataset: str, split: str, columns: Mapping[str, str]):
    """A ``datasets.Dataset`` of the split: a local CSV/JSONL/Parquet file, a local dataset folder, or a hub id."""
    import datasets

    from embedscope.data.hf import is_saved_dataset

    datasets.disable_progress_bars()
    path = Path(dataset).expanduser()
    suffix = path.suffix.lower()
    try:
        if path.is_file():
            kind = {".csv": "csv", ".tsv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}.get(suffix)
            if kind is None:
                raise DataFormatError(f"{path}: unsupported file type {suffix!r}; use .csv, .tsv, .jsonl or .parquet")
            extra = {"delimiter": "\t"} if suffix == ".tsv" else {}
            ds = datasets.load_dataset(kind, data_files={split: str(path)}, split=split, **extra)
        elif is_saved_dataset(path):
            loaded = datasets.load_from_disk(str(path))
            ds = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        else:
            ds = datasets.load_dataset(str(path) if path.exists() else dataset, split=split)
    except (ValueError, KeyError) as e:
        if "split" in str(e).lower() or isinstance(e, KeyError):
            raise DataFormatError(f"{dataset}: split {split!r} not found ({e})") from e
        raise
    except (ConnectionError, OSError) as e:
        raise DataFormatError(f"{dataset}: cannot load it ({e}). Offline, pass a local file or folder.") from e
    missing = [c for c in columns.values() if c not in ds.column_names]
    if missing:
        raise DataFormatError(
            f"{dataset} ({split}): column(s) {missing} not found; columns are {ds.column_names}. "
            "Map them with --column input_column_1=... --column input_column_2=... --column score_column=..."
        )
    return ds


def spearman_x100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rho × 100, rounded to 2 decimals (the seed's reporting)."""
    from scipy.stats import spearmanr

    return round(float(spearmanr(predicted, gold).statistic) * 100, 2)


def pair_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (float64, zero vectors give 0)."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, (a * b).sum(axis=1) / np.where(norms > 0, norms, 1.0), 0.0)


def evaluate_feature_extraction(
    encoder: Encoder,
    *,
    model_id: str,
    model_path: str,
    dataset: str,
    task: str = "feature-extraction",
    split: str = "test",
    samples: int | None = None,
    columns: Mapping[str, str] | None = None,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Run the evaluator and return the seed's JSON record."""
    if task not in TASKS:
        raise ConfigError(f"--task {task!r}: expected one of {', '.join(TASKS)}")
    mapping = {**DEFAULT_COLUMNS, **(columns or {})}
    ds = load_pairs(dataset, split, mapping)
    shuffle = samples is not None
    if shuffle:
        if samples < 1:
            raise ConfigError("--samples must be a positive integer")
        ds = ds.shuffle(seed=SEED).select(range(min(samples, len(ds))))
    s1 = [str(x) for x in ds[mapping["input_column_1"]]]
    s2 = [str(x) for x in ds[mapping["input_column_2"]]]
    gold = np.asarray(ds[mapping["score_column"]], dtype=np.float64)
    e1 = encoder.encode(s1, role="document", batch_size=batch_size)
    e2 = encoder.encode(s2, role="document", batch_size=batch_size)
    return {
        "model_id": model_id,
        "model_path": model_path,
        "task": task,
        "device": "cpu",
        "dataset": {
            "path": dataset,
            "split": split,
            "samples": len(s1),
            "shuffle": shuffle,
            "seed": SEED,
            "columns_mapping": dict(mapping),
        },
        "metrics": {"cosine_spearman": spearman_x100(pair_cosines(e1, e2), gold)},
    }
