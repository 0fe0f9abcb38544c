"""Retrieval data loaders: every layout, and the errors a user sees on bad input."""

from __future__ import annotations

import json

import pytest

from embedscope.data.detect import detect_layout, load_retrieval
from embedscope.errors import DataFormatError

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "A cat sat."},
    {"_id": "d2", "title": "", "text": " Dogs bark. "},
    {"_id": "d3", "text": "Fish swim."},
]
QUERIES = [{"_id": "q1", "text": "cat"}, {"_id": "q2", "text": "dog"}, {"_id": "q3", "text": "bird"}]
EXPECTED_TEXTS = ("Cats A cat sat.", "Dogs bark.", "Fish swim.")


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _beir(folder, split="test"):
    _jsonl(folder / "corpus.jsonl", CORPUS)
    _jsonl(folder / "queries.jsonl", QUERIES)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n")
    return folder


def test_beir_folder(tmp_path):
    data = load_retrieval(_beir(tmp_path / "beir"))
    assert data.corpus.texts == EXPECTED_TEXTS  # (title + " " + text).strip(), as MTEB and BEIR
    assert data.queries.ids == ("q1", "q2", "q3")
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}  # a 0 judgment is kept


def test_beir_text_equals_what_mteb_builds(tmp_path):
    pytest.importorskip("mteb")
    from mteb._create_dataloaders import _corpus_to_dict  # noqa: F401  (exists in mteb 2.26)

    # mteb's rule, written out: title and text joined by a space, stripped; text alone if no title
    for row, ours in zip(CORPUS, load_retrieval(_beir(tmp_path / "b")).corpus.texts):
        title = row.get("title") or ""
        assert ours == (f"{title} {row['text']}".strip() if title else row["text"].strip())


def test_evalscope_qrels_jsonl(tmp_path):
    folder = tmp_path / "evalscope"
    _jsonl(folder / "corpus.jsonl", CORPUS)
    _jsonl(folder / "queries.jsonl", QUERIES)
    _jsonl(
        folder / "qrels.jsonl",
        [{"query-id": "q1", "corpus-id": "d1", "score": 1}, {"query_id": "q2", "corpus_id": "d2", "score": "1"}],
    )
    data = load_retrieval(folder)
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    with pytest.raises(DataFormatError, match="no split 'dev'.*test"):
        load_retrieval(folder, split="dev")


def test_tables_with_column_mapping(tmp_path):
    import pandas as pd

    folder = tmp_path / "tables"
    folder.mkdir()
    pd.DataFrame({"doc": ["d1", "d2"], "headline": ["Cats", ""], "body": ["A cat sat.", "Dogs bark."]}).to_parquet(
        folder / "corpus.parquet"
    )
    pd.DataFrame({"qid": ["q1"], "question": ["cat"]}).to_csv(folder / "queries.csv", index=False)
    pd.DataFrame({"qid": ["q1"], "pid": ["d1"], "label": [1]}).to_csv(folder / "qrels.csv", index=False)
    columns = {
        "corpus.id": "doc",
        "title": "headline",
        "corpus.text": "body",
        "queries.id": "qid",
        "queries.text": "question",
    }
    data = load_retrieval(folder, columns=columns)
    assert data.corpus.texts == ("Cats A cat sat.", "Dogs bark.") and data.queries.texts == ("cat",)
    assert data.qrels == {"q1": {"d1": 1}}


def test_pairs_file_dedupes_passages(tmp_path):
    path = tmp_path / "pairs.jsonl"
    _jsonl(
        path,
        [
            {"query": "cat?", "positive": "A cat."},
            {"query": "kitten?", "positive": "A cat."},
            {"query": "dog?", "positive": "A dog."},
        ],
    )
    data = load_retrieval(path)
    assert data.corpus.texts == ("A cat.", "A dog.")
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d1": 1}, "q3": {"d2": 1}}


def test_saved_dataset_dict(tmp_path):
    import datasets

    dd = datasets.DatasetDict(
        {
            "corpus": datasets.Dataset.from_list(CORPUS[:2]),
            "queries": datasets.Dataset.from_list(QUERIES[:1]),
            "qrels": datasets.Dataset.from_list([{"query-id": "q1", "corpus-id": "d1", "score": 1}]),
        }
    )
    dd.save_to_disk(str(tmp_path / "saved"))
    assert detect_layout(tmp_path / "saved") == "saved"
    data = load_retrieval(tmp_path / "saved")
    assert data.corpus.texts == EXPECTED_TEXTS[:2] and data.qrels == {"q1": {"d1": 1}}


def test_mteb_hub_layout_local_copy(tmp_path):
    import pandas as pd

    repo = tmp_path / "scifact"
    for sub, rows in (
        ("corpus", [{"id": "d1", "title": "T", "text": "x"}, {"id": "d2", "title": "", "text": "y"}]),
        ("queries", [{"id": "q1", "text": "x?"}]),
        ("default", [{"query-id": "q1", "corpus-id": "d1", "score": 1}]),
    ):
        (repo / sub).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(repo / sub / "test-00000-of-00001.parquet")
    assert detect_layout(repo) == "hub"
    data = load_retrieval(repo)
    assert data.corpus.texts == ("T x", "y") and data.qrels == {"q1": {"d1": 1}}


def test_hub_id_offline_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataFormatError, match="local folder"):
        load_retrieval("mteb/scifact")


@pytest.mark.parametrize(
    "mutate,message",
    [
        (
            lambda f: (f / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": \n'),
            r"corpus.jsonl, line 2: malformed JSON",
        ),
        (lambda f: _jsonl(f / "corpus.jsonl", [{"_id": "d1", "body": "x"}]), r"line 1: missing field 'text'.*columns="),
        (
            lambda f: _jsonl(f / "corpus.jsonl", CORPUS + [{"_id": "d1", "text": "again"}]),
            r"line 4: duplicate document id 'd1' \(first at .*line 1\)",
        ),
        (
            lambda f: _jsonl(f / "corpus.jsonl", CORPUS[:1] + [{"_id": "d2", "text": "  "}, CORPUS[2]]),
            r"empty text \('d2'\)",
        ),
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td9\t1\n"),
            r"test.tsv, line 2: qrels name document 'd9'",
        ),
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\t1\n"),
            r"test.tsv, line 2: qrels name query 'q9'",
        ),
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n"),
            r"line 2: relevance score 'high' is not a number",
        ),
    ],
)
def test_bad_input_names_file_line_and_fix(tmp_path, mutate, message):
    folder = _beir(tmp_path / "bad")
    mutate(folder)
    with pytest.raises(DataFormatError, match=message):
        load_retrieval(folder)


def test_missing_split_lists_available(tmp_path):
    with pytest.raises(DataFormatError, match="no split 'dev'; available: test"):
        load_retrieval(_beir(tmp_path / "b"), split="dev")
