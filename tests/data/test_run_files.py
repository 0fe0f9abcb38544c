"""TREC / JSON run and qrels files: formats by content, exact round trips, errors with file and line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedscope.data.runs import read_qrels, read_run, write_trec_run
from embedscope.errors import DataFormatError


def test_round_trip_exact_with_numpy_scores_and_ranks(tmp_path):
    run = {"q1": {"d1": np.float32(0.25), "d2": np.float64(0.1 + 0.2), "d3": 7}, "q2": {"a": -1e-12, "b": -1e-12}}
    path = tmp_path / "out" / "run.txt"
    write_trec_run(run, path, tag="mine")
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(x[0], x[2], x[3], x[5]) for x in lines] == [
        ("q1", "d3", "1", "mine"),
        ("q1", "d2", "2", "mine"),
        ("q1", "d1", "3", "mine"),
        ("q2", "b", "1", "mine"),
        ("q2", "a", "2", "mine"),
    ]
    back = read_run(path)
    assert back == {"q1": {"d3": 7.0, "d2": 0.1 + 0.2, "d1": 0.25}, "q2": {"b": -1e-12, "a": -1e-12}}


def test_write_rejects_ids_with_spaces(tmp_path):
    with pytest.raises(DataFormatError, match=r"document id 'a b' .*whitespace"):
        write_trec_run({"q1": {"a b": 1.0}}, tmp_path / "r")


def test_json_run_detected_by_content(tmp_path):
    path = tmp_path / "run.trec"  # the name does not matter
    path.write_text(json.dumps({"q1": {"d1": 2, "d2": 0.5}, "q2": {}}, indent=2))
    assert read_run(path) == {"q1": {"d1": 2.0, "d2": 0.5}, "q2": {}}
    path.write_text('{"q1": {"d1": "x"}}')
    with pytest.raises(DataFormatError, match=r"run.trec, query 'q1', document 'd1': score 'x' is not a number"):
        read_run(path)
    path.write_text('{"q1": {"d1": 1},\n "q2": [1]}')
    with pytest.raises(DataFormatError, match=r"query 'q2' maps to a list"):
        read_run(path)
    path.write_text('{"q1": {"d1": 1},\n "q2": }')
    with pytest.raises(DataFormatError, match=r"run.trec, line 2: malformed JSON"):
        read_run(path)


def test_trec_run_errors_name_line(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 0.5 tag\n\nq1 Q0 d2 2 abc tag\n")
    with pytest.raises(DataFormatError, match=r"run.trec, line 3: score 'abc' is not a number"):
        read_run(path)
    path.write_text("q1 d1 0.5\n")
    with pytest.raises(DataFormatError, match=r"run.trec, line 1: expected 6 fields"):
        read_run(path)
    path.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n")
    with pytest.raises(DataFormatError, match=r"line 2: document 'd1' appears twice for query 'q1' \(first at line 1"):
        read_run(path)
    with pytest.raises(DataFormatError, match="no such run file"):
        read_run(tmp_path / "missing")


EXPECTED = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}


@pytest.mark.parametrize(
    "text",
    [
        "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n",  # TREC
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",  # BEIR tsv
        "q1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",  # header-less 3 columns
        json.dumps(EXPECTED),  # JSON
        "".join(
            json.dumps({"query-id": q, "corpus-id": d, "score": s}) + "\n"
            for q, docs in EXPECTED.items()
            for d, s in docs.items()
        ),  # EvalScope qrels.jsonl
    ],
)
def test_qrels_formats_keep_zero_judgments(tmp_path, text):
    (tmp_path / "qrels").write_text(text)
    assert read_qrels(tmp_path / "qrels") == EXPECTED


def test_single_line_jsonl_qrels(tmp_path):
    (tmp_path / "qrels.jsonl").write_text('{"query_id": "q1", "doc_id": "d1", "score": 1}\n')
    assert read_qrels(tmp_path / "qrels.jsonl") == {"q1": {"d1": 1}}


def test_qrels_errors_name_line(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\nq1 0 d2 0.5\n")
    with pytest.raises(DataFormatError, match=r"qrels.txt, line 2: relevance score '0.5' is not an integer"):
        read_qrels(path)
    path.write_text("q1 0 d1 1\nq1 d2\n")
    with pytest.raises(DataFormatError, match=r"qrels.txt, line 2: expected 'qid 0 docid relevance'"):
        read_qrels(path)
    path.write_text("q1 0 d1 1\nq1 0 d1 2\n")
    with pytest.raises(DataFormatError, match=r"line 2: query 'q1' / document 'd1' is judged 2, but .*line 1"):
        read_qrels(path)
    path.write_text('{"query-id": "q1", "corpus-id": "d1", "score": 1}\n{"query-id": "q2", "score": 1}\n')
    with pytest.raises(DataFormatError, match=r"qrels.txt, line 2: missing field 'corpus-id'"):
        read_qrels(path)


def test_run_and_qrels_feed_the_metrics(tmp_path):
    """A written run reads back into the same ranking the metrics see."""
    run = {"q1": {"d1": 0.9, "d2": 0.8}}
    write_trec_run(run, tmp_path / "r.trec")
    (tmp_path / "q.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    assert read_run(tmp_path / "r.trec") == run and read_qrels(tmp_path / "q.tsv") == {"q1": {"d2": 1}}
