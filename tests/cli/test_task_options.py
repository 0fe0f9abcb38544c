"""--task-param, --splits, --benchmark, `tasks --benchmark --data-dir` and `download` from the command line;
the same parameters in config custom_tasks."""

from __future__ import annotations

import json

import pytest

from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.catalog import benchmark_specs
from embedscope.tasks.params import apply_task_options
from embedscope.tasks.registry import resolve_task
from embedscope.testing.fakes import HashEncoder


def _emotion(folder):
    labels = ["joy", "anger", "fear"]
    for split, n in (("train", 48), ("validation", 15), ("test", 12)):
        path = folder / "mteb" / "emotion" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(json.dumps({"text": f"{split} {i} {labels[i % 3]}", "label": i % 3}) + "\n" for i in range(n))
        )


def test_splits_and_params_reach_a_catalog_task(tmp_path):
    _emotion(tmp_path)
    task = resolve_task("EmotionClassification", data_dir=tmp_path)
    [changed] = apply_task_options([task], {"samples_per_label": "4", "n_experiments": "3"}, ["validation"])
    assert (changed.eval_splits, changed.samples_per_label, changed.n_experiments) == (("validation",), 4, 3)
    report = evaluate(HashEncoder(), [changed], output_folder=tmp_path / "out", cache=False, show_progress=False)
    scores = report.outcomes[0].result.scores
    assert list(scores) == ["validation"] and len(scores["validation"][0]["scores_per_experiment"]) == 3


