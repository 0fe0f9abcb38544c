"""Looking after the embedding cache: list its stores, verify their vectors, clear them.

One store per encoder fingerprint (see :mod:`embedscope.models.cache`). ``model`` selects the
stores of one model: its name as results file it, or the start of a fingerprint.

>>> import tempfile
>>> from embedscope.models.cache import CachedEncoder, EmbeddingCache
>>> from embedscope.testing.fakes import HashEncoder
>>> folder = tempfile.mkdtemp()
>>> _ = CachedEncoder(HashEncoder(dim=4), EmbeddingCache(folder)).encode(["a", "b"], role="query")
>>> [(s.model, s.vectors, s.dim) for s in list_stores(folder)]
[('fake/hash-encoder', 2, 4)]
>>> [(r.model, r.checked, r.ok) for r in verify_stores(folder)]
[('fake/hash-encoder', 2, True)]
>>> [s.model for s in clear_stores(folder)], list_stores(folder)
(['fake/hash-encoder'], [])
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.cache import EmbeddingCache, is_corruption, quarantine, store_dim, store_folders

_ROWS = 4096  # vectors read at once while verifying


@dataclass
class StoreInfo:
    """One fingerprint's store: its model, how many vectors it holds and its size on disk."""

    fingerprint: str
    path: Path
    model: str
    revision: str
    vectors: int | None  # None: the store cannot be read
    dim: int | None
    bytes: int
    error: str = ""


@dataclass
class VerifyReport:
    """What :func:`verify_stores` found in one store."""

    fingerprint: str
    path: Path
    model: str
    checked: int = 0
    wrong_length: int = 0
    non_finite: int = 0
    problems: list[str] = field(default_factory=list)
    repaired: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def _store_paths(root: Path, pattern: str = "*.sqlite") -> list[Path]:
    """The files matching ``pattern`` in the store folders of the cache folder ``root`` (both layouts)."""
    return sorted(p for folder in store_folders(root) for p in folder.glob(f"??/{pattern}") if p.is_file())


def _size(path: Path) -> int:
    return sum(os.path.getsize(f"{path}{s}") for s in ("", "-wal", "-shm") if os.path.exists(f"{path}{s}"))


def cache_folder(directory: str | Path | None = None) -> Path:
    """The cache folder (``directory``, else ``$EMBEDSCOPE_CACHE`` or ``~/.cache/embedscope``); one that is a
    file is a :class:`ConfigError`."""
    root = EmbeddingCache(directory).directory
    if root.exists() and not root.is_dir():
        raise ConfigError(
            f"{root}: is a file, not an embedding cache folder (the cache folder setting or $EMBEDSCOPE_CACHE)"
        )
    return root


def _describe(path: Path) -> StoreInfo:
    fingerprint = path.stem
    info = StoreInfo(fingerprint, path, "(unknown)", "", None, None, _size(path))
    try:
        conn = sqlite3.connect(path, timeout=30)
        try:
            row = conn.execute("SELECT value FROM meta WHERE name = 'encoder'").fetchone()
            if row:
                meta = json.loads(row[0])
                info.model, info.revision = str(meta.get("name", info.model)), str(meta.get("revision", ""))
            info.vectors = int(conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
            info.dim = store_dim(conn)
        finally:
            conn.close()
    except (sqlite3.DatabaseError, json.JSONDecodeError) as e:
        info.error = str(e).splitlines()[0] if str(e) else type(e).__name__
    return info


def _selected(info: StoreInfo, model: str | None) -> bool:
    return model is None or info.model == model or (len(model) >= 4 and info.fingerprint.startswith(model))


def list_stores(directory: str | Path | None = None, model: str | None = None) -> list[StoreInfo]:
    """The stores in the cache folder (default: the one ``run`` uses), optionally of one model."""
    return [info for info in map(_describe, _store_paths(cache_folder(directory))) if _selected(info, model)]


def _check_vectors(conn: sqlite3.Connection, report: VerifyReport, dim: int | None) -> list[bytes]:
    """Count wrong-length and non-finite vectors; return their keys."""
    bad: list[bytes] = []
    cursor = conn.execute("SELECT key, vec FROM vectors")
    while rows := cursor.fetchmany(_ROWS):
        for key, blob in rows:
            report.checked += 1
            if not blob or len(blob) % 4 or (dim is not None and len(blob) != 4 * dim):
                report.wrong_length += 1
                bad.append(bytes(key))
            elif not np.isfinite(np.frombuffer(blob, dtype=np.float32)).all():
                report.non_finite += 1
                bad.append(bytes(key))
    return bad


def _verify(info: StoreInfo, repair: bool) -> VerifyReport:
    report = VerifyReport(info.fingerprint, info.path, info.model)
    damage = ""
    try:
        conn = sqlite3.connect(info.path, timeout=30)
        try:
            check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)")]
            if check != ["ok"]:
                damage = check[0]
            else:
                bad = _check_vectors(conn, report, store_dim(conn))
                if repair and bad:
                    with conn:
                        for start in range(0, len(bad), 900):
                            part = bad[start : start + 900]
                            conn.execute(f"DELETE FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
                    report.repaired = f"dropped {len(bad)} vector(s); their texts are encoded again on the next run"
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        if not is_corruption(e):
            report.problems.append(f"cannot be read: {e}")
            return report
        damage = str(e).splitlines()[0] if str(e) else type(e).__name__
    if damage:
        report.problems.append(f"the database is damaged ({damage})")
        if repair:
            target = quarantine(info.path, damage)
            report.repaired = f"moved to {target.name}" if target else "already moved away"
        return report
    if report.wrong_length:
        report.problems.append(f"{report.wrong_length} vector(s) of the wrong length")
    if report.non_finite:
        report.problems.append(f"{report.non_finite} vector(s) with NaN or infinite values")
    return report


def verify_stores(
    directory: str | Path | None = None, model: str | None = None, repair: bool = False
) -> list[VerifyReport]:
    """Check every store: SQLite's integrity check, then each vector's length and finiteness.

    With ``repair``, bad vectors are deleted and a damaged store is quarantined (renamed
    ``<name>.corrupt-<time>``); either way their texts are encoded again on the next run.
    """
    return [_verify(info, repair) for info in list_stores(directory, model)]


def clear_stores(directory: str | Path | None = None, model: str | None = None) -> list[StoreInfo]:
    """Delete the stores (all, or one model's) with their ``-wal``/``-shm`` files, and the damaged stores
    moved aside (``<fingerprint>.sqlite.corrupt-<time>``: all, or those of ``model``'s fingerprints or of a
    fingerprint prefix); return what was deleted. A run using a deleted store goes on in a new one."""
    removed = list_stores(directory, model)
    fingerprints = {info.fingerprint for info in removed}
    for path in _store_paths(cache_folder(directory), "*.sqlite.corrupt-*"):
        fingerprint = path.name.split(".sqlite.corrupt-")[0]
        if path.name.endswith(("-wal", "-shm")):
            continue  # removed with their store below
        if model is None or fingerprint in fingerprints or (len(model) >= 4 and fingerprint.startswith(model)):
            removed.append(StoreInfo(fingerprint, path, "(damaged, moved aside)", "", None, None, _size(path)))
    for info in removed:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(f"{info.path}{suffix}")
            except FileNotFoundError:
                pass
    return removed
