"""Catalog tasks and ``type:path`` routes read hub copies as ``huggingface-cli download`` leaves them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embedscope.data.hub_files import split_files
from embedscope.errors import DataFormatError
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.from_catalog import catalog_task
from embedscope.tasks.registry import resolve_task
from embedscope.testing.fakes import HashEncoder


def _parquet(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _hub_clutter(folder):
    (folder / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / "download.parquet.metadata").write_text("x")


def _sick_nl(folder, readme_configs: bool):
    rows = [
        {"sentence1": f"een man speelt {i}", "sentence2": f"een vrouw zingt {i % 5}", "labels": i % 2}
        for i in range(40)
    ]
    _parquet(folder / "data" / "test-00000-of-00001.parquet", rows)
    header = (
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*\n---\n"
        if readme_configs
        else ""
    )
    (folder / "README.md").write_text(header + "# SICK-NL pair classification\n")
    _hub_clutter(folder)


def _sib200(folder, languages=("eng_Latn",)):
    cats = ["science/technology", "travel", "politics", "sports"]
    for split, n in (("train", 24), ("validation", 8), ("test", 12)):
        for lang in languages:
            _parquet(
                folder / split / f"{lang}.parquet",
                [{"index_id": i, "category": cats[i % 4], "text": f"{lang} {split} sentence {i}"} for i in range(n)],
            )
    (folder / "README.md").write_text("# SIB-200\n")
    _hub_clutter(folder)


def _run(task, tmp_path, encoder=None):
    report = evaluate(
        encoder or HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False
    )
    return report.outcomes[0].result


@pytest.mark.parametrize("readme_configs", [True, False])
def test_sick_nl_pair_classification_by_name(tmp_path, readme_configs):
    _sick_nl(tmp_path / "clips" / "mteb-nl-sick-pcls-pr", readme_configs)
    result = _run(catalog_task("SICKNLPairClassification", data_dir=tmp_path), tmp_path)
    scores = result.scores["test"][0]
    assert scores["main_score"] == scores["max_ap"] and 0 <= scores["max_ap"] <= 1


def test_pairclassification_route_on_a_hub_folder(tmp_path):
    _sick_nl(tmp_path / "sick", readme_configs=False)
    task = resolve_task(f"pairclassification:{tmp_path / 'sick'}")
    assert 0 <= _run(task, tmp_path).main_score() <= 1


@pytest.mark.slow
@pytest.mark.long  # against mteb on a whole hub layout: a minute, in the long tier
def test_sib200_clustering_by_name_concatenates_every_split(tmp_path):
    _sib200(tmp_path / "mteb" / "sib200", languages=("eng_Latn", "fra_Latn"))
    task = catalog_task("SIB200ClusteringS2S:eng_Latn", data_dir=tmp_path)
    data = task.load_split("test")
    assert len(data.texts) == 24 + 8 + 12  # mteb's transform: train + validation + test
    assert data.texts[0] == "eng_Latn train sentence 0" and task.max_document_to_embed == 1004
    assert 0 <= _run(task, tmp_path).main_score() <= 1


def test_clustering_route_on_sib200_split_folders(tmp_path):
    _sib200(tmp_path / "sib200")
    with pytest.raises(DataFormatError, match="eng_Latn.parquet, row 1: missing field 'label'"):
        resolve_task(f"clustering:{tmp_path / 'sib200'}").load_split("test")  # the file is found; its column named
    from embedscope.tasks.custom import custom_task

    task = custom_task(tmp_path / "sib200", type="clustering", columns={"label": "category"})
    data = task.load_split("test")
    assert len(data.texts) == 12 and data.labels[0] == "science/technology"


def test_masakhanews_legacy_clustering_by_name(tmp_path):
    folder = tmp_path / "MasakhaNEWSClusteringS2S"
    for lang in ("amh", "eng"):
        _parquet(
            folder / lang / "test-00000-of-00001.parquet",
            [
                {"sentences": [f"{lang} headline {s} {j}" for j in range(15)], "labels": [j % 3 for j in range(15)]}
                for s in range(2)
            ],
        )
    (folder / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {lang}\n  data_files:\n  - split: test\n    path: {lang}/test-*\n"
            for lang in ("amh", "eng")
        )
        + "---\n"
    )
    _hub_clutter(folder)
    task = catalog_task("MasakhaNEWSClusteringS2S:eng", data_dir=tmp_path)
    assert task.protocol == "legacy"
    result = _run(task, tmp_path)
    assert result.scores["test"][0]["hf_subset"] == "eng" and 0 <= result.main_score() <= 1


@pytest.mark.parametrize(
    "layout", ["{subset}/{split}.jsonl", "{split}/{subset}.csv", "{subset}/data/{split}-00000-of-00002.tsv"]
)
def test_split_files_layouts(tmp_path, layout):
    path = tmp_path / layout.format(subset="deu", split="test")
    path.parent.mkdir(parents=True)
    path.write_text("x")
    assert split_files(tmp_path, "test", "deu") == [path]
    with pytest.raises(DataFormatError, match="no data file for split 'dev'"):
        split_files(tmp_path, "dev", "deu")


def test_unsupported_type_fails_with_one_line():
    from embedscope.errors import ConfigError

    with pytest.raises(ConfigError, match="task type SomeType is not supported yet"):
        from dataclasses import replace

        from embedscope.tasks import from_catalog
        from embedscope.tasks.catalog import catalog_entry

        entry = replace(catalog_entry("SciFact"), type="SomeType")
        original = from_catalog.catalog_entry
        try:
            from_catalog.catalog_entry = lambda name: entry
            catalog_task("SciFact")
        finally:
            from_catalog.catalog_entry = original


@pytest.mark.slow
@pytest.mark.long  # against mteb on a whole hub layout: a minute, in the long tier
def test_sib200_by_name_equals_mteb_with_its_own_transform(tmp_path, monkeypatch):
    """mteb's real SIB200ClusteringS2S (its load_data and dataset_transform) on the same hub files."""
    pytest.importorskip("mteb")
    import datasets
    import mteb
    import mteb.abstasks.abstask as abstask

    from support.mteb_reference_labels import assert_same_scores, mteb_label_scores

    folder = tmp_path / "mteb" / "sib200"
    _sib200(folder, languages=("eng_Latn", "fra_Latn"))

    def local_load_dataset(*, name, path, revision, **kwargs):
        assert path == "mteb/sib200" and revision.startswith("a74d735")
        return datasets.DatasetDict(
            {
                split: datasets.Dataset.from_parquet(str(folder / split / f"{name}.parquet"))
                for split in ("train", "validation", "test")
            }
        )

    monkeypatch.setattr(abstask, "load_dataset", local_load_dataset)
    theirs = mteb_label_scores(HashEncoder(), mteb.get_task("SIB200ClusteringS2S", hf_subsets=["eng_Latn"]))["test"][0]
    ours = _run(catalog_task("SIB200ClusteringS2S:eng_Latn", data_dir=tmp_path), tmp_path, HashEncoder())
    ours = ours.scores["test"][0]
    assert_same_scores(
        {k: v for k, v in ours.items() if k not in ("hf_subset", "languages", "main_score")}, theirs, "v_measure"
    )


