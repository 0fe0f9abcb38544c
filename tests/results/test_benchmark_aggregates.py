"""Benchmark aggregate columns (Mean (Task), Mean (TaskType), Rank (Borda)) against mteb's own computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embedscope.results.report import ResultRow, borda_ranks, build_report, restrict_to_benchmark

TASKS = {
    "SciFact": "Retrieval",
    "NFCorpus": "Retrieval",
    "STS12": "STS",
    "STS13": "STS",
    "Banking77Classification": "Classification",
    "SprintDuplicateQuestions": "PairClassification",
}


def _rows(seed: int, ties: bool) -> list[ResultRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for m in ("m1", "m2", "m3", "m4"):
        for task, kind in TASKS.items():
            score = float(rng.choice([0.5, 0.6])) if ties else float(rng.random())
            rows.append(ResultRow(m, task, kind, "main", score, Path()))
    return rows


@pytest.mark.parametrize("seed, ties", [(0, False), (1, True), (2, True)])
def test_aggregates_equal_mtebs(seed, ties):
    pl = pytest.importorskip("polars")
    from mteb.benchmarks._create_table import _borda_rank_from_long, _get_means_per_types, _skipna_false_mean

    rows = _rows(seed, ties)
    frame = pl.DataFrame(
        {
            "model_name": [r.model for r in rows],
            "task_name": [r.task for r in rows],
            "score": [r.score for r in rows],
            "subset": ["default"] * len(rows),
            "split": ["test"] * len(rows),
        }
    )
    theirs = dict(_borda_rank_from_long(frame).iter_rows())
    ours = borda_ranks({(r.model, r.task): r.score for r in rows}, ["m1", "m2", "m3", "m4"], list(TASKS))
    assert ours == theirs
    # mteb's summary-table steps (_create_summary_table): per-task pivot, type means, skipna=False means
    wide = (
        frame.group_by(["model_name", "task_name"])
        .agg(pl.col("score").mean())
        .pivot(on="task_name", index="model_name", values="score")
    )
    task_cols = [c for c in wide.columns if c != "model_name"]
    type_exprs, type_cols = _get_means_per_types(task_cols)
    table = (
        wide.select("model_name", *type_exprs, _skipna_false_mean(task_cols).alias("Mean (Task)"))
        .with_columns(_skipna_false_mean(type_cols).alias("Mean (TaskType)"))
        .join(_borda_rank_from_long(frame), on="model_name")
    )
    report = {row[0]: row[2:] for row in build_report(rows, digits=10, borda=True).per_type}
    assert table.height == 4
    for rec in table.iter_rows(named=True):
        m = ["m1", "m2", "m3", "m4"].index(rec["model_name"])
        assert float(report["Mean (Task)"][m]) == pytest.approx(rec["Mean (Task)"], abs=1e-9)
        assert float(report["Mean (TaskType)"][m]) == pytest.approx(rec["Mean (TaskType)"], abs=1e-9)
        assert int(report["Rank (Borda)"][m]) == rec["Rank (Borda)"]


def test_missing_task_earns_no_points_and_benchmark_restricts():
    rows = [
        ResultRow("a", "SciFact", "Retrieval", "m", 0.9, Path()),
        ResultRow("b", "SciFact", "Retrieval", "m", 0.8, Path()),
        ResultRow("b", "STS12", "STS", "m", 0.5, Path()),
        ResultRow("a", "Other", "STS", "m", 1.0, Path()),
    ]
    assert borda_ranks({(r.model, r.task): r.score for r in rows}, ["a", "b"], ["SciFact", "STS12"]) == {
        "a": 1,
        "b": 1,
    }  # a wins SciFact; b alone ran STS12
    kept = restrict_to_benchmark(rows, "MTEB(eng, v1)")
    assert {r.task for r in kept} == {"SciFact", "STS12"}


@pytest.mark.slow
def test_cli_report_for_a_benchmark(tmp_path, capsys):
    from embedscope.cli.main import main
    from embedscope.evaluation.runner import evaluate
    from embedscope.testing.fakes import HashEncoder

    evaluate(HashEncoder(), ["BBCNewsRetrieval"], output_folder=tmp_path, cache=False, show_progress=False)
    assert main(["report", str(tmp_path), "--benchmark", "MTEB(eng, v2)"]) == 2
    assert "No results for a task of MTEB(eng, v2)" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_report_shows_borda_for_a_benchmark(tmp_path, capsys):
    import json

    from embedscope.cli.main import main
    from embedscope.evaluation.runner import evaluate
    from embedscope.testing.fakes import HashEncoder

    data = tmp_path / "data" / "STSBenchmark" / "test.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text(
        "".join(
            json.dumps({"sentence1": f"a {i}", "sentence2": f"b {i % 7}", "score": float(i % 6)}) + "\n"
            for i in range(20)
        )
    )
    for dim, name in ((8, "fake/small"), (32, "fake/large")):
        evaluate(
            HashEncoder(dim=dim, name=name),
            ["STSBenchmark", "BBCNewsRetrieval"],
            output_folder=tmp_path / "out",
            cache=False,
            show_progress=False,
            data_dir=tmp_path / "data",
        )
    assert main(["report", str(tmp_path / "out"), "--benchmark", "MTEB(eng, v1)"]) == 0
    out = capsys.readouterr().out
    assert "| Rank (Borda) |  |" in out and "STSBenchmark" in out and "BBCNewsRetrieval" not in out
