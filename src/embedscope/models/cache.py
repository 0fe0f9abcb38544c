"""Persistent embedding cache: a re-run of the same model on the same texts encodes nothing.

The key of a vector is ``sha256(role, prompt, text)`` inside a store named by the encoder's
``fingerprint`` (model identity and revision or file hash, backend, pooling, max length,
normalisation). So a query vector is never served for an identical document text (mteb issue
#5383), and a change of prompt, pooling or weights never serves a stale vector.

Storage is one SQLite database per fingerprint, in WAL mode: every write is a transaction, so a
crash mid-write loses at most the batch being written (a damaged database is quarantined, see
:class:`EmbeddingCache`), and several processes can read and write
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
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from embedscope.models.base import Encoder, Similarity, check_finite
from embedscope.types import Role

logger = logging.getLogger(__name__)

_SQL_VARS = 900  # stay under SQLite's host-parameter limit
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26  # primary result codes of a damaged database file
FLUSH_EVERY = 1000  # streamed vectors are stored every this many texts
FLUSH_SECONDS = 5.0  # or this many seconds (a slow model)
_T = TypeVar("_T")


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


def is_corruption(error: BaseException) -> bool:
    """Whether a SQLite error means a damaged database file (not a lock, a full disk or a read-only file)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    return not isinstance(error, sqlite3.OperationalError)  # pragma: no cover - Python < 3.11


def quarantine(path: Path, reason: BaseException | str) -> Path | None:
    """Move a damaged store (and its ``-wal``/``-shm`` files) aside as ``<name>.corrupt-<time>``, with a
    one-line warning; None when another process moved it first."""
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    for suffix in ("-wal", "-shm"):
        try:
            os.replace(f"{path}{suffix}", f"{target}{suffix}")
        except FileNotFoundError:
            pass
    logger.warning("embedding cache %s is corrupt (%s): moved it to %s; its texts are encoded again",
                   path, str(reason).splitlines()[0] if str(reason) else type(reason).__name__, target.name)
    return target


