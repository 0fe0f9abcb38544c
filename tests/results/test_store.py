"""Result files: MTEB layout, atomic writes, overwrite strategies, mteb can load them."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.files import write_json_atomic
from embedscope.results.schema import TaskResult, score_entry
from embedscope.results.store import ResultStore, check_strategy, safe_name, splits_to_run


def _result(splits=("test",)) -> TaskResult:
    scores = {
        s: [score_entry({"ndcg_at_10": 0.5, "recall_at_5": 0.25}, "ndcg_at_10", "default", ("eng-Latn",))]
        for s in splits
    }
    return TaskResult(task_name="T", dataset_revision="rev1", scores=scores, evaluation_time=1.5, date="2026-01-01")


def test_layout_and_round_trip(tmp_path):
    store = ResultStore(tmp_path, "sentence-transformers/all-MiniLM-L6-v2", "abc123")
    path = store.save(_result())
    assert path == tmp_path / "sentence-transformers__all-MiniLM-L6-v2" / "abc123" / "T.json"
    loaded = store.load("T")
    assert loaded.scores == _result().scores and loaded.main_score() == 0.5
    assert [p.name for p in path.parent.iterdir()] == ["T.json"]  # no temporary files left behind


def test_mteb_loads_our_result_files(tmp_path):
    from mteb import TaskResult as MtebTaskResult

    path = ResultStore(tmp_path, "org/model", "r").save(_result(("test", "dev")))
    mt = MtebTaskResult.from_disk(path)
    assert mt.task_name == "T" and mt.scores["test"][0]["main_score"] == 0.5
    assert mt.scores["dev"][0]["languages"] == ["eng-Latn"]


def test_atomic_write_keeps_old_file_when_serialisation_fails(tmp_path):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_overwrite_strategies(tmp_path):
    stored = _result(("test",))
    where = tmp_path / "T.json"
    assert splits_to_run(None, ("test",), "only-missing", "T", where) == ("test",)
    assert splits_to_run(stored, ("test", "dev"), "only-missing", "T", where) == ("dev",)
    assert splits_to_run(stored, ("test", "dev"), "never", "T", where) == ()
    assert splits_to_run(stored, ("test",), "always", "T", where) == ("test",)
    assert splits_to_run(stored, ("test", "dev"), "only-cache", "T", where) == ()
    with pytest.raises(ConfigError, match="only-cache"):
        splits_to_run(None, ("test",), "only-cache", "T", where)
    with pytest.raises(UnknownNameError, match="Did you mean 'always'"):
        check_strategy("alway")


def test_unreadable_stored_result_names_the_file(tmp_path):
    store = ResultStore(tmp_path, "m", "r")
    store.path("T").parent.mkdir(parents=True)
    store.path("T").write_text("{broken")
    with pytest.raises(ConfigError, match="T.json"):
        store.load("T")


def test_safe_name():
    assert safe_name("a/b") == "a__b"
    assert safe_name("") == "unnamed"


def test_atomic_write_to_a_folder_names_the_folder_not_a_temporary_file(tmp_path):
    """Issue 21: ``--per-query DIR`` said ``/…/.s.kbjgj28_.tmp -> /…/s: Is a directory``."""
    from embedscope.files import atomic_write_text

    (tmp_path / "s").mkdir()
    with pytest.raises(ConfigError, match=r"s is a folder: give a file name$") as caught:
        atomic_write_text(tmp_path / "s", "x")
    assert ".tmp" not in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["s"]  # no temporary file left behind


def test_atomic_write_under_a_file_names_the_path(tmp_path):
    from embedscope.files import atomic_write_text

    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match=r"f/out\.csv: cannot write") as caught:
        atomic_write_text(tmp_path / "f" / "out.csv", "x")
    assert ".tmp" not in str(caught.value)


def test_score_per_query_to_a_folder_says_so_in_one_line(tmp_path, capsys):
    """``report --html DIR`` writes through the same helper (tested above)."""
    from embedscope.cli.main import main

    (tmp_path / "Q").write_text("q0 0 d0 1\n")
    (tmp_path / "R").write_text("q0 Q0 d0 1 0.5 t\n")
    (tmp_path / "out").mkdir()
    assert (
        main(
            [
                "score",
                "--qrels",
                str(tmp_path / "Q"),
                "--run",
                str(tmp_path / "R"),
                "--per-query",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.endswith("out is a folder: give a file name") and len(err.splitlines()) == 1, err
