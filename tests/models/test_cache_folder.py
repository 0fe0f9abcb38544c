"""The embedding cache folder (issue 21): one rule for ``--cache-dir`` and ``$EMBEDSCOPE_CACHE``, older
layouts still read, ``cache clear`` takes damaged stores too, and a store deleted during a run loses
nothing that the run encodes afterwards."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.models import cache as cache_module
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.models.cache_admin import clear_stores, list_stores
from embedscope.testing.fakes import HashEncoder

TEXTS = [f"text number {i}" for i in range(40)]
SRC = str(Path(embedscope.__file__).resolve().parents[1])


def _vectors(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        count = int(conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
    conn.close()
    return count


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``embedscope ARGV`` in another process (this worktree's code)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "embedscope", *argv], capture_output=True, text=True, env=env)


def test_cache_dir_and_environment_name_the_same_folder(tmp_path, monkeypatch, capsys):
    """The issue's case: stores written under $EMBEDSCOPE_CACHE=X were not listed by --cache-dir X."""
    monkeypatch.setenv("EMBEDSCOPE_CACHE", str(tmp_path))
    enc = HashEncoder(dim=8)
    CachedEncoder(enc, EmbeddingCache()).encode(TEXTS, role="document")
    assert EmbeddingCache().path(enc.fingerprint) == EmbeddingCache(tmp_path).path(enc.fingerprint)
    assert EmbeddingCache(tmp_path).path(enc.fingerprint) == tmp_path / "embeddings" / enc.fingerprint[:2] / (
        f"{enc.fingerprint}.sqlite"
    )
    monkeypatch.delenv("EMBEDSCOPE_CACHE")
    assert main(["cache", "list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fake/hash-encoder" in out and "| 40 |" in out


def test_stores_where_cache_dir_put_them_before_are_still_used(tmp_path):
    enc = HashEncoder(dim=8)
    cold = CachedEncoder(enc, EmbeddingCache(tmp_path)).encode(TEXTS, role="document")
    shutil.move(tmp_path / "embeddings" / enc.fingerprint[:2], tmp_path / enc.fingerprint[:2])  # the older layout
    warm = CachedEncoder(enc, EmbeddingCache(tmp_path))
    assert warm.encode(TEXTS, role="document").tobytes() == cold.tobytes() and warm.stats.encoded == 0
    assert [(s.model, s.vectors) for s in list_stores(tmp_path)] == [("fake/hash-encoder", 40)]
    assert not (tmp_path / "embeddings" / enc.fingerprint[:2]).exists()


def test_cache_list_of_a_file_is_an_error(tmp_path, capsys):
    path = tmp_path / "file.txt"
    path.write_text("x")
    for command in ("list", "verify", "clear"):
        assert main(["cache", command, "--cache-dir", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert (
            err
            == f"embedscope: error: {path}: is a file, not an embedding cache folder (the cache folder setting or "
            + ("$EMBEDSCOPE_CACHE)")
        )
    assert path.read_text() == "x"


def test_clear_removes_damaged_stores_moved_aside(tmp_path, capsys):
    enc = HashEncoder(dim=8)
    cache = EmbeddingCache(tmp_path)
    path = cache.path(enc.fingerprint)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    CachedEncoder(enc, cache).encode(TEXTS, role="document")  # quarantines it, encodes into a new store
    cache._forget(enc.fingerprint)
    assert len(list(path.parent.glob("*.corrupt-*"))) == 1
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "deleted 2 store(s) (1 damaged, moved aside earlier), 40 vectors" in capsys.readouterr().out
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_clear_by_model_takes_only_that_models_damaged_stores(tmp_path):
    a, b = HashEncoder(dim=8), HashEncoder(dim=4)
    cache = EmbeddingCache(tmp_path)
    for enc in (a, b):
        CachedEncoder(enc, cache).encode(TEXTS, role="document")
        cache._forget(enc.fingerprint)
    damaged = cache.path(b.fingerprint).with_name(f"{b.fingerprint}.sqlite.corrupt-20250101T000000-1")
    damaged.write_bytes(b"x")
    removed = clear_stores(tmp_path, model=a.fingerprint[:8])
    assert [s.fingerprint for s in removed] == [a.fingerprint] and damaged.exists()
    assert [s.fingerprint for s in clear_stores(tmp_path, model=b.fingerprint[:8])] == [b.fingerprint] * 2
    assert not damaged.exists()


class ClearingEncoder(HashEncoder):
    """Runs ``embedscope cache clear`` in another process when its third batch is encoded."""

    def __init__(self, folder: Path) -> None:
        super().__init__(dim=8)
        self.folder, self.batches = folder, 0

    def encode_batch(self, texts, *, role):
        self.batches += 1
        if self.batches == 3:
            done = _cli("cache", "clear", "--cache-dir", str(self.folder))
            assert done.returncode == 0 and "deleted 1 store(s), 8 vectors" in done.stdout, done.stderr
        return super().encode_batch(texts, role=role)


@pytest.mark.slow
def test_clear_during_a_run_keeps_what_the_run_encodes_afterwards(tmp_path, monkeypatch, caplog):
    """The issue's case: vectors went into the deleted store file (exit 0, no message)."""
    monkeypatch.setattr(cache_module, "FLUSH_EVERY", 4)
    enc = ClearingEncoder(tmp_path)
    cached = CachedEncoder(enc, EmbeddingCache(tmp_path))
    with caplog.at_level(logging.WARNING, logger="embedscope.models.cache"):
        cold = cached.encode(TEXTS, role="document", batch_size=4)
    assert enc.batches == 10
    path = EmbeddingCache(tmp_path).path(enc.fingerprint)
    assert _vectors(path) == 32  # batches 3 to 10; batches 1 and 2 were flushed before the clear deleted them
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"embedding cache {path} was deleted or moved while this run used it" in warning
    warm = CachedEncoder(HashEncoder(dim=8), EmbeddingCache(tmp_path))
    assert warm.encode(TEXTS, role="document", batch_size=4).tobytes() == cold.tobytes()
    assert (warm.stats.encoded, warm.stats.hits) == (8, 32)  # the plan and description survived too
    assert [s.model for s in list_stores(tmp_path)] == ["fake/hash-encoder"]


@pytest.mark.slow
def test_clear_between_two_calls_of_one_process(tmp_path):
    cached = CachedEncoder(HashEncoder(dim=8), EmbeddingCache(tmp_path))
    cached.encode(TEXTS[:20], role="document")
    assert _cli("cache", "clear", "--cache-dir", str(tmp_path)).returncode == 0
    second = cached.encode(TEXTS[20:], role="document")
    assert _vectors(EmbeddingCache(tmp_path).path(cached.fingerprint)) == 20
    assert np.isfinite(second).all()
