"""Catalog tasks run from local copies in the hub's layout, and fail helpfully without one."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import ConfigError
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.from_catalog import catalog_task
from embedscope.testing.fakes import HashEncoder


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
def test_classification_task_from_a_local_hub_copy(tmp_path):
    labels = ["card_arrival", "card_linking", "exchange_rate"]
    _jsonl(
        tmp_path / "mteb" / "banking77" / "train.jsonl",
        [{"text": f"train text {i} about {labels[i % 3]}", "label": labels[i % 3]} for i in range(60)],
    )
    _jsonl(
        tmp_path / "mteb" / "banking77" / "test.jsonl",
        [{"text": f"test text {i} about {labels[i % 3]}", "label": labels[i % 3]} for i in range(30)],
    )
    task = catalog_task("Banking77Classification", data_dir=tmp_path)
    assert (task.type, task.samples_per_label, task.dataset_revision[:7]) == ("Classification", 8, "0fd18e2")
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    entry = report.outcomes[0].result.scores["test"][0]
    assert len(entry["scores_per_experiment"]) == 10 and entry["main_score"] == entry["accuracy"]


def test_legacy_clustering_rows_are_sets(tmp_path):
    _jsonl(
        tmp_path / "TwentyNewsgroupsClustering" / "test.jsonl",
        [{"sentences": [f"s{i}{j}" for j in range(12)], "labels": [j % 3 for j in range(12)]} for i in range(2)],
    )
    task = catalog_task("TwentyNewsgroupsClustering", data_dir=tmp_path)
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    assert 0.0 <= report.outcomes[0].result.main_score() <= 1.0


def test_catalog_task_without_data_offline_fails_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="huggingface-cli download mteb/banking77"):
        evaluate(HashEncoder(), ["Banking77Classification"], output_folder=tmp_path, cache=False, data_dir=tmp_path)


def test_multi_subset_task_needs_a_subset():
    with pytest.raises(ConfigError, match="STS22:SUBSET"):
        catalog_task("STS22")


def test_sts_benchmark_from_a_local_hub_copy(tmp_path):
    rows = [{"sentence1": f"a {i}", "sentence2": f"b {i % 7}", "score": float(i % 6)} for i in range(20)]
    _jsonl(tmp_path / "STSBenchmark" / "test.jsonl", rows)
    task = catalog_task("STSBenchmark", data_dir=tmp_path)
    assert (task.type, task.max_score, task.main_score) == ("STS", 5, "cosine_spearman")
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    assert -1.0 <= report.outcomes[0].result.main_score() <= 1.0


def test_pair_classification_from_a_local_hub_copy_in_the_single_row_format(tmp_path):
    row = {
        "sent1": [f"a {i}" for i in range(12)],
        "sent2": [f"a {i % 4}" for i in range(12)],
        "labels": [int(i % 4 == i) for i in range(12)],
    }
    _jsonl(tmp_path / "SprintDuplicateQuestions" / "test.jsonl", [row])
    task = catalog_task("SprintDuplicateQuestions", data_dir=tmp_path)
    assert task.type == "PairClassification"
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    entry = report.outcomes[0].result.scores["test"][0]
    assert entry["main_score"] == entry["max_ap"] and 0 <= entry["max_ap"] <= 1


def test_reranking_from_a_local_hub_copy_with_top_ranked(tmp_path):
    import pandas as pd

    repo = tmp_path / "AskUbuntuDupQuestions"
    tables = {
        "corpus": [
            {"id": f"d{i}", "title": "", "text": f"doc about {w}"} for i, w in enumerate(["cat", "dog", "cat", "fish"])
        ],
        "queries": [{"id": "q1", "text": "cat"}, {"id": "q2", "text": "fish"}],
        "default": [
            {"query-id": "q1", "corpus-id": "d0", "score": 1},
            {"query-id": "q1", "corpus-id": "d1", "score": 0},
            {"query-id": "q2", "corpus-id": "d3", "score": 1},
        ],
        "top_ranked": [
            {"query-id": "q1", "corpus-ids": ["d0", "d1", "d2"]},
            {"query-id": "q2", "corpus-ids": ["d3", "d1"]},
        ],
    }
    for name, rows in tables.items():
        (repo / name).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(repo / name / "test-00000-of-00001.parquet")
    task = catalog_task("AskUbuntuDupQuestions", data_dir=tmp_path)
    assert task.type == "Reranking"
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    entry = report.outcomes[0].result.scores["test"][0]
    assert entry["main_score"] == entry["map_at_1000"] and 0 < entry["map_at_1000"] <= 1
