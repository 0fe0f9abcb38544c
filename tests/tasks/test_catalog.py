"""The task catalog: content checked against mteb's own metadata, filtering, and the offline error."""

from __future__ import annotations

import pytest

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.tasks.catalog import (
    CATALOG_FILE,
    benchmark_tasks,
    benchmarks,
    catalog_entry,
    catalog_names,
    find_entries,
    locate_data,
    suites,
)

RU_MTEB_17 = [
    "GeoreviewClassification",
    "GeoreviewClusteringP2P",
    "HeadlineClassification",
    "InappropriatenessClassification",
    "KinopoiskClassification",
    "RiaNewsRetrieval",
    "RuBQRetrieval",
    "RuReviewsClassification",
    "RuSciBenchGRNTIClassification",
    "RuSciBenchGRNTIClusteringP2P",
    "RuSciBenchOECDClassification",
    "RuSciBenchOECDClusteringP2P",
    "RuSTSBenchmarkSTS",
    "TERRa",
    "RuBQReranking",
    "CEDRClassification",
    "SensitiveTopicsClassification",
]


@pytest.mark.slow
def test_catalog_agrees_with_mteb_metadata():
    mteb = pytest.importorskip("mteb")
    for name in catalog_names():
        meta = mteb.get_task(name).metadata
        entry = catalog_entry(name)
        assert (entry.type, entry.main_score, entry.dataset_path, entry.dataset_revision) == (
            meta.type,
            meta.main_score,
            meta.dataset["path"],
            meta.dataset["revision"],
        ), name
        assert list(entry.eval_splits) == list(meta.eval_splits), name


def test_seed_task_lists_are_all_there():
    names = set(catalog_names())
    assert set(RU_MTEB_17) <= names
    assert len(suites()["ruMTEB"]) == 23
    assert len(suites()["C-MTEB"]) == 31
    for name in [
        "STSBenchmark",
        "SciFact",
        "NFCorpus",
        "ArguAna",
        "FiQA2018",
        "SCIDOCS",
        "SICK-R",
        "Banking77Classification",
        "EmotionClassification",
        "AmazonCounterfactualClassification",
        "TwentyNewsgroupsClustering",
        "SprintDuplicateQuestions",
        "AskUbuntuDupQuestions",
        *[f"STS1{i}" for i in range(2, 8)],
    ]:
        assert name in names


def test_filters_by_language_type_and_name():
    rus = {e.name for e in find_entries(language="rus")}
    assert set(RU_MTEB_17) <= rus
    assert "SciFact" not in rus
    assert all(e.type == "Clustering" for e in find_entries(type="clustering"))
    found = [e.name for e in find_entries(name="scifact")]
    assert found[0] == "SciFact" and "SciFact-PL" in found and all("scifact" in n.lower() for n in found)
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
    assert "mteb/scifact" in message and "huggingface-cli download" in message and "data_dir" in message


def test_local_copy_is_found_under_data_dir(tmp_path):
    (tmp_path / "mteb" / "scifact").mkdir(parents=True)
    assert locate_data(catalog_entry("SciFact"), data_dir=tmp_path) == str(tmp_path / "mteb" / "scifact")
    (tmp_path / "SciFact").mkdir()
    assert locate_data(catalog_entry("SciFact"), data_dir=tmp_path) == str(tmp_path / "SciFact")


def test_the_whole_text_catalog_is_there():
    names = set(catalog_names())
    assert len(names) >= 1100
    for name in [
        "SICKNLPairClassification",
        "SIB200ClusteringS2S",
        "MasakhaNEWSClusteringS2S",
        "Tatoeba",
        "BUCC.v2",
        "SummEvalSummarization.v2",
        "EmotionClassification.v2",
    ]:
        assert name in names
    types = {e.type for e in find_entries()}
    assert types == {
        "Retrieval",
        "Classification",
        "Clustering",
        "Reranking",
        "PairClassification",
        "STS",
        "MultilabelClassification",
        "BitextMining",
        "Summarization",
        "InstructionRetrieval",
        "InstructionReranking",
    }
    assert CATALOG_FILE.stat().st_size < 1_000_000


def test_transforms_and_sizes_as_data():
    sib = catalog_entry("SIB200ClusteringS2S")
    assert sib.concat_splits == {
        "splits": ["train", "validation", "test"],
        "into": "test",
        "columns": {"category": "labels", "text": "sentences"},
    }
    assert sib.params["max_document_to_embed"] == 1004
    assert catalog_entry("SICKNLPairClassification").size == {"samples": 2115}
    assert catalog_entry("SprintDuplicateQuestions").rename_columns == {"sent1": "sentence1", "sent2": "sentence2"}
    assert catalog_entry("MedrxivClusteringS2S.v2").flatten_sets


@pytest.mark.slow
def test_benchmarks_match_mteb():
    mteb = pytest.importorskip("mteb")
    for name in ("MTEB(eng, v2)", "MTEB(rus, v1)", "MTEB(cmn, v1)", "MTEB(Multilingual, v2)"):
        assert list(benchmark_tasks(name)) == [t.metadata.name for t in mteb.get_benchmark(name).tasks]
    assert len(benchmarks()) == len(mteb.get_benchmarks())
    assert benchmark_tasks("mteb(eng,v2)") == benchmark_tasks("MTEB(eng, v2)")
    assert [e.name for e in find_entries(benchmark="MTEB(eng, v2)")] == list(benchmark_tasks("MTEB(eng, v2)"))
    with pytest.raises(UnknownNameError, match="MTEB\\(eng, v2\\)"):
        benchmark_tasks("MTEB(eng, v3)")
