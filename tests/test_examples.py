"""The sweep files in examples/ are valid, expand to the points they describe, and the fastbook studies run
through ``sweep`` on a small QA folder (real retrievers BM25 and FTS5; the dense points need a real model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedscope.compare.core import CompareOptions
from embedscope.settings import Layer
from embedscope.sweep.grid import SweepGrid, read_sweep_file, run_sweep
from embedscope.sweep.report import sweep_report
from tests.support.qa import write_qa_folder

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def grid_of(name: str, tmp_path: Path, **overrides) -> SweepGrid:
    layer, axes, grids = read_sweep_file(EXAMPLES / name)
    more = Layer("test", {"output_folder": str(tmp_path / "out"), "show_progress": False, **overrides}, "flag")
    return SweepGrid([layer, more], axes, grids)


def test_the_bbc_grid_has_the_issues_33_points(tmp_path):
    points = grid_of("sweep-bbc-grid.yaml", tmp_path).points()
    assert len(points) == 3 * (1 + 9 + 1)
    assert {p.settings.chunking.chunk_size for p in points if p.settings.chunking} == {128, 256, 512}


@pytest.mark.slow
def test_the_fastbook_studies_run_through_sweep(tmp_path):
    qa = write_qa_folder(tmp_path / "fastbook")
    tasks = [{"name": "fastbook", "data_path": str(qa), "main_score": "modified_mrr_at_10"}]
    sizes = grid_of("sweep-fastbook-chunk-sizes.yaml", tmp_path, custom_tasks=tasks)
    assert len(sizes.points()) == 5 * 2
    paragraphs = grid_of("sweep-fastbook-paragraphs.yaml", tmp_path, custom_tasks=tasks)
    assert len(paragraphs.points()) == 6 * 4
    lexical = [(k, v if k != "model" else ["fts5", "bm25"]) for k, v in paragraphs.grids[0]]
    runnable = SweepGrid(paragraphs.base, paragraphs.axes, [lexical])
    outcomes = run_sweep(runnable, log=None)
    assert len(outcomes) == 12 and all(list(o.paths) == ["fastbook"] for o in outcomes)
    report = sweep_report(outcomes, runnable.axis_keys, CompareOptions(rounds=200))
    assert {r.metric for r in report.rows} == {"modified_mrr_at_10"}
    assert len({r.score for r in report.rows}) > 1 and all(r.ci_low <= r.score <= r.ci_high for r in report.rows)


def _keywords_file(qa: Path) -> dict[str, str]:
    """``fts_keywords.csv`` in the study's format: for most questions two words of its context other than the
    question's own (so keywords and question text search differently), one empty row, one question without a row."""
    import csv
    import json

    questions = json.loads((qa / "questions.json").read_text())["questions"]
    keywords: dict[str, str] = {}
    with (qa / "fts_keywords.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["chapter", "question_number", "question_text", "keywords"])
        for i, q in enumerate(questions[:-1]):
            words = q["answer_context"][0]["context"][0].replace(".", "").split()
            text = "" if i == 3 else f'"{words[-1]}, {words[len(words) // 2]}"'
            writer.writerow([q["chapter"], q["question_number"], q["question_text"], text])
            keywords[f"{q['chapter']}-{q['question_number']}"] = text
    return keywords


@pytest.mark.slow
def test_a_fastbook_sweep_point_with_keywords_equals_fastbook_run(tmp_path, capsys):
    """The chunk-size example's FTS5 point at 100 tokens, on a QA folder holding ``fts_keywords.csv``, gives what
    ``fastbook run --queries fts_keywords.csv`` gives (and not what the question text gives)."""
    from embedscope.cli.main import main

    qa = write_qa_folder(tmp_path / "fastbook", n_docs=3, paragraphs=30, n_questions=24)
    _keywords_file(qa)
    tasks = [{"name": "fastbook", "data_path": str(qa), "main_score": "modified_mrr_at_10"}]
    sizes = grid_of("sweep-fastbook-chunk-sizes.yaml", tmp_path, custom_tasks=tasks)
    point = SweepGrid(sizes.base, [("chunking.chunk_size", [100]), ("model", ["fts5"])], [])
    outcomes = run_sweep(point, log=None)
    (row,) = sweep_report(outcomes, point.axis_keys, CompareOptions(rounds=20)).rows

    def fastbook_run(*queries: str) -> float:
        table = tmp_path / f"table{len(queries)}.csv"
        args = ["--benchmark", str(qa / "questions.json"), "--notebooks", str(qa / "documents"), "--scope", "chapter"]
        argv = ["fastbook", "run", *args, "--chunk-size", "100", "--retriever", "fts5", *queries]
        assert main([*argv, "--table-csv", str(table)]) == 0
        return float(table.read_text().splitlines()[-1].split(",")[2])

    with_keywords = fastbook_run("--queries", str(qa / "fts_keywords.csv"))
    assert row.metric == "modified_mrr_at_10" and 0 < row.score == round(with_keywords, 5)
    assert round(fastbook_run(), 5) != row.score  # the question text gives another figure
