"""A QA folder's question files: two are refused, per-stage keyword queries are read into the queries (issue 31)."""

from __future__ import annotations

import json

import pytest

from embedscope.cli.main import main
from embedscope.data.qa import load_qa_folder, stage_query_field
from embedscope.errors import DataFormatError
from tests.support.qa import write_qa_folder


def _jsonl(folder):
    (folder / "questions.jsonl").write_text(json.dumps({"_id": "x", "text": "cat", "contexts": ["cat dog"]}) + "\n")


def test_a_folder_with_both_question_files_is_refused_naming_both(tmp_path, capsys):
    qa = write_qa_folder(tmp_path / "qa")
    _jsonl(qa)
    with pytest.raises(DataFormatError, match=r"holds both questions.json and questions.jsonl"):
        load_qa_folder(qa)
    argv = ["run", "--model", "bm25", "--tasks", str(qa), "--output-folder", str(tmp_path / "out"), "--no-cache"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "questions.json and questions.jsonl" in err[0]


def test_keywords_file_becomes_the_fts5_stage_query_of_each_question(tmp_path):
    qa = write_qa_folder(tmp_path / "qa", n_questions=3)
    (qa / "fts_keywords.csv").write_text(
        'chapter,question_number,question_text,keywords\n{c},1,"q","""cat, dog"""\n'.format(
            c=json.loads((qa / "questions.json").read_text())["questions"][0]["chapter"]
        )
    )
    queries = load_qa_folder(qa).queries
    values = queries.metadata[stage_query_field("fts5")]
    assert values[0] == '"cat, dog"' and values[1:] == (None, None)


@pytest.mark.parametrize(
    "rows, message",
    [
        ("chapter,question_number,question_text,keywords\n99,1,q,cat\n", "not in questions.json: 99-1"),
        ("chapter,question,keywords\n1,1,cat\n", "missing column"),
        ("chapter,question_number,question_text,keywords\nx,1,q,cat\n", "chapter: expected a whole number"),
    ],
)
def test_bad_keyword_files_are_one_line(tmp_path, rows, message):
    qa = write_qa_folder(tmp_path / "qa", n_questions=3)
    (qa / "fts_keywords.csv").write_text(rows)
    with pytest.raises(DataFormatError, match=message):
        load_qa_folder(qa)


def test_keywords_with_jsonl_questions_are_refused(tmp_path):
    qa = tmp_path / "qa"
    (qa / "documents").mkdir(parents=True)
    (qa / "documents" / "01_a.md").write_text("cat dog\n")
    _jsonl(qa)
    (qa / "fts_keywords.csv").write_text("chapter,question_number,question_text,keywords\n1,1,q,cat\n")
    with pytest.raises(DataFormatError, match="fts_keywords.csv matches questions by chapter"):
        load_qa_folder(qa)
