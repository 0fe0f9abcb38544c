"""A sweep checks everything it will need before its first point runs, in one pass that names every problem
(issue 31): each point's settings and pipeline stages, each model's availability, the output files and folders, the
seed. Nothing runs, nothing is encoded, nothing is written."""

from __future__ import annotations

import pytest

from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.sweep import grid as grid_module
from embedscope.sweep.grid import SweepGrid
from embedscope.sweep.preflight import check_sweep, output_file_problem, output_folder_problem
from embedscope.testing.fakes import KeywordEncoder

from .test_sweep import WORDS, base, write_beir


@pytest.fixture()
def beir(tmp_path):
    return write_beir(tmp_path / "words")


def _point_runs(monkeypatch) -> list:
    calls: list = []
    real = grid_module.run_point
    monkeypatch.setattr(grid_module, "run_point", lambda point: calls.append(point) or real(point))
    return calls


def test_a_bad_output_path_a_bad_point_and_a_missing_model_are_named_together_before_anything_runs(
    beir, tmp_path, monkeypatch
):
    encoder = KeywordEncoder(WORDS, name="fake/keywords")
    wrong_weights = {"retrievers": ["bm25", "fts5"], "fusion": {"method": "wsum", "weights": [1, 2, 3]}}
    grid = SweepGrid(
        [base(beir, tmp_path)],
        [("top_k", [5, 10])],
        [[("model", [encoder, "./no-such-model"])], [("pipeline", [wrong_weights])]],
    )
    (tmp_path / "page.html").mkdir()
    with pytest.raises(ConfigError) as refused:
        check_sweep(grid, {"--html": tmp_path / "page.html", "--csv": None}, seed=-1)
    message = str(refused.value)
    assert "\n" not in message and "4 problems" in message
    assert "--seed -1" in message and "page.html is a folder" in message
    assert "./no-such-model: no such file or folder" in message and "(and 1 more point)" in message
    assert "fusion weights: 3 given for 2 retrievers" in message
    assert encoder.calls == []  # nothing encoded
    assert not (tmp_path / "out").exists()  # nothing written


def test_the_cli_sweep_refuses_before_the_first_point_runs(beir, tmp_path, monkeypatch, capsys):
    runs = _point_runs(monkeypatch)
    (tmp_path / "file").write_text("x")
    argv = [
        "sweep",
        "--tasks",
        str(beir),
        "--output-folder",
        str(tmp_path / "out"),
        "--set",
        "show_progress=false",
        "--set",
        "latency_sample=3",  # refused for the bm25 point only (a pipeline), after static-64 would have run
        "--axis",
        "model=static-64,bm25,./missing,org/not-cached",
        "--csv",
        str(tmp_path / "file" / "table.csv"),
        "--html",
        str(tmp_path),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    for named in ("--csv", "--html", "latency_sample", "bm25", "./missing", "org/not-cached", "5 problems"):
        assert named in err, named
    assert runs == [] and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_good_sweep_passes_the_preflight_and_runs(beir, tmp_path, monkeypatch):
    runs = _point_runs(monkeypatch)
    out = tmp_path / "out"
    argv = ["sweep", "--tasks", str(beir), "--output-folder", str(out), "--set", "show_progress=false", "-q"]
    assert main([*argv, "--axis", "model=bm25,fts5", "--csv", str(tmp_path / "t.csv"), "--rounds", "100"]) == 0
    assert len(runs) == 2 and (tmp_path / "t.csv").is_file()


@pytest.mark.parametrize("seed", ["-1", "-99999999999999999999"])
def test_a_negative_seed_is_one_line(beir, tmp_path, capsys, seed):
    argv = ["sweep", "--tasks", str(beir), "--output-folder", str(tmp_path / "out"), "--axis", "model=bm25,fts5"]
    assert main([*argv, "--seed", seed]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--seed {seed}" in err and "0 or more" in err
    assert not (tmp_path / "out").exists()


def test_output_path_checks(tmp_path):
    (tmp_path / "file").write_text("x")
    assert output_file_problem(tmp_path / "new" / "deeper" / "t.csv") is None  # folders are made when written
    assert "is a folder" in str(output_file_problem(tmp_path))
    assert "is a file" in str(output_file_problem(tmp_path / "file" / "t.csv"))
    assert "is a file" in str(output_folder_problem(tmp_path / "file"))
    assert output_folder_problem(tmp_path / "results") is None
    assert not (tmp_path / "new").exists()


def test_a_model_behind_an_api_is_checked_as_a_service_not_looked_up_on_the_hub(monkeypatch) -> None:
    from embedscope.sweep.preflight import check_model_available

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    check_model_available("openai:text-embedding-3-small", {"api_key": "sk-test-0123"})  # no request is sent
    check_model_available("local-name", {"api_base": "http://127.0.0.1:9/v1"})
    with pytest.raises(ConfigError, match="pooling cannot act on a model behind an API"):
        check_model_available("openai:m", {"api_base": "http://127.0.0.1:9/v1", "pooling": "cls"})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        check_model_available("openai:text-embedding-3-small", {})


@pytest.mark.parametrize(
    ("kind", "reranker"),
    [(k, False) for k in ("bm25", "fts5", "dense", "colbert")] + [(k, True) for k in ("cross-encoder", "api-rerank")],
)
def test_every_stage_kind_takes_the_same_options_in_a_sweep_as_in_a_run(kind: str, reranker: bool) -> None:
    """The preflight of sweep and screen reads each stage kind's options from the pipeline's one declaration
    (``STAGE_OPTIONS``), so a kind added there is taken everywhere, and an unknown option lists the same names."""
    from embedscope.errors import ConfigError
    from embedscope.retrieval.pipeline import RERANKER_KINDS, RETRIEVER_KINDS, STAGE_OPTIONS, check_stage
    from embedscope.sweep.preflight import _check_stage

    assert set(STAGE_OPTIONS) == set(RETRIEVER_KINDS) | set(RERANKER_KINDS)
    spec = {"type": kind, "no_such_option": 1}
    with pytest.raises(ConfigError) as in_run:
        check_stage(spec, reranker=reranker)
    with pytest.raises(ConfigError) as in_sweep:
        _check_stage(spec, {}, reranker=reranker)
    assert str(in_sweep.value) == str(in_run.value)
    assert str(in_run.value).endswith(f"Valid options: {', '.join(STAGE_OPTIONS[kind])}")


def test_an_api_reranker_that_run_accepts_passes_the_sweep_preflight() -> None:
    """issue 52's case: ``{type: api-rerank, model: x, api_base: …, max_retries: 2}`` was refused by sweep and screen
    ("unknown option(s) ['api_base', 'max_retries']") although run accepted it."""
    from embedscope.retrieval.pipeline import check_stage
    from embedscope.sweep.preflight import check_pipeline

    stage = {"type": "api-rerank", "model": "x", "api_base": "http://127.0.0.1:9/v1", "max_retries": 2}
    check_stage(stage, reranker=True)
    check_pipeline({"retrievers": ["bm25"], "rerankers": [stage]}, {})
