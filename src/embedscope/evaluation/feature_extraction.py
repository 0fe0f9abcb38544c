"""The feature-extraction / sentence-similarity evaluator of the ONNX-export seed.

Shuffle the pairs with seed 42 (when sampling), encode both sentences (mask-weighted mean pooling
for models that emit token embeddings), cosine similarity per pair, Spearman ×100 against the gold
scores as ``cosine_spearman``. The JSON it prints and writes has the seed's exact shape::

    {"model_id": ..., "model_path": ..., "task": "feature-extraction", "device": "cpu",
     "dataset": {"path": ..., "split": "test", "samples": 1000, "shuffle": true, "seed": 42,
                 "columns_mapping": {"input_column_1": "sentence1", ...}},
     "metrics": {"cosine_spearman": 82.05}}

With a reference model (``eval --reference-model M``, e.g. the original of a quantized export) the
record gains ``reference``: the reference's ``cosine_spearman``, the candidate's shift against it with
a 95% bootstrap interval over pairs and its p-value, the per-text agreement of the two embeddings
(cosine between the two vectors of each text: mean, 5th percentile, minimum; when the dimensions
match), and the agreement of the two similarity lists (Spearman; discordant pairs of pairs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    given: set[str] = set()
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise ConfigError(f"--column {item!r}: expected KEY=COLUMN, e.g. --column score_column=score")
        if key not in DEFAULT_COLUMNS:
            raise ConfigError(f"--column {item!r}: unknown key {key!r}; valid keys: {', '.join(DEFAULT_COLUMNS)}")
        if key in given:  # the last would win silently
            raise ConfigError(f"--column {item!r}: {key} is given twice: give it once")
        given.add(key)
        mapping[key] = value
    return mapping


def check_dataset(dataset: str) -> None:
    """Refuse at once, before a model loads, a ``--dataset`` that is neither a local path nor loadable from the hub
    now: a missing file is "no such file or folder", a hub id while the hub is offline one line saying so."""
    from embedscope.data.hf import hub_dataset_id

    if not Path(dataset).expanduser().exists():
        hub_dataset_id(dataset)


def load_pairs(dataset: str, split: str, columns: Mapping[str, str]):
    """A ``datasets.Dataset`` of the split: a local table file (any of :func:`~embedscope.data.tables.table_suffixes`,
    read whole), a local dataset folder, or a hub id."""
    import datasets

    from embedscope.data.hf import hub_dataset_id, is_saved_dataset
    from embedscope.data.hub_files import read_dataset
    from embedscope.data.tables import suffix_of, table_suffixes

    datasets.disable_progress_bars()
    path = Path(dataset).expanduser()
    try:
        if path.is_file():
            if suffix_of(path) not in table_suffixes():
                raise DataFormatError(
                    f"{path}: unsupported file type {suffix_of(path)!r}; use one of {', '.join(table_suffixes())}"
                )
            ds = read_dataset([path])
        elif is_saved_dataset(path):
            loaded = datasets.load_from_disk(str(path))
            ds = loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        elif path.exists():
            ds = datasets.load_dataset(str(path), split=split)
        else:
            ds = datasets.load_dataset(hub_dataset_id(dataset), split=split)
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


def _texts(values: Sequence[Any], dataset: str, column: str) -> list[str]:
    """A text column as strings; binary cells (Parquet) are decoded as UTF-8."""
    from embedscope.data.validate import as_text

    return [as_text(x, f"{dataset}, row {i}", column) for i, x in enumerate(values, start=1)]


def _gold_scores(values: Sequence[Any], dataset: str, column: str) -> np.ndarray:
    """The gold scores as floats: each one a finite number, and not all the same (Spearman needs variation)."""
    gold = np.empty(len(values), dtype=np.float64)
    for i, value in enumerate(values):
        try:
            gold[i] = float(value)
        except (TypeError, ValueError):
            raise DataFormatError(f"{dataset}, row {i + 1}: {column} {value!r} is not a number") from None
        if not np.isfinite(gold[i]):
            raise DataFormatError(f"{dataset}, row {i + 1}: {column} {value!r} is not a finite number")
    if len(gold) > 1 and np.all(gold == gold[0]):
        raise DataFormatError(
            f"{dataset}: every {column} is {gold[0]:g}; Spearman's correlation is undefined when "
            "the gold scores do not vary"
        )
    return gold


def spearman_x100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rho × 100, rounded to 2 decimals (the seed's reporting)."""
    from embedscope.metrics.correlation import spearman

    return round(spearman(predicted, gold) * 100, 2)


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
    batch_size: int | None = None,  # None: the device's default (models.device.default_batch_size)
    reference: Encoder | None = None,
) -> dict[str, Any]:
    """Run the evaluator and return the seed's JSON record (with ``reference``: the fidelity section)."""
    if task not in TASKS:
        raise ConfigError(f"--task {task!r}: expected one of {', '.join(TASKS)}")
    mapping = {**DEFAULT_COLUMNS, **(columns or {})}
    ds = load_pairs(dataset, split, mapping)
    shuffle = samples is not None
    if samples is not None:
        if samples < 1:
            raise ConfigError("--samples must be a positive integer")
        ds = ds.shuffle(seed=SEED).select(range(min(samples, len(ds))))
    s1 = _texts(ds[mapping["input_column_1"]], dataset, mapping["input_column_1"])
    s2 = _texts(ds[mapping["input_column_2"]], dataset, mapping["input_column_2"])
    gold = _gold_scores(ds[mapping["score_column"]], dataset, mapping["score_column"])
    e1 = encoder.encode(s1, role="document", batch_size=batch_size)
    e2 = encoder.encode(s2, role="document", batch_size=batch_size)
    record = {
        "model_id": model_id,
        "model_path": model_path,
        "task": task,
        "device": str(getattr(encoder, "device", "cpu")),
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
    if reference is not None:
        r1 = reference.encode(s1, role="document", batch_size=batch_size)
        r2 = reference.encode(s2, role="document", batch_size=batch_size)
        record["reference"] = reference_fidelity(reference.name, (r1, r2), (e1, e2), gold)
    return record


def reference_fidelity(
    name: str,
    reference: tuple[np.ndarray, np.ndarray],
    candidate: tuple[np.ndarray, np.ndarray],
    gold: np.ndarray,
    rounds: int = 10_000,
    seed: int = SEED,
) -> dict[str, Any]:
    """How closely a candidate's embeddings and scores reproduce a reference's on the same pairs.

    Shift: ``ρ(candidate) − ρ(reference)`` (Spearman against the gold, ×100), its 95% CI and p-value
    from a paired bootstrap over pairs (both models resampled together).
    """
    from embedscope.compare.embeddings import cosine_summary, row_cosines
    from embedscope.compare.fidelity import discordant_pairs
    from embedscope.compare.stats import bootstrap_test, spearman_rows

    ref_sim, cand_sim = pair_cosines(*reference), pair_cosines(*candidate)
    ref_score, cand_score = spearman_x100(ref_sim, gold), spearman_x100(cand_sim, gold)
    observed = float(spearman_rows(cand_sim[None], gold[None])[0] - spearman_rows(ref_sim[None], gold[None])[0])
    shift = bootstrap_test(
        lambda idx: spearman_rows(cand_sim[idx], gold[idx]) - spearman_rows(ref_sim[idx], gold[idx]),
        observed,
        len(gold),
        rounds,
        seed,
        name="bootstrap-pairs",
    )
    out: dict[str, Any] = {
        "model_id": name,
        "metrics": {"cosine_spearman": ref_score},
        "cosine_spearman_shift": round(cand_score - ref_score, 2),
        "shift_ci95": [round(shift.ci_low * 100, 2), round(shift.ci_high * 100, 2)],
        "shift_p_value": shift.p_value,
        "similarity_spearman": float(spearman_rows(ref_sim[None], cand_sim[None])[0]),
        "discordant_pairs": discordant_pairs(ref_sim, cand_sim),
    }
    if reference[0].shape == candidate[0].shape:
        out["embedding_agreement"] = cosine_summary(row_cosines(np.vstack(reference), np.vstack(candidate)))
    else:
        out["embedding_agreement"] = f"dimensions differ ({reference[0].shape[1]} vs {candidate[0].shape[1]})"
    return out