@pytest.mark.slow
def test_cli_run_with_task_params_and_splits(tmp_path, capsys):
    _emotion(tmp_path)
    args = [
        "run",
        "--model",
        "static-64",
        "--tasks",
        "EmotionClassification",
        "--data-dir",
        str(tmp_path),
        "--task-param",
        "samples_per_label=4",
        "--task-param",
        "n_experiments=2",
        "--splits",
        "validation",
        "--output-folder",
        str(tmp_path / "out"),
        "--no-cache",
        "--json",
    ]
    assert main(args) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert list(result["scores"]) == ["validation"]
    assert len(result["scores"]["validation"][0]["scores_per_experiment"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    "param, message",
    [
        (
            "sample_per_label=4",
            "'sample_per_label' is not a parameter of the Classification task(s) asked for "
            "(valid: n_experiments, samples_per_label)",
        ),
        ("samples_per_label=-1", "samples_per_label='-1': expected a positive integer"),
        ("samples_per_label", "expected NAME=VALUE"),
    ],
)
def test_bad_task_params_are_one_line_exit_2(tmp_path, capsys, param, message):
    _emotion(tmp_path)
    args = [
        "run",
        "--model",
        "static-64",
        "--tasks",
        "EmotionClassification",
        "--data-dir",
        str(tmp_path),
        "--task-param",
        param,
        "--output-folder",
        str(tmp_path / "out"),
        "--no-cache",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_clustering_and_retrieval_params():
    from embedscope.tasks.params import task_param_fields

    assert task_param_fields("Clustering", {"max_fraction_of_documents_to_embed": "0.5"}) == {
        "max_fraction_of_documents_to_embed": 0.5,
        "max_document_to_embed": None,
    }
    assert task_param_fields("Clustering", {"max_document_to_embed": 100, "legacy": "false"}) == {
        "max_document_to_embed": 100,
        "max_fraction_of_documents_to_embed": None,
        "protocol": "v2",
    }
    assert task_param_fields("Retrieval", {"k": "1,10", "top_k": "100"}) == {"k_values": (1, 10), "top_k": 100}
    with pytest.raises(ConfigError, match=r"valid: k, top_k"):
        task_param_fields("Retrieval", {"samples_per_label": 3})


@pytest.mark.slow
def test_retrieval_top_k_param_cuts_the_run(tmp_path):
    task = resolve_task("BBCNewsRetrieval")
    with pytest.raises(ConfigError, match="main score ndcg_at_10 needs k 10"):
        apply_task_options([task], {"k": "1,5"})
    [cut] = apply_task_options([task], {"top_k": "5", "k": "1,5,10"})
    report = evaluate(
        HashEncoder(), [cut], output_folder=tmp_path, cache=False, show_progress=False, save_predictions=True
    )
    scores = report.outcomes[0].result.scores["test"][0]
    assert "ndcg_at_5" in scores and "ndcg_at_100" not in scores
    run = json.loads(next(tmp_path.rglob("*_predictions.json")).read_text())
    assert max(len(docs) for docs in run["default"]["test"].values()) == 5


def test_config_custom_tasks_take_protocol_params(tmp_path):
    from embedscope.settings.files import load_settings

    folder = tmp_path / "clusters"
    folder.mkdir()
    rows = [{"text": f"t{i}", "label": i % 3, "set": i // 12} for i in range(24)]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {
        "model": "static-64",
        "custom_tasks": [
            {"name": "Sets", "data_path": str(folder), "type": "clustering", "group_sets": "set"},
            {"name": "Frac", "data_path": str(folder), "type": "clustering", "max_fraction_of_documents_to_embed": 0.5},
        ],
    }
    sets, frac = load_settings(cfg).task_specs()
    assert sets.protocol == "legacy" and [len(s) for s in sets.load_split("test")] == [12, 12]
    assert frac.max_fraction_of_documents_to_embed == 0.5
    bad = {
        "model": "static-64",
        "custom_tasks": [{"name": "X", "data_path": str(folder), "type": "sts", "samples_per_label": 3}],
    }
    with pytest.raises(ConfigError, match="custom task 'X': parameter 'samples_per_label' is not a parameter of STS"):
        load_settings(bad).task_specs()
    # a key beyond the entry's fields is a parameter of its type, checked by the type's record when tasks resolve
    with pytest.raises(
        ConfigError, match="custom task 'X': parameter 'sample_per_label' is not a parameter of Retrieval"
    ):
        load_settings({"custom_tasks": [{"name": "X", "data_path": str(folder), "sample_per_label": 3}]}).task_specs()


def test_cli_benchmark_runs_its_tasks(tmp_path, monkeypatch, capsys):

    import embedscope.evaluation.runner as runner

    seen = {}

    def fake_resolve(settings):
        seen["tasks"] = settings.task_specs()
        raise ConfigError("stop here")

    monkeypatch.setattr(runner, "resolve_tasks", fake_resolve)
    assert main(["run", "--model", "static-64", "--benchmark", "MTEB(eng, v2)", "--output-folder", str(tmp_path)]) == 2
    assert seen["tasks"] == benchmark_specs("MTEB(eng, v2)")[0]
    assert "STS17:en-en" in seen["tasks"] and len(seen["tasks"]) == 41


def test_tasks_benchmark_says_which_are_local(tmp_path, capsys):
    (tmp_path / "RuBQRetrieval").mkdir()
    assert main(["tasks", "--benchmark", "MTEB(rus, v1)", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "23 tasks, 1 with a local copy" in out and str(tmp_path / "RuBQRetrieval") in out
    assert main(["tasks", "--benchmark", "MTEB(eng, v3)"]) == 2
    assert "Did you mean 'MTEB(eng, v2)'" in capsys.readouterr().err


def test_tasks_lists_the_whole_catalog_with_sizes(capsys):
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 1100
    sick = next(r for r in rows if r["name"] == "SICKNLPairClassification")
    assert sick["size"] == {"samples": 2115}


def test_download_fetches_the_pinned_revision(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    calls = []

    def fake_snapshot_download(**kwargs):
        calls.append(kwargs)
        folder = tmp_path / "data" / "SICKNLPairClassification" / "data"
        folder.mkdir(parents=True)
        (folder / "test-00000-of-00001.parquet").write_text("")
        return kwargs["local_dir"]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr("embedscope.hub.hub_offline", lambda: False)  # the hub taken as reachable: no probe
    assert main(["download", "SICKNLPairClassification", "--to", str(tmp_path / "data")]) == 0
    assert calls == [
        {
            "repo_id": "clips/mteb-nl-sick-pcls-pr",
            "repo_type": "dataset",
            "revision": "a13a1892bcb4c077dc416d390389223eea5f20f0",
            "local_dir": str(tmp_path / "data" / "SICKNLPairClassification"),
        }
    ]
    assert main(["tasks", "--name", "SICKNL", "--data-dir", str(tmp_path / "data")]) == 0
    assert "1 with a local copy" in capsys.readouterr().out
    assert main(["download", "NoSuchTask", "--to", str(tmp_path)]) == 2 and not calls[1:]


@pytest.mark.slow
def test_native_config_task_params_splits_and_benchmark(tmp_path):
    from embedscope.settings.files import load_settings

    _emotion(tmp_path)
    cfg = {
        "model": "static-64",
        "tasks": ["EmotionClassification"],
        "benchmark": "MTEB(rus, v1)",
        "task_params": {"samples_per_label": 4},
        "splits": ["validation"],
        "data_dir": str(tmp_path),
    }
    settings = load_settings(cfg)
    tasks = settings.task_specs()
    assert tasks[:2] == ["EmotionClassification", "GeoreviewClassification"]
    assert len(tasks) == 1 + len(benchmark_specs("MTEB(rus, v1)")[0])
    assert (settings.task_params, settings.splits, settings.data_dir) == (
        {"samples_per_label": 4},
        ["validation"],
        str(tmp_path),
    )
    report = evaluate(
        HashEncoder(),
        ["EmotionClassification"],
        output_folder=tmp_path / "out",
        cache=False,
        show_progress=False,
        data_dir=tmp_path,
        task_params=settings.task_params,
        splits=settings.splits,
    )
    assert list(report.outcomes[0].result.scores) == ["validation"]


def test_print_settings_of_an_evalscope_config_with_custom_tasks_names_each_task(tmp_path, capsys):
    """EvalScope's custom_tasks become task objects in the settings: --print-settings shows each by name and type."""
    import yaml

    from embedscope.testing.tiny import write_tiny_beir

    data = write_tiny_beir(tmp_path / "tiny")
    eval_ = {"custom_tasks": [{"name": "Mine", "type": "Retrieval", "data_path": str(data), "top_k": 5}]}
    config = {
        "eval_backend": "RAGEval",
        "eval_config": {"tool": "MTEB", "models": [{"model_name_or_path": "static-64"}]},
    }
    config["eval_config"]["eval"] = eval_
    path = tmp_path / "es.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["run", "-c", str(path), "--print-settings"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| tasks |"))
    assert '["Mine (RetrievalTask)"]' in row and "es.yaml" in row
