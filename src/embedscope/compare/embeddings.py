"""Per-text embedding agreement of two models on the texts a task encodes (through the embedding cache).

The texts are found by running the task's protocol with a recorder (a deterministic hash encoder that
notes every call it is given), so every task type, prompt role and split is covered. Each model is then
given the task's own calls again (the same texts, order and batch size: the embedding cache serves every
vector when the models were evaluated before), and the agreement of a text is the cosine of its two vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, Task, recorded_protocol
from embedscope.types import Role


def task_texts(task: Task, options: SearchOptions) -> list[tuple[Role, str]]:
    """Every distinct ``(role, text)`` the task's protocol encodes on its eval splits."""
    return list(recorded_protocol(task, options).texts)


def replayed_vectors(
    encoder: Encoder, calls: Sequence[tuple[Role, tuple[str, ...], int | None]], texts: Sequence[tuple[Role, str]]
) -> np.ndarray:
    """The vectors of ``texts`` (each at its first call), from ``encoder`` given the task's own calls again: the same
    texts in the same order and batch size, so an embedding cache that saw the task run serves every batch."""
    found: dict[tuple[Role, str], np.ndarray] = {}
    for role, call, batch_size in calls:
        vectors = np.asarray(encoder.encode(list(call), role=role, batch_size=batch_size))
        for text, vector in zip(call, vectors):
            found.setdefault((role, text), vector)
    if not texts:
        return np.zeros((0, 0))
    return np.vstack([found[t] for t in texts])


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``cos(a_i, b_i) = a_i · b_i / (‖a_i‖ ‖b_i‖)`` per row (0 when a vector is zero)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ConfigError(
            f"the two models' embeddings differ in shape ({a.shape[1:]} vs {b.shape[1:]}): "
            "per-text agreement needs models of the same dimension"
        )
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, (a * b).sum(axis=1) / np.where(norms > 0, norms, 1.0), 0.0)


def cosine_summary(cosines: np.ndarray) -> dict[str, Any]:
    """Mean, minimum and 5th percentile of per-text cosines, and the share below 0.99."""
    if not len(cosines):
        return {}
    return {
        "embedding_cosine_mean": float(cosines.mean()),
        "embedding_cosine_min": float(cosines.min()),
        "embedding_cosine_p05": float(np.quantile(cosines, 0.05)),
        "share_below_0.99": float(np.mean(cosines < 0.99)),
        "texts": int(len(cosines)),
    }


def embedding_agreement(
    reference: Encoder, candidate: Encoder, tasks: Sequence[Task], options: SearchOptions
) -> dict[str, dict[str, Any]]:
    """``{task: cosine_summary}`` over the texts each task encodes, each model given the task's own encode calls
    (:func:`replayed_vectors`): vectors a run of the task cached are served, none encoded again. A served-only
    encoder (:class:`~embedscope.models.cache.ServedOnly`) missing a batch leaves the task a note instead."""
    from embedscope.models.cache import NotCached

    out = {}
    for task in tasks:
        recorded = recorded_protocol(task, options)
        texts = list(recorded.texts)
        try:
            a = replayed_vectors(reference, recorded.calls, texts)
            b = replayed_vectors(candidate, recorded.calls, texts)
        except NotCached as e:  # a served-only encoder: the two were not both encoded
            out[task.name] = {"embedding_agreement": f"not both encoded ({e})"}
            continue
        if a.shape != b.shape:
            out[task.name] = {"embedding_agreement": f"dimensions differ ({a.shape[1]} vs {b.shape[1]})"}
        else:
            out[task.name] = cosine_summary(row_cosines(a, b))
    return out
