"""Every supported retrieval layout loads to exactly the expected corpus, queries and qrels."""

from __future__ import annotations

import gzip
import json

import pytest

from embedscope.data.detect import detect_layout, load_retrieval
from embedscope.errors import ConfigError, DataFormatError

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "A cat sat."},
    {"_id": "d2", "title": "", "text": " Dogs bark. "},
    {"_id": "d3", "text": "Fish swim."},
    {"_id": "d4", "title": "Only title", "text": ""},
]
QUERIES = [{"_id": "q1", "text": "cat"}, {"_id": "q2", "text": "dog"}, {"_id": "q3", "text": "bird"}]
TEXTS = ("Cats A cat sat.", "Dogs bark.", "Fish swim.", "Only title")
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}


def jsonl(path, rows, *, gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def beir(folder, splits=("test",)):
    jsonl(folder / "corpus.jsonl", CORPUS)
    jsonl(folder / "queries.jsonl", QUERIES)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for split in splits:
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n")
    return folder


def test_beir_folder_exact(tmp_path):
    data = load_retrieval(beir(tmp_path / "scifact"))
    assert detect_layout(tmp_path / "scifact") == "beir"
    assert data.corpus.ids == ("d1", "d2", "d3", "d4") and data.corpus.texts == TEXTS
    assert data.queries.ids == ("q1", "q2", "q3") and data.queries.texts == ("cat", "dog", "bird")  # q3 kept
    assert data.qrels == QRELS and data.qrels["q2"]["d3"] == 0  # a score-0 judgment is kept as 0
    assert (data.name, data.split) == ("scifact", "test")


def test_beir_multiple_splits_and_missing_split(tmp_path):
    folder = beir(tmp_path / "b", splits=("dev", "test"))
    assert load_retrieval(folder, split="dev").split == "dev"
    with pytest.raises(DataFormatError, match=r"no split 'train'; available: dev, test"):
        load_retrieval(folder, split="train")


@pytest.mark.slow  # imports a heavy library (mteb, onnx, nncf): seconds
def test_beir_text_matches_mteb(tmp_path):
    """BEIR's GenericDataLoader gives {_id: {title, text}}; MTEB merges with _corpus_to_dict. Same texts here."""
    pytest.importorskip("mteb")
    from mteb._create_dataloaders import _corpus_to_dict

    rows = CORPUS + [{"_id": "d5", "title": "  ", "text": "spaces title"}, {"_id": "d6", "title": "T", "text": " x "}]
    folder = beir(tmp_path / "b")
    jsonl(folder / "corpus.jsonl", rows)
    ours = load_retrieval(folder).corpus.as_dict()
    for row in rows:
        mteb_row = {"id": row["_id"], "title": row.get("title", ""), "text": row["text"]}
        assert ours[row["_id"]] == _corpus_to_dict(mteb_row)["text"]


@pytest.mark.slow  # imports a heavy library (mteb, onnx, sentence-transformers): seconds
def test_mteb_loader_on_hub_copy_agrees(tmp_path, monkeypatch):
    """mteb's own RetrievalDatasetLoader on the same local hub-style folder gives the same split."""
    pytest.importorskip("mteb")
    pd = pytest.importorskip("pandas")
    import datasets
    from mteb._create_dataloaders import _corpus_to_dict
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    repo = tmp_path / "repo"
    corpus = [{"_id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in CORPUS]
    qrels = [{"query-id": q, "corpus-id": d, "score": s} for q, docs in QRELS.items() for d, s in docs.items()]
    for sub, rows in (("corpus", corpus), ("queries", QUERIES), ("default", qrels)):
        (repo / sub).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(repo / sub / "test-00000-of-00001.parquet")
    (repo / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}/test-*.parquet\n"
            for c in ("corpus", "queries", "default")
        )
        + "---\n"
    )
    ours = load_retrieval(repo)
    theirs = RetrievalDatasetLoader(str(repo), revision=None, split="test").load()
    assert {k: dict(v) for k, v in theirs["relevant_docs"].items()} == ours.qrels
    assert [_corpus_to_dict(r)["text"] for r in theirs["corpus"]] == list(ours.corpus.texts)
    assert list(theirs["corpus"]["id"]) == list(ours.corpus.ids)
    # mteb drops queries without qrels at load time; we keep them (the task protocol filters later)
    assert list(theirs["queries"]["id"]) == list(ours.with_positives_only().queries.ids)


def test_evalscope_qrels_jsonl(tmp_path):
    folder = tmp_path / "evalscope"
    jsonl(folder / "corpus.jsonl", CORPUS)
    jsonl(folder / "queries.jsonl", QUERIES)
    jsonl(
        folder / "qrels.jsonl",
        [
            {"query-id": "q1", "corpus-id": "d1", "score": 1},
            {"query_id": "q2", "corpus_id": "d2", "score": "2"},
            {"query_id": "q2", "doc_id": "d3", "score": 0.0},
        ],
    )
    assert detect_layout(folder) == "beir"
    data = load_retrieval(folder)
    assert data.qrels == QRELS and data.corpus.texts == TEXTS
    with pytest.raises(DataFormatError, match=r"no split 'dev'; available: test"):
        load_retrieval(folder, split="dev")


def test_evalscope_qrels_in_both_places_is_ambiguous(tmp_path):
    folder = beir(tmp_path / "e")
    jsonl(folder / "qrels.jsonl", [{"query-id": "q1", "corpus-id": "d1", "score": 1}])
    with pytest.raises(DataFormatError, match=r"qrels.jsonl and qrels/test.tsv"):
        load_retrieval(folder)


def test_gzipped_jsonl_and_integer_ids(tmp_path):
    folder = tmp_path / "gz"
    jsonl(folder / "corpus.jsonl.gz", [{"_id": 1, "text": "one"}, {"_id": 2, "text": "two"}], gz=True)
    jsonl(folder / "queries.jsonl", [{"_id": 10, "text": "q"}])
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n10\t2\t1\n")
    data = load_retrieval(folder)
    assert data.corpus.ids == ("1", "2") and data.queries.ids == ("10",) and data.qrels == {"10": {"2": 1}}


def test_headerless_qrels_tsv_keeps_first_line(tmp_path):
    folder = beir(tmp_path / "b")
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1\nq2\td3\t0\n")
    assert load_retrieval(folder).qrels == {"q1": {"d1": 1}, "q2": {"d3": 0}}


def test_tables_with_column_mapping(tmp_path):
    pd = pytest.importorskip("pandas")
    folder = tmp_path / "tables"
    folder.mkdir()
    pd.DataFrame({"doc_id": ["d1", "d2"], "headline": ["Cats", None], "body": ["A cat sat.", "Dogs bark."]}).to_parquet(
        folder / "corpus.parquet"
    )
    pd.DataFrame({"doc_id": ["q1", "q2"], "body": ["cat", "dog"]}).to_csv(folder / "queries.csv", index=False)
    jsonl(folder / "qrels.jsonl", [{"qid": "q1", "pid": "d1", "label": 1}, {"qid": "q2", "pid": "d2", "label": 0}])
    columns = {
        "id": "doc_id",
        "text": "body",
        "title": "headline",
        "query-id": "qid",
        "corpus-id": "pid",
        "score": "label",
    }
    data = load_retrieval(folder, columns=columns)
    assert data.corpus.ids == ("d1", "d2") and data.corpus.texts == ("Cats A cat sat.", "Dogs bark.")
    assert data.queries.texts == ("cat", "dog")
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 0}}


