"""Result files: MTEB layout, atomic writes, overwrite strategies, mteb can load them."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.results.schema import TaskResult, score_entry
from embedscope.results.store import ResultStore, check_strategy, safe_name, splits_to_run, write_json_atomic


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
