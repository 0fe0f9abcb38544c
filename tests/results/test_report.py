"""Aggregated report tables over result folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedscope.errors import DataFormatError
from embedscope.results.report import build_report, collect_results


def _write(root: Path, model: str, task: str, score: float, kind: str | None, metric: str) -> None:
    folder = root / model.replace("/", "__") / "rev1"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {metric: score, "main_score": score, "hf_subset": "default", "languages": ["eng-Latn"]}
    data = {"task_name": task, "dataset_revision": "x", "scores": {"test": [entry]}}
    if kind:
        data["task_type"] = kind
    (folder / f"{task}.json").write_text(json.dumps(data))
    (folder / "model_meta.json").write_text(json.dumps({"name": model}))


def test_per_task_per_type_and_overall_means(tmp_path):
    _write(tmp_path / "a", "org/m1", "T1", 0.5, "Retrieval", "ndcg_at_10")
    _write(tmp_path / "a", "org/m1", "T2", 0.7, "Retrieval", "ndcg_at_10")
    _write(tmp_path / "a", "org/m1", "S1", 0.9, None, "cosine_spearman")  # type inferred from keys
    _write(tmp_path / "b", "org/m2", "T1", 0.2, "Retrieval", "ndcg_at_10")
    tables = build_report(collect_results([tmp_path / "a", tmp_path / "b"]), digits=4)
    assert tables.per_task[0] == ["task", "type", "metric", "org/m1", "org/m2"]
    by_name = {row[0]: row for row in tables.per_task[1:]}
    assert by_name["S1"][1:] == ["STS", "Spearman (cosine)", "0.9000", ""]
    types = {row[0]: row for row in tables.per_type[1:]}
    assert types["Retrieval (2)"][2:] == ["0.6000", ""]  # m2 misses T2: no mean over an incomplete set
    assert types["Mean (Task)"][2:] == [f"{(0.5 + 0.7 + 0.9) / 3:.4f}", ""]
    assert types["Mean (TaskType)"][2:] == [f"{(0.6 + 0.9) / 2:.4f}", ""]
    assert "## Per task" in tables.markdown() and tables.csv().count("\n") == 1 + 3 + 1 + 4


def test_no_results_is_a_clear_error(tmp_path):
    with pytest.raises(DataFormatError, match="No task results"):
        collect_results([tmp_path])
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(DataFormatError, match="broken.json"):
        collect_results([tmp_path])


def test_blank_means_are_explained(tmp_path):
    _write(tmp_path / "a", "org/m1", "T1", 0.5, "Retrieval", "ndcg_at_10")
    _write(tmp_path / "a", "org/m1", "T2", 0.7, "Retrieval", "ndcg_at_10")
    _write(tmp_path / "b", "org/m2", "T1", 0.2, "Retrieval", "ndcg_at_10")
    text = build_report(collect_results([tmp_path / "a", tmp_path / "b"])).markdown()
    assert "Blank means for org/m2: no result for T2" in text and "Blank means for org/m1" not in text


def test_same_name_in_different_folders_stays_two_models(tmp_path):
    _write(tmp_path / "a", "my-model", "T1", 0.5, "Retrieval", "ndcg_at_10")
    _write(tmp_path / "b", "my-model", "T1", 0.9, "Retrieval", "ndcg_at_10")
    tables = build_report(collect_results([tmp_path / "a", tmp_path / "b"]), digits=1)
    assert len(tables.per_task[0]) == 5 and tables.per_task[1][3:] == ["0.5", "0.9"]
    assert all(str(tmp_path) in name for name in tables.per_task[0][3:])


def test_metric_label_is_the_main_metric_when_others_tie(tmp_path):
    folder = tmp_path / "m" / "r"
    folder.mkdir(parents=True)
    entry = {"ndcg_at_1": 0.5, "ndcg_at_3": 0.8, "ndcg_at_10": 0.8, "main_score": 0.8, "hf_subset": "default"}
    (folder / "MyTask.json").write_text(json.dumps({"task_name": "MyTask", "scores": {"test": [entry]}}))
    tables = build_report(collect_results([tmp_path]))
    assert tables.per_task[1][1:] == ["Retrieval", "NDCG@10", "0.800"]