def test_general_mapping_falls_back_to_defaults_but_file_mapping_is_strict(tmp_path):
    folder = tmp_path / "mixed"
    jsonl(folder / "corpus.jsonl", [{"_id": "d1", "body": "x"}])
    jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    jsonl(folder / "qrels.jsonl", [{"query-id": "q1", "corpus-id": "d1", "score": 1}])
    assert load_retrieval(folder, columns={"text": "body"}).queries.texts == ("y",)
    with pytest.raises(DataFormatError, match=r"queries.jsonl, line 1: missing field 'text' \(looked for 'body'"):
        load_retrieval(folder, columns={"corpus.text": "body", "queries.text": "body"})


def test_unknown_mapping_key_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'titel'.*Did you mean 'title'"):
        load_retrieval(beir(tmp_path / "b"), columns={"titel": "headline"})
    with pytest.raises(ConfigError, match=r"unknown key 'corpus.score'"):
        load_retrieval(beir(tmp_path / "c"), columns={"corpus.score": "x"})


def test_mapping_key_aliases(tmp_path):
    folder = tmp_path / "aliases"
    jsonl(folder / "corpus.jsonl", [{"_id": "d1", "text": "x"}])
    jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    jsonl(folder / "qrels.jsonl", [{"Q": "q1", "D": "d1", "R": 3}])
    assert load_retrieval(folder, columns={"query_id": "Q", "doc_id": "D", "label": "R"}).qrels == {"q1": {"d1": 3}}


