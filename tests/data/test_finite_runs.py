"""Issue 21: no NaN or ±inf gets from a run or qrels file into a score; odd shapes and huge lines fail fast
in one line naming the file."""

from __future__ import annotations

import gzip
import time

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.data.runs import read_keyed_run, read_qrels, read_ranked_run, read_run, read_trec_run
from embedscope.errors import DataFormatError
from embedscope.evaluation.scoring import rank_run

READERS = [read_run, read_ranked_run, read_trec_run, read_keyed_run]
CANONICAL = "".join(f"q{i // 3} Q0 d{i} {i % 3 + 1} {1.0 - i / 100} tag\n" for i in range(30))


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e400", "-1e999", "nan"])
@pytest.mark.parametrize("spacing", [" ", "  "], ids=["pyarrow", "line-by-line"])
def test_trec_run_with_a_non_finite_score_names_the_line(tmp_path, reader, value, spacing):
    lines = CANONICAL.splitlines()
    lines[6] = f"q2 Q0 d6 1 {value} tag"
    path = tmp_path / "run.trec"
    path.write_text("\n".join(ln.replace(" ", spacing) for ln in lines) + "\n")
    with pytest.raises(DataFormatError, match=r"run\.trec, line 7: score .*(NaN|infinite)"):
        reader(path)


def test_gzipped_run_with_an_infinite_score(tmp_path):
    path = tmp_path / "run.trec.gz"
    path.write_bytes(gzip.compress((CANONICAL + "q9 Q0 d9 1 inf tag\n").encode()))
    with pytest.raises(DataFormatError, match=r"run\.trec\.gz, line 31: score 'inf' is infinite"):
        read_trec_run(path)


@pytest.mark.parametrize("text", ['{"q0": {"d0": 1e400}}', '{"q0": {"d0": -Infinity}}', '{"q0": {"d0": NaN}}'])
def test_json_run_with_a_non_finite_score_names_query_and_document(tmp_path, text):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(DataFormatError, match=r"run\.json, query 'q0', document 'd0': score .*(NaN|infinite)"):
        read_run(tmp_path / "run.json")


def test_score_refuses_an_infinite_run_score_in_one_line(tmp_path, capsys):
    """The issue's case: one ``inf`` score gave ``nauc_ndcg_at_10_max`` 0.1002 with exit 0."""
    (tmp_path / "qrels.txt").write_text("q0 0 d0 1\nq0 0 d1 0\n")
    (tmp_path / "run.trec").write_text("q0 Q0 d0 1 inf t\nq0 Q0 d1 2 0.5 t\n")
    assert main(["score", "--qrels", str(tmp_path / "qrels.txt"), "--run", str(tmp_path / "run.trec")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run.trec, line 1: score 'inf' is infinite" in err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("q0 0 d0 inf\n", "line 1"),
        ("q0 0 d0 1\nq0 0 d1 1e400\n", "line 2"),
        ("query-id\tcorpus-id\tscore\nq0\td0\tnan\n", "line 2"),
        ('{"q0": {"d0": 1e400}}', "query 'q0', document 'd0'"),
        ('{"query-id": "q0", "corpus-id": "d0", "score": 1e400}\n', "line 1"),
    ],
)
def test_qrels_with_a_non_finite_relevance_names_the_place(tmp_path, text, where):
    (tmp_path / "qrels").write_text(text)
    # orjson, when installed, refuses 1e400 in a JSON line itself ("number is infinity")
    with pytest.raises(DataFormatError, match=rf"qrels, {where}: (relevance score .* is not finite|.*infinity)"):
        read_qrels(tmp_path / "qrels")


@pytest.mark.parametrize("text", ["[1, 2, 3]", '[{"q0": {"d0": 1}}]', "[]"])
def test_json_array_says_which_shape_is_expected(tmp_path, text):
    (tmp_path / "run.json").write_text(text)
    for reader in (read_run, read_ranked_run, read_qrels):
        with pytest.raises(DataFormatError, match=r"run\.json: a JSON list, but .* one JSON object \{query id"):
            reader(tmp_path / "run.json")


@pytest.mark.parametrize("text", ["", " \n", "query-id\tcorpus-id\tscore\n", "{}", '{"q0": {}}'])
def test_qrels_without_judgments_says_so(tmp_path, text):
    (tmp_path / "q.tsv").write_text(text)
    (tmp_path / "run.trec").write_text("q0 Q0 d0 1 0.5 t\n")
    with pytest.raises(DataFormatError, match=r"^qrels .*q\.tsv has no judgments"):
        rank_run(tmp_path / "q.tsv", tmp_path / "run.trec")


@pytest.mark.parametrize(
    "line",
    [
        "q0 Q0 " + "d" * 8_000_000 + " 1 0.5 t\n",  # one 8 MB document id
        "q" * 8_000_000 + " Q0 d0 1 0.5 t\n",  # one 8 MB query id
        " ".join(["q0 Q0 d0 1 0.5 t"] * 500_000),  # 8 MB of lines without a newline
        "x" * 8_000_000,
    ],
    ids=["long-doc-id", "long-query-id", "no-newlines", "one-token"],
)
@pytest.mark.slow
def test_a_huge_single_line_is_handled_fast(tmp_path, line):
    """A long id was hashed 8 bytes per numpy pass (about 2 s per MB): 92 s for a 50 MB line."""
    (tmp_path / "qrels.txt").write_text("q0 0 d0 1\n")
    (tmp_path / "run.trec").write_text(line)
    start = time.perf_counter()
    try:
        rank_run(tmp_path / "qrels.txt", tmp_path / "run.trec")
    except DataFormatError as e:
        assert len(str(e)) < 2_500
    assert time.perf_counter() - start < 2.0


def test_long_ids_still_match_the_qrels(tmp_path):
    """Ids beyond numpy's hashing length are keyed by hashlib: equal ids still meet, different ones do not."""
    long_a, long_b = "a" * 300 + "x", "a" * 300 + "y"
    (tmp_path / "qrels.txt").write_text(f"q0 0 {long_a} 1\n")
    (tmp_path / "run.trec").write_text(f"q0 Q0 {long_b} 1 0.9 t\nq0 Q0 {long_a} 2 0.5 t\n")
    scores = rank_run(tmp_path / "qrels.txt", tmp_path / "run.trec", k_values=[1, 2])
    reference = rank_run({"q0": {"A": 1}}, {"q0": {"B": 0.9, "A": 0.5}}, k_values=[1, 2])
    np.testing.assert_equal(scores.to_mteb(), reference.to_mteb())  # NaN (no spread) equals NaN
    assert scores.to_mteb()["ndcg_at_1"] == 0.0
