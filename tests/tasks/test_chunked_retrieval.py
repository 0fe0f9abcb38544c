"""Retrieval with chunking: QA over documents scored per passage (equal to the fastbook study's BEIR export run
separately, and to pytrec_eval), documents scored by their best passage (equal to pytrec_eval on a brute-force
run), and the run option's checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from embedscope.cli.main import main
from embedscope.data.chunked import NO_PASSAGE
from embedscope.data.documents import chunk_documents
from embedscope.evaluation.runner import evaluate
from embedscope.settings.run import ChunkingSettings
from embedscope.studies.fastbook.corpus import export_beir, relevant_passages
from embedscope.studies.fastbook.data import load_benchmark
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from tests.support.qa import WORDS, write_qa_folder


def scores_of(report) -> dict:
    return report.outcomes[0].result.scores["test"][0]


def settings(tmp_path: Path, name: str) -> dict:
    return {"output_folder": str(tmp_path / name), "cache": False, "show_progress": False}


@pytest.fixture()
def qa(tmp_path):
    return write_qa_folder(tmp_path / "qa")


def test_a_qa_run_equals_the_separate_run_of_the_studys_beir_export(qa, tmp_path):
    options = ChunkingSettings(method="paragraphs", paragraphs=12).options()  # whole chapters: no context is cut
    chunking = {"method": "paragraphs", "paragraphs": 12}
    ours = evaluate(KeywordEncoder(WORDS), [str(qa)], chunking=chunking, **settings(tmp_path, "a"))
    beir = export_beir(
        load_benchmark(qa / "questions.json"), chunk_documents([qa / "documents"], options), tmp_path / "b"
    )
    theirs = evaluate(KeywordEncoder(WORDS), [str(beir)], **settings(tmp_path, "c"))
    a, b = scores_of(ours), scores_of(theirs)
    a.pop("hf_subset"), b.pop("hf_subset")
    a = {k: v for k, v in a.items() if not k.startswith("modified_")}  # the QA task's answer-component metrics
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # every key, bit for bit (NaN-aware)


def test_a_cut_context_counts_as_a_miss_as_pytrec_eval_scores_it(qa, tmp_path):
    options = ChunkingSettings(method="paragraphs").options()
    report = evaluate(KeywordEncoder(WORDS), [str(qa)], chunking={"method": "paragraphs"}, **settings(tmp_path, "a"))
    passages = chunk_documents([qa / "documents"], options)
    benchmark = load_benchmark(qa / "questions.json")
    encoder = KeywordEncoder(WORDS)
    p = encoder.encode([x.text for x in passages], role="document")
    q = encoder.encode([x.query_text for x in benchmark.questions], role="query")
    sims = q @ p.T
    run = {
        x.qid: {passages[j].id: float(sims[i, j]) for j in range(len(passages))}
        for i, x in enumerate(benchmark.questions)
    }
    qrels = {x.qid: {pid: 1 for pid in relevant_passages(x, passages)} or {NO_PASSAGE: 0} for x in benchmark.questions}
    assert any(NO_PASSAGE in v for v in qrels.values())
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(run)
    ours = scores_of(report)
    assert ours["ndcg_at_10"] == pytest.approx(
        np.mean([r["ndcg_cut_10"] for r in ref.values()]), abs=5e-6
    )  # results keep 5 digits, as mteb's
    assert ours["recall_at_10"] == pytest.approx(
        np.mean([r["recall_10"] for r in ref.values()]), abs=5e-6
    )  # results keep 5 digits, as mteb's


def write_long_beir(folder: Path, n_docs: int = 30, n_queries: int = 15, seed: int = 5) -> Path:
    """Documents of several paragraphs; relevance names documents."""
    rng = np.random.default_rng(seed)
    docs = {
        f"d{i}": "\n\n".join(
            " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8)))) for _ in range(int(rng.integers(1, 6)))
        )
        for i in range(n_docs)
    }
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=2, replace=False)) for i in range(n_queries)}
    qrels = {q: {f"d{j}": 1 for j in rng.choice(n_docs, size=3, replace=False)} for q in queries}
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    rows = "".join(f"{q}\t{d}\t{r}\n" for q, ds in qrels.items() for d, r in ds.items())
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def test_documents_are_scored_by_their_best_passage_as_pytrec_eval_on_a_brute_force_run(tmp_path):
    folder = write_long_beir(tmp_path / "long")
    top_k = 7
    report = evaluate(
        HashEncoder(),
        [str(folder)],
        chunking={"method": "paragraphs"},
        top_k=top_k,
        **settings(tmp_path, "a"),
    )
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    encoder = HashEncoder()  # no ties: the top k is one set
    q = encoder.encode([x["text"] for x in queries], role="query")
    run = {}
    for i, query in enumerate(queries):
        best = {}
        for doc in docs:
            paragraphs = [t.strip() for t in doc["text"].split("\n\n") if t.strip()]
            best[doc["_id"]] = float((encoder.encode(paragraphs, role="document") @ q[i]).max())
        run[query["_id"]] = dict(sorted(best.items(), key=lambda kv: (-kv[1], kv[0]), reverse=False)[: top_k * 3])
    qrels = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, rel = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(rel)
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "P.5"}).evaluate(run)
    ours = scores_of(report)
    assert ours["ndcg_at_5"] == pytest.approx(
        np.mean([r["ndcg_cut_5"] for r in ref.values()]), abs=5e-6
    )  # results keep 5 digits, as mteb's
    assert ours["precision_at_5"] == pytest.approx(
        np.mean([r["P_5"] for r in ref.values()]), abs=5e-6
    )  # results keep 5 digits, as mteb's


def test_chunking_is_recorded_and_stored_apart(qa, tmp_path):
    a = evaluate(KeywordEncoder(WORDS), [str(qa)], chunking={"method": "paragraphs"}, **settings(tmp_path, "o"))
    b = evaluate(
        KeywordEncoder(WORDS), [str(qa)], chunking={"method": "paragraphs", "paragraphs": 2}, **settings(tmp_path, "o")
    )
    pa, pb = a.outcomes[0].path, b.outcomes[0].path
    assert pa != pb and pa.parent.name != pb.parent.name
    recorded = json.loads(pb.read_text())["run_settings"]["chunking"]
    assert recorded["method"] == "paragraphs" and recorded["paragraphs"] == 2
    again = evaluate(KeywordEncoder(WORDS), [str(qa)], chunking={"method": "paragraphs"}, **settings(tmp_path, "o"))
    assert again.outcomes[0].reused and again.outcomes[0].path == pa


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chunking", "sentences"], "chunking method 'sentences': use one of tokens, paragraphs"),
        (["--chunking", "tokens", "--chunk-size", "0"], "--chunk-size: Input should be greater than 0"),
        (["--chunking", "fastbook-paragraphs-a", "--chunk-size", "100"], "fixes its paragraphs"),
        (["--chunking", "tokens", "--chunk-overlap", "600"], "must be smaller than the chunk size"),
    ],
)
def test_bad_chunking_is_one_line(qa, tmp_path, capsys, no_offline_flags, args, message):
    code = main(["run", "--model", "bm25", "--tasks", str(qa), "--output-folder", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err


def test_chunking_on_sts_alone_is_refused(tmp_path, capsys):
    code = main(
        [
            "run",
            "--model",
            "bm25",
            "--tasks",
            "LeeDocumentSimilarity",
            "--chunking",
            "tokens",
            "--output-folder",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "has no effect on the task(s) of this run" in err


def test_a_chunk_size_flag_overrides_a_config_files_chunking(qa, tmp_path):
    from embedscope.settings import build_settings
    from embedscope.settings.sources import Layer

    settings_ = build_settings(
        [
            Layer("c.yaml", {"chunking": {"method": "tokens", "chunk_size": 300, "overlap": 10}}, "file"),
            Layer("command line", {"chunking": {"chunk_size": 100}}, "flag"),
        ]
    )
    assert settings_.chunking is not None
    assert (settings_.chunking.method, settings_.chunking.chunk_size, settings_.chunking.overlap) == ("tokens", 100, 10)


@pytest.mark.parametrize("scope", ["chapter", "all"])
def test_modified_mrr_and_recall_equal_the_fastbook_studys_run(qa, tmp_path, scope):
    from embedscope.studies.fastbook.run import run_fastbook

    options = ChunkingSettings(method="paragraphs", paragraphs=2).options()
    extra = {"filter_field": "chapter"} if scope == "chapter" else {}
    ours = scores_of(
        evaluate(
            "bm25", [str(qa)], chunking={"method": "paragraphs", "paragraphs": 2}, **extra, **settings(tmp_path, "a")
        )
    )
    study = run_fastbook(
        load_benchmark(qa / "questions.json"), chunk_documents([qa / "documents"], options), "bm25", scope=scope, k=10
    )
    assert ours["modified_mrr_at_10"] == round(study.overall["modified_mrr_at_10"], 5)
    assert ours["modified_recall_at_10"] == round(study.overall["modified_recall_at_10"], 5)
    assert 0 < ours["modified_recall_at_10"] < 1
