"""The embedding cache: keys, persistence, role separation, crash and concurrency safety."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import numpy as np
import pytest

from embedscope.models.cache import CachedEncoder, CacheStats, EmbeddingCache, batch_vector_keys, text_key
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
    keys = {
        text_key("query", "", "x"),
        text_key("document", "", "x"),
        text_key("query", "p", "x"),
        text_key("query", "", "y"),
        text_key("query", "a", "bc"),
        text_key("query", "ab", "c"),
    }
    assert len(keys) == 6


def test_different_fingerprints_do_not_share_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path)
    a = CachedEncoder(HashEncoder(dim=4), cache)
    b = CachedEncoder(HashEncoder(dim=8), cache)
    assert a.encode(["t"], role="query").shape == (1, 4)
    assert b.encode(["t"], role="query").shape == (1, 8)
    assert b.stats.encoded == 1


def test_a_text_cached_in_another_call_is_encoded_again_as_the_uncached_call_would(tmp_path):
    inner = KeywordEncoder(["cat", "dog"])
    cached = CachedEncoder(inner, EmbeddingCache(tmp_path))
    cached.encode(["cat", "dog"], role="document")
    out = cached.encode(["dog", "cat dog", "cat"], role="document")
    assert inner.calls[-1] == ("document", ["dog", "cat dog", "cat"])  # its vectors came from other batches
    assert out.tolist() == [[0, 1], [1, 1], [1, 0]]
    assert cached.stats.encoded == 5 and cached.stats.hits == 0


def test_duplicates_keep_their_own_vectors_cold_and_warm(tmp_path):
    class Drifting(HashEncoder):  # returns a slightly different vector for each occurrence
        def encode(self, texts, *, role, batch_size=32, show_progress=False):
            out = super().encode(texts, role=role)
            return out + np.arange(len(texts), dtype=np.float32)[:, None] * 1e-6

    cache = EmbeddingCache(tmp_path)
    cold = CachedEncoder(Drifting(), cache).encode(["x", "y", "x"], role="document")
    warm = CachedEncoder(Drifting(), cache).encode(["x", "y", "x"], role="document")
    assert cold.tobytes() == warm.tobytes() == Drifting().encode(["x", "y", "x"], role="document").tobytes()


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
    return cached.encode(texts, role="document").tobytes()  # the same call in both processes


@pytest.mark.slow
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


# -- damaged stores are quarantined and re-encoded ----------------------------------------------

TEXTS = [f"text number {i} " * 20 for i in range(3000)]  # a store of several hundred pages


def _damage(path, how: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    conn.close()
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if how == "truncated":
            f.truncate(size // 2)
        elif how == "overwritten pages":
            f.seek(4096 * 3)
            f.write(bytes(range(256)) * 16 * 20)
        else:  # the header
            f.write(b"not a database" * 8)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["truncated", "overwritten pages", "overwritten header"])
def test_a_damaged_store_is_quarantined_and_its_texts_encoded_again(tmp_path, caplog, how):
    enc = HashEncoder(dim=64)
    cold = CachedEncoder(enc, EmbeddingCache(tmp_path)).encode(TEXTS, role="document")
    path = EmbeddingCache(tmp_path).path(enc.fingerprint)
    _damage(path, how)
    with pytest.raises(sqlite3.DatabaseError):  # what every later run hit before
        with sqlite3.connect(path) as conn:
            conn.execute("SELECT COUNT(*), SUM(length(vec)) FROM vectors").fetchall()
    cached = CachedEncoder(HashEncoder(dim=64), EmbeddingCache(tmp_path))
    with caplog.at_level("WARNING", logger="embedscope.models.cache"):
        again = cached.encode(TEXTS, role="document")
    assert again.tobytes() == cold.tobytes() and cached.stats.encoded == len(TEXTS)
    [moved] = [m for m in path.parent.glob(f"{path.name}.corrupt-*") if not m.name.endswith(("-wal", "-shm"))]
    [warning] = [r.getMessage() for r in caplog.records]  # one line, naming the quarantined file
    assert "corrupt" in warning and "\n" not in warning and moved.name in warning
    warm = CachedEncoder(HashEncoder(dim=64), EmbeddingCache(tmp_path))
    assert warm.encode(TEXTS, role="document").tobytes() == cold.tobytes() and warm.stats.encoded == 0


def test_a_vector_of_the_wrong_length_is_a_miss_and_is_replaced(tmp_path, caplog):
    enc = HashEncoder(dim=8)
    cold = CachedEncoder(enc, EmbeddingCache(tmp_path)).encode(["a", "b", "c"], role="query", batch_size=1)
    path = EmbeddingCache(tmp_path).path(enc.fingerprint)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (b"\0" * 12, *batch_vector_keys("query", "", ["b"])))
    conn.close()
    cached = CachedEncoder(HashEncoder(dim=8), EmbeddingCache(tmp_path))
    with caplog.at_level("WARNING", logger="embedscope.models.cache"):
        out = cached.encode(["a", "b", "c"], role="query", batch_size=1)
    assert out.tobytes() == cold.tobytes()
    assert (cached.stats.hits, cached.stats.encoded) == (2, 1)
    assert "wrong length" in caplog.text
    with sqlite3.connect(path) as conn:
        lengths = [n for (n,) in conn.execute("SELECT length(vec) FROM vectors")]
    conn.close()
    assert lengths == [32, 32, 32]  # the row was replaced by the re-encoded vector


def test_a_lock_is_not_taken_for_damage(tmp_path):
    enc = HashEncoder(dim=4)
    cache = EmbeddingCache(tmp_path, timeout=0.05)
    cache.put(enc.fingerprint, [b"k"], np.ones((1, 4), np.float32))
    other = sqlite3.connect(cache.path(enc.fingerprint), timeout=0.05)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError):
            cache.put(enc.fingerprint, [b"k2"], np.ones((1, 4), np.float32))
    finally:
        other.rollback()
        other.close()
    assert not list(tmp_path.rglob("*.corrupt-*"))
    assert cache.count(enc.fingerprint) == 1


# -- embedscope cache list | verify | clear -----------------------------------------------------


def _two_models(folder):
    cache = EmbeddingCache(folder)
    CachedEncoder(HashEncoder(dim=8), cache).encode([f"t{i}" for i in range(50)], role="document")
    CachedEncoder(KeywordEncoder(["a"]), cache).encode(["a"], role="query")
    return cache


def test_list_verify_and_clear(tmp_path):
    from embedscope.models.cache_admin import clear_stores, list_stores, verify_stores

    cache = _two_models(tmp_path)
    listed = {s.model: (s.vectors, s.dim) for s in list_stores(tmp_path)}
    assert listed == {"fake/hash-encoder": (50, 8), "fake/keyword-encoder": (1, 1)}
    assert all(r.ok for r in verify_stores(tmp_path))
    with sqlite3.connect(cache.path(HashEncoder(dim=8).fingerprint)) as conn:
        conn.execute("UPDATE vectors SET vec = x'0000' WHERE rowid IN (SELECT rowid FROM vectors LIMIT 2)")
        conn.execute(
            "UPDATE vectors SET vec = ? WHERE rowid IN (SELECT rowid FROM vectors LIMIT 1 OFFSET 5)",
            (np.full(8, np.nan, np.float32).tobytes(),),
        )
    conn.close()
    [bad] = verify_stores(tmp_path, model="fake/hash-encoder")
    assert (bad.checked, bad.wrong_length, bad.non_finite, bad.ok) == (50, 2, 1, False)
    [fixed] = verify_stores(tmp_path, model="fake/hash-encoder", repair=True)
    assert "dropped 3" in fixed.repaired
    assert [r.ok for r in verify_stores(tmp_path)] == [True, True]
    assert [s.model for s in clear_stores(tmp_path, model="fake/keyword-encoder")] == ["fake/keyword-encoder"]
    assert [s.model for s in list_stores(tmp_path)] == ["fake/hash-encoder"]
    clear_stores(tmp_path)
    assert list_stores(tmp_path) == [] and not list(tmp_path.rglob("*.sqlite*"))


@pytest.mark.slow
def test_verify_finds_and_repairs_a_damaged_store(tmp_path):
    from embedscope.models.cache_admin import list_stores, verify_stores

    enc = HashEncoder(dim=64)
    CachedEncoder(enc, EmbeddingCache(tmp_path)).encode(TEXTS, role="document")
    _damage(EmbeddingCache(tmp_path).path(enc.fingerprint), "overwritten pages")
    [report] = verify_stores(tmp_path)
    assert not report.ok and "damaged" in report.problems[0]
    [report] = verify_stores(tmp_path, repair=True)
    assert report.repaired.startswith("moved to") and list_stores(tmp_path) == []


@pytest.mark.slow
def test_cache_cli(tmp_path, capsys):
    from embedscope.cli.main import main

    cache = _two_models(tmp_path)
    assert main(["cache", "list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| fake/hash-encoder |" in out and "| 50 | 8 |" in out and "fake/keyword-encoder" in out
    assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 0
    with sqlite3.connect(cache.path(HashEncoder(dim=8).fingerprint)) as conn:
        conn.execute("UPDATE vectors SET vec = x'0000' WHERE rowid = 1")
    conn.close()
    assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 1
    assert "1 vector(s) of the wrong length" in capsys.readouterr().out
    assert main(["cache", "clear", "--cache-dir", str(tmp_path), "--model", "fake/hash-encoder"]) == 0
    assert "deleted 1 store(s), 50 vectors" in capsys.readouterr().out
    assert main(["cache", "list", "--cache-dir", str(tmp_path), "--model", "fake/hash-encoder"]) == 0
    assert "no stores" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The numbers never depend on what the cache holds (vectors depend on their batch, as with padding)


def test_a_warm_cache_from_another_call_changes_no_bit(tmp_path):
    from embedscope.testing.fakes import PaddedHashEncoder

    first = [f"text number {i}" + "!" * (i % 7) for i in range(50)]
    second = first[::-1][:30] + ["a new text", "another one that is longer"]
    uncached = PaddedHashEncoder().encode(second, role="document", batch_size=8)
    cached = CachedEncoder(PaddedHashEncoder(), EmbeddingCache(tmp_path))
    cached.encode(first, role="document", batch_size=8)  # the cache now holds 30 of them, from other batches
    got = cached.encode(second, role="document", batch_size=8)
    assert got.tobytes() == uncached.tobytes()
    again = CachedEncoder(PaddedHashEncoder(), EmbeddingCache(tmp_path))
    assert again.encode(second, role="document", batch_size=8).tobytes() == uncached.tobytes()
    assert again.stats.encoded == 0  # a warm call is served whole


def test_a_plan_stored_in_another_batch_order_is_planned_again_and_changes_no_bit(tmp_path, monkeypatch):
    """A call cached when plans kept ties in input order: its stored plan is not reused (it is keyed by the order
    plans follow), so the warm call batches, and encodes, as an uncached one does today."""
    import embedscope.models.base as base
    import embedscope.models.cache as cache
    from embedscope.testing.fakes import PaddedHashEncoder

    texts = [f"text {i % 10}" + "!" * (i % 3) for i in range(40)]  # many equal lengths
    uncached = PaddedHashEncoder().encode(texts, role="document", batch_size=8)
    stable = lambda lengths: sorted(range(len(lengths)), key=lambda i: -lengths[i])  # noqa: E731
    assert base.batches(stable([len(t) for t in texts]), 8) != base.batches(base.length_order(texts), 8)
    with monkeypatch.context() as m:  # the cache as an older embedscope wrote it
        m.setattr(base, "order_by_length", stable)
        m.setattr(cache, "BATCH_ORDER", "stable")
        old = CachedEncoder(PaddedHashEncoder(), EmbeddingCache(tmp_path)).encode(texts, role="document", batch_size=8)
    assert old.tobytes() != uncached.tobytes()  # other batches: other bits
    warm = CachedEncoder(PaddedHashEncoder(), EmbeddingCache(tmp_path))
    assert warm.encode(texts, role="document", batch_size=8).tobytes() == uncached.tobytes()
    assert warm.stats.encoded > 0  # the batches that differ are encoded as today's plan forms them


def test_a_batch_size_change_shares_only_identical_batches(tmp_path):
    from embedscope.testing.fakes import PaddedHashEncoder

    texts = [f"t{i}" * (i % 5 + 1) for i in range(20)]
    cached = CachedEncoder(PaddedHashEncoder(), EmbeddingCache(tmp_path))
    cached.encode(texts, role="query", batch_size=4)
    got = cached.encode(texts, role="query", batch_size=8)
    assert got.tobytes() == PaddedHashEncoder().encode(texts, role="query", batch_size=8).tobytes()
    assert cached.stats.hits == 4  # only an identical batch is shared: the last four texts, in both plans


def test_a_row_encoded_in_another_batch_of_the_same_padded_length_is_encoded_again(tmp_path):
    """A row can depend on its batch's shape beyond its padded length (a transformer's on some CPUs:
    ``bench/bench_row_invariance.py``), so the cache serves a vector only in its own batch: a subset call whose
    batches share padded lengths with the full call's serves none of them, and the full call keeps its bits."""
    from embedscope.testing.fakes import RowPaddedHashEncoder

    full = [f"document {i:02d} " + "x" * (20 if i % 2 else i % 11) for i in range(60)]
    subset = full[5:45:3]  # another call: other batches, many of the same padded length
    encoder = RowPaddedHashEncoder(batch_nudge=True)
    plan = encoder.batch_plan([len(t) for t in full], 8)
    padded = {full[i]: max(len(full[j]) for j in b) for b in plan for i in b}
    sub_plan = encoder.batch_plan([len(t) for t in subset], 8)
    assert any(padded[subset[i]] == max(len(subset[j]) for j in b) for b in sub_plan for i in b)  # the case is real
    uncached = encoder.encode(full, role="document", batch_size=8)
    cached = CachedEncoder(RowPaddedHashEncoder(batch_nudge=True), EmbeddingCache(tmp_path))
    cached.encode(subset, role="document", batch_size=8)
    cached.stats = CacheStats()  # count the full call alone
    assert cached.encode(full, role="document", batch_size=8).tobytes() == uncached.tobytes()
    assert (cached.stats.hits, cached.stats.encoded) == (0, len(full))