def test_tsv_corpus_and_csv_qrels(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "corpus.tsv").write_text("id\ttitle\ttext\nd1\tT\tbody one\nd2\t\tbody two\n")
    (folder / "queries.tsv").write_text("id\ttext\nq1\tquestion\n")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "dev.csv").write_text("query-id,corpus-id,score\nq1,d2,1\n")
    data = load_retrieval(folder, split="dev")
    assert data.corpus.texts == ("T body one", "body two") and data.qrels == {"q1": {"d2": 1}}


def test_pairs_file_dedupes_passages(tmp_path):
    path = jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"query": "cat?", "positive": "A cat."},
            {"query": "kitten?", "positive": " A cat. "},
            {"query": "dog?", "positive": "A dog."},
            {"query": "cat?", "positive": "Cats purr."},
        ],
    )
    assert detect_layout(path) == "pairs"
    data = load_retrieval(path)
    assert data.corpus.ids == ("d1", "d2", "d3") and data.corpus.texts == ("A cat.", "A dog.", "Cats purr.")
    assert data.queries.ids == ("q1", "q2", "q3") and data.queries.texts == ("cat?", "kitten?", "dog?")
    assert data.qrels == {"q1": {"d1": 1, "d3": 1}, "q2": {"d1": 1}, "q3": {"d2": 1}}
    with pytest.raises(DataFormatError, match=r"no split 'dev'; available: test"):
        load_retrieval(path, split="dev")


def test_pairs_csv_with_ids_and_mapping(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("qid,question,pid,passage\nA,first?,P1,alpha\nB,second?,P1,alpha\n")
    data = load_retrieval(path, columns={"query-id": "qid", "corpus-id": "pid"})
    assert (
        data.queries.ids == ("A", "B") and data.corpus.ids == ("P1",) and data.qrels == {"A": {"P1": 1}, "B": {"P1": 1}}
    )
    path.write_text("qid,question,pid,passage\nA,first?,P1,alpha\nB,second?,P1,beta\n")
    with pytest.raises(DataFormatError, match=r"pairs.csv, line 3: document id 'P1' is used for two different"):
        load_retrieval(path, columns={"query-id": "qid", "corpus-id": "pid"})


def test_flagembedding_pos_neg_lists(tmp_path):
    path = jsonl(
        tmp_path / "train.jsonl",
        [
            {"query": "q one", "pos": ["p1", "p2"], "neg": ["n1"]},
            {"query": "q two", "pos": ["n1"], "neg": ["p1", "n2"]},
        ],
    )
    data = load_retrieval(path)
    assert data.corpus.as_dict() == {"d1": "p1", "d2": "p2", "d3": "n1", "d4": "n2"}
    assert data.qrels == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}