def _mteb_on_local_files(monkeypatch, files_of):
    """mteb's load_dataset answered from local files: ``files_of(name) -> {split: parquet path}``."""
    import datasets
    import mteb.abstasks.abstask as abstask

    def local_load_dataset(*, path, revision, name=None, **kwargs):
        return datasets.DatasetDict(
            {split: datasets.Dataset.from_parquet(str(file)) for split, file in files_of(name).items()}
        )

    monkeypatch.setattr(abstask, "load_dataset", local_load_dataset)


@pytest.mark.slow
def test_sick_nl_and_masakhanews_by_name_equal_mteb(tmp_path, monkeypatch):
    pytest.importorskip("mteb")
    import mteb

    from support.mteb_reference_labels import assert_same_scores, mteb_label_scores

    sick = tmp_path / "clips" / "mteb-nl-sick-pcls-pr"
    _sick_nl(sick, readme_configs=True)
    masakha = tmp_path / "MasakhaNEWSClusteringS2S"
    _parquet(
        masakha / "eng" / "test-00000-of-00001.parquet",
        [
            {"sentences": [f"eng headline {s} {j}" for j in range(15)], "labels": [j % 3 for j in range(15)]}
            for s in range(2)
        ],
    )
    files = {
        None: {"test": sick / "data" / "test-00000-of-00001.parquet"},
        "eng": {"test": masakha / "eng" / "test-00000-of-00001.parquet"},
    }
    _mteb_on_local_files(monkeypatch, lambda name: files[name])
    for name, spec, kwargs in (
        ("SICKNLPairClassification", "SICKNLPairClassification", {}),
        ("MasakhaNEWSClusteringS2S", "MasakhaNEWSClusteringS2S:eng", {"hf_subsets": ["eng"]}),
    ):
        task = mteb.get_task(name, **kwargs)
        theirs = mteb_label_scores(HashEncoder(), task)["test"][0]
        ours = _run(catalog_task(spec, data_dir=tmp_path), tmp_path / name, HashEncoder()).scores["test"][0]
        assert_same_scores(
            {k: v for k, v in ours.items() if k not in ("hf_subset", "languages", "main_score")},
            theirs,
            task.metadata.main_score,
        )


@pytest.mark.slow
@pytest.mark.long  # two subsets of a hub task end to end: most of a minute, in the long tier
def test_two_subsets_of_a_task_share_its_result_file(tmp_path):
    """``Task:a`` then ``Task:b`` (as a benchmark runs them): both subsets stay in Task.json, neither is reused."""
    _sib200(tmp_path / "mteb" / "sib200", languages=("eng_Latn", "fra_Latn"))
    out = tmp_path / "out"
    for spec in ("SIB200ClusteringS2S:eng_Latn", "SIB200ClusteringS2S:fra_Latn", "SIB200ClusteringS2S:eng_Latn"):
        report = evaluate(HashEncoder(), [spec], output_folder=out, cache=False, show_progress=False, data_dir=tmp_path)
    assert report.outcomes[0].reused
    result = report.outcomes[0].result
    assert [e["hf_subset"] for e in result.scores["test"]] == ["eng_Latn", "fra_Latn"]
