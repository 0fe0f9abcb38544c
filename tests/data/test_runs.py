"""Run and qrels files."""

from __future__ import annotations

import json

import pytest

from embedscope.data.runs import read_qrels, read_run, write_trec_run
from embedscope.errors import DataFormatError


def test_trec_run_round_trip_keeps_scores_exactly(tmp_path):
    run = {"q1": {"d1": 0.1 + 0.2, "d2": 1e-9, "d3": 0.1 + 0.2}, "q2": {"d9": -3.5}}
    write_trec_run(run, tmp_path / "run.trec")
    lines = (tmp_path / "run.trec").read_text().splitlines()
    assert lines[0].split()[:4] == ["q1", "Q0", "d3", "1"]  # tie broken by doc id descending, like trec_eval
    assert read_run(tmp_path / "run.trec") == {"q1": {"d3": 0.1 + 0.2, "d1": 0.1 + 0.2, "d2": 1e-9}, "q2": {"d9": -3.5}}


def test_json_run_and_qrels(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"q1": {"d1": 2, "d2": 0.5}}))
    (tmp_path / "qrels.json").write_text(json.dumps({"q1": {"d1": 1}}))
    assert read_run(tmp_path / "run.json") == {"q1": {"d1": 2.0, "d2": 0.5}}
    assert read_qrels(tmp_path / "qrels.json") == {"q1": {"d1": 1}}


@pytest.mark.parametrize(
    "text",
    [
        "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n",
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        '{"query-id": "q1", "corpus-id": "d1", "score": 1}\n'
        '{"query-id": "q1", "corpus-id": "d2", "score": 0}\n'
        '{"query-id": "q2", "corpus-id": "d3", "score": 2}\n',
    ],
)
def test_qrels_formats(tmp_path, text):
    (tmp_path / "qrels").write_text(text)
    assert read_qrels(tmp_path / "qrels") == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}


def test_bad_run_line_is_named(tmp_path):
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 0.5 tag\nq1 Q0 d2 2 abc tag\n")
    with pytest.raises(DataFormatError, match=r"run.trec, line 2: score 'abc'"):
        read_run(tmp_path / "run.trec")
    (tmp_path / "short.trec").write_text("q1 d1 0.5\n")
    with pytest.raises(DataFormatError, match="line 1: expected 6 fields"):
        read_run(tmp_path / "short.trec")
