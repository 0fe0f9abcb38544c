"""Bad input: every error names the file, the line or field, and the fix."""

from __future__ import annotations

import json

import pytest

from embedscope.data.detect import load_retrieval
from embedscope.errors import DataFormatError

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "A cat sat."},
    {"_id": "d2", "text": "Dogs bark."},
    {"_id": "d3", "text": "Fish swim."},
]
QUERIES = [{"_id": "q1", "text": "cat"}, {"_id": "q2", "text": "dog"}]
HEADER = "query-id\tcorpus-id\tscore\n"


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def folder(tmp_path):
    f = tmp_path / "data"
    jsonl(f / "corpus.jsonl", CORPUS)
    jsonl(f / "queries.jsonl", QUERIES)
    (f / "qrels").mkdir()
    (f / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t1\nq2\td2\t1\n")
    return f


def fails(folder, pattern, **kwargs):
    with pytest.raises(DataFormatError, match=pattern) as info:
        load_retrieval(folder, **kwargs)
    return str(info.value)


def test_malformed_json_names_file_and_line(folder):
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n\n{"_id": "d2", "text": \n')
    fails(folder, r"corpus.jsonl, line 3: malformed JSON .*column")


def test_non_object_line(folder):
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n["q2", "y"]\n')
    fails(folder, r"queries.jsonl, line 2: expected a JSON object")


def test_missing_field_names_field_line_existing_fields_and_mapping(folder):
    jsonl(folder / "corpus.jsonl", CORPUS[:1] + [{"_id": "d2", "body": "x"}])
    message = fails(folder, r"corpus.jsonl, line 2: missing field 'text'")
    assert "'_id', 'body'" in message and "columns={'text': '<name>'}" in message


def test_missing_id(folder):
    jsonl(folder / "queries.jsonl", [{"qid": "q1", "text": "x"}])
    fails(folder, r"queries.jsonl, line 1: missing field 'id' \(looked for '_id', 'id'.*'qid'")


def test_null_field(folder):
    jsonl(folder / "corpus.jsonl", CORPUS + [{"_id": "d4", "text": None}])
    fails(folder, r"line 4: missing field 'text' \(field 'text' is null")


def test_duplicate_ids_name_both_lines(folder):
    jsonl(folder / "corpus.jsonl", CORPUS + [{"_id": "d1", "text": "again"}])
    fails(folder, r"corpus.jsonl, line 4: duplicate document id 'd1' \(first at .*corpus.jsonl, line 1\)")
    jsonl(folder / "corpus.jsonl", CORPUS)
    jsonl(folder / "queries.jsonl", QUERIES + [{"_id": "q2", "text": "x"}])
    fails(folder, r"queries.jsonl, line 3: duplicate query id 'q2' \(first at .*line 2\)")


def test_empty_texts_name_ids_and_file(folder):
    jsonl(folder / "corpus.jsonl", CORPUS[:1] + [{"_id": "d2", "text": "  "}, {"_id": "d3", "title": "", "text": ""}])
    fails(folder, r"corpus.jsonl: 2 documents with empty text \('d2', 'd3'\)")
    jsonl(folder / "corpus.jsonl", CORPUS)
    jsonl(folder / "queries.jsonl", QUERIES + [{"_id": "q3", "text": ""}])
    fails(folder, r"queries.jsonl: 1 queries with empty text \('q3'\)")


def test_qrels_unknown_document_lists_first_few(folder):
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t1\nq1\td9\t1\nq2\td8\t1\n")
    message = fails(folder, r"test.tsv, line 3: qrels name document 'd9' \(query 'q1'\), which is not in the corpus")
    assert "2 unknown document ids in all: 'd9' (line 3), 'd8' (line 4)" in message


def test_qrels_unknown_query(folder):
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t1\nq9\td1\t1\n")
    fails(folder, r"test.tsv, line 3: qrels name query 'q9', which is not among the queries")


def test_non_integer_and_non_numeric_scores(folder):
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t0.5\n")
    fails(folder, r"test.tsv, line 2: relevance score '0.5' is not an integer")
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\thigh\n")
    fails(folder, r"test.tsv, line 2: relevance score 'high' is not a number")
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t2.0\n")
    assert load_retrieval(folder).qrels == {"q1": {"d1": 2}}


def test_conflicting_judgments_name_both_lines(folder):
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t1\nq1\td1\t1\nq1\td1\t0\n")
    fails(folder, r"test.tsv, line 4: query 'q1' / document 'd1' is judged 0, but .*line 2 judged it 1")


def test_qrels_row_with_wrong_cell_count(folder):
    (folder / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\n")
    fails(folder, r"test.tsv, line 2: 2 tab-separated cells, but the header has 3")


def test_missing_split_lists_available(folder):
    fails(folder, r"no split 'dev'; available: test", split="dev")


def test_missing_qrels_and_queries(folder):
    (folder / "qrels" / "test.tsv").unlink()
    fails(folder, r"no qrels found; add qrels/test.tsv")


def test_csv_and_parquet_locations(tmp_path):
    pd = pytest.importorskip("pandas")
    f = tmp_path / "t"
    f.mkdir()
    pd.DataFrame({"id": ["d1", "d2", "d1"], "text": ["a", "b", "c"]}).to_parquet(f / "corpus.parquet")
    (f / "queries.csv").write_text("id,text\nq1,x\n")
    (f / "qrels.csv").write_text("query-id,corpus-id,score\nq1,d1,1\n")
    fails(f, r"corpus.parquet, row 3: duplicate document id 'd1' \(first at .*row 1\)")
    pd.DataFrame({"id": ["d1"], "text": ["a"]}).to_parquet(f / "corpus.parquet")
    (f / "queries.csv").write_text("id,text\nq1,x,extra\n")
    fails(f, r"queries.csv, line 2: 3 cells but the header has 2")


def test_empty_corpus_file(folder):
    (folder / "corpus.jsonl").write_text("\n")
    fails(folder, r"corpus.jsonl: no documents found")


def test_pairs_missing_positive(tmp_path):
    path = tmp_path / "pairs.jsonl"
    jsonl(path, [{"query": "x", "positive": "y"}, {"query": "z", "answr": "w"}])
    message = fails(path, r"pairs.jsonl, line 2: missing field 'positive'")
    assert "columns={'positive': '<name>'}" in message


@pytest.mark.slow
def test_large_corpus_loads_fast(tmp_path):
    import time

    f = tmp_path / "big"
    f.mkdir()
    with open(f / "corpus.jsonl", "w") as out:
        for i in range(100_000):
            out.write(json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": "word " * 30}) + "\n")
    jsonl(f / "queries.jsonl", [{"_id": "q1", "text": "x"}])
    jsonl(f / "qrels.jsonl", [{"query-id": "q1", "corpus-id": "d99999", "score": 1}])
    start = time.perf_counter()
    data = load_retrieval(f)
    assert len(data.corpus) == 100_000 and data.corpus.texts[-1].startswith("T99999 word")
    assert time.perf_counter() - start < 3.0  # ~0.4 s here; generous for a loaded 2-core machine
