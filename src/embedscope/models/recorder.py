"""An encoder that records the calls a protocol makes: run a task's protocol on it to learn which texts the task
encodes, in which calls, without a model (per-text agreement in ``compare``, a screen's row proxies in
``tasks.proxy``).

>>> recorder = CallRecorder()
>>> recorder.encode(["a", "b", "a"], role="document", batch_size=2).shape, recorder.calls
((3, 32), [('document', ('a', 'b', 'a'), 2)])
>>> list(recorder.texts)
[('document', 'a'), ('document', 'b')]
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from embedscope.models.base import BaseEncoder
from embedscope.types import Role


class CallRecorder(BaseEncoder):
    """Pseudo-random unit vectors from each text's hash (stable, fast, meaningless, so every scorer runs on them);
    records each call it is given (role, texts in order, batch size) and each distinct ``(role, text)`` in
    first-seen order."""

    backend = "call-recorder"

    def __init__(self, dim: int = 32) -> None:
        self.dim = self.embed_dim = dim
        self.name = "embedscope/call-recorder"
        self.revision = f"dim{dim}"
        self.similarity = "cosine"
        self.prompts: dict[str, str] = {}
        self.texts: dict[tuple[Role, str], None] = {}
        self.calls: list[tuple[Role, tuple[str, ...], int | None]] = []
        self._place("cpu", None)

    def settings(self) -> dict:
        return {"backend": self.backend, "dim": self.dim}

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        self.calls.append((role, tuple(texts), batch_size))
        for t in texts:
            self.texts.setdefault((role, t))
        return super().encode(texts, role=role)

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        rows = [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")).standard_normal(
                self.dim
            )
            for t in texts
        ]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)
