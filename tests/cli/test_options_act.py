"""An option that acts nowhere in a run is refused in one line naming where it came from (exit 2): each case of
"options that act nowhere", replayed, and ``--print-settings`` making the run's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.settings import Layer, build_settings
from embedscope.settings.options import acts_nowhere
from embedscope.settings.run import ChunkingSettings

PIPE = ["--retriever", "bm25", "--retriever", "fts5"]


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("embedscope: error: ") and "Traceback" not in err, err
    return err


def _config(tmp_path: Path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([*PIPE, "--fusion", "rrf", "--weights", "1", "9"], "--weights: acts with fusion wsum only"),
        ([*PIPE, "--weights", "1", "9"], "--weights: acts with fusion wsum only"),  # rrf is the default fusion
        ([*PIPE, "--fusion", "wsum-zmuv", "--rrf-k", "5"], "--rrf-k: acts with fusion rrf only"),
        (["--rescore", "3"], "--rescore: acts with precision int8 or binary only"),
        (["--fusion", "wsum"], "--fusion: need --retriever"),
        (["--top-k", "5", "--tasks", "LeeDocumentSimilarity"], "--top-k has no effect on the task(s) of this run"),
        (["--chunk-size", "100", "--tasks", "LeeDocumentSimilarity"], "--chunk-size has no effect"),
    ],
)
def test_flags_that_act_nowhere_are_refused(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *argv, "--print-settings"]) == 2
    assert expected in _error(capsys)


def test_fusion_parameters_that_act_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *PIPE, "--fusion", "wsum-zmuv", "--weights", "1", "9", "--print-settings"]) == 0
    assert '"method": "wsum", "norm": "zmuv", "weights": [1.0, 9.0]' in capsys.readouterr().out
    assert main(["run", *PIPE, "--rrf-k", "5", "--print-settings"]) == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pipeline: {retrievers: [bm25, fts5], fusion: {method: rrf, norm: zmuv}}", "pipeline.fusion.norm: acts with"),
        ("pipeline: {retrievers: [bm25, fts5], fusion: {method: wsum, k: 5}}", "pipeline.fusion.k: acts with"),
        ("pipeline: {retrievers: [bm25, fts5], fusion: {method: rrf, kk: 5}}", "pipeline.fusion.kk: unknown key"),
        ("pipeline: {retrievers: [bm25, fts5], fusion: rff}", "fusion method 'rff'"),
        ("pipeline: {retrievers: [{type: bm25, k_1: 1.2}]}", "unknown option(s) ['k_1']"),
        ("pipeline: {retrievers: ['bm25:k1=inf']}", "k1=inf: expected a finite number"),
        ("models: [{retriever: bm25, rerankers: [{type: cross-encoder, model: x, max_lenght: 5}]}]", "max_lenght"),
        ("top_k: true", "top_k: expected a number, not true"),
        ("chunking: {chunk_size: false}", "chunking.chunk_size: expected a number, not false"),
        ("models: []", "models: an empty list"),
        ("filter_field: ''", "filter_field: an empty field name"),
        ("top_k: 10\nlimits: 3\ntop_k: 20\n", "key 'top_k' is given twice (lines 1 and 3)"),
    ],
)
@pytest.mark.slow
def test_config_files_that_would_act_nowhere_are_refused_by_print_settings_too(
    tmp_path: Path, text: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, text)
    for argv in (["run", "--config", config, "--print-settings"], ["sweep", "--config", config, "--axis", "limits=2"]):
        assert main(argv) == 2
        err = _error(capsys)
        assert expected in err and "c.yaml" in err, err


def test_a_json_key_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, '{"top_k": 5, "chunking": {"chunk_size": 1, "chunk_size": 2}}', "c.json")
    assert main(["run", "--config", config, "--print-settings"]) == 2
    assert "c.json: key 'chunk_size' is given twice" in _error(capsys)


@pytest.mark.parametrize("axis", ["show_progress=true,false", "cache_dir=[a, b]", "verbosity=1,2", "device=cpu,auto"])
def test_a_sweep_axis_that_changes_no_stored_result_is_refused_before_any_point_runs(
    tmp_path: Path, axis: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--axis", axis, "--tasks", "LeeDocumentSimilarity", "--output-folder", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "changes no stored result" in _error(capsys)
    assert not (tmp_path / "out").exists()


def test_print_settings_names_the_true_source_of_a_cache_folder_set_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, f"cache: {tmp_path / 'vectors'}\n")
    assert main(["run", "--config", config, "--print-settings"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| cache_dir "))
    assert config in row and "default" not in row
    settings = build_settings([Layer(config, {"cache": str(tmp_path / "v")}, "file")])
    assert settings.source("cache_dir") == config and settings.display_name("cache_dir") == f"{config}: cache"


def test_a_nested_option_is_named_as_it_was_given() -> None:
    flags = Layer("command line", {"chunking": {"chunk_size": 100}}, "flag", {"chunking.chunk_size": "--chunk-size"})
    assert build_settings([flags]).display_name("chunking.chunk_size") == "--chunk-size"
    file = build_settings([Layer("c.yaml", {"chunking": {"chunk_size": 100}}, "file")])
    assert file.display_name("chunking.chunk_size") == "c.yaml: chunking.chunk_size"


def test_the_generic_check_reads_each_option_s_declaration() -> None:
    assert acts_nowhere("pipeline.fusion.weights", {"fusion": ["rrf"]}) == ("fusion", ["wsum"])
    assert acts_nowhere("pipeline.fusion.weights", {"fusion": ["wsum"]}) is None
    assert acts_nowhere("engine.ray_workers", {"engine": ["local"]}) == ("engine", ["ray"])
    assert acts_nowhere("top_k", {"task_type": ["Reranking"]}) == ("task_type", ["Retrieval", "InstructionRetrieval"])
    assert acts_nowhere("limits", {"task_type": ["STS"]}) is None  # declares nothing: acts everywhere


def test_a_model_alias_is_a_chunking_tokenizer_under_run_as_under_chunk() -> None:
    from embedscope.models.specs import tokenizer_location

    chunking = ChunkingSettings.model_validate({"tokenizer": "minilm", "chunk_size": 100})
    assert chunking.options().tokenizer == tokenizer_location("minilm") != "minilm"
    assert chunking.record()["tokenizer"] == "minilm"  # recorded as given: the same on every machine
    assert Path(chunking.options().tokenizer).exists()


def test_run_accepts_a_model_alias_as_chunking_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "chunking: {tokenizer: minilm}\n")
    assert main(["run", "--config", config, "--print-settings"]) == 0
    out = capsys.readouterr().out
    assert json.dumps("minilm") in out


def test_a_sweep_point_where_an_option_acts_nowhere_is_refused_before_any_point_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["sweep", "--axis", "top_k=5,10", "--tasks", "LeeDocumentSimilarity", "--output-folder", str(out)]
    assert main(argv) == 2
    err = _error(capsys)
    assert "point top_k=5" in err and "axis top_k=5 has no effect on the task(s) of this run (STS)" in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--calibration", "texts.txt"], "--calibration applies to --backend openvino-int8 only, not the default"),
        (["--calibration", "t.txt", "--backend", "onnx"], "--calibration applies to --backend openvino-int8 only"),
    ],
)
def test_a_model_option_for_another_backend_is_refused_before_any_model_loads(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *argv, "--print-settings"]) == 2
    assert expected in _error(capsys)


def test_a_models_entry_s_own_option_is_named_by_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, "models: [minilm, {model: minilm, calibration: t.txt}]\n")
    assert main(["run", "--config", config, "--print-settings"]) == 2
    assert "models[1].calibration applies to --backend openvino-int8 only" in _error(capsys)
