"""An interrupted run loses at most the last ~1,000 texts: SIGKILL during corpus encoding, then resume.

The encoder here is batch-sensitive (each vector is nudged by a hash of its whole batch), so the
resumed run gives the uninterrupted run's scores only if it encodes exactly the same batches.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from embedscope.models import cache as cache_module
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.testing.fakes import HashEncoder

N_DOCS, N_QUERIES = 5000, 60

SCRIPT = textwrap.dedent('''
    import hashlib, sys, time
    import numpy as np
    from embedscope import evaluate
    from embedscope.models.batching import encode_sorted
    from embedscope.testing.fakes import HashEncoder

    data, output, cache, log, delay = sys.argv[1:6]

    class SlowBatchSensitive(HashEncoder):
        """HashEncoder vectors nudged by a hash of the batch; sleeps per document batch."""

        def _encode(self, texts, role, batch_size, show_progress):
            return encode_sorted(texts, lambda b: self._batch(b, role), batch_size=batch_size)

        def _batch(self, batch, role):
            if role == "document":
                time.sleep(float(delay))
            with open(log, "a") as f:
                f.write(f"{role} {len(batch)}\\n")
            seed = int.from_bytes(hashlib.sha256("\\0".join(batch).encode()).digest()[:4], "little")
            return HashEncoder._encode(self, batch, role, len(batch), False) + np.float32(seed % 1000) * 1e-4

    enc = SlowBatchSensitive(dim=32, name="fake/slow-encoder")
    evaluate(enc, [data], output_folder=output, cache=cache, show_progress=False, batch_size=32)
''')


def _corpus(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w") as f:
        for i in range(N_DOCS):
            text = " ".join(rng.choice(words, size=int(rng.integers(3, 40))))
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": f"doc {i} {text}"}) + "\n")
    with open(folder / "queries.jsonl", "w") as f:
        for q in range(N_QUERIES):
            f.write(json.dumps({"_id": f"q{q}", "text": " ".join(rng.choice(words, size=5))}) + "\n")
    (folder / "qrels").mkdir()
    with open(folder / "qrels" / "test.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q in range(N_QUERIES):
            for d in rng.choice(N_DOCS, size=3, replace=False):
                f.write(f"q{q}\td{d}\t1\n")
    return folder


def _run(tmp: Path, name: str, cache: Path, delay: float, script_text: str | None = None) -> subprocess.Popen:
    script = tmp / f"run-{name}.py"
    script.write_text(script_text or SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(cache_module.__file__).parents[2]), os.environ.get("PYTHONPATH")])
        ),
    }
    return subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(tmp / "data"),
            str(tmp / name),
            str(cache),
            str(tmp / f"{name}.log"),
            str(delay),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _documents_encoded(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("document "))


def _texts_encoded(log: Path) -> int:
    return sum(int(line.split()[1]) for line in log.read_text().splitlines())


def _stored(cache: Path) -> int:
    [path] = [p for p in cache.rglob("*.sqlite") if p.name != "data-hashes.sqlite"]  # the vector store alone
    with sqlite3.connect(path) as conn:
        n = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    conn.close()
    return int(n)


def _scores(folder: Path) -> dict:
    [path] = [p for p in folder.rglob("*.json") if p.name != "model_meta.json"]
    return json.loads(path.read_text())["scores"]


@pytest.mark.slow
def test_a_killed_run_resumes_with_every_flushed_vector_and_the_same_results(tmp_path):
    _corpus(tmp_path / "data")
    killed = _run(tmp_path, "killed", tmp_path / "cache", delay=0.02)
    deadline = time.monotonic() + 120
    while _documents_encoded(tmp_path / "killed.log") < 0.6 * N_DOCS:
        assert killed.poll() is None, killed.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    at_kill = _documents_encoded(tmp_path / "killed.log")
    assert at_kill < N_DOCS, "the run finished before it was killed"
    stored = _stored(tmp_path / "cache")
    assert stored >= N_QUERIES + at_kill - 2 * cache_module.FLUSH_EVERY  # lost at most ~1,000 texts
    assert not [p for p in (tmp_path / "killed").rglob("*.json") if p.name != "model_meta.json"]

    resumed = _run(tmp_path, "resumed", tmp_path / "cache", delay=0)
    assert resumed.wait(timeout=120) == 0, resumed.stdout.read().decode()
    assert _texts_encoded(tmp_path / "resumed.log") == N_QUERIES + N_DOCS - stored  # every stored vector reused

    fresh = _run(tmp_path, "fresh", tmp_path / "fresh-cache", delay=0)
    assert fresh.wait(timeout=120) == 0, fresh.stdout.read().decode()
    assert _texts_encoded(tmp_path / "fresh.log") == N_QUERIES + N_DOCS
    assert _scores(tmp_path / "resumed") == _scores(tmp_path / "fresh")
    assert _stored(tmp_path / "cache") == _stored(tmp_path / "fresh-cache") == N_QUERIES + N_DOCS


class _Watched(HashEncoder):
    """Records, at each batch, how many vectors another connection sees in the cache."""

    def __init__(self, cache: EmbeddingCache) -> None:
        super().__init__(dim=8)
        self.cache, self.seen = cache, []

    def _encode(self, texts, role, batch_size, show_progress):
        self.seen.append(EmbeddingCache(self.cache.directory).count(self.fingerprint))
        return super()._encode(texts, role, batch_size, show_progress)


@pytest.mark.slow
def test_one_corpus_chunk_is_stored_while_it_is_encoded_in_unchanged_batches(tmp_path):
    texts = [f"doc {i} " + "x" * (i % 97) for i in range(4500)]
    cache = EmbeddingCache(tmp_path)
    watched = _Watched(cache)
    out = CachedEncoder(watched, cache).encode(texts, role="document", batch_size=32)
    assert len(watched.seen) == -(-len(texts) // 32)  # one encode call per planned batch
    assert sorted(set(watched.seen)) == [0, 1024, 2048, 3072, 4096]  # stored every ~1,000 texts
    assert out.tobytes() == HashEncoder(dim=8).encode(texts, role="document", batch_size=32).tobytes()


def test_a_small_call_is_one_encode_call(tmp_path):
    cache = EmbeddingCache(tmp_path)
    watched = _Watched(cache)
    CachedEncoder(watched, cache).encode([f"t{i}" for i in range(cache_module.FLUSH_EVERY)], role="document")
    assert watched.seen == [0]


def test_a_slow_model_is_stored_every_few_seconds(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "FLUSH_SECONDS", 0.0)  # every batch is "slow"
    cache = EmbeddingCache(tmp_path)
    watched = _Watched(cache)
    CachedEncoder(watched, cache).encode([f"t{i}" for i in range(1100)], role="document", batch_size=100)
    assert watched.seen == list(range(0, 1100, 100))


@pytest.mark.slow
def test_two_processes_share_one_cache_and_one_output_folder(tmp_path):
    """Two runs of the same model and data at once, on one cache and one output folder: both succeed,
    the cache stays consistent and the stored result is an uninterrupted run's."""
    _corpus(tmp_path / "data")
    runs = [_run(tmp_path, "shared", tmp_path / "cache", delay=0.001) for _ in range(2)]
    for proc in runs:
        assert proc.wait(timeout=180) == 0, proc.stdout.read().decode()
    fresh = _run(tmp_path, "fresh", tmp_path / "fresh-cache", delay=0)
    assert fresh.wait(timeout=120) == 0, fresh.stdout.read().decode()
    assert _scores(tmp_path / "shared") == _scores(tmp_path / "fresh")
    assert _stored(tmp_path / "cache") == N_QUERIES + N_DOCS
    # the vector store (the data-hash index is there too once the data is older than fingerprint.RACY_SECONDS)
    [path] = [p for p in (tmp_path / "cache").rglob("*.sqlite") if p.name != "data-hashes.sqlite"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sentence-transformers", "transformers"])
def test_a_local_model_streams_to_the_cache_with_unchanged_vectors(tiny_st, tmp_path, monkeypatch, backend):
    from embedscope.models.specs import load_encoder

    monkeypatch.setattr(cache_module, "FLUSH_EVERY", 16)
    texts = [f"document {i} " + "word " * (i % 13) for i in range(100)]
    encoder = load_encoder(str(tiny_st), backend=backend, device="cpu")
    expected = encoder.encode(texts, role="document", batch_size=8)
    puts = []
    cache = EmbeddingCache(tmp_path)
    original = cache.put
    monkeypatch.setattr(cache, "put", lambda fp, keys, vectors: (puts.append(len(keys)), original(fp, keys, vectors)))
    out = CachedEncoder(encoder, cache).encode(texts, role="document", batch_size=8)
    assert out.tobytes() == expected.tobytes()
    assert puts == [16] * 6 + [4]  # stored every 16 texts (two batches of 8), not once at the end


SPARSE_SCRIPT = textwrap.dedent('''
    import sys, time
    import numpy as np
    from embedscope import evaluate
    from embedscope.models.backends import Backend, register_backend
    from embedscope.testing.fakes import HashEncoder

    data, output, cache, log, delay = sys.argv[1:6]
    register_backend(Backend("fake-sparse", "a toy sparse model", ("nothing",), vectors="sparse"))

    class SlowSparse(HashEncoder):
        """HashEncoder vectors with their negative half zeroed (term weights), declared sparse by its record."""

        backend = "fake-sparse"

        def encode_batch(self, texts, *, role):
            if role == "document":
                time.sleep(float(delay))
            with open(log, "a") as f:
                f.write(f"{role} {len(texts)}\\n")
            return np.maximum(HashEncoder._encode(self, list(texts), role, len(texts), False), 0)

        def _encode(self, texts, role, batch_size, show_progress):
            plan = self.batch_plan([len(t) for t in texts], batch_size)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for batch in plan:
                out[batch] = self.encode_batch([texts[i] for i in batch], role=role)
            return out

    enc = SlowSparse(dim=256, name="fake/slow-sparse", similarity="dot")
    evaluate(enc, [data], output_folder=output, cache=cache, show_progress=False, batch_size=32)
''')


@pytest.mark.slow
def test_a_killed_sparse_run_resumes_from_its_sparse_rows_with_the_same_results(tmp_path):
    """A sparse model's rows are stored as active positions and values as they are encoded; a run killed with
    SIGKILL keeps them, and the resumed run encodes only the rest and scores bit for bit as a fresh run."""
    _corpus(tmp_path / "data")
    killed = _run(tmp_path, "killed", tmp_path / "cache", delay=0.02, script_text=SPARSE_SCRIPT)
    deadline = time.monotonic() + 120
    while _documents_encoded(tmp_path / "killed.log") < 0.6 * N_DOCS:
        assert killed.poll() is None, killed.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    stored = _stored(tmp_path / "cache")
    assert stored >= N_QUERIES + _documents_encoded(tmp_path / "killed.log") - 2 * cache_module.FLUSH_EVERY

    resumed = _run(tmp_path, "resumed", tmp_path / "cache", delay=0, script_text=SPARSE_SCRIPT)
    assert resumed.wait(timeout=120) == 0, resumed.stdout.read().decode()
    assert _texts_encoded(tmp_path / "resumed.log") == N_QUERIES + N_DOCS - stored  # every stored row reused
    fresh = _run(tmp_path, "fresh", tmp_path / "fresh-cache", delay=0, script_text=SPARSE_SCRIPT)
    assert fresh.wait(timeout=120) == 0, fresh.stdout.read().decode()
    assert _scores(tmp_path / "resumed") == _scores(tmp_path / "fresh")
    assert _scores(tmp_path / "fresh")["test"][0]["sparse_active_dims_document_mean"] == pytest.approx(128, rel=0.1)
    [path] = [p for p in (tmp_path / "cache").rglob("*.sqlite") if p.name != "data-hashes.sqlite"]
    with sqlite3.connect(path) as conn:
        rows, mean_size, odd = conn.execute(
            "SELECT COUNT(*), AVG(LENGTH(vec)), SUM(LENGTH(vec) % 8 != 0) FROM vectors"
        ).fetchone()
        kind = conn.execute("SELECT value FROM meta WHERE name = 'rows'").fetchone()
    conn.close()
    assert rows == N_QUERIES + N_DOCS and kind == ("sparse",) and odd == 0
    assert mean_size / 8 == pytest.approx(128, rel=0.1)  # each row: its active positions and values, not 256 floats
