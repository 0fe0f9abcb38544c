"""Output paths through a symbolic link loop are one line (issue 21), for every command that writes."""

from __future__ import annotations

import os
import re
import warnings

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.files import atomic_write_text
from embedscope.results.store import ResultStore
from embedscope.testing.fakes import HashEncoder
from embedscope.testing.tiny import tiny_retrieval_task

LOOP_MESSAGE = "symbolic link loop (a link on this path points back to itself); give another path"


@pytest.fixture
def loop(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a"


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("sub", ["", "inner"])
def test_evaluate_into_a_loop_fails_before_running(loop, sub):
    folder = loop / sub if sub else loop
    with warnings.catch_warnings(), pytest.raises(ConfigError, match=re.escape(f"{folder}: {LOOP_MESSAGE}")):
        warnings.simplefilter("ignore")
        embedscope.evaluate(
            HashEncoder(), [tiny_retrieval_task()], output_folder=folder, cache=False, show_progress=False
        )


def test_result_store_and_writes(loop):
    with pytest.raises(ConfigError, match=re.escape(LOOP_MESSAGE)):
        ResultStore(loop, "org/model", "rev")
    with pytest.raises(ConfigError, match=re.escape(LOOP_MESSAGE)):
        atomic_write_text(loop / "x.html", "text")
    with pytest.raises(ConfigError, match=re.escape(LOOP_MESSAGE)):
        atomic_write_text(loop, "text")
    assert loop.is_symlink()  # the link was not replaced by a file


@pytest.fixture
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("res")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        embedscope.evaluate(
            HashEncoder(),
            [tiny_retrieval_task()],
            output_folder=out,
            cache=False,
            show_progress=False,
            save_predictions=True,
        )
    return out


@pytest.mark.parametrize("flag", ["--html", "--csv"])
@pytest.mark.parametrize("target", ["", "report.out"])
def test_report_outputs(loop, results, capsys, flag, target):
    path = loop / target if target else loop
    assert f"{path}: {LOOP_MESSAGE}" in _error(capsys, ["report", str(results), flag, str(path)])
    assert loop.is_symlink()


def test_score_per_query(loop, results, capsys, tmp_path):
    run = next(results.rglob("TinyRetrieval_predictions.json"))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    err = _error(capsys, ["score", "--qrels", str(qrels), "--run", str(run), "--per-query", str(loop / "q.csv")])
    assert f"{loop / 'q.csv'}: {LOOP_MESSAGE}" in err


def test_eval_output(loop, capsys, tmp_path, monkeypatch):
    import embedscope.models.specs as specs

    monkeypatch.setattr(specs, "load_encoder", lambda *a, **k: HashEncoder(name="fake/hash"))
    data = tmp_path / "pairs.csv"
    data.write_text("sentence1,sentence2,score\na cat,a dog,1\nrain,sun,2.5\nx y,x z,4\n")
    argv = ["eval", "-m", "fake", "--task", "sentence-similarity", "--dataset", str(data), "--output", str(loop)]
    assert LOOP_MESSAGE in _error(capsys, argv)


def test_a_folder_given_as_output_file_is_named_without_temporary_files(results, capsys, tmp_path):
    """Issue 21: the error named the temporary file (``.x.kbjgj28_.tmp -> …: Is a directory``)."""
    folder = tmp_path / "s"
    folder.mkdir()
    err = _error(capsys, ["report", str(results), "--html", str(folder)])
    assert err == f"embedscope: error: {folder} is a folder: give a file name"
    assert not list(folder.iterdir())
