"""One settings type: every option means the same from flags, config files (both schemas) and evaluate(), an explicit
flag overrides the config file, and nothing is dropped silently (issue 20). Each case under the issue's "Why"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.settings import Layer, build_settings
from embedscope.settings.files import load_settings
from embedscope.testing.tiny import write_tiny_beir


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.fixture
def base_config(tmp_path, tiny_model) -> Path:
    data = write_tiny_beir(tmp_path / "data")
    config = tmp_path / "base.yaml"
    config.write_text(
        f"model: {tiny_model}\ntasks: [{data}]\noutput_folder: {tmp_path / 'outA'}\ndevice: cpu\ncache: false\n"
    )
    return config


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("embedscope: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_an_explicit_output_folder_flag_overrides_the_config_file(tmp_path, base_config, capsys):
    assert main(["run", "--config", str(base_config), "--output-folder", str(tmp_path / "outB")]) == 0
    assert list((tmp_path / "outB").rglob("*.json")) and not (tmp_path / "outA").exists()
    assert str(tmp_path / "outB") in capsys.readouterr().out


@pytest.mark.slow
def test_a_device_flag_is_not_dropped_when_a_config_is_given(base_config, capsys):
    assert main(["run", "--config", str(base_config), "--device", "cuda"]) == 2
    assert "device 'cuda:0' is not available here" in _one_error_line(capsys)


@pytest.mark.slow
def test_limits_and_overwrite_flags_take_effect_over_a_stored_full_result(base_config, capsys):
    assert main(["run", "--config", str(base_config)]) == 0
    assert main(["run", "--config", str(base_config), "--limits", "3", "--overwrite", "always"]) == 0
    out = capsys.readouterr().out
    assert "reused" not in out.splitlines()[-1] and "/experiments/" in out.splitlines()[-1]
    written = Path(out.splitlines()[-1].split(" ", 1)[1])
    assert json.loads(written.read_text())["run_settings"]["limits"] == 3


@pytest.mark.slow
def test_print_settings_shows_each_value_and_where_it_came_from(base_config, capsys):
    assert main(["run", "--config", str(base_config), "--limits", "3", "--print-settings"]) == 0
    rows = {
        r.split("|")[1].strip(): r.split("|")[3].strip() for r in capsys.readouterr().out.splitlines()[2:] if "|" in r
    }
    assert rows["limits"] == "command line (--limits)" and rows["device"] == str(base_config)
    assert rows["top_k"] == "default"


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("task_types", ["Clustering"], "none of the 2 task"),
        ("languages", ["zho"], "none of the 2 task"),
    ],
)
def test_evalscope_task_filters_act(tmp_path, key, value, match):
    data = write_tiny_beir(tmp_path / "data")
    config = {
        "eval_config": {
            "models": [{"model_name_or_path": "minilm"}],
            "eval": {
                "task_names": ["LeeDocumentSimilarity"],
                "custom_tasks": [{"name": "Mine", "data_path": str(data)}],
            },
        }
    }
    config["eval_config"]["eval"][key] = value
    with pytest.raises(ConfigError, match=match):
        embedscope.evaluate_config(config)
    config["eval_config"]["eval"][key] = ["STS"] if key == "task_types" else ["eng"]
    from embedscope.evaluation.plan import resolve_tasks

    kept = resolve_tasks(load_settings(config))
    assert [t.name for t in kept] == (
        ["LeeDocumentSimilarity"] if key == "task_types" else ["LeeDocumentSimilarity", "Mine"]
    )


def test_native_task_filters_keep_a_benchmark_s_tasks_of_one_type():
    from embedscope.evaluation.plan import _filtered
    from embedscope.tasks.registry import resolve_task

    tasks = [resolve_task(t) for t in ("BBCNewsRetrieval", "LeeDocumentSimilarity", "BBCNewsClustering")]
    settings = load_settings({"task_types": ["sts", "Clustering"]})
    assert [t.name for t in _filtered(tasks, settings)] == ["LeeDocumentSimilarity", "BBCNewsClustering"]
    with pytest.raises(ConfigError, match="Unknown task type 'Clusterin'.*Did you mean 'Clustering'"):
        _filtered(tasks, load_settings({"task_types": ["Clusterin"]}))


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--ray-workers", "2"], "--ray-workers applies to the ray engine only"),
        (["--ray-address", "auto"], "--ray-address applies to the ray engine only"),
        (["--batch-size", "0"], "--batch-size: Input should be greater than 0"),
        (["--limits", "0"], "--limits: Input should be greater than 0"),
        (["--limits", "-1"], "--limits: Input should be greater than 0"),
        (["--engine", "ray", "--ray-workers", "0"], "--ray-workers: Input should be greater than 0"),
        (["--top-k", "abc"], "--top-k: Input should be a valid integer"),
        (["--output-folder", ""], "--output-folder: an empty output folder"),
        (["--weights", "nan", "1", "--retriever", "bm25", "--retriever", "fts5"], "weights[0] = nan is not a finite"),
        (["--task-param", "k=inf"], "--task-param: k = inf is not a finite number"),
        (["--dtype", "int4"], "--dtype: dtype 'int4'"),
    ],
)
def test_flags_that_cannot_act_are_one_line_errors(argv, names, capsys):
    assert main(["run", *argv, "--print-settings"]) == 2
    assert names in _one_error_line(capsys)


def test_a_retrieval_option_on_tasks_that_cannot_use_it_is_refused(tmp_path, capsys):
    argv = ["run", "--tasks", "LeeDocumentSimilarity", "--top-k", "10", "--output-folder", str(tmp_path)]
    assert main(argv) == 2
    assert "--top-k has no effect on the task(s) of this run (STS)" in _one_error_line(capsys)
    assert (
        main(["run", "--tasks", "LeeDocumentSimilarity", "--save-predictions", "--output-folder", str(tmp_path)]) == 2
    )
    assert "--save-predictions has no effect" in _one_error_line(capsys)


def test_eval_refuses_a_zero_batch_size(capsys):
    assert main(["eval", "-m", "minilm", "--dataset", "x.csv", "--batch-size", "0"]) == 2
    assert "--batch-size" in _one_error_line(capsys)


def test_unknown_model_option_in_a_config_is_a_one_line_error(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("models: [{model: static-64, foo: bar}]\n")
    assert main(["run", "--config", str(config)]) == 2
    err = _one_error_line(capsys)
    assert f"{config}: models[0].foo: unknown key" in err and "pooling" in err


def test_evalscope_batch_size_of_the_wrong_type_names_its_key(tmp_path, capsys):
    config = tmp_path / "e.json"
    config.write_text(
        json.dumps(
            {"eval_config": {"models": [{"model_name_or_path": "minilm", "encode_kwargs": {"batch_size": "abc"}}]}}
        )
    )
    assert main(["run", "--config", str(config)]) == 2
    assert "eval_config.models[0].encode_kwargs.batch_size: Input should be a valid integer" in _one_error_line(capsys)


def test_a_retriever_option_of_the_wrong_type_is_a_one_line_error(tmp_path, capsys):
    data = write_tiny_beir(tmp_path / "data")
    for spec, expected in (("bm25:k1=abc", "k1='abc': expected a finite number"), ("bm25:k1=inf", "k1=inf")):
        assert main(["run", "--model", spec, "--tasks", str(data), "--output-folder", str(tmp_path / "o")]) == 2
        assert f"bm25 stage option {expected}" in _one_error_line(capsys)


def test_flags_override_config_options_of_each_model(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("models: [{model: a, pooling: cls, device: cuda:1}, b]\nmodel_options: {pooling: max}\n")
    from embedscope.settings.files import config_layer

    flags = Layer("command line", {"model_options": {"pooling": "mean"}, "device": "cpu"}, "flag")
    runs = build_settings([config_layer(config), flags]).model_runs()
    assert [(r.model, r.options) for r in runs] == [("a", {"pooling": "mean"}), ("b", {"pooling": "mean"})]
    alone = build_settings([config_layer(config)]).model_runs()
    assert [r.options for r in alone] == [{"pooling": "cls", "device": "cuda:1"}, {"pooling": "max"}]


def test_evaluate_takes_the_same_keys_as_a_config_file(tmp_path):
    with pytest.raises(ConfigError, match="ray_workers applies to the ray engine only"):
        embedscope.evaluate("minilm", ray_workers=2)
    with pytest.raises(ConfigError, match="limitz: unknown key. Did you mean 'limits'"):
        embedscope.evaluate("minilm", limitz=3)
    with pytest.raises(ConfigError, match="batch_size: Input should be greater than 0"):
        embedscope.evaluate("minilm", batch_size=0)
