"""The sweep files in examples/ are valid, expand to the points they describe, and the fastbook studies run
through ``sweep`` on a small QA folder (real retrievers BM25 and FTS5; the dense points need a real model)."""

from __future__ import annotations

from pathlib import Path

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
