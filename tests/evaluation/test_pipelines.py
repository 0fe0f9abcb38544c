"""Pipelines through the runner, config files and the CLI: result files for every stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.retrieval.late_interaction import LateInteraction
from embedscope.retrieval.pipeline import Pipeline, RerankStep
from embedscope.settings.files import load_settings
from embedscope.testing.fakes import OverlapReranker, WordTokenEncoder
from support.tiny_models import build_tiny_cross_encoder

DOCS = {
    "d1": "Cats purr and sleep all day in the sun.",
    "d2": "The stock market fell sharply on Monday as investors sold shares.",
    "d3": "Heavy rain is expected tomorrow across the north.",
    "d4": "Shares rallied after the market opened, investors bought stock.",
    "d5": "A sleepy cat and a loud dog.",
}
QUERIES = {"q1": "stock market shares", "q2": "sleepy cats", "q3": "rain forecast tomorrow"}
QRELS = {"q1": {"d2": 1, "d4": 1}, "q2": {"d5": 1}, "q3": {"d3": 2}}


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in DOCS.items())
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items()))
    rows = "".join(f"{q}\t{d}\t{r}\n" for q, docs in QRELS.items() for d, r in docs.items())
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


@pytest.fixture()
def beir(tmp_path):
    return write_beir(tmp_path / "mybeir")


@pytest.mark.parametrize(
    "model", ["bm25", "fts5", "bm25:method=bm25+,stemmer=none", {"retrievers": ["bm25", "fts5"], "fusion": "wsum-zmuv"}]
)
def test_lexical_and_fused_retrievers_write_mteb_results(tmp_path, beir, model):
    report = embedscope.evaluate(model, [str(beir)], output_folder=tmp_path / "out", cache=False, show_progress=False)
    (outcome,) = report.outcomes
    assert outcome.path.is_file() and (outcome.path.parent / "model_meta.json").is_file()
    stored = json.loads(outcome.path.read_text())
    assert stored["scores"]["test"][0]["main_score"] == outcome.result.main_score() > 0.5
    stages = stored["pipeline_stages"]["test"]  # extra keys sit at the top level, as mteb's own extras do
    assert {"seconds", "peak_rss_mb", "peak_delta_mb", "main_score"} <= set(stages[-1])


def test_two_stage_writes_stage1_and_stage2(tmp_path, beir):
    reranker = OverlapReranker(bonus={"d4": 10.0})
    pipeline = Pipeline([LateInteraction(WordTokenEncoder())], rerankers=[RerankStep(reranker)], name="colbert-fake+rr")
    report = embedscope.evaluate(
        pipeline, [str(beir)], output_folder=tmp_path / "out", top_k=2, cache=False, show_progress=False
    )
    folder = report.outcomes[0].path.parent
    stage1 = json.loads((folder / "stage1" / "mybeir.json").read_text())
    stage2 = json.loads((folder / "stage2" / "mybeir.json").read_text())
    final = json.loads((folder / "mybeir.json").read_text())
    assert final["scores"] == stage2["scores"]
    assert stage1["scores"] != stage2["scores"]
    assert "| stage2 | reranker | fake/overlap-reranker |" in report.stage_table()
    # top_k=2 sets the first stage's candidates (not in the pipeline's fingerprint): stored apart, as any setting
    assert folder.parent.name == "experiments" and folder.parents[2].name == "colbert-fake+rr"


@pytest.mark.slow
def test_cross_encoder_two_stage_from_the_cli(tmp_path, beir, capsys):
    ce = build_tiny_cross_encoder(tmp_path / "ce")
    args = [
        "run",
        "--retriever",
        "bm25",
        "--reranker",
        str(ce),
        "--top-k",
        "3",
        "--tasks",
        str(beir),
        "--output-folder",
        str(tmp_path / "out"),
        "--no-cache",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| stage1 | retriever | bm25-lucene |" in out and "| stage2 | reranker | ce |" in out
    result = next((tmp_path / "out").glob("bm25-lucene__rerank-ce/*/experiments/*/stage2/mybeir.json"))
    assert json.loads(result.read_text())["scores"]["test"][0]["recall_at_3"] <= 1.0


@pytest.mark.slow
def test_fusion_from_the_cli_and_flag_errors(tmp_path, beir, capsys):
    args = [
        "run",
        "--retriever",
        "bm25",
        "--retriever",
        "fts5",
        "--fusion",
        "wsum-min-max",
        "--weights",
        "1",
        "2",
        "--tasks",
        str(beir),
        "--output-folder",
        str(tmp_path / "out"),
        "--no-cache",
    ]
    assert main(args) == 0
    assert "wsum-min-max-w1_2" in capsys.readouterr().out
    assert main(["run", "--fusion", "rrf", "--tasks", str(beir)]) == 2
    assert "need --retriever" in capsys.readouterr().err
    assert main(["run", "--model", "bm25", "--tasks", "BBCNewsClassification"]) == 2
    assert "Retrieval and Reranking tasks only" in capsys.readouterr().err


def test_reranking_task_scored_by_a_reranker_directly(tmp_path):
    rows = [
        {"query": "stock market", "positive": ["stock market news"], "negative": ["cats purr", "market"]},
        {"query": "sleepy cats", "positive": ["a sleepy cat"], "negative": ["dogs bark", "sleepy cats nap"]},
    ]
    path = tmp_path / "rerank.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pipeline = Pipeline([], rerankers=[RerankStep(OverlapReranker())])
    report = embedscope.evaluate(
        pipeline, [f"Reranking:{path}"], output_folder=tmp_path / "out", cache=False, show_progress=False
    )
    scores = report.outcomes[0].result.scores["test"][0]
    # q1: positive overlaps 2 words (rank 1); q2: "sleepy cats nap" overlaps 2, the positive 1 -> rank 2
    assert scores["mrr_at_10"] == pytest.approx((1.0 + 0.5) / 2)
    with pytest.raises(ConfigError, match="Reranking tasks only"):
        embedscope.evaluate(pipeline, ["BBCNewsRetrieval"], output_folder=tmp_path / "o2", cache=False)


def test_config_pipeline_section_and_evalscope_two_stage(tmp_path, beir):
    settings = load_settings(
        {
            "pipeline": {"retrievers": ["bm25", {"type": "fts5"}], "fusion": {"method": "rrf", "k": 30}},
            "models": ["static-64"],
            "tasks": [str(beir)],
            "output_folder": str(tmp_path / "o"),
        }
    )
    calls = settings.model_runs()
    assert [c.model for c in calls][0] == "static-64"
    assert calls[1].model["fusion"] == {"method": "rrf", "k": 30}
    with pytest.raises(ConfigError, match="pipeline.rerank: unknown key"):
        load_settings({"pipeline": {"retriever": "bm25", "rerank": "x"}})
    evalscope = {
        "eval_backend": "RAGEval",
        "eval_config": {
            "tool": "MTEB",
            "model": [
                {"model_name_or_path": "minilm", "is_cross_encoder": False, "max_seq_length": 128},
                {"model_name_or_path": "./reranker", "is_cross_encoder": True, "max_seq_length": 256},
            ],
            "eval": {"tasks": ["T2Retrieval"], "topk": 5},
        },
    }
    settings = load_settings(evalscope)
    (call,) = settings.model_runs()
    assert settings.top_k == 5
    assert call.model["retrievers"] == [{"type": "dense", "model": "minilm", "max_seq_length": 128}]
    assert call.model["rerankers"] == [{"type": "cross-encoder", "model": "./reranker", "max_length": 256}]


def test_config_file_runs_a_pipeline(tmp_path, beir):
    config = tmp_path / "c.yaml"
    config.write_text(
        f"pipeline:\n  retriever: fts5\n  name: my-fts\ntasks: [{beir}]\noutput_folder: {tmp_path / 'o'}\n"
        "cache: false\nshow_progress: false\n"
    )
    (report,) = embedscope.evaluate_config(config)
    assert report.model_name == "my-fts" and report.outcomes[0].result.main_score() > 0.5
