"""``embedscope sweep``: grid expansion, every point equal to a separate run, resume, no re-encoding, the report
(CI, Δ, Holm-adjusted p against an independent computation, costs) and one-line errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions
from embedscope.errors import ConfigError
from embedscope.evaluation.runner import run
from embedscope.settings import Layer, build_settings
from embedscope.sweep.grid import SweepGrid, parse_axis_flag, read_sweep_file, run_sweep
from embedscope.sweep.report import sweep_report
from embedscope.testing.fakes import KeywordEncoder

WORDS = ("cat", "dog", "fish", "bird", "rain", "sun", "stock", "market", "tea", "boat")


def write_beir(folder: Path, n_docs: int = 40, n_queries: int = 24) -> Path:
    """A BEIR folder of random word documents; each query is two words, relevant: documents holding both."""
    rng = np.random.default_rng(7)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for i in range(n_docs)}
    queries, qrels = {}, {}
    for q in range(n_queries):
        a, b = rng.choice(WORDS, size=2, replace=False)
        relevant = {d: 1 for d, text in docs.items() if a in text.split() and b in text.split()}
        relevant = relevant or {f"d{q % n_docs}": 1}
        queries[f"q{q}"], qrels[f"q{q}"] = f"{a} {b}", relevant
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    rows = "".join(f"{q}\t{d}\t{r}\n" for q, docs_ in qrels.items() for d, r in docs_.items())
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


@pytest.fixture()
def beir(tmp_path):
    return write_beir(tmp_path / "words")


def base(beir: Path, tmp_path: Path, **more) -> Layer:
    values = {
        "tasks": [str(beir)],
        "output_folder": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "show_progress": False,
        **more,
    }
    return Layer("base", values, "file")


def encoded_documents(encoder: KeywordEncoder) -> int:
    return sum(len(texts) for role, texts in encoder.calls if role == "document")


# ---------------------------------------------------------------------------------------------
# Grid expansion


def test_axes_expand_in_order_and_paths_reach_nested_values(beir, tmp_path):
    pipeline = {"retrievers": ["bm25", "fts5"], "fusion": {"method": "wsum", "norm": "min-max", "weights": [1, 1]}}
    grid = SweepGrid(
        [base(beir, tmp_path, pipeline=pipeline)],
        [("pipeline.fusion.weights", [[1, 2], [2, 1]]), ("top_k", [5, 50])],
    )
    points = grid.points()
    assert [(p.settings.pipeline.fusion.weights, p.settings.top_k) for p in points] == [
        ([1, 2], 5),
        ([1, 2], 50),
        ([2, 1], 5),
        ([2, 1], 50),
    ]
    assert pipeline["fusion"]["weights"] == [1, 1]  # the base is not changed
    assert points[0].label == "pipeline.fusion.weights=[1, 2], top_k=5"


def test_a_model_axis_replaces_the_base_pipeline(beir, tmp_path):
    grid = SweepGrid([base(beir, tmp_path, pipeline={"retriever": "bm25"})], [("model", ["fts5"])])
    (point,) = grid.points()
    assert point.settings.pipeline is None and point.settings.model == "fts5"


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ([("topk", [1])], "axis 'topk': 'topk' is not a setting. Did you mean 'top_k'?"),
        ([("top_k", [])], "axis 'top_k': give a non-empty list"),
        ([("top_k", [0, 10])], "axis top_k=0: Input should be greater than 0"),
        ([("top_k", [1]), ("top_k", [2])], "axis 'top_k' is given twice"),
        ([("pipeline.rerankers[3].top_k", [5])], "position [3] does not exist"),
        ([("pipeline..x", [5])], "not a settings key or path"),
        ([("model", ["bm25"]), ("limits", [2, "many"])], "axis limits=many: Input should be a valid integer"),
    ],
)
def test_grid_errors_are_one_line_naming_the_axis(beir, tmp_path, axes, message):
    with pytest.raises(ConfigError) as e:
        SweepGrid([base(beir, tmp_path, pipeline={"retriever": "bm25", "rerankers": []})], axes).points()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_point_with_two_models_is_refused(beir, tmp_path):
    with pytest.raises(ConfigError, match="runs 2 models; a point runs one"):
        SweepGrid([base(beir, tmp_path, models=["bm25", "fts5"])], [("top_k", [5])]).points()


def test_axis_flags_are_read_as_yaml():
    assert parse_axis_flag("model=bm25,fts5") == ("model", ["bm25", "fts5"])
    assert parse_axis_flag("limits=2, 3") == ("limits", [2, 3])
    assert parse_axis_flag("limits=null,3") == ("limits", [None, 3])  # null: the setting's default
    for bad in ("top_k", "=1,2", "top_k=", "top_k=1,,2", "top_k=[]"):
        with pytest.raises(ConfigError):
            parse_axis_flag(bad)


def test_sweep_file_keys_are_checked(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("base: {top_k: 5}\naxes: {limits: [2]}\nextra: 1\n")
    with pytest.raises(ConfigError, match="grid.yaml: unknown key 'extra'. Valid keys: base, axes, grids"):
        read_sweep_file(path)
    path.write_text("base: {top_k: 5}\naxes: {limits: []}\n")
    with pytest.raises(ConfigError, match="axes.limits: give a non-empty list"):
        read_sweep_file(path)
    path.write_text("base: {topk: 5}\naxes: {limits: [2]}\n")
    layer, axes, _ = read_sweep_file(path)
    with pytest.raises(ConfigError, match=r"grid.yaml: base.topk: unknown key"):
        SweepGrid([layer], axes)


# ---------------------------------------------------------------------------------------------
# Running: every point is a separate run's result; resume; the cache


def _result(path: Path) -> tuple[dict, list]:
    data = json.loads(path.read_text())
    with gzip.open(str(path).removesuffix(".json") + ".per_item.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    return data["scores"], rows


@pytest.mark.slow
def test_every_point_equals_a_separate_run(beir, tmp_path):
    grid = SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5"]), ("top_k", [3, 50])])
    outcomes = run_sweep(grid, log=None)
    for outcome in outcomes:
        alone = build_settings(
            [base(beir, tmp_path / "alone", model=outcome.point.values["model"], top_k=outcome.point.values["top_k"])]
        )
        (report,) = run(alone)
        (separate,) = report.outcomes
        assert not separate.reused
        assert _result(separate.path) == _result(outcome.paths["words"])  # every metric and per-query value
    assert len({o.paths["words"] for o in outcomes}) == 4  # four result files, none replaced


@pytest.mark.slow
def test_resume_after_an_interruption_and_a_second_sweep_evaluates_nothing(beir, tmp_path):
    encoder = KeywordEncoder(WORDS, name="fake/counting")
    grid = SweepGrid([base(beir, tmp_path, model=encoder)], [("top_k", [2, 5, 10]), ("limits", [10, 20])])

    class Stop(Exception):
        pass

    finished = []

    def stop_after_two(outcome):
        finished.append(outcome)
        if len(finished) == 2:
            raise Stop

    with pytest.raises(Stop):
        run_sweep(grid, log=None, on_point=stop_after_two)
    first = [o.paths["words"].read_bytes() for o in finished]
    outcomes = run_sweep(grid, log=None)
    assert [o.reused for o in outcomes] == [True, True, False, False, False, False]
    assert [o.paths["words"].read_bytes() for o in outcomes[:2]] == first  # untouched
    calls = len(encoder.calls)
    again = run_sweep(grid, log=None)
    assert all(o.reused for o in again) and len(encoder.calls) == calls  # nothing evaluated, nothing encoded


@pytest.mark.slow
def test_a_top_k_axis_encodes_the_corpus_once(beir, tmp_path):
    encoder = KeywordEncoder(WORDS, name="fake/counting")
    grid = SweepGrid([base(beir, tmp_path, model=encoder)], [("top_k", [1, 5, 20])])
    outcomes = run_sweep(grid, log=None)
    assert not any(o.reused for o in outcomes)
    assert encoded_documents(encoder) == 40  # the corpus once; the other points read the embedding cache
    assert sum(len(t) for role, t in encoder.calls if role == "query") == 24


@pytest.mark.slow
def test_points_writing_one_file_with_other_settings_are_refused(beir, tmp_path, monkeypatch):
    from embedscope.evaluation import runner

    monkeypatch.setattr(runner, "experiment_name", lambda kwargs: None)  # as if top_k were not stored apart
    grid = SweepGrid([base(beir, tmp_path)], [("top_k", [3, 50]), ("model", ["bm25"])])
    with pytest.raises(ConfigError, match="write the same result file"):
        run_sweep(grid, log=None)


# ---------------------------------------------------------------------------------------------
# The report


def holm_by_hand(p: list[float]) -> list[float]:
    """Holm's step-down adjustment written out: sort, multiply the i-th smallest by (m − i), running maximum."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


