"""The task catalog: content checked against mteb's own metadata, filtering, and the offline error."""

from __future__ import annotations

import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.tasks.catalog import catalog_entry, catalog_names, find_entries, locate_data, suites

RU_MTEB_17 = ["GeoreviewClassification", "GeoreviewClusteringP2P", "HeadlineClassification",
              "InappropriatenessClassification", "KinopoiskClassification", "RiaNewsRetrieval", "RuBQRetrieval",
              "RuReviewsClassification", "RuSciBenchGRNTIClassification", "RuSciBenchGRNTIClusteringP2P",
              "RuSciBenchOECDClassification", "RuSciBenchOECDClusteringP2P", "RuSTSBenchmarkSTS", "TERRa",
              "RuBQReranking", "CEDRClassification", "SensitiveTopicsClassification"]


def test_catalog_agrees_with_mteb_metadata():
    mteb = pytest.importorskip("mteb")
    for name in catalog_names():
        meta = mteb.get_task(name).metadata
        entry = catalog_entry(name)
        assert (entry.type, entry.main_score, entry.dataset_path, entry.dataset_revision) == (
            meta.type, meta.main_score, meta.dataset["path"], meta.dataset["revision"]), name
        assert list(entry.eval_splits) == list(meta.eval_splits), name


def test_seed_task_lists_are_all_there():
    names = set(catalog_names())
    assert set(RU_MTEB_17) <= names
    assert len(suites()["ruMTEB"]) == 23
    assert len(suites()["C-MTEB"]) == 31
    for name in ["STSBenchmark", "SciFact", "NFCorpus", "ArguAna", "FiQA2018", "SCIDOCS", "SICK-R",
                 "Banking77Classification", "EmotionClassification", "AmazonCounterfactualClassification",
                 "TwentyNewsgroupsClustering", "SprintDuplicateQuestions", "AskUbuntuDupQuestions",
                 *[f"STS1{i}" for i in range(2, 8)]]:
        assert name in names


def test_filters_by_language_type_and_name():
    rus = {e.name for e in find_entries(language="rus")}
    assert set(RU_MTEB_17) <= rus
    assert "SciFact" not in rus
    assert all(e.type == "Clustering" for e in find_entries(type="clustering"))
    assert [e.name for e in find_entries(name="scifact")] == ["SciFact"]
    assert {e.name for e in find_entries(language="cmn", type="Reranking")} >= {"T2Reranking", "MMarcoReranking"}


def test_unknown_task_suggests_close_names():
    with pytest.raises(UnknownNameError, match="SciFact"):
        catalog_entry("SciFakt")
    assert catalog_entry("RUParaphraserSTS").name == "RUParaPhraserSTS"  # the ruMTEB article's spelling


def test_missing_local_data_offline_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        locate_data(catalog_entry("SciFact"), data_dir=tmp_path)
    message = str(err.value)
    assert "mteb/scifact" in message and "huggingface-cli download" in message and "--data-dir" in message


def test_local_copy_is_found_under_data_dir(tmp_path):
    (tmp_path / "mteb" / "scifact").mkdir(parents=True)
    assert locate_data(catalog_entry("SciFact"), data_dir=tmp_path) == str(tmp_path / "mteb" / "scifact")
    (tmp_path / "SciFact").mkdir()
    assert locate_data(catalog_entry("SciFact"), data_dir=tmp_path) == str(tmp_path / "SciFact")
