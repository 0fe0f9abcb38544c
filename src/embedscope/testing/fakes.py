"""Deterministic stand-ins for real models, so metric assertions can be exact."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from embedscope.models.base import BaseEncoder, Similarity
from embedscope.types import Role


class KeywordEncoder(BaseEncoder):
    """One dimension per keyword: the vector counts how often each keyword occurs in the text.

    >>> KeywordEncoder(["car", "bike"]).encode(["a car and a car"], role="document").tolist()
    [[2.0, 0.0]]
    """

    backend = "fake-keyword"

    def __init__(
        self,
        keywords: Sequence[str],
        similarity: Similarity = "dot",
        prompts: dict[str, str] | None = None,
        name: str = "fake/keyword-encoder",
        device: str | None = "cpu",
        dtype: str | None = None,
    ) -> None:
        self.keywords = [k.lower() for k in keywords]
        self.similarity = similarity
        self.prompts = dict(prompts or {})
        self.name = name
        self.embed_dim = len(self.keywords)
        self.revision = hashlib.sha256("|".join(self.keywords).encode()).hexdigest()[:12]
        self.calls: list[tuple[Role, list[str]]] = []
        self._place(device, dtype)

    def settings(self) -> dict:
        return {"backend": self.backend, "revision": self.revision, "similarity": self.similarity}

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        prompt = self.prompts.get(role, "")
        texts = [prompt + t for t in texts]
        self.calls.append((role, list(texts)))
        out = np.zeros((len(texts), len(self.keywords)), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for j, kw in enumerate(self.keywords):
                out[i, j] = words.count(kw)
        return out


class HashEncoder(BaseEncoder):
    """Pseudo-random unit vectors derived from each text's hash: stable, fast, meaningless."""

    backend = "fake-hash"

    def __init__(
        self,
        dim: int = 16,
        name: str = "fake/hash-encoder",
        similarity: Similarity = "cosine",
        device: str | None = "cpu",
    ) -> None:
        self.dim = self.embed_dim = dim
        self.name = name
        self.revision = f"dim{dim}"
        self.similarity = similarity
        self.prompts: dict[str, str] = {}
        self._place(device, None)

    def settings(self) -> dict:
        return {"backend": self.backend, "dim": self.dim}

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).standard_normal(self.dim))
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)


class PaddedHashEncoder(HashEncoder):
    """:class:`HashEncoder` whose vectors depend on their batch, as a padded transformer's last bits do:
    each vector is nudged by ``1e-3 ×`` the longest text of its batch (batches: :meth:`batch_plan`).

    >>> enc = PaddedHashEncoder(dim=4)
    >>> a = enc.encode(["x", "yy"], role="document", batch_size=2)[0]
    >>> b = enc.encode(["x", "yy"], role="document", batch_size=1)[0]
    >>> bool((a != b).any())
    True
    """

    backend = "fake-padded-hash"

    def __init__(
        self, dim: int = 16, name: str = "fake/padded-hash-encoder", similarity: Similarity = "cosine"
    ) -> None:
        super().__init__(dim=dim, name=name, similarity=similarity)

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        out = super()._encode(texts, role, batch_size, show_progress)
        for batch in self.batch_plan([len(t) for t in texts], batch_size):
            out[batch] += np.float32(1e-3 * max(len(texts[i]) for i in batch))
        return out


class RowPaddedHashEncoder(PaddedHashEncoder):
    """:class:`PaddedHashEncoder` that says its padded lengths: a row depends only on its text and its batch's
    padded length (the longest text's, in characters), what :func:`~embedscope.testing.rows.compare_rows` measures.
    ``batch_nudge`` also nudges each row by ``1e-4 ×`` the batch's size: a kernel chosen by the batch's shape, as a
    transformer's on some CPUs (``bench/bench_row_invariance.py``).

    >>> enc = RowPaddedHashEncoder(dim=4)
    >>> a = enc.encode(["x", "yy", "z"], role="document", batch_size=3)[0]
    >>> bool((a == enc.encode(["x", "yy"], role="document", batch_size=2)[0]).all()), enc.padded_lengths(["yy"], role="query")
    (True, [2])
    """

    backend = "fake-row-padded-hash"

    def __init__(self, dim: int = 16, batch_nudge: bool = False) -> None:
        super().__init__(dim=dim, name="fake/row-padded-hash-encoder")
        self.batch_nudge = batch_nudge

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        out = super()._encode(texts, role, batch_size, show_progress)
        if self.batch_nudge:
            for batch in self.batch_plan([len(t) for t in texts], batch_size):
                out[batch] += np.float32(1e-4 * len(batch))
        return out

    def padded_lengths(self, texts: Sequence[str], *, role: Role) -> list[int]:
        return [len(t) for t in texts]


class WordTokenEncoder:
    """A token encoder with one unit vector per distinct word (hashed into ``dim`` dimensions).

    MaxSim of a query with a document then counts the query's words that occur in the document
    (exactly, when no two words share a dimension).

    >>> enc = WordTokenEncoder(dim=64)
    >>> [t.shape for t in enc.encode_tokens(["a cat", "dog"], role="query")]
    [(2, 64), (1, 64)]
    """

    def __init__(self, dim: int = 256, name: str = "fake/word-tokens") -> None:
        self.dim = dim
        self.name = name
        self.revision = f"dim{dim}"
        self.fingerprint = hashlib.sha256(f"word-tokens|{dim}".encode()).hexdigest()
        self.calls: list[tuple[Role, int]] = []

    def _dimension(self, word: str) -> int:
        return int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim

    def encode_tokens(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> list[np.ndarray]:
        self.calls.append((role, len(texts)))
        out = []
        for text in texts:
            words = re.findall(r"\w+", text.lower()) or ["<empty>"]
            m = np.zeros((len(words), self.dim), dtype=np.float32)
            m[np.arange(len(words)), [self._dimension(w) for w in words]] = 1.0
            out.append(m)
        return out


class OverlapReranker:
    """A deterministic reranker: the number of distinct query words in the document, plus a
    per-document bonus (``bonus={doc_id: value}``) to steer tests."""

    def __init__(self, bonus: dict[str, float] | None = None, name: str = "fake/overlap-reranker") -> None:
        self.bonus = dict(bonus or {})
        self.name = name
        self.fingerprint = hashlib.sha256(repr(sorted(self.bonus.items())).encode()).hexdigest()[:16]
        self.pairs_scored = 0

    def score_candidates(self, queries, corpus, candidates, options) -> np.ndarray:  # Reranker protocol
        out = np.full(candidates.doc_index.shape, -np.inf)
        for i, row in enumerate(candidates.doc_index):
            q = set(re.findall(r"\w+", queries.texts[i].lower()))
            for j, d in enumerate(row):
                if d >= 0:
                    words = set(re.findall(r"\w+", corpus.texts[d].lower()))
                    out[i, j] = len(q & words) + self.bonus.get(corpus.ids[d], 0.0)
                    self.pairs_scored += 1
        return out
