"""Persistent embedding cache: a re-run of the same model on the same texts encodes nothing.

A vector depends on the batch it was encoded in (padding, and the kernels a batch shape picks move the
last float bits), so the cache serves a vector only in the batch context it was made in. An encode call
is keyed by ``sha256(role, prompt, batch size, texts in order)``; its *plan* (the batches the uncached
call forms: the encoder's ``batch_plan``, or the whole call as one batch for an encoder without one) is
stored under that key, and each vector under ``sha256(batch key, position)``, where the batch key is
``sha256(role, prompt, the batch's texts in order)``. A call is served from the cache only for the
batches it holds whole; every other batch is encoded exactly as the uncached call batches it (an
all-missing call goes through the encoder's own ``encode`` / ``encode_stream``). So what the cache holds
never changes a number: a warm, a resumed and an uncached run give the same vectors, bit for bit (a
text encoded by another call in another batch is encoded again). All of this lives inside a store named
by the encoder's ``fingerprint`` (model identity and revision or file hash, backend, pooling, max
length, normalisation); role and prompt are part of every key, so a query vector is never served for an
identical document text (mteb issue #5383).

Storage is one SQLite database per fingerprint (``<cache folder>/embeddings/<fp[:2]>/<fp>.sqlite``), in WAL mode: every write is a transaction, so a
crash mid-write loses at most the batches being written (a damaged database is quarantined, see
:class:`EmbeddingCache`), and several processes can read and write
the same cache at once (SQLite's locking; writers wait up to ``timeout`` seconds). Vectors are written
every ``FLUSH_EVERY`` texts or ``FLUSH_SECONDS``, whole batches at a time, and a call's plan before its first vector: an
interrupted call resumes with the batches already stored and encodes only the others.

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
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import numpy as np

from embedscope.models.base import BATCH_ORDER, Encoder, Similarity, check_finite
from embedscope.models.sparse_rows import SparsePair, csr_from_pairs, in_order, pair_blob, pair_from_blob, row_pair
from embedscope.types import Role

logger = logging.getLogger(__name__)

_SQL_VARS = 900  # stay under SQLite's host-parameter limit
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26  # primary result codes of a damaged database file
FLUSH_EVERY = 1000  # streamed vectors are stored every this many texts
FLUSH_SECONDS = 5.0  # or this many seconds (a slow model)
_T = TypeVar("_T")


STORES = "embeddings"  # the stores' folder inside the cache folder


def default_cache_dir() -> Path:
    """``$EMBEDSCOPE_CACHE`` or ``~/.cache/embedscope``."""
    env = os.environ.get("EMBEDSCOPE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "embedscope"


def store_folders(root: Path) -> tuple[Path, Path]:
    """Where stores live under a cache folder ``root``: ``root/embeddings/`` (written), and ``root/`` itself,
    where ``--cache-dir`` put them before 0.x (still read, so an existing cache keeps working)."""
    return root / STORES, root


def text_key(role: str, prompt: str, text: str) -> bytes:
    """A text's identity with its role and prompt (the key of caches written before vectors were keyed by
    batch; vectors are now served by :func:`call_key` and :func:`batch_vector_keys`).

    >>> text_key("query", "", "x") != text_key("document", "", "x")
    True
    """
    h = hashlib.sha256()
    for part in (role, prompt, text):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def _digest(*parts: str | bytes) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def call_key(role: str, prompt: str, batch_size: int, texts: Sequence[str]) -> bytes:
    """The key of one encode call: what decides its batches (role, prompt, batch size, texts in order, and the order
    plans follow, :data:`~embedscope.models.base.BATCH_ORDER`: a plan stored in another is planned again, so a warm
    call batches as an uncached one).

    >>> call_key("query", "", 32, ["a", "b"]) != call_key("query", "", 32, ["b", "a"])
    True
    """
    return _digest("call", BATCH_ORDER, role, prompt, str(batch_size), *texts)


def batch_vector_keys(role: str, prompt: str, texts: Sequence[str]) -> list[bytes]:
    """The keys of a batch's vectors: ``sha256(batch key, position)``; equal only for the same batch.

    >>> a = batch_vector_keys("document", "", ["x", "y"])
    >>> a == batch_vector_keys("document", "", ["x", "y"]), a[0] in batch_vector_keys("document", "", ["x", "z"])
    (True, False)
    """
    batch = _digest("batch", role, prompt, *texts)
    return [_digest(batch, str(i)) for i in range(len(texts))]


def encode_plan(plan: Sequence[Sequence[int]]) -> bytes:
    """A plan (batches of indices) as bytes: batch sizes, then the indices (int64)."""
    sizes = [len(b) for b in plan]
    flat = [i for b in plan for i in b]
    return np.asarray([len(sizes), *sizes, *flat], dtype=np.int64).tobytes()


def decode_plan(blob: bytes) -> list[list[int]]:
    """The inverse of :func:`encode_plan`.

    >>> decode_plan(encode_plan([[2, 0], [1]]))
    [[2, 0], [1]]
    """
    values = np.frombuffer(blob, dtype=np.int64)
    n = int(values[0])
    sizes, flat = values[1 : 1 + n], values[1 + n :]
    bounds = np.cumsum(sizes)[:-1]
    return [part.tolist() for part in np.split(flat, bounds)] if n else []


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
    logger.warning(
        "embedding cache %s is corrupt (%s): moved it to %s; its texts are encoded again",
        path,
        str(reason).splitlines()[0] if str(reason) else type(reason).__name__,
        target.name,
    )
    return target


class EmbeddingCache:
    """A cache folder (``directory``: the ``cache_dir`` setting, ``$EMBEDSCOPE_CACHE`` or ``~/.cache/embedscope``, the same
    rule for each) whose ``embeddings/`` folder holds SQLite vector stores, one per encoder fingerprint; a store
    directly in the folder (where ``--cache-dir`` put them before) is still read and written.

    A store that SQLite finds damaged is quarantined (renamed beside itself, one warning) and
    replaced by an empty one, so its texts are encoded again; a vector of the wrong length is
    dropped and served as a miss.
    """

    def __init__(self, directory: str | Path | None = None, timeout: float = 600.0) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()  # the cache folder
        self.stores, self.legacy_stores = store_folders(self.directory)
        self.timeout = timeout
        self._local = threading.local()
        self._dims: dict[str, int | None] = {}

    def path(self, fingerprint: str) -> Path:
        """The store file of a fingerprint: under ``embeddings/``, or where an older version put it."""
        relative = Path(fingerprint[:2]) / f"{fingerprint}.sqlite"
        current, legacy = self.stores / relative, self.legacy_stores / relative
        return legacy if legacy.is_file() and not current.exists() else current

    def _connect(self, fingerprint: str) -> sqlite3.Connection:
        conns: dict[str, sqlite3.Connection] = self._local.__dict__.setdefault("conns", {})
        files: dict[str, tuple[int, int]] = self._local.__dict__.setdefault("files", {})
        if fingerprint in conns and _file_id(self.path(fingerprint)) != files.get(fingerprint):
            return self._reopen(fingerprint)
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
            files[fingerprint] = _file_id(path)
        return conns[fingerprint]

    def _reopen(self, fingerprint: str) -> sqlite3.Connection:
        """A new store in place of one deleted (``cache clear``) or moved aside while this process used it, with
        the old one's description and batch plans, so the vectors still to come are kept (one warning)."""
        old = self._local.conns.pop(fingerprint)
        try:
            meta = old.execute("SELECT name, value FROM meta").fetchall()
            plans = old.execute("SELECT key, plan FROM plans").fetchall()
        except sqlite3.Error:
            meta, plans = [], []
        old.close()
        self._dims.pop(fingerprint, None)
        path = self.path(fingerprint)
        logger.warning(
            "embedding cache %s was deleted or moved while this run used it (embedscope cache clear?): "
            "the vectors encoded from now on go into a new store there",
            path,
        )
        conn = self._connect(fingerprint)
        with conn:
            conn.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", meta)
            conn.executemany("INSERT OR IGNORE INTO plans VALUES (?, ?)", plans)
        return conn

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
        self._local.__dict__.get("files", {}).pop(fingerprint, None)
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

    def get(self, fingerprint: str, keys: Sequence[bytes], *, sparse: int | None = None) -> dict[bytes, Any]:
        """Vectors found for ``keys`` (missing keys, and vectors of the wrong length, are absent). ``sparse``: the
        store holds a sparse model's rows of that many dimensions, each found as its
        :data:`~embedscope.models.sparse_rows.SparsePair`."""
        return self._guarded(fingerprint, lambda conn: self._get(fingerprint, conn, keys, sparse))

    def _get(
        self, fingerprint: str, conn: sqlite3.Connection, keys: Sequence[bytes], sparse: int | None = None
    ) -> dict[bytes, Any]:
        found: dict[bytes, Any] = {}
        bad: list[bytes] = []
        unique = list(dict.fromkeys(keys))
        size = self._vector_bytes(fingerprint, conn) if unique and sparse is None else None
        for start in range(0, len(unique), _SQL_VARS):
            part = unique[start : start + _SQL_VARS]
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part):
                if sparse is not None:
                    pair = pair_from_blob(bytes(blob or b""), sparse)
                    if pair is None:
                        bad.append(bytes(key))
                    else:
                        found[bytes(key)] = pair
                elif not blob or len(blob) % 4 or (size is not None and len(blob) != size):
                    bad.append(bytes(key))
                else:
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        if bad:
            self._drop(conn, bad, size)
        return found

    def _drop(self, conn: sqlite3.Connection, keys: list[bytes], size: int | None) -> None:
        expected = f"{size // 4} floats" if size else "a whole number of floats"
        logger.warning(
            "embedding cache %s: %d vector(s) of the wrong length (expected %s) dropped; their texts are encoded again",
            conn_path(conn),
            len(keys),
            expected,
        )
        with conn:
            for start in range(0, len(keys), _SQL_VARS):
                part = keys[start : start + _SQL_VARS]
                conn.execute(f"DELETE FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)

    def put_sparse(self, fingerprint: str, keys: Sequence[bytes], pairs: Sequence[SparsePair], dim: int) -> None:
        """Store a sparse model's rows (active positions and values) in one transaction; an existing key keeps its
        first row."""

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(dim),))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('rows', 'sparse')")
                conn.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?)", ((k, pair_blob(p)) for k, p in zip(keys, pairs))
                )

        self._guarded(fingerprint, write)

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

    def get_plan(self, fingerprint: str, key: bytes) -> list[list[int]] | None:
        """The stored batch plan of an encode call, or None."""
        row = self._guarded(fingerprint, lambda c: c.execute("SELECT plan FROM plans WHERE key = ?", (key,)).fetchone())
        return decode_plan(bytes(row[0])) if row else None

    def put_plan(self, fingerprint: str, key: bytes, plan: Sequence[Sequence[int]]) -> None:
        """Store an encode call's batch plan (an existing one is kept: it is the same plan)."""

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("INSERT OR IGNORE INTO plans VALUES (?, ?)", (key, encode_plan(plan)))

        self._guarded(fingerprint, write)

    def count(self, fingerprint: str) -> int:
        return self._guarded(fingerprint, lambda c: int(c.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]))