def test_an_interrupted_call_resumes_with_its_stored_batches_bit_for_bit(tmp_path, monkeypatch):
    from embedscope.models import cache as cache_module
    from embedscope.models.planned import LocalPlanned
    from embedscope.testing.fakes import PaddedHashEncoder

    monkeypatch.setattr(cache_module, "FLUSH_EVERY", 4)
    texts = [f"document {i} " + "x" * (i % 11) for i in range(40)]

    class Interrupted(LocalPlanned):
        def _run(self, batches, role):
            for n, vectors in enumerate(super()._run(batches, role)):
                if n == 5:
                    raise KeyboardInterrupt  # the process dies in the middle of the call
                yield vectors

    with pytest.raises(KeyboardInterrupt):
        CachedEncoder(Interrupted(PaddedHashEncoder()), EmbeddingCache(tmp_path)).encode(
            texts, role="document", batch_size=4
        )
    sent: list[int] = []

    class Counting(LocalPlanned):
        def _run(self, batches, role):
            sent.extend(len(b) for b in batches)
            yield from super()._run(batches, role)

    resumed = CachedEncoder(Counting(PaddedHashEncoder()), EmbeddingCache(tmp_path))
    got = resumed.encode(texts, role="document", batch_size=4)
    assert resumed.stats.hits == 20 and sum(sent) == 20  # 5 batches of 4 were stored before the interruption
    assert got.tobytes() == PaddedHashEncoder().encode(texts, role="document", batch_size=4).tobytes()


def test_an_object_without_known_batches_is_cached_as_one_call(tmp_path):
    from embedscope.models.wrap import as_encoder

    class Mine:
        def __init__(self):
            self.calls = []

        def encode(self, texts, batch_size=32):
            self.calls.append(list(texts))
            return np.asarray([[len(t), len(texts)] for t in texts], dtype=np.float32)  # depends on the call

    obj = Mine()
    cached = CachedEncoder(as_encoder(obj, fingerprint="mine-v1"), EmbeddingCache(tmp_path))
    cached.encode(["a", "bb"], role="document")
    out = cached.encode(["bb", "ccc", "a"], role="document")
    assert obj.calls[-1] == ["bb", "ccc", "a"] and out[:, 1].tolist() == [3, 3, 3]
    cached.encode(["bb", "ccc", "a"], role="document")
    assert len(obj.calls) == 2
