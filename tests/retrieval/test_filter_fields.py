"""Any filter field name works with FTS5, mixed value types are refused, and huge index integers are one line
(issue 31)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.retrieval import ann
from embedscope.retrieval.bm25 import BM25Retriever
from embedscope.retrieval.fts5 import FTS5Retriever, text_expression
from embedscope.settings import RunSettings
from embedscope.types import Corpus, Queries

TEXTS = ("cats purr softly", "cats sleep all day", "dogs bark at cats", "dogs run")


@pytest.mark.parametrize("field", ["group", "order", "select", 'we"ird', "text", "a b"])
def test_fts5_filter_on_any_field_name_equals_a_direct_query(field):
    groups = ("a", "a", "b", "b")
    corpus = Corpus(("d1", "d2", "d3", "d4"), TEXTS, {field: groups})
    queries = Queries(("q1", "q2"), ("cats", "dogs cats"), {field: ("a", "b")})
    run = FTS5Retriever().retrieve(
        queries, corpus, RunSettings(top_k=5, filter_field=field).search_options(show_progress=False)
    )
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(g, text)")
    con.executemany(
        "INSERT INTO t(rowid, g, text) VALUES (?, ?, ?)", [(i + 1, g, t) for i, (g, t) in enumerate(zip(groups, TEXTS))]
    )
    for row, (text, value) in enumerate(zip(queries.texts, ("a", "b"))):
        sql = "SELECT rowid, rank FROM t WHERE t MATCH ? AND g = ? ORDER BY rank LIMIT 5"
        direct = con.execute(sql, (text_expression(text), value)).fetchall()
        got = [(int(i), float(s)) for i, s in zip(run.doc_index[row], run.scores[row]) if i >= 0]
        assert got == [(i - 1, -rank) for i, rank in direct] and got


def _beir(folder, field):
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "text": t, field: "a" if i < 2 else "b"} for i, t in enumerate(TEXTS)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "cats", field: "a"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return str(folder)


def test_cli_filter_field_group_with_fts5_runs(tmp_path, capsys):
    argv = ["run", "--model", "fts5", "--tasks", _beir(tmp_path / "d", "group"), "--filter-field", "group"]
    assert main([*argv, "--output-folder", str(tmp_path / "out"), "--no-cache"]) == 0
    assert "error" not in capsys.readouterr().err


def test_an_sqlite_error_that_is_not_the_disk_does_not_say_free_disk_space():
    from embedscope.cli.main import _one_line

    assert "disk space" not in _one_line(sqlite3.OperationalError('near "group": syntax error'))
    assert "free some disk space" in _one_line(sqlite3.OperationalError("database or disk is full"))


@pytest.mark.parametrize("side", ["queries", "documents"])
def test_mixed_value_types_are_refused_naming_the_field_and_an_example_of_each(side):
    docs = (1, 1, "2", 2) if side == "documents" else (1, 1, 2, 2)
    asked = (1, "2") if side == "queries" else (1, 2)
    corpus = Corpus(("d1", "d2", "d3", "d4"), TEXTS, {"chapter": docs})
    queries = Queries(("q1", "q2"), ("cats", "dogs"), {"chapter": asked})
    for retriever in (FTS5Retriever(), BM25Retriever(backend="numpy")):
        with pytest.raises(
            ConfigError, match=rf"filter field 'chapter': the {side} mix value types \(int 1, str '2'\)"
        ):
            retriever.retrieve(queries, corpus, RunSettings(filter_field="chapter").search_options(show_progress=False))


@pytest.mark.parametrize(
    "spec", ["hnsw:ef_search=99999999999999999999999", "ivfpq:nlist=4294967296", "ivfpq:seed=-99999999999999999999"]
)
def test_index_integers_beyond_a_c_int_are_one_line(spec):
    with pytest.raises(ConfigError, match=r"index (hnsw|ivfpq) option (ef_search|nlist|seed)"):
        ann.parse_index(spec)


def test_cli_huge_index_integer_is_exit_2(capsys):
    assert (
        main(["run", "--model", "static-64", "--index", "hnsw:ef_search=99999999999999999999999", "--print-settings"])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ef_search" in err[0]
