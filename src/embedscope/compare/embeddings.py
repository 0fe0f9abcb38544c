"""Per-text embedding agreement of two models on the texts a task encodes (through the embedding cache).

The texts are found by running the task's protocol with a recorder (a deterministic hash encoder that
notes every ``(role, text)`` it is given), so every task type, prompt role and split is covered. Each
model then encodes those texts (served from the cache when the models were evaluated before), and the
agreement of a text is the cosine of its two vectors.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, Task
from embedscope.testing.fakes import HashEncoder
from embedscope.types import Role


class TextRecorder(HashEncoder):
    """A hash encoder that records each distinct ``(role, text)`` it encodes, in first-seen order."""

    def __init__(self) -> None:
        super().__init__(dim=32, name="embedscope/text-recorder")
        self.texts: dict[tuple[Role, str], None] = {}

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = 32, show_progress: bool = False
    ) -> np.ndarray:
        for t in texts:
            self.texts.setdefault((role, t))
        return super().encode(texts, role=role)


def task_texts(task: Task, options: SearchOptions) -> list[tuple[Role, str]]:
    """Every distinct ``(role, text)`` the task's protocol encodes on its eval splits."""
    recorder = TextRecorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for split in task.eval_splits:
            task.evaluate_split(split, recorder, options)
    return list(recorder.texts)


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


def encode_by_role(encoder: Encoder, texts: Sequence[tuple[Role, str]], batch_size: int | None = 32) -> np.ndarray:
    """Vectors of ``texts`` in their order, each role encoded in one call."""
    out: np.ndarray | None = None
    for role in ("query", "document"):
        rows = [i for i, (r, _) in enumerate(texts) if r == role]
        if not rows:
            continue
        vectors = np.asarray(encoder.encode([texts[i][1] for i in rows], role=role, batch_size=batch_size))
        if out is None:
            out = np.zeros((len(texts), vectors.shape[1]))
        out[rows] = vectors
    return np.zeros((0, 0)) if out is None else out


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
    """``{task: cosine_summary}`` over the texts each task encodes."""
    out = {}
    for task in tasks:
        texts = task_texts(task, options)
        a, b = (
            encode_by_role(reference, texts, options.batch_size),
            encode_by_role(candidate, texts, options.batch_size),
        )
        if a.shape != b.shape:
            out[task.name] = {"embedding_agreement": f"dimensions differ ({a.shape[1]} vs {b.shape[1]})"}
        else:
            out[task.name] = cosine_summary(row_cosines(a, b))
    return out
