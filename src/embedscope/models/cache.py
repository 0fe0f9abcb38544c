"""Persistent embedding cache: a re-run of the same model on the same texts encodes nothing.

The key of a vector is ``sha256(role, prompt, text)`` inside a store named by the encoder's
``fingerprint`` (model identity and revision or file hash, backend, pooling, max length,
normalisation). So a query vector is never served for an identical document text (mteb issue
#5383), and a change of prompt, pooling or weights never serves a stale vector.

Storage is one SQLite database per fingerprint, in WAL mode: every write is a transaction, so a
crash mid-write loses at most the batch being written, and several processes can read and write
the same cache at once (SQLite's locking; writers wait up to ``timeout`` seconds).

>>> import numpy as np, tempfile
>>> from embedscope.testing.fakes import KeywordEncoder
>>> enc = CachedEncoder(KeywordEncoder(["cat", "dog"]), EmbeddingCache(tempfile.mkdtemp()))
>>> enc.encode(["a cat"], role="query").tolist()
[[1.0, 0.0]]
>>> enc.stats.encoded, enc.encode(["a cat"], role="query").tolist(), enc.stats.encoded
(1, [[1.0, 0.0]], 1)
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedscope.models.base import Encoder, Similarity, check_finite
from embedscope.types import Role

_SQL_VARS = 900  # stay under SQLite's host-parameter limit
FLUSH_EVERY = 1000  # texts an engine's streamed vectors are stored in


def default_cache_dir() -> Path:
    """``$EMBEDSCOPE_CACHE`` or ``~/.cache/embedscope``."""
    env = os.environ.get("EMBEDSCOPE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "embedscope"


def text_key(role: str, prompt: str, text: str) -> bytes:
    """The cache key of one text; role and prompt are part of it.

    >>> text_key("query", "", "x") != text_key("document", "", "x")
    True
    """
    h = hashlib.sha256()
    for part in (role, prompt, text):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


class EmbeddingCache:
    """A folder of SQLite vector stores, one per encoder fingerprint."""

    def __init__(self, directory: str | Path | None = None, timeout: float = 600.0) -> None:
        self.directory = Path(directory) if directory else default_cache_dir() / "embeddings"
        self.timeout = timeout
        self._local = threading.local()

    def _connect(self, fingerprint: str) -> sqlite3.Connection:
        conns: dict[str, sqlite3.Connection] = self._local.__dict__.setdefault("conns", {})
        if fingerprint not in conns:
            folder = self.directory / fingerprint[:2]
            folder.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(folder / f"{fingerprint}.sqlite", timeout=self.timeout)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            conn.commit()
            conns[fingerprint] = conn
        return conns[fingerprint]

    def describe(self, fingerprint: str, info: dict) -> None:
        """Record what a fingerprint stands for (for people browsing the cache)."""
        conn = self._connect(fingerprint)
        with conn:
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('encoder', ?)", (json.dumps(info, sort_keys=True),))

    def get(self, fingerprint: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors found for ``keys`` (missing keys are absent from the result)."""
        conn = self._connect(fingerprint)
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _SQL_VARS):
            part = unique[start : start + _SQL_VARS]
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part):
                found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, fingerprint: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store vectors in one transaction; an existing key keeps its first vector."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        conn = self._connect(fingerprint)
        rows = ((k, vectors[i].tobytes()) for i, k in enumerate(keys))
        with conn:
            conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)

    def count(self, fingerprint: str) -> int:
        return int(self._connect(fingerprint).execute("SELECT COUNT(*) FROM vectors").fetchone()[0])


@dataclass
class CacheStats:
    """How many texts were served from the cache and how many were encoded."""

    hits: int = 0
    encoded: int = 0


class CachedEncoder:
    """An :class:`Encoder` that serves vectors from an :class:`EmbeddingCache` and encodes the rest.

    Missing texts are encoded in one call in their original order (duplicates included), so a
    cold run batches exactly as the wrapped encoder would; duplicate texts then all get the first
    occurrence's vector, which is the one stored, so a warm run returns exactly the cold run's
    vectors.
    """

    def __init__(self, encoder: Encoder, cache: EmbeddingCache) -> None:
        self.encoder = encoder
        self.cache = cache
        self.stats = CacheStats()
        cache.describe(encoder.fingerprint, {"name": encoder.name, "revision": encoder.revision})

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def revision(self) -> str:
        return self.encoder.revision

    @property
    def fingerprint(self) -> str:
        return self.encoder.fingerprint

    @property
    def similarity(self) -> Similarity:
        return self.encoder.similarity

    @property
    def prompts(self) -> dict[str, str]:
        return self.encoder.prompts

    def __getattr__(self, item: str):  # metadata of the wrapped encoder (dim, max length, …)
        return getattr(self.encoder, item)

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        prompt = self.encoder.prompts.get(role, "")
        keys = [text_key(role, prompt, t) for t in texts]
        found = self.cache.get(self.encoder.fingerprint, keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            self._encode_missing([texts[i] for i in missing], [keys[i] for i in missing], found,
                                 role=role, batch_size=batch_size, show_progress=show_progress)
        self.stats.hits += len(texts) - len(missing)
        self.stats.encoded += len(missing)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return check_finite(np.stack([found[k] for k in keys]).astype(np.float32, copy=False), texts, self.name,
                            f"the embedding cache ({self.cache.directory})")

    def _encode_missing(self, texts: list[str], keys: list[bytes], found: dict[bytes, np.ndarray], *, role: Role,
                        batch_size: int | None, show_progress: bool) -> None:
        """Encode ``texts`` in one call and store each key's first occurrence; an engine's vectors
        (``encode_stream``) are stored as they arrive, every ``FLUSH_EVERY`` texts."""
        first: dict[bytes, int] = {}
        for pos, k in enumerate(keys):
            first.setdefault(k, pos)
        stream = getattr(self.encoder, "encode_stream", None)
        if stream is not None:
            parts = stream(texts, role=role, batch_size=batch_size, show_progress=show_progress)
        else:
            fresh = self.encoder.encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)
            parts = iter([(list(range(len(texts))), np.asarray(fresh, dtype=np.float32))])
        pending: list[bytes] = []
        for idx, vectors in parts:
            check_finite(vectors, [texts[pos] for pos in idx], self.name)
            for row, pos in enumerate(idx):
                k = keys[pos]
                if first[k] == pos:
                    found[k] = vectors[row]
                    pending.append(k)
            if len(pending) >= FLUSH_EVERY:
                self.cache.put(self.encoder.fingerprint, pending, np.stack([found[k] for k in pending]))
                pending = []
        if pending:
            self.cache.put(self.encoder.fingerprint, pending, np.stack([found[k] for k in pending]))