def _file_id(path: Path) -> tuple[int, int]:
    """``(device, inode)`` of a file, ``(0, 0)`` when it is gone: a changed id means another file took its place."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0)
    return (st.st_dev, st.st_ino)


def open_store(path: Path, timeout: float = 600.0) -> sqlite3.Connection:
    """Open (creating if needed) one fingerprint's store; raises sqlite3.DatabaseError when it is damaged."""
    conn = sqlite3.connect(path, timeout=timeout)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS plans (key BLOB PRIMARY KEY, plan BLOB NOT NULL)")
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


class _EncodesBatch(Protocol):
    """A backend's one-batch call (:meth:`~embedscope.models.base.BaseEncoder.encode_batch`)."""

    def encode_batch(self, texts: Sequence[str], *, role: Role) -> np.ndarray: ...


class _EncodesPerText(Protocol):
    """An encoder whose vectors do not depend on their batch companions (``vectors_per_text = True``): it requests
    the texts given and hands each answer to ``sink(indices, vectors)`` as it arrives
    (:class:`~embedscope.models.api.encoder.ApiEncoder`)."""

    def encode_into(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        sink: Callable[[Sequence[int], np.ndarray], None],
        batch_size: int | None = None,
        show_progress: bool = False,
        kept: bool = False,
    ) -> None: ...

    def note_cached(self, texts: Sequence[str], *, role: Role, batch_size: int | None = None) -> None: ...


