"""Deterministic stand-ins for real models, so metric assertions can be exact."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from embedscope.models.base import Similarity
from embedscope.types import Role


class KeywordEncoder:
    """One dimension per keyword: the vector counts how often each keyword occurs in the text.

    >>> KeywordEncoder(["car", "bike"]).encode(["a car and a car"], role="document").tolist()
    [[2.0, 0.0]]
    """

    def __init__(
        self,
        keywords: Sequence[str],
        similarity: Similarity = "dot",
        prompts: dict[str, str] | None = None,
        name: str = "fake/keyword-encoder",
    ) -> None:
        self.keywords = [k.lower() for k in keywords]
        self.similarity = similarity
        self.prompts = dict(prompts or {})
        self.name = name
        self.revision = hashlib.sha256("|".join(self.keywords).encode()).hexdigest()[:12]
        self.fingerprint = hashlib.sha256(f"keyword|{self.revision}|{similarity}".encode()).hexdigest()
        self.calls: list[tuple[Role, list[str]]] = []

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        prompt = self.prompts.get(role, "")
        texts = [prompt + t for t in texts]
        self.calls.append((role, list(texts)))
        out = np.zeros((len(texts), len(self.keywords)), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for j, kw in enumerate(self.keywords):
                out[i, j] = words.count(kw)
        return out


class HashEncoder:
    """Pseudo-random unit vectors derived from each text's hash: stable, fast, meaningless."""

    def __init__(self, dim: int = 16, name: str = "fake/hash-encoder", similarity: Similarity = "cosine") -> None:
        self.dim = dim
        self.name = name
        self.revision = f"dim{dim}"
        self.similarity = similarity
        self.prompts: dict[str, str] = {}
        self.fingerprint = hashlib.sha256(f"hash|{dim}".encode()).hexdigest()

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).standard_normal(self.dim))
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)
