"""Chunking as a sweep axis: every point equals a separate run with the same chunking (bit for bit), the QA
relevance is recomputed per point, the paragraph strategies are points of their own, and the report draws the
chunk-size axis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedscope.compare.core import CompareOptions
from embedscope.evaluation.runner import evaluate
from embedscope.settings import Layer
from embedscope.sweep.grid import SweepGrid, run_sweep
from embedscope.sweep.report import sweep_report
from embedscope.testing.fakes import KeywordEncoder
from tests.support.qa import WORDS, write_qa_folder


@pytest.fixture()
def qa(tmp_path):
    return write_qa_folder(tmp_path / "qa")


def base(qa: Path, tmp_path: Path, encoder: KeywordEncoder, **more) -> Layer:
    values = {
        "model": encoder,
        "tasks": [str(qa)],
        "output_folder": str(tmp_path / "sweep"),
        "cache_dir": str(tmp_path / "cache"),
        "show_progress": False,
        **more,
    }
    return Layer("base", values, "file")


def main_scores(path: Path) -> str:
    return json.dumps(json.loads(path.read_text())["scores"]["test"][0], sort_keys=True)


@pytest.mark.slow
def test_each_chunking_point_equals_its_separate_run(qa, tmp_path):
    encoder = KeywordEncoder(WORDS)
    grid = SweepGrid(
        [base(qa, tmp_path, encoder, chunking={"method": "paragraphs"})],
        [("chunking.paragraphs", [1, 2, 4])],
    )
    outcomes = run_sweep(grid, log=None)
    seen = set()
    for outcome, paragraphs in zip(outcomes, (1, 2, 4)):
        (path,) = outcome.paths.values()
        seen.add(path)
        alone = evaluate(
            KeywordEncoder(WORDS),
            [str(qa)],
            chunking={"method": "paragraphs", "paragraphs": paragraphs},
            output_folder=str(tmp_path / f"alone{paragraphs}"),
            cache=False,
            show_progress=False,
        )
        assert main_scores(path) == main_scores(alone.outcomes[0].path)
    assert len(seen) == 3  # stored apart
    scores = [json.loads(p.read_text())["scores"]["test"][0]["ndcg_at_10"] for p in seen]
    assert len(set(scores)) > 1  # the chunking changes the answer
    again = run_sweep(grid, log=None)
    assert all(o.reused for o in again)


@pytest.mark.slow
def test_the_paragraph_strategies_and_token_windows_are_points(qa, tmp_path):
    encoder = KeywordEncoder(WORDS)
    methods = [
        {"method": "fastbook-paragraphs-a"},
        {"method": "fastbook-paragraphs-f"},
        {"method": "tokens", "chunk_size": 40, "overlap": 8},
    ]
    grid = SweepGrid([base(qa, tmp_path, encoder)], [("chunking", methods)])
    outcomes = run_sweep(grid, log=None)
    report = sweep_report(outcomes, ["chunking"], CompareOptions(rounds=200))
    assert len(report.rows) == 3
    assert {r.label for r in report.rows} == {
        "chunking={method: fastbook-paragraphs-a}",
        "chunking={method: fastbook-paragraphs-f}",
        "chunking={method: tokens, chunk_size: 40, overlap: 8}",
    }