class EmbeddingCache:
    """A folder of SQLite vector stores, one per encoder fingerprint.

    A store that SQLite finds damaged is quarantined (renamed beside itself, one warning) and
    replaced by an empty one, so its texts are encoded again; a vector of the wrong length is
    dropped and served as a miss.
    """

    def __init__(self, directory: str | Path | None = None, timeout: float = 600.0) -> None:
        self.directory = Path(directory) if directory else default_cache_dir() / "embeddings"
        self.timeout = timeout
        self._local = threading.local()
        self._dims: dict[str, int | None] = {}

    def path(self, fingerprint: str) -> Path:
        """The store file of a fingerprint."""
        return self.directory / fingerprint[:2] / f"{fingerprint}.sqlite"

    def _connect(self, fingerprint: str) -> sqlite3.Connection:
        conns: dict[str, sqlite3.Connection] = self._local.__dict__.setdefault("conns", {})
        if fingerprint not in conns:
            path = self.path(fingerprint)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                conns[fingerprint] = open_store(path, self.timeout)
            except sqlite3.DatabaseError as e:
                if not is_corruption(e):
                    raise
                quarantine(path, e)
                conns[fingerprint] = open_store(path, self.timeout)
        return conns[fingerprint]

    def _guarded(self, fingerprint: str, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """``operation`` on the store; a damaged store is quarantined and the operation runs on a fresh one."""
        try:
            return operation(self._connect(fingerprint))
        except sqlite3.DatabaseError as e:
            if not is_corruption(e):
                raise
            self._forget(fingerprint)
            quarantine(self.path(fingerprint), e)
            return operation(self._connect(fingerprint))

    def _forget(self, fingerprint: str) -> None:
        conn = self._local.__dict__.get("conns", {}).pop(fingerprint, None)
        if conn is not None:
            conn.close()
        self._dims.pop(fingerprint, None)

    def describe(self, fingerprint: str, info: dict) -> None:
        """Record what a fingerprint stands for (for people browsing the cache)."""
        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('encoder', ?)", (json.dumps(info, sort_keys=True),))

        self._guarded(fingerprint, write)

    def _vector_bytes(self, fingerprint: str, conn: sqlite3.Connection) -> int | None:
        """The byte length every vector of this store has (recorded dim, else the most common length)."""
        if fingerprint not in self._dims:
            self._dims[fingerprint] = store_dim(conn)
        dim = self._dims[fingerprint]
        return None if dim is None else 4 * dim

    def get(self, fingerprint: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors found for ``keys`` (missing keys, and vectors of the wrong length, are absent)."""
        return self._guarded(fingerprint, lambda conn: self._get(fingerprint, conn, keys))

    def _get(self, fingerprint: str, conn: sqlite3.Connection, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        bad: list[bytes] = []
        unique = list(dict.fromkeys(keys))
        size = self._vector_bytes(fingerprint, conn) if unique else None
        for start in range(0, len(unique), _SQL_VARS):
            part = unique[start : start + _SQL_VARS]
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part):
                if not blob or len(blob) % 4 or (size is not None and len(blob) != size):
                    bad.append(bytes(key))
                else:
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        if bad:
            self._drop(conn, bad, size)
        return found

    def _drop(self, conn: sqlite3.Connection, keys: list[bytes], size: int | None) -> None:
        expected = f"{size // 4} floats" if size else "a whole number of floats"
        logger.warning("embedding cache %s: %d vector(s) of the wrong length (expected %s) dropped; their texts "
                       "are encoded again", conn_path(conn), len(keys), expected)
        with conn:
            for start in range(0, len(keys), _SQL_VARS):
                part = keys[start : start + _SQL_VARS]
                conn.execute(f"DELETE FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)

    def put(self, fingerprint: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store vectors in one transaction; an existing key keeps its first vector."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)

        def write(conn: sqlite3.Connection) -> None:
            rows = ((k, vectors[i].tobytes()) for i, k in enumerate(keys))
            with conn:
                if vectors.ndim == 2 and vectors.shape[1]:
                    conn.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(vectors.shape[1]),))
                conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)

        self._guarded(fingerprint, write)
        if vectors.ndim == 2 and vectors.shape[1] and self._dims.get(fingerprint) is None:
            self._dims.pop(fingerprint, None)  # read again: the store now records its width

    def count(self, fingerprint: str) -> int:
        return self._guarded(fingerprint, lambda c: int(c.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]))


def open_store(path: Path, timeout: float = 600.0) -> sqlite3.Connection:
    """Open (creating if needed) one fingerprint's store; raises sqlite3.DatabaseError when it is damaged."""
    conn = sqlite3.connect(path, timeout=timeout)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        conn.commit()
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn


def store_dim(conn: sqlite3.Connection) -> int | None:
    """A store's vector width: its recorded ``dim``, else that of most of its vectors (None when empty)."""
    row = conn.execute("SELECT value FROM meta WHERE name = 'dim'").fetchone()
    if row is not None and str(row[0]).isdigit():
        return int(row[0])
    row = conn.execute("SELECT length(vec) FROM vectors GROUP BY 1 ORDER BY COUNT(*) DESC LIMIT 1").fetchone()
    return int(row[0]) // 4 if row and row[0] and row[0] % 4 == 0 else None


def conn_path(conn: sqlite3.Connection) -> str:
    """The file a connection is open on."""
    return str(conn.execute("PRAGMA database_list").fetchone()[2])


@dataclass
class CacheStats:
    """How many texts were served from the cache and how many were encoded."""

    hits: int = 0
    encoded: int = 0


class CachedEncoder:
    """An :class:`Encoder` that serves vectors from an :class:`EmbeddingCache` and encodes the rest.

    Missing texts are encoded as one call in their original order (duplicates included), so a
    cold run batches exactly as the wrapped encoder would; duplicate texts then all get the first
    occurrence's vector, which is the one stored, so a warm run returns exactly the cold run's
    vectors. Vectors are stored as batches finish (see :meth:`_encode_missing`), so a run killed
    mid-call resumes from the last ~1,000 texts in the same batches.
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
        """Encode ``texts`` as one call would and store each key's first occurrence.

        Vectors are stored as batches finish, every ``FLUSH_EVERY`` texts, so an interrupted run
        keeps them: an engine's (``encode_stream``) always, and an in-process encoder's when it
        exposes its exact batch plan (``exact_batch_plan``) and more than ``FLUSH_EVERY`` texts are
        missing; its planned batches are then encoded one by one, so the vectors are unchanged.
        A slow model's vectors are stored at least every ``FLUSH_SECONDS``.
        """
        first: dict[bytes, int] = {}
        for pos, k in enumerate(keys):
            first.setdefault(k, pos)
        stream = getattr(self.encoder, "encode_stream", None)
        if stream is None and len(texts) > FLUSH_EVERY and getattr(self.encoder, "exact_batch_plan", False):
            from embedscope.engines.planned import LocalPlanned

            stream = LocalPlanned(self.encoder).encode_stream  # the same batches, stored as they finish
        if stream is not None:
            parts = stream(texts, role=role, batch_size=batch_size, show_progress=show_progress)
        else:
            fresh = self.encoder.encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)
            parts = iter([(list(range(len(texts))), np.asarray(fresh, dtype=np.float32))])
        pending: list[bytes] = []
        flushed = time.monotonic()
        for idx, vectors in parts:
            check_finite(vectors, [texts[pos] for pos in idx], self.name)
            for row, pos in enumerate(idx):
                k = keys[pos]
                if first[k] == pos:
                    found[k] = vectors[row]
                    pending.append(k)
            if len(pending) >= FLUSH_EVERY or (pending and time.monotonic() - flushed >= FLUSH_SECONDS):
                self.cache.put(self.encoder.fingerprint, pending, np.stack([found[k] for k in pending]))
                pending, flushed = [], time.monotonic()
        if pending:
            self.cache.put(self.encoder.fingerprint, pending, np.stack([found[k] for k in pending]))
