"""Config files: embedscope's schema and EvalScope's eval_config (current and legacy keys)."""

from __future__ import annotations

import json

import pytest

from embedscope.config import load_config
from embedscope.errors import ConfigError

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
    (call,) = list(load_config(SEED_ONE_STAGE).runs())
    assert call["model"] == "minilm" and call["tasks"] == ["BBCNewsRetrieval"]
    assert call["batch_size"] == 128 and call["limits"] == 500 and call["overwrite"] == "always"
    assert call["output_folder"] == "outputs" and call["model_options"] == {"max_seq_length": 512}


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
    (call,) = list(load_config(cfg).runs())
    assert call["model_options"] == {"pooling": "cls", "query_prompt": "query: "}
    assert call["overwrite"] == "only-missing"
    (task,) = call["tasks"]
    assert task.name == "Mine" and task.main_score == "ndcg_at_10" and not task.ignore_identical_ids


def test_legacy_custom_retrieval_defaults(tmp_path):
    cfg = {
        "eval_config": {
            "model": [{"model_name_or_path": "minilm"}],
            "eval": {"tasks": ["CustomRetrieval"], "dataset_path": str(tmp_path)},
        }
    }
    (call,) = list(load_config(cfg).runs())
    (task,) = call["tasks"]
    assert task.ignore_identical_ids and task.main_score == "recall_at_5" and task.languages == ("cmn-Hans",)


def test_per_task_prompts_split_the_run():
    cfg = {
        "eval_config": {
            "models": [{"model_name_or_path": "minilm", "prompts": {"A": "pa: "}}],
            "eval": {"task_names": ["A", "B"]},
        }
    }
    calls = list(load_config(cfg).runs())
    assert [(c["tasks"], (c["model_options"] or {}).get("query_prompt")) for c in calls] == [
        (["A"], "pa: "),
        (["B"], None),
    ]


def test_unknown_keys_are_rejected_with_the_valid_ones():
    with pytest.raises(ConfigError) as e:
        load_config({"eval_config": {"models": [{"model_name_or_path": "m"}], "eval": {"task_name": ["x"]}}})
    assert "unknown key 'eval_config.eval.task_name'" in str(e.value) and "task_names" in str(e.value)
    with pytest.raises(ConfigError, match="unknown key 'modle'.*Valid keys.*model"):
        load_config({"modle": "minilm"})


def test_native_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("models: [minilm, static-64]\ntasks: [BBCNewsRetrieval]\ntop_k: 100\n")
    calls = list(load_config(path).runs())
    assert [c["model"] for c in calls] == ["minilm", "static-64"] and calls[0]["top_k"] == 100


def test_bad_files(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text('{"model": "m",\n "tasks": [}')
    with pytest.raises(ConfigError, match="c.json: invalid JSON at line 2"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "l.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(tmp_path / "l.yaml")


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
        load_config(two_rerankers)
    with pytest.raises(ConfigError, match="no tasks"):
        load_config({"eval_config": {"models": [{"model_name_or_path": "a"}], "eval": {}}})
    with pytest.raises(ConfigError, match="dataset_path"):
        load_config({"eval_config": {"models": [{"model_name_or_path": "a"}], "eval": {"tasks": ["CustomRetrieval"]}}})
    assert json.dumps(SEED_ONE_STAGE)  # the seed example itself stays valid JSON


def test_device_dtype_engine_per_run_and_per_model():
    plan = list(
        load_config(
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
        ).runs()
    )
    assert [c["model"] for c in plan] == ["minilm", "static-64", "./m"]
    assert plan[0]["model_options"] == {"pooling": "mean"}
    assert plan[1]["model_options"] == {"pooling": "mean", "device": "cpu"}  # overrides the run's device
    assert plan[2]["model_options"] == {"pooling": "mean", "dtype": "bf16"}
    assert {(c["device"], c["dtype"], c["engine"], c["ray_address"], c["ray_gpus_per_worker"]) for c in plan} == {
        ("cuda:1", "fp16", "ray", "auto", 0.5)
    }
    assert plan[0]["batch_size"] is None  # the device's default
    with pytest.raises(ConfigError, match="needs 'model'"):
        list(load_config({"models": [{"device": "cpu"}]}).runs())
    with pytest.raises(ConfigError):
        load_config({"dtype": "int4"})


def test_evalscope_torch_dtype_becomes_the_dtype():
    cfg = json.loads(json.dumps(SEED_ONE_STAGE))
    cfg["eval_config"]["model"][0]["model_kwargs"] = {"torch_dtype": "bfloat16"}
    (call,) = list(load_config(cfg).runs())
    assert call["model_options"] == {"max_seq_length": 512, "dtype": "bf16"}
    cfg["eval_config"]["model"][0]["model_kwargs"] = {"torch_dtype": "int8"}
    with pytest.raises(ConfigError, match="torch_dtype"):
        load_config(cfg)
