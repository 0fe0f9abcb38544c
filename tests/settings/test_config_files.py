"""Config files: embedscope's schema and EvalScope's eval_config (current and legacy keys)."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import ConfigError
from embedscope.settings.files import load_settings

SEED_ONE_STAGE = {  # the EvalScope seed's legacy one-stage example
    "eval_backend": "RAGEval",
    "eval_config": {
        "tool": "MTEB",
        "model": [
            {
                "model_name_or_path": "minilm",
                "pooling_mode": None,
                "max_seq_length": 512,
                "prompt": "",
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 128},
            }
        ],
        "eval": {
            "tasks": ["BBCNewsRetrieval"],
            "verbosity": 2,
            "output_folder": "outputs",
            "overwrite_results": True,
            "topk": 10,
            "limits": 500,
        },
    },
}


def test_evalscope_legacy_seed_example():
    settings = load_settings(SEED_ONE_STAGE)
    (call,) = settings.model_runs()
    assert call.model == "minilm" and settings.task_specs() == ["BBCNewsRetrieval"]
    assert call.batch_size == 128 and settings.limits == 500 and settings.overwrite == "always"
    assert settings.output_folder == "outputs" and call.options == {"max_seq_length": 512}
    assert settings.verbosity == 2 and settings.source("limits") == "config"


def test_evalscope_current_keys_with_custom_task(tmp_path):
    cfg = {
        "eval_config": {
            "tool": "mteb",
            "models": [{"model_name_or_path": "static-64", "prompt": "query: ", "pooling_mode": "cls"}],
            "eval": {
                "task_names": [],
                "custom_tasks": [{"name": "Mine", "data_path": str(tmp_path)}],
                "overwrite_results": False,
                "top_k": 10,
            },
        }
    }
    settings = load_settings(cfg)
    (call,) = settings.model_runs()
    assert call.options == {"pooling": "cls", "query_prompt": "query: "}
    assert settings.overwrite == "only-missing"
    (task,) = settings.task_specs()
    assert task.name == "Mine" and task.main_score == "ndcg_at_10" and not task.ignore_identical_ids


def test_legacy_custom_retrieval_defaults(tmp_path):
    cfg = {
        "eval_config": {
            "model": [{"model_name_or_path": "minilm"}],
            "eval": {"tasks": ["CustomRetrieval"], "dataset_path": str(tmp_path)},
        }
    }
    (task,) = load_settings(cfg).task_specs()
    assert task.ignore_identical_ids and task.main_score == "recall_at_5" and task.languages == ("cmn-Hans",)


def test_per_task_prompts_split_the_run():
    cfg = {
        "eval_config": {
            "models": [{"model_name_or_path": "minilm", "prompts": {"A": "pa: "}}],
            "eval": {"task_names": ["A", "B"]},
        }
    }
    calls = load_settings(cfg).model_runs()
    assert [(c.tasks, c.options.get("query_prompt")) for c in calls] == [(["A"], "pa: "), (["B"], None)]


def test_unknown_keys_are_rejected_with_the_valid_ones():
    with pytest.raises(ConfigError) as e:
        load_settings({"eval_config": {"models": [{"model_name_or_path": "m"}], "eval": {"task_name": ["x"]}}})
    assert "eval_config.eval.task_name: unknown key" in str(e.value) and "task_names" in str(e.value)
    with pytest.raises(ConfigError, match="modle: unknown key. Did you mean 'model'.*Valid keys.*model"):
        load_settings({"modle": "minilm"})


def test_native_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("models: [minilm, static-64]\ntasks: [BBCNewsRetrieval]\ntop_k: 100\n")
    settings = load_settings(path)
    assert [c.model for c in settings.model_runs()] == ["minilm", "static-64"] and settings.top_k == 100


def test_bad_files(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text('{"model": "m",\n "tasks": [}')
    with pytest.raises(ConfigError, match="c.json: invalid JSON at line 2"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.yaml")
    (tmp_path / "l.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(tmp_path / "l.yaml")


def test_unsupported_evalscope_features_fail_clearly():
    two_rerankers = {
        "eval_config": {
            "models": [
                {"model_name_or_path": "a"},
                {"model_name_or_path": "b", "is_cross_encoder": True},
                {"model_name_or_path": "c", "is_cross_encoder": True},
            ],
            "eval": {"task_names": ["T"]},
        }
    }
    with pytest.raises(ConfigError, match="one cross-encoder"):
        load_settings(two_rerankers)
    with pytest.raises(ConfigError, match="no tasks"):
        load_settings({"eval_config": {"models": [{"model_name_or_path": "a"}], "eval": {}}})
    with pytest.raises(ConfigError, match="dataset_path"):
        load_settings(
            {"eval_config": {"models": [{"model_name_or_path": "a"}], "eval": {"tasks": ["CustomRetrieval"]}}}
        )
    assert json.dumps(SEED_ONE_STAGE)  # the seed example itself stays valid JSON


def test_device_dtype_engine_per_run_and_per_model():
    settings = load_settings(
        {
            "models": ["minilm", {"model": "static-64", "device": "cpu"}, {"model": "./m", "dtype": "bf16"}],
            "model_options": {"pooling": "mean"},
            "device": "cuda:1",
            "dtype": "fp16",
            "engine": "ray",
            "ray_address": "auto",
            "ray_gpus_per_worker": 0.5,
            "tasks": ["BBCNewsRetrieval"],
        }
    )
    plan = settings.model_runs()
    assert [c.model for c in plan] == ["minilm", "static-64", "./m"]
    assert plan[0].options == {"pooling": "mean"}
    assert plan[1].options == {"pooling": "mean", "device": "cpu"}  # overrides the run's device
    assert plan[2].options == {"pooling": "mean", "dtype": "bf16"}
    assert (settings.device, settings.dtype, settings.engine.name) == ("cuda:1", "fp16", "ray")
    assert (settings.engine.address, settings.engine.gpus_per_worker) == ("auto", 0.5)
    assert plan[0].batch_size is None and settings.batch_size is None  # the device's default
    with pytest.raises(ConfigError, match="needs 'model'"):
        load_settings({"models": [{"device": "cpu"}]})
    with pytest.raises(ConfigError):
        load_settings({"dtype": "int4"})


def test_evalscope_torch_dtype_becomes_the_dtype():
    cfg = json.loads(json.dumps(SEED_ONE_STAGE))
    cfg["eval_config"]["model"][0]["model_kwargs"] = {"torch_dtype": "bfloat16"}
    (call,) = load_settings(cfg).model_runs()
    assert call.options == {"max_seq_length": 512, "dtype": "bf16"}
    cfg["eval_config"]["model"][0]["model_kwargs"] = {"torch_dtype": "int8"}
    with pytest.raises(ConfigError, match="torch_dtype"):
        load_settings(cfg)
