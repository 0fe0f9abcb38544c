"""Every configuration example of EvalScope's MTEB documentation runs unchanged with a local model and local data
substituted (issue 31): the one-stage and two-stage examples of its RAGEval/MTEB backend page and the example of its
guide "Custom Text Retrieval Evaluation Dataset". ``work_dir`` is acted on as EvalScope does: the run's configuration
dump and log under ``work_dir`` (``outputs`` is EvalScope's default, under which each run gets a time-stamped folder),
the MTEB results under ``eval.output_folder``. Each example's scores are checked against the same model and data run
through ``evaluate`` with the settings the example means."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from embedscope.cli.main import main
from embedscope.evaluation.runner import evaluate, evaluate_config
from embedscope.settings.evalscope import work_dir_folder

# EvalScope's examples as its documentation prints them (docs/en/user_guides/backend/rageval_backend/mteb.md and
# docs/en/advanced_guides/custom_dataset/embedding.md); only the model paths and the data are substituted below.
ONE_STAGE: dict[str, Any] = {
    "work_dir": "outputs",
    "eval_backend": "RAGEval",
    "eval_config": {
        "tool": "MTEB",
        "model": [
            {
                "model_name_or_path": "AI-ModelScope/m3e-base",
                "pooling_mode": None,
                "max_seq_length": 512,
                "prompt": "",
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 128},
            }
        ],
        "eval": {
            "tasks": ["TNews", "CLSClusteringS2S", "T2Reranking", "T2Retrieval", "ATEC"],
            "verbosity": 2,
            "overwrite_results": True,
            "topk": 10,
            "limits": 500,
        },
    },
}
TWO_STAGE: dict[str, Any] = {
    "work_dir": "outputs",
    "eval_backend": "RAGEval",
    "eval_config": {
        "tool": "MTEB",
        "model": [
            {
                "model_name_or_path": "AI-ModelScope/m3e-base",
                "is_cross_encoder": False,
                "max_seq_length": 512,
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 64},
            },
            {
                "model_name_or_path": "OpenBMB/MiniCPM-Reranker",
                "is_cross_encoder": True,
                "max_seq_length": 512,
                "prompt": "Generate a retrieval representation for this question",
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 32},
            },
        ],
        "eval": {"tasks": ["T2Retrieval"], "verbosity": 2, "overwrite_results": True, "topk": 5, "limits": 100},
    },
}
CUSTOM_RETRIEVAL: dict[str, Any] = {
    "work_dir": "outputs",
    "eval_backend": "RAGEval",
    "eval_config": {
        "tool": "MTEB",
        "models": [
            {
                "model_name_or_path": "AI-ModelScope/m3e-base",
                "pooling_mode": None,
                "max_seq_length": 512,
                "prompt": "",
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 128},
            }
        ],
        "eval": {
            "custom_tasks": [{"name": "CustomRetrieval", "data_path": "my_retrieval_data"}],
            "overwrite_results": True,
            "limits": 500,
        },
    },
}

# the legacy custom-retrieval example of the same page's earlier version (CustomRetrieval over eval.dataset_path)
LEGACY_CUSTOM_RETRIEVAL: dict[str, Any] = {
    "eval_backend": "RAGEval",
    "eval_config": {
        "tool": "MTEB",
        "model": [
            {
                "model_name_or_path": "AI-ModelScope/m3e-base",
                "pooling_mode": None,
                "max_seq_length": 512,
                "prompt": "",
                "model_kwargs": {"torch_dtype": "auto"},
                "encode_kwargs": {"batch_size": 128},
            }
        ],
        "eval": {
            "tasks": ["CustomRetrieval"],
            "dataset_path": "custom_eval/text/retrieval",
            "verbosity": 2,
            "output_folder": "outputs",
            "overwrite_results": True,
            "limits": 500,
        },
    },
}

DOCS = [
    "Climate change is leading to more extreme weather patterns.",
    "The stock market surged today, led by tech stocks.",
    "AI is transforming various industries by automating tasks and providing insights.",
    "With technological advancements, renewable energy sources like wind and solar are becoming more widespread.",
    "Recent studies show that a balanced diet and regular exercise can significantly improve mental health.",
    "Virtual reality is creating new opportunities in education, entertainment, and training.",
    "Electric vehicles are becoming increasingly popular due to environmental benefits and advances in battery tech.",
    "Space exploration missions are revealing new information about our solar system and beyond.",
    "Blockchain technology has potential applications beyond cryptocurrency, including supply chain management.",
    "The benefits of remote work include greater flexibility and reduced commuting time.",
]
QUERIES = [
    "What are the impacts of climate change?",
    "What caused the stock market to rise today?",
    "How is AI changing industries?",
    "What are the advancements in renewable energy?",
    "How does a balanced diet improve mental health?",
    "What new opportunities does virtual reality create?",
    "Why are electric vehicles becoming more popular?",
    "What new information has space exploration revealed?",
    "What are the applications of blockchain technology beyond cryptocurrency?",
    "What are the benefits of remote work?",
]


def write_retrieval_data(folder: Path, qrels: str) -> Path:
    """EvalScope's example data: corpus.jsonl, queries.jsonl and qrels as ``qrels.jsonl`` (the custom-dataset
    guide's layout) or ``qrels/test.tsv`` (the backend page's)."""
    folder.mkdir(parents=True)
    lines = [json.dumps({"_id": f"doc{i + 1}", "text": t}) for i, t in enumerate(DOCS)]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    lines = [json.dumps({"_id": f"query{i + 1}", "text": t}) for i, t in enumerate(QUERIES)]
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n")
    if qrels == "jsonl":
        rows = [json.dumps({"query-id": f"query{i}", "corpus-id": f"doc{i}", "score": 1}) for i in range(1, 11)]
        (folder / "qrels.jsonl").write_text("\n".join(rows) + "\n")
    else:
        (folder / "qrels").mkdir()
        rows = "".join(f"query{i}\tdoc{i}\t1\n" for i in range(1, 11))
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from support.tiny_models import build_tiny_cross_encoder, build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("evalscope-models")
    return {
        "encoder": str(build_tiny_sentence_transformer(root / "encoder", seed=1)),
        "reranker": str(build_tiny_cross_encoder(root / "reranker", seed=2)),
    }


def _main_score(path: Path) -> float:
    return float(json.loads(path.read_text())["scores"]["test"][0]["main_score"])


def _one_result(folder: Path, task: str) -> Path:
    (path,) = [p for p in folder.rglob(f"{task}.json") if "stage" not in p.parent.name]
    return path


def _check_work_dir(tmp_path: Path, example: dict[str, Any]) -> Path:
    """The configuration dump and the log EvalScope keeps under ``work_dir`` (``outputs/<run time>/``)."""
    (run_folder,) = [p for p in (tmp_path / "outputs").iterdir() if (p / "configs").is_dir()]
    assert run_folder == work_dir_folder("outputs", run_folder.name).absolute() or run_folder.parent.name == "outputs"
    assert yaml.safe_load((run_folder / "configs" / "task_config.yaml").read_text()) == example
    log = (run_folder / "logs" / "eval_log.log").read_text()
    assert "run of" in log and "ended" in log
    return run_folder


@pytest.mark.slow
def test_custom_retrieval_guide_example_runs_unchanged(tmp_path, monkeypatch, models):
    monkeypatch.chdir(tmp_path)
    write_retrieval_data(tmp_path / "my_retrieval_data", "jsonl")  # the guide's data_path, as written
    example = copy.deepcopy(CUSTOM_RETRIEVAL)
    example["eval_config"]["models"][0]["model_name_or_path"] = models["encoder"]
    (report,) = evaluate_config(example)
    path = _one_result(tmp_path / "outputs", "CustomRetrieval")  # eval.output_folder's default, as EvalScope's
    assert report.outcomes[0].path.resolve() == path.resolve()
    _check_work_dir(tmp_path, example)
    direct = evaluate(
        models["encoder"],
        [str(tmp_path / "my_retrieval_data")],
        output_folder=str(tmp_path / "direct"),
        model_options={"max_seq_length": 512},
        batch_size=128,
        limits=500,
        cache=False,
        show_progress=False,
    )
    assert _main_score(path) == _main_score(direct.outcomes[0].path)


@pytest.mark.slow
def test_one_stage_example_runs_unchanged_from_the_cli(tmp_path, monkeypatch, models):
    monkeypatch.chdir(tmp_path)
    data = write_retrieval_data(tmp_path / "t2", "tsv")
    example = copy.deepcopy(ONE_STAGE)
    example["eval_config"]["model"][0]["model_name_or_path"] = models["encoder"]
    example["eval_config"]["eval"]["tasks"] = [str(data)]  # local data for the hub's C-MTEB tasks
    config = tmp_path / "one_stage.json"
    config.write_text(json.dumps(example))
    assert main(["run", "--config", str(config), "--no-cache"]) == 0
    path = _one_result(tmp_path / "outputs", "t2")
    _check_work_dir(tmp_path, example)
    direct = evaluate(
        models["encoder"],
        [str(data)],
        output_folder=str(tmp_path / "direct"),
        model_options={"max_seq_length": 512},
        limits=500,
        cache=False,
        show_progress=False,
    )
    assert _main_score(path) == _main_score(direct.outcomes[0].path)


@pytest.mark.slow
def test_two_stage_example_runs_unchanged(tmp_path, monkeypatch, models):
    monkeypatch.chdir(tmp_path)
    data = write_retrieval_data(tmp_path / "t2", "tsv")
    example = copy.deepcopy(TWO_STAGE)
    example["eval_config"]["model"][0]["model_name_or_path"] = models["encoder"]
    example["eval_config"]["model"][1]["model_name_or_path"] = models["reranker"]
    example["eval_config"]["eval"]["tasks"] = [str(data)]
    (report,) = evaluate_config(example, cache=False)
    _check_work_dir(tmp_path, example)
    pipeline = {
        "retrievers": [{"type": "dense", "model": models["encoder"], "max_seq_length": 512}],
        "rerankers": [{"type": "cross-encoder", "model": models["reranker"], "max_length": 512}],
    }
    direct = evaluate(
        pipeline,
        [str(data)],
        output_folder=str(tmp_path / "direct"),
        top_k=5,
        limits=100,
        cache=False,
        show_progress=False,
    )
    assert _main_score(report.outcomes[0].path) == _main_score(direct.outcomes[0].path)


@pytest.mark.slow
def test_a_named_work_dir_holds_the_configuration_and_log_and_results_stay_in_output_folder(tmp_path, models):
    data = write_retrieval_data(tmp_path / "data", "tsv")
    example = copy.deepcopy(CUSTOM_RETRIEVAL)
    example["work_dir"] = str(tmp_path / "work")
    example["eval_config"]["models"][0]["model_name_or_path"] = models["encoder"]
    example["eval_config"]["eval"]["custom_tasks"][0]["data_path"] = str(data)
    example["eval_config"]["eval"]["output_folder"] = str(tmp_path / "results")
    evaluate_config(example, cache=False)
    assert (tmp_path / "work" / "configs" / "task_config.yaml").is_file()
    assert (tmp_path / "work" / "logs" / "eval_log.log").is_file()
    assert _one_result(tmp_path / "results", "CustomRetrieval").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "results", "work"]


def test_print_settings_writes_nothing_into_work_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = write_retrieval_data(tmp_path / "t2", "tsv")
    example = copy.deepcopy(ONE_STAGE)
    example["work_dir"] = str(tmp_path / "work")
    example["eval_config"]["eval"]["tasks"] = [str(data)]
    config = tmp_path / "c.json"
    config.write_text(json.dumps(example))
    assert main(["run", "--config", str(config), "--print-settings"]) == 0
    assert not (tmp_path / "work").exists() and not (tmp_path / "outputs").exists()


def test_an_empty_work_dir_is_one_line(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**CUSTOM_RETRIEVAL, "work_dir": " "}))
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "work_dir" in err and err.count("\n") == 1


@pytest.mark.slow
def test_legacy_custom_retrieval_example_runs_unchanged(tmp_path, monkeypatch, models):
    monkeypatch.chdir(tmp_path)
    write_retrieval_data(tmp_path / "custom_eval" / "text" / "retrieval", "tsv")  # its dataset_path, as written
    example = copy.deepcopy(LEGACY_CUSTOM_RETRIEVAL)
    example["eval_config"]["model"][0]["model_name_or_path"] = models["encoder"]
    (report,) = evaluate_config(example, cache=False)
    stored = json.loads(_one_result(tmp_path / "outputs", "CustomRetrieval").read_text())
    assert stored["scores"]["test"][0]["main_score"] == stored["scores"]["test"][0]["recall_at_5"]  # EvalScope's
    assert not any(p.name == "configs" for p in (tmp_path / "outputs").rglob("*"))  # no work_dir: nothing kept


@pytest.mark.slow
def test_custom_retrieval_example_with_minilm(tmp_path, monkeypatch):
    """The guide's example with the built-in MiniLM: the score equals sentence-transformers + pytrec_eval's."""
    import numpy as np
    import pytrec_eval
    from sentence_transformers import SentenceTransformer

    from embedscope.models.specs import alias_path

    monkeypatch.chdir(tmp_path)
    write_retrieval_data(tmp_path / "my_retrieval_data", "jsonl")
    example = copy.deepcopy(CUSTOM_RETRIEVAL)
    example["eval_config"]["models"][0]["model_name_or_path"] = "minilm"
    evaluate_config(example, cache=False)
    stored = json.loads(_one_result(tmp_path / "outputs", "CustomRetrieval").read_text())
    model = SentenceTransformer(str(alias_path("minilm")), device="cpu")
    model.max_seq_length = 512
    q = model.encode(QUERIES, normalize_embeddings=True)
    d = model.encode(DOCS, normalize_embeddings=True)
    scores = q @ d.T
    run = {f"query{i + 1}": {f"doc{j + 1}": float(scores[i, j]) for j in range(len(DOCS))} for i in range(len(QUERIES))}
    qrels = {f"query{i}": {f"doc{i}": 1} for i in range(1, 11)}
    ndcg = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    expected = float(np.mean([v["ndcg_cut_10"] for v in ndcg.values()]))
    assert stored["scores"]["test"][0]["ndcg_at_10"] == pytest.approx(expected, abs=1e-5)
    _check_work_dir(tmp_path, example)