@pytest.mark.slow
def test_report_scores_ci_delta_and_holm_against_independent_computations(beir, tmp_path):
    grid = SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5", "bm25:k1=0.1,b=0.1"]), ("top_k", [2, 50])])
    outcomes = run_sweep(grid, log=None)
    report = sweep_report(outcomes, ["model", "top_k"], CompareOptions(test="t-test"))
    rows = report.rows
    per_query = []
    for row, outcome in zip(rows, outcomes):
        scores, items = _result(outcome.paths["words"])
        values = {r["id"]: r["ndcg_at_10"] for r in items}
        per_query.append(values)
        assert row.score == scores["test"][0]["main_score"]
        assert row.ci_low <= row.score <= row.ci_high
    best = max(range(len(rows)), key=lambda i: (rows[i].score, -i))
    assert rows[best].best and sum(r.best for r in rows) == 1
    raw = []
    for i, row in enumerate(rows):
        if i == best:
            continue
        ids = sorted(per_query[best])
        a = [per_query[best][q] for q in ids]
        b = [per_query[i][q] for q in ids]
        assert row.delta == pytest.approx(np.mean(b) - np.mean(a), abs=1e-5)  # stored scores: 5 decimals
        expected = 1.0 if a == b else float(scipy_stats.ttest_rel(b, a).pvalue)
        assert row.p_value == pytest.approx(expected, rel=1e-9)
        raw.append(row.p_value)
    assert [r.p_adjusted for i, r in enumerate(rows) if i != best] == pytest.approx(holm_by_hand(raw), rel=1e-12)


