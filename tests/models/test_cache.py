"""The embedding cache: keys, persistence, role separation, crash and concurrency safety."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import numpy as np
import pytest

from embedscope.models.cache import CachedEncoder, EmbeddingCache, text_key
from embedscope.testing.fakes import HashEncoder, KeywordEncoder


def test_second_run_encodes_nothing_and_returns_identical_vectors(tmp_path):
    texts = ["a cat", "a dog", "fish fish", "a cat"]
    first = CachedEncoder(KeywordEncoder(["cat", "dog", "fish"]), EmbeddingCache(tmp_path))
    cold = first.encode(texts, role="document")
    assert first.stats.encoded == 4 and first.stats.hits == 0
    inner = KeywordEncoder(["cat", "dog", "fish"])
    second = CachedEncoder(inner, EmbeddingCache(tmp_path))  # a new process would see the same files
    warm = second.encode(texts, role="document")
    assert second.stats.encoded == 0 and second.stats.hits == 4
    assert inner.calls == []
    assert warm.tobytes() == cold.tobytes()


def test_query_vector_is_never_reused_for_identical_document_text(tmp_path):
    enc = KeywordEncoder(["cat"], prompts={"query": "cat "})  # the query prompt changes the vector
    cached = CachedEncoder(enc, EmbeddingCache(tmp_path))
    q = cached.encode(["cat"], role="query")
    d = cached.encode(["cat"], role="document")
    assert q.tolist() == [[2.0]] and d.tolist() == [[1.0]]
    assert cached.stats.encoded == 2


def test_key_covers_role_prompt_and_text():
    keys = {text_key("query", "", "x"), text_key("document", "", "x"), text_key("query", "p", "x"),
            text_key("query", "", "y"), text_key("query", "a", "bc"), text_key("query", "ab", "c")}
    assert len(keys) == 6


def test_different_fingerprints_do_not_share_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path)
    a = CachedEncoder(HashEncoder(dim=4), cache)
    b = CachedEncoder(HashEncoder(dim=8), cache)
    assert a.encode(["t"], role="query").shape == (1, 4)
    assert b.encode(["t"], role="query").shape == (1, 8)
    assert b.stats.encoded == 1


def test_only_missing_texts_are_encoded(tmp_path):
    inner = KeywordEncoder(["cat", "dog"])
    cached = CachedEncoder(inner, EmbeddingCache(tmp_path))
    cached.encode(["cat", "dog"], role="document")
    out = cached.encode(["dog", "cat dog", "cat"], role="document")
    assert inner.calls[-1] == ("document", ["cat dog"])
    assert out.tolist() == [[0, 1], [1, 1], [1, 0]]


def test_duplicates_in_a_cold_run_get_the_stored_vector(tmp_path):
    class Drifting(HashEncoder):  # returns a slightly different vector for each occurrence
        def encode(self, texts, *, role, batch_size=32, show_progress=False):
            out = super().encode(texts, role=role)
            return out + np.arange(len(texts), dtype=np.float32)[:, None] * 1e-6

    cache = EmbeddingCache(tmp_path)
    cold = CachedEncoder(Drifting(), cache).encode(["x", "y", "x"], role="document")
    warm = CachedEncoder(Drifting(), cache).encode(["x", "y", "x"], role="document")
    assert cold.tobytes() == warm.tobytes()
    assert cold[0].tobytes() == cold[2].tobytes()


def test_empty_input(tmp_path):
    cached = CachedEncoder(HashEncoder(), EmbeddingCache(tmp_path))
    assert cached.encode([], role="query").shape[0] == 0


def test_interrupted_write_leaves_a_consistent_cache(tmp_path):
    cache = EmbeddingCache(tmp_path)
    enc = HashEncoder(dim=4)
    cache.put(enc.fingerprint, [b"k1"], np.ones((1, 4), np.float32))
    conn = cache._connect(enc.fingerprint)

    def rows():
        yield (b"k2", np.ones(4, np.float32).tobytes())
        raise KeyboardInterrupt  # the process is interrupted in the middle of a write

    with pytest.raises(KeyboardInterrupt):
        with conn:
            conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows())
    fresh = EmbeddingCache(tmp_path)
    assert set(fresh.get(enc.fingerprint, [b"k1", b"k2"])) == {b"k1"}  # the half-written batch is gone


def _writer(args):
    folder, worker = args
    enc = HashEncoder(dim=8)
    cached = CachedEncoder(enc, EmbeddingCache(folder))
    texts = [f"text {i}" for i in range(300)]  # every worker writes the same keys at once
    return cached.encode(texts[worker::2] + texts, role="document").tobytes()


def test_two_processes_share_one_cache(tmp_path):
    with mp.get_context("spawn").Pool(2) as pool:
        outs = pool.map(_writer, [(str(tmp_path), 0), (str(tmp_path), 1)])
    enc = HashEncoder(dim=8)
    expected = enc.encode([f"text {i}" for i in range(300)], role="document")
    assert EmbeddingCache(tmp_path).count(enc.fingerprint) == 300
    for out in outs:
        vecs = np.frombuffer(out, dtype=np.float32).reshape(-1, 8)[-300:]
        np.testing.assert_array_equal(vecs, expected)
    with sqlite3.connect(next(tmp_path.rglob("*.sqlite"))) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