class CachedEncoder:
    """An :class:`Encoder` that serves whole batches from an :class:`EmbeddingCache` and encodes the rest.

    The numbers never depend on what the cache holds (see the module docstring): a call's vectors come
    from the batches the uncached call forms, served when stored whole, else encoded as those batches.
    Duplicate texts are encoded as often as they occur, as without the cache.
    """

    def __init__(self, encoder: Encoder, cache: EmbeddingCache) -> None:
        self.encoder = encoder
        self.cache = cache
        self.stats = CacheStats()
        cache.describe(self.fingerprint, {"name": encoder.name, "revision": encoder.revision})

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def revision(self) -> str:
        return self.encoder.revision

    @property
    def fingerprint(self) -> str:
        fingerprint = self.encoder.fingerprint
        # callers wrap only fingerprinted encoders (the runner turns the cache off for the others)
        assert fingerprint is not None, f"{self.encoder.name}: an encoder without a fingerprint cannot be cached"
        return fingerprint

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
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if getattr(type(self.encoder), "vectors_per_text", False):  # the class's: a lazy encoder stays unloaded
            return self._encode_per_text(texts, role, batch_size, show_progress)
        if self._sparse_dim() is not None:  # a sparse model's rows, cached sparse, made dense for the task
            return np.asarray(
                self.encode_sparse(texts, role=role, batch_size=batch_size, show_progress=show_progress).toarray(),
                dtype=np.float32,
            )
        fp, prompt = self.fingerprint, self.encoder.prompts.get(role, "")
        plan = self._call_plan(texts, role, batch_size)
        keys = [batch_vector_keys(role, prompt, [texts[i] for i in b]) for b in plan]
        found = self.cache.get(fp, [k for ks in keys for k in ks])
        missing = [n for n, ks in enumerate(keys) if not all(k in found for k in ks)]
        if missing:
            self._encode_batches(
                texts, plan, keys, missing, found, role=role, batch_size=batch_size, show_progress=show_progress
            )
        n_missing = sum(len(plan[n]) for n in missing)
        self.stats.hits += len(texts) - n_missing
        self.stats.encoded += n_missing
        out: np.ndarray | None = None
        for batch, ks in zip(plan, keys):
            vectors = np.stack([found[k] for k in ks])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
        assert out is not None
        return check_finite(out, texts, self.name, f"the embedding cache ({self.cache.directory})")

    def encode_rows(
        self,
        texts: Sequence[str],
        rows: Sequence[int],
        *,
        role: Role,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """The vectors of ``texts[rows]`` as the call ``encode(texts)`` makes them: only the batches of that call's
        plan that hold one of ``rows`` are served or encoded, and stored under that call's keys, so the call itself
        is later served them (a screen's proxy encodes its documents so, :class:`~embedscope.types.EncodedWithin`).

        >>> import tempfile
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> enc = CachedEncoder(KeywordEncoder(["cat", "dog"]), EmbeddingCache(tempfile.mkdtemp()))
        >>> texts = ["a cat"] * 40 + ["a dog"]
        >>> enc.encode_rows(texts, [40], role="document", batch_size=32).tolist(), enc.stats.encoded
        ([[0.0, 1.0]], 9)
        >>> _ = enc.encode(texts, role="document", batch_size=32); enc.stats.hits, enc.stats.encoded
        (9, 41)
        """
        texts, rows = list(texts), list(rows)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if getattr(type(self.encoder), "vectors_per_text", False):
            return self._encode_per_text([texts[i] for i in rows], role, batch_size, show_progress)
        if self._sparse_dim() is not None:  # the whole call's rows (a sparse model's batches are not served apart)
            whole = self.encode_sparse(texts, role=role, batch_size=batch_size, show_progress=show_progress)
            return np.asarray(whole[rows].toarray(), dtype=np.float32)
        fp, prompt = self.fingerprint, self.encoder.prompts.get(role, "")
        plan = self._call_plan(texts, role, batch_size)
        wanted = set(rows)
        needed = [n for n, b in enumerate(plan) if wanted.intersection(b)]
        keys = [
            batch_vector_keys(role, prompt, [texts[i] for i in b]) if n in needed else [] for n, b in enumerate(plan)
        ]
        found = self.cache.get(fp, [k for ks in keys for k in ks])
        missing = [n for n in needed if not all(k in found for k in keys[n])]
        if missing:
            self._encode_batches(
                texts, plan, keys, missing, found, role=role, batch_size=batch_size, show_progress=show_progress
            )
        n_missing = sum(len(plan[n]) for n in missing)
        self.stats.hits += sum(len(plan[n]) for n in needed) - n_missing
        self.stats.encoded += n_missing
        place = {i: (n, j) for n in needed for j, i in enumerate(plan[n])}
        out = np.stack([found[keys[place[i][0]][place[i][1]]] for i in rows]).astype(np.float32, copy=False)
        return check_finite(out, [texts[i] for i in rows], self.name, f"the embedding cache ({self.cache.directory})")

    def _sparse_dim(self) -> int | None:
        """The vocabulary size when the wrapped model's vectors are sparse (its backend's record says so), else
        None."""
        from embedscope.models.backends import vector_kind

        if vector_kind(self.encoder) != "sparse":
            return None
        return int(getattr(self.encoder, "embed_dim", 0) or 0)

    def encode_sparse(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> Any:
        """A sparse model's vectors of the call ``encode(texts)`` as a float32 CSR matrix: whole batches served
        from the cache as active positions and values, the rest encoded as those batches and stored as they finish
        (never the call's dense rows at once)."""
        dim = self._sparse_dim()
        if dim is None:
            raise TypeError(f"{self.name}: its vectors are dense; encode_sparse is for a sparse model")
        texts = list(texts)
        if not texts:
            return csr_from_pairs([], dim)
        fp, prompt = self.fingerprint, self.encoder.prompts.get(role, "")
        plan = self._call_plan(texts, role, batch_size)
        keys = [batch_vector_keys(role, prompt, [texts[i] for i in b]) for b in plan]
        found = self.cache.get(fp, [k for ks in keys for k in ks], sparse=dim)
        missing = [n for n, ks in enumerate(keys) if not all(k in found for k in ks)]
        if missing:
            self._encode_batches(
                texts,
                plan,
                keys,
                missing,
                found,
                role=role,
                batch_size=batch_size,
                show_progress=show_progress,
                sparse=dim,
            )
        n_missing = sum(len(plan[n]) for n in missing)
        self.stats.hits += len(texts) - n_missing
        self.stats.encoded += n_missing
        matrix = csr_from_pairs([found[k] for ks in keys for k in ks], dim)
        check_finite(matrix.data, texts, self.name, f"the embedding cache ({self.cache.directory})")
        return in_order(matrix, [i for b in plan for i in b])

    def _encode_per_text(self, texts: list[str], role: Role, batch_size: int | None, show_progress: bool) -> np.ndarray:
        """An encoder whose vector of a text does not depend on the texts encoded with it (``vectors_per_text``: a
        service behind an API) is cached per text, each vector under the key of a batch of that text alone. The
        encoder is asked only for the distinct texts missing (``encode_into``), and each answer is stored as it
        arrives, in its own transaction: a killed run keeps every vector it was given. It is told which texts the
        cache served (``note_cached``), so it can count what they would have cost."""
        fp, prompt = self.fingerprint, self.encoder.prompts.get(role, "")
        keys = [batch_vector_keys(role, prompt, [t])[0] for t in texts]
        found = self.cache.get(fp, keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        encoder = cast(_EncodesPerText, self.encoder)
        encoder.note_cached(
            list(dict.fromkeys(t for t, k in zip(texts, keys) if k in found)), role=role, batch_size=batch_size
        )
        if missing:
            missing_keys = [batch_vector_keys(role, prompt, [t])[0] for t in missing]

            def store(idx: Sequence[int], vectors: np.ndarray) -> None:
                check_finite(vectors, [missing[i] for i in idx], self.name)  # never stored, never scored
                answered = [missing_keys[i] for i in idx]
                self.cache.put(fp, answered, vectors)
                found.update(zip(answered, np.asarray(vectors, dtype=np.float32)))

            encoder.encode_into(
                missing, role=role, sink=store, batch_size=batch_size, show_progress=show_progress, kept=True
            )
        self.stats.hits += len(texts) - len(missing)
        self.stats.encoded += len(missing)
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        return check_finite(out, texts, self.name, f"the embedding cache ({self.cache.directory})")

    def _call_plan(self, texts: list[str], role: Role, batch_size: int | None) -> list[list[int]]:
        """The batches of the call ``encode(texts)``: stored with the call (a warm call needs no model, not even to
        plan its batches), else planned by the encoder and stored."""
        fp, prompt = self.fingerprint, self.encoder.prompts.get(role, "")
        key = call_key(role, prompt, self._batch_size(batch_size), texts)
        plan = self.cache.get_plan(fp, key)
        if plan is None:
            plan = self._plan(texts, batch_size)
            self.cache.put_plan(fp, key, plan)
        return plan

    def _batch_size(self, batch_size: int | None) -> int:
        """The batch size the wrapped encoder uses for ``batch_size`` (None: its device's default)."""
        from embedscope.models.device import default_batch_size

        return batch_size or default_batch_size(str(getattr(self.encoder, "device", "cpu")))

    def _plan(self, texts: list[str], batch_size: int | None) -> list[list[int]]:
        """The batches the wrapped encoder's own call forms (its ``batch_plan``); the whole call as one
        batch for an encoder that cannot say (``exact_batch_plan = False``) or cannot encode a batch alone."""
        planner = getattr(self.encoder, "batch_plan", None)
        alone = (
            getattr(self.encoder, "encode_batches", None) is not None
            or getattr(self.encoder, "encode_batch", None) is not None
        )
        if planner is None or not alone or not getattr(self.encoder, "exact_batch_plan", True):
            return [list(range(len(texts)))]
        return [list(b) for b in planner([len(t) for t in texts], self._batch_size(batch_size))]

    def _encode_batches(
        self,
        texts: list[str],
        plan: list[list[int]],
        keys: list[list[bytes]],
        missing: list[int],
        found: dict[bytes, np.ndarray],
        *,
        role: Role,
        batch_size: int | None,
        show_progress: bool,
        sparse: int | None = None,
    ) -> None:
        """Encode the ``missing`` batches of ``plan`` as the uncached call would, storing whole batches
        every ``FLUSH_EVERY`` texts or ``FLUSH_SECONDS`` (a slow model), so an interrupted run keeps them.
        ``sparse``: a sparse model's batches, each kept and stored as its rows' active positions and values."""
        pending: list[bytes] = []
        pending_vectors: list[Any] = []
        flushed = time.monotonic()
        for n, vectors in self._batch_vectors(texts, plan, missing, role, batch_size, show_progress, sparse):
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(plan[n]):
                raise ValueError(f"{self.encoder.name}: got shape {vectors.shape} for a batch of {len(plan[n])}")
            check_finite(vectors, [texts[i] for i in plan[n]], self.name)  # never stored, never scored
            rows: list[Any] = [row_pair(v) for v in vectors] if sparse is not None else list(vectors)
            for k, v in zip(keys[n], rows):
                found[k] = v
            pending.extend(keys[n])
            pending_vectors.extend(rows) if sparse is not None else pending_vectors.append(vectors)
            if len(pending) >= FLUSH_EVERY or time.monotonic() - flushed >= FLUSH_SECONDS:
                self._store(pending, pending_vectors, sparse)
                pending, pending_vectors, flushed = [], [], time.monotonic()
        if pending:
            self._store(pending, pending_vectors, sparse)

    def _store(self, keys: list[bytes], vectors: list[Any], sparse: int | None) -> None:
        if sparse is not None:
            self.cache.put_sparse(self.fingerprint, keys, vectors, sparse)
        else:
            self.cache.put(self.fingerprint, keys, np.concatenate(vectors))

    def _batch_vectors(
        self,
        texts: list[str],
        plan: list[list[int]],
        missing: list[int],
        role: Role,
        batch_size: int | None,
        show_progress: bool,
        sparse: int | None = None,
    ):
        """``(batch number, vectors)`` of each missing batch. A call missing every batch goes through the
        encoder's own ``encode_stream`` / ``encode`` (exactly the uncached call; a sparse model's call is never
        made dense whole: its batches are encoded one by one, as it batches them itself); otherwise each missing
        batch is encoded alone (``encode_batches`` of an engine, ``encode_batch`` of a backend)."""
        if len(missing) == len(plan) and (sparse is None or getattr(self.encoder, "encode_stream", None)):
            stream = getattr(self.encoder, "encode_stream", None)
            if stream is None and len(texts) > FLUSH_EVERY and len(plan) > 1:
                from embedscope.models.planned import LocalPlanned

                stream = LocalPlanned(self.encoder).encode_stream  # the same batches, stored as they finish
                batch_size = self._batch_size(batch_size)
            if stream is not None:
                for n, (idx, vectors) in enumerate(
                    stream(texts, role=role, batch_size=batch_size, show_progress=show_progress)
                ):
                    if list(idx) != plan[n]:
                        raise RuntimeError(f"{self.encoder.name}: the engine's batches differ from its batch plan")
                    yield n, vectors
                return
            out = np.asarray(
                self.encoder.encode(texts, role=role, batch_size=batch_size, show_progress=show_progress),
                dtype=np.float32,
            )
            for n, batch in enumerate(plan):
                yield n, out[batch]
            return
        batches = [[texts[i] for i in plan[n]] for n in missing]
        many = getattr(self.encoder, "encode_batches", None)
        if many is not None:
            yield from zip(missing, many(batches, role=role))
            return
        # not an engine: a backend (a BaseEncoder), which encodes one batch with encode_batch
        backend = cast(_EncodesBatch, self.encoder)
        for n, batch_texts in zip(missing, batches):
            yield n, backend.encode_batch(batch_texts, role=role)


def with_cache(encoder: Encoder, cache: EmbeddingCache | None) -> Encoder:
    """``encoder`` behind ``cache`` (as it is without a cache, when it is cached already, or when it has no
    fingerprint to key its vectors by: then a warning says the cache is off for it)."""
    if cache is None or isinstance(encoder, CachedEncoder):
        return encoder
    if encoder.fingerprint is None:
        logger.warning(
            "%s: no fingerprint (give fingerprint=... to evaluate, or a model by name or path): "
            "running with the embedding cache off",
            encoder.name,
        )
        return encoder
    return CachedEncoder(encoder, cache)


def cache_stats(model: Any) -> CacheStats | None:
    """How many texts a cached encoder served and encoded (None for any other model)."""
    return model.stats if isinstance(model, CachedEncoder) else None


class NotCached(Exception):
    """A :class:`ServedOnly` encoder was asked for vectors its cache does not hold."""


class ServedOnly:
    """An encoder's identity with no way to encode: wrapped in a :class:`CachedEncoder`, it is served every batch its
    cache holds and raises :class:`NotCached` for any other (vectors compared from what earlier runs encoded, never
    encoded again: a screen's fidelity). Nothing of the wrapped encoder loads.

    >>> import tempfile
    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> cache = EmbeddingCache(tempfile.mkdtemp())
    >>> _ = CachedEncoder(KeywordEncoder(["cat"]), cache).encode(["a cat"], role="query")
    >>> served = CachedEncoder(ServedOnly(KeywordEncoder(["cat"])), cache)
    >>> served.encode(["a cat"], role="query").tolist()
    [[1.0]]
    >>> served.encode(["a dog"], role="query")
    Traceback (most recent call last):
    ...
    embedscope.models.cache.NotCached: fake/keyword-encoder: 1 query texts were never encoded into the cache
    """

    def __init__(self, encoder: Encoder) -> None:
        self.wrapped = encoder

    @property
    def name(self) -> str:
        return self.wrapped.name

    @property
    def revision(self) -> str:
        return self.wrapped.revision

    @property
    def fingerprint(self) -> str | None:
        return self.wrapped.fingerprint

    @property
    def similarity(self) -> Similarity:
        return self.wrapped.similarity

    @property
    def prompts(self) -> dict[str, str]:
        return self.wrapped.prompts

    def __getattr__(self, item: str) -> Any:
        """The wrapped encoder's metadata (its device, which sets the batches a call forms; its backend, which says
        whether its vectors are sparse); never a way to encode."""
        if item.startswith(("encode", "_")) or item == "wrapped":
            raise AttributeError(item)
        return getattr(self.wrapped, item)

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        raise NotCached(f"{self.name}: {len(texts)} {role} texts were never encoded into the cache")

    def encode_batch(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        return self.encode(texts, role=role)