def test_saved_dataset_dict(tmp_path):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict(
        {
            "corpus": datasets.Dataset.from_list(
                [{"_id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in CORPUS]
            ),
            "queries": datasets.Dataset.from_list(QUERIES),
            "qrels": datasets.Dataset.from_list(
                [{"query-id": "q1", "corpus-id": "d1", "score": 1}, {"query-id": "q2", "corpus-id": "d3", "score": 0}]
            ),
        }
    )
    dd.save_to_disk(str(tmp_path / "saved"))
    assert detect_layout(tmp_path / "saved") == "saved"
    data = load_retrieval(tmp_path / "saved")
    assert data.corpus.texts == TEXTS and data.queries.ids == ("q1", "q2", "q3")
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d3": 0}}


def test_saved_subfolders_with_split_dicts(tmp_path):
    datasets = pytest.importorskip("datasets")
    root = tmp_path / "saved"
    datasets.Dataset.from_list([{"id": "d1", "text": "x"}, {"id": "d2", "text": "y"}]).save_to_disk(
        str(root / "corpus")
    )
    datasets.DatasetDict({"test": datasets.Dataset.from_list([{"id": "q1", "text": "x?"}])}).save_to_disk(
        str(root / "queries")
    )
    datasets.DatasetDict(
        {
            "test": datasets.Dataset.from_list([{"query-id": "q1", "corpus-id": "d2", "score": 1}]),
            "dev": datasets.Dataset.from_list([{"query-id": "q1", "corpus-id": "d1", "score": 1}]),
        }
    ).save_to_disk(str(root / "qrels"))
    assert load_retrieval(root).qrels == {"q1": {"d2": 1}}
    assert load_retrieval(root, split="dev").qrels == {"q1": {"d1": 1}}
    with pytest.raises(DataFormatError, match=r"no split 'train'; available: dev, test"):
        load_retrieval(root, split="train")


def hub_copy(repo, prefix=""):
    pd = pytest.importorskip("pandas")
    for sub, rows in (
        (f"{prefix}corpus", [{"_id": "d1", "title": "T", "text": "x"}, {"_id": "d2", "title": "", "text": "y"}]),
        (f"{prefix}queries", [{"_id": "q1", "text": "x?"}, {"_id": "q2", "text": "y?"}]),
        (
            f"{prefix}qrels" if prefix else "default",
            [{"query-id": "q1", "corpus-id": "d1", "score": 1}, {"query-id": "q2", "corpus-id": "d2", "score": 0}],
        ),
    ):
        (repo / sub).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(repo / sub / "test-00000-of-00001.parquet")
    return repo


def test_mteb_hub_layout_parquet(tmp_path):
    repo = hub_copy(tmp_path / "scifact")
    assert detect_layout(repo) == "hub"
    data = load_retrieval(repo)
    assert data.corpus.ids == ("d1", "d2") and data.corpus.texts == ("T x", "y")
    assert data.queries.texts == ("x?", "y?") and data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 0}}
    with pytest.raises(DataFormatError, match=r"no split 'dev'; available: test"):
        load_retrieval(repo, split="dev")


def test_mteb_hub_layout_with_subset_prefix(tmp_path):
    repo = hub_copy(tmp_path / "multi", prefix="en-")
    assert load_retrieval(repo, subset="en").qrels == {"q1": {"d1": 1}, "q2": {"d2": 0}}
    with pytest.raises(DataFormatError, match=r"no subset 'fr-corpus'"):
        load_retrieval(repo, subset="fr")


def test_hub_copy_with_readme_configs(tmp_path):
    repo = tmp_path / "repo"
    jsonl(repo / "data" / "docs.jsonl", [{"_id": "d1", "title": "A", "text": "b"}])
    jsonl(repo / "data" / "qs.jsonl", [{"_id": "q1", "text": "c"}])
    (repo / "qrels").mkdir()
    (repo / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: corpus\n  data_files:\n  - split: corpus\n    path: data/docs.jsonl\n"
        "- config_name: queries\n  data_files:\n  - split: queries\n    path: data/qs.jsonl\n"
        "- config_name: default\n  data_files:\n  - split: test\n    path: qrels/test.tsv\n---\n# Data\n"
    )
    assert detect_layout(repo) == "hub"
    data = load_retrieval(repo)
    assert data.corpus.texts == ("A b",) and data.qrels == {"q1": {"d1": 2}}


def test_hub_id_offline_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataFormatError, match=r"mteb/not-a-cached-dataset-xyz.*local folder"):
        load_retrieval("mteb/not-a-cached-dataset-xyz", revision="0" * 40)


def test_not_a_dataset_folder(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hi")
    with pytest.raises(DataFormatError, match=r"not a retrieval dataset folder \(it holds notes.txt\)"):
        load_retrieval(tmp_path / "x")
    with pytest.raises(DataFormatError, match="no such file or folder"):
        load_retrieval(tmp_path / "missing")


def test_hub_copy_keeps_empty_documents_with_a_warning(tmp_path, caplog):
    pd = pytest.importorskip("pandas")
    repo = hub_copy(tmp_path / "r")
    pd.DataFrame([{"_id": "d1", "title": "", "text": ""}, {"_id": "d2", "title": "", "text": "y"}]).to_parquet(
        repo / "corpus" / "test-00000-of-00001.parquet"
    )
    data = load_retrieval(str(repo))
    assert "1 documents with empty text ('d1')" in caplog.text
    assert data.corpus.texts == ("", "y")


def test_one_loader_reads_any_layout_and_the_hub_loader_sends_a_folder_there(tmp_path):
    from embedscope.data.hf import load_hub_retrieval

    assert load_retrieval(str(beir(tmp_path / "b"))).qrels == QRELS
    with pytest.raises(DataFormatError, match="local folder: load it with embedscope.data.detect.load_retrieval"):
        load_hub_retrieval(str(tmp_path / "b"))