def test_costs_from_the_stored_result(beir, tmp_path):
    encoder = KeywordEncoder(WORDS, name="fake/counting")
    outcomes = run_sweep(SweepGrid([base(beir, tmp_path, model=encoder)], [("top_k", [5, 10])]), log=None)
    report = sweep_report(outcomes, ["top_k"])
    all_phases = [
        {p["name"]: p["end"] - p["start"] for p in json.loads(o.paths["words"].read_text())["evaluation_phases"]}
        for o in outcomes
    ]
    # both points use one encoder's vectors: each shows the encode time of the point that encoded them
    cold = max(ph["encode_corpus"] + ph["encode_queries"] for ph in all_phases)
    for row, phases in zip(report.rows, all_phases):
        c = row.costs
        assert c["bytes_per_vector"] == 4 * len(WORDS)
        assert c["encode_s"] == pytest.approx(cold)
        assert c["query_s"] == pytest.approx(phases["encode_queries"] + phases["search"])
        assert c["qps"] == pytest.approx(24 / c["query_s"])
        assert c["peak_mb"] is None  # a plain encoder's run records no stage memory


@pytest.mark.slow
def test_tune_folds_chooses_on_other_folds(beir, tmp_path):
    from embedscope.compare.selection import fold_assignment

    grid = SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5", "bm25:k1=0.1,b=0.1"])])
    outcomes = run_sweep(grid, log=None)
    report = sweep_report(outcomes, ["model"], tune_folds=3)
    (fold,) = report.folds
    assert fold.folds == 3 and fold.n_items == 24 and len(fold.chosen) == 3
    # recomputed from the per-item files: per fold, the point with the best mean on the other folds' queries
    per_point = []
    for o in outcomes:
        rows = _result(o.paths["words"])[1]
        per_point.append(np.array([r["ndcg_at_10"] for r in rows]))  # every point: the queries in file order
    fold_of = fold_assignment(24, 3, 42)
    picked = np.empty(24)
    for f in range(3):
        means = [v[fold_of != f].mean() for v in per_point]
        best = max(range(len(means)), key=lambda i: (means[i], -i))
        assert fold.chosen[f] == report.rows[best].label
        picked[fold_of == f] = per_point[best][fold_of == f]
    assert fold.held_out_score == pytest.approx(picked.mean(), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# The command


@pytest.mark.slow
def test_cli_end_to_end_markdown_csv_json(beir, tmp_path, capsys):
    common = ["sweep", "--tasks", str(beir), "--output-folder", str(tmp_path / "out"), "--set", "show_progress=false"]
    args = [*common, "--axis", "model=bm25,fts5", "--axis", "top_k=3,50", "--csv", str(tmp_path / "t.csv")]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n| ") == 5 and "(best)" in captured.out and "Pareto" in captured.out
    assert captured.err.count("sweep [") == 4 and "sweep [4/4" in captured.err
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert len(lines) == 5 and lines[0].startswith("point,task,model,model,top_k,metric,score")
    assert main([*common, "--axis", "model=bm25,fts5", "--axis", "top_k=3,50", "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert len(data["rows"]) == 4 and all(r["reused"] for r in data["rows"]) and captured.err == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--axis", "topk=1,2"], "axis 'topk': 'topk' is not a setting. Did you mean 'top_k'?"),
        (["--axis", "top_k=0,2"], "axis top_k=0: Input should be greater than 0"),
        (["--axis", "top_k="], "--axis top_k: no values"),
        (["--axis", "limits=nan"], "axis limits=nan"),
        ([], "sweep needs at least one axis"),
        (["--axis", "top_k=2", "--tune-folds", "1"], "--tune-folds 1: give 2 or more folds"),
    ],
)
def test_cli_errors_are_one_line(beir, tmp_path, capsys, extra, message):
    assert main(["sweep", "--tasks", str(beir), "--output-folder", str(tmp_path / "out"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_cli_sweep_file_with_unknown_keys(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("base: {model: bm25}\naxis: {top_k: [1]}\n")
    assert main(["sweep", "--grid", str(grid)]) == 2
    assert "grid.yaml: unknown key 'axis'. Valid keys: base, axes" in capsys.readouterr().err


def test_sub_grids_cross_the_shared_axes_with_their_own(beir, tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(
        f"base: {{tasks: ['{beir}'], output_folder: '{tmp_path / 'out'}', show_progress: false}}\n"
        "axes: {top_k: [5, 50]}\n"
        "grids:\n  - axes: {model: [bm25]}\n  - axes: {model: [fts5], limits: [10, 20]}\n"
    )
    layer, axes, grids = read_sweep_file(path)
    grid = SweepGrid([layer], axes, grids)
    assert [p.label for p in grid.points()] == [
        "top_k=5, model=bm25",
        "top_k=50, model=bm25",
        "top_k=5, model=fts5, limits=10",
        "top_k=5, model=fts5, limits=20",
        "top_k=50, model=fts5, limits=10",
        "top_k=50, model=fts5, limits=20",
    ]
    assert grid.axis_keys == ["top_k", "model", "limits"]
    path.write_text("axes: {top_k: [5]}\ngrids: [{axes: {top_k: [6]}}]\n")
    layer, axes, grids = read_sweep_file(path)
    with pytest.raises(ConfigError, match="axis 'top_k' is given twice"):
        SweepGrid([layer], axes, grids)
    path.write_text("grids: [{model: [bm25]}]\n")
    with pytest.raises(ConfigError, match=r"grids\[0\] must be a mapping with one key, axes"):
        read_sweep_file(path)


def test_one_progress_bar_over_the_grid_on_a_terminal_only(beir, tmp_path, monkeypatch):
    import io
    import sys

    import embedscope.progress

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(embedscope.progress, "on_terminal", lambda: True)
    run_sweep(SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5"])]), log=sys.stderr)
    text = stream.getvalue()
    assert "sweep: 100%" in text and "2/2" in text and "model=fts5: ran in" in text
    quiet = io.StringIO()
    run_sweep(SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5"])]), log=quiet)  # not the terminal
    assert "100%" not in quiet.getvalue() and quiet.getvalue().count("\n") == 2


def test_the_sweep_says_when_its_points_ran_with_other_threads_or_cpus(tmp_path) -> None:
    import embedscope
    from embedscope.testing.tiny import tiny_retrieval_task

    def sweep():
        return embedscope.sweep(
            {"model": ["fts5", "fts5:match=all"]}, tasks=[tiny_retrieval_task()], output_folder=tmp_path,
            cache=False, show_progress=False,
        )  # fmt: skip

    first = sweep()
    assert all(r.compute and r.compute["cpu"] for r in first.rows)  # every result records its compute
    assert "compare unlike" not in first.table()
    stored = Path(first.rows[1].path)
    data = json.loads(stored.read_text())
    data["compute"] = {"threads": {"torch": {"intra_op": 7}}, "cpu": {"model": "Other", "isa": "sve"}}
    stored.write_text(json.dumps(data))
    line = next(x for x in sweep().table().splitlines() if "compare unlike" in x)
    assert "threads differ (point 0: " in line and "point 1: torch intra_op 7)" in line
    assert "CPUs differ (point 0: " in line and "point 1: Other (sve))" in line
