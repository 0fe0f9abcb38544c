"""The task types added last (bitext mining, summarization, instruction retrieval/reranking) from local copies
in the hub's layout, through the shipped catalog's entries, its builders and the runner; mteb reads the result files."""

from __future__ import annotations

import json

import pytest

from embedscope.evaluation.runner import evaluate
from embedscope.settings import RunSettings
from embedscope.tasks import from_catalog
from embedscope.tasks.catalog import CatalogEntry, catalog_entry
from embedscope.testing.fakes import HashEncoder, KeywordEncoder

WORDS = ["flood", "court", "election", "virus", "market", "storm"]


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _entry(name: str) -> CatalogEntry:
    """The shipped catalog's entry of ``name`` (scripts/build_catalog.py made it from mteb's metadata)."""
    return catalog_entry(name)


def _run(entry: CatalogEntry, spec: str, data_dir, tmp_path, monkeypatch, encoder=None):
    task = from_catalog.catalog_task(spec, data_dir=data_dir)
    report = evaluate(
        encoder or HashEncoder(), [task], output_folder=tmp_path / "out", cache=False, show_progress=False
    )
    from support.mteb_results import mteb_file_scores

    files = mteb_file_scores(tmp_path / "out")
    assert list(files.values()) == [report.outcomes[0].result.main_score()]
    return task, report.outcomes[0].result.scores[entry.eval_splits[0]][0]


def test_tatoeba_subset_from_a_fast_loading_copy(tmp_path, monkeypatch):
    rows = [
        {"sentence1": f"phrase {i} {WORDS[i % 6]}", "sentence2": f"frase {i} {WORDS[i % 6]}", "lang": lang}
        for lang in ("fra-eng", "deu-eng")
        for i in range(12)
    ]
    _jsonl(tmp_path / "data" / "Tatoeba" / "test.jsonl", rows)
    task, scores = _run(
        _entry("Tatoeba"),
        "Tatoeba:fra-eng",
        tmp_path / "data",
        tmp_path,
        monkeypatch,
        KeywordEncoder([*WORDS, *map(str, range(12))]),
    )
    assert (task.type, task.hf_subset, task.languages) == ("BitextMining", "fra-eng", ("fra-Latn", "eng-Latn"))
    assert scores["f1"] == scores["main_score"] == 1.0 and scores["hf_subset"] == "fra-eng"


def test_bucc_v2_subset_config(tmp_path, monkeypatch):
    _jsonl(
        tmp_path / "data" / "BUCC.v2" / "de-en" / "test.jsonl",
        [{"sentence1": f"satz {i}", "sentence2": f"sentence {i}"} for i in range(10)],
    )
    task, scores = _run(_entry("BUCC.v2"), "BUCC.v2:de-en", tmp_path / "data", tmp_path, monkeypatch)
    assert set(scores) >= {"precision", "recall", "f1", "accuracy", "main_score"}


def test_summeval_v2_from_a_local_copy(tmp_path, monkeypatch):
    rows = [
        {
            "text": f"article {i}",
            "human_summaries": [f"{WORDS[i % 6]} {WORDS[(i + 1) % 6]}", "storm court"],
            "machine_summaries": [f"{WORDS[j % 6]} summary {j}" for j in range(i, i + 5)],
            "relevance": [float((i * j) % 5) for j in range(5)],
        }
        for i in range(1, 9)
    ]
    _jsonl(tmp_path / "data" / "SummEvalSummarization.v2" / "test.jsonl", rows)
    task, scores = _run(
        _entry("SummEvalSummarization.v2"), "SummEvalSummarization.v2", tmp_path / "data", tmp_path, monkeypatch
    )
    assert (task.type, task.protocol, task.main_score) == ("Summarization", "v2", "cosine_spearman")
    assert list(scores)[:6] == [
        "pearson",
        "spearman",
        "cosine_spearman",
        "cosine_pearson",
        "dot_pearson",
        "dot_spearman",
    ]


def _followir_copy(folder, lang: str = ""):
    """FollowIR's layout (configs corpus, queries, …); with ``lang`` mFollowIR's (corpus-LANG, queries-LANG, …)."""
    if lang:
        _followir_copy(folder / "_plain")
        for sub in sorted((folder / "_plain").iterdir()):
            sub.rename(folder / f"{sub.name}-{lang}")
        (folder / "_plain").rmdir()
        return
    _jsonl(
        folder / "corpus" / "corpus.jsonl",
        [{"_id": f"d{i}", "title": "", "text": f"{WORDS[i % 6]} report {i}"} for i in range(12)],
    )
    ids = [f"q{q}-{kind}" for q in range(3) for kind in ("og", "changed")]
    _jsonl(
        folder / "queries" / "queries.jsonl",
        [{"_id": q, "text": f"news on {WORDS[i // 2]}"} for i, q in enumerate(ids)],
    )
    _jsonl(
        folder / "instruction" / "instruction.jsonl",
        [
            {"query-id": q, "instruction": "any report" if q.endswith("og") else f"only {WORDS[i // 2]}"}
            for i, q in enumerate(ids)
        ],
    )
    qrels = [
        {"query-id": q, "corpus-id": f"d{d}", "score": 1}
        for i, q in enumerate(ids)
        for d in range(i // 2, 12, 6 if q.endswith("og") else 12)
    ]
    _jsonl(folder / "default" / "test.jsonl", qrels)
    _jsonl(
        folder / "top_ranked" / "test.jsonl", [{"query-id": q, "corpus-ids": [f"d{d}" for d in range(12)]} for q in ids]
    )
    _jsonl(
        folder / "qrel_diff" / "qrel_diff.jsonl", [{"query-id": f"q{q}", "corpus-ids": [f"d{q + 6}"]} for q in range(3)]
    )


def test_followir_instruction_reranking_from_a_local_copy(tmp_path, monkeypatch):
    _followir_copy(tmp_path / "data" / "Core17InstructionRetrieval")
    task, scores = _run(
        _entry("Core17InstructionRetrieval"),
        "Core17InstructionRetrieval",
        tmp_path / "data",
        tmp_path,
        monkeypatch,
        KeywordEncoder(WORDS),
    )
    assert (task.type, task.task_scores, task.main_score) == ("InstructionReranking", "p-MRR", "p-MRR")
    assert (
        scores["main_score"] == scores["p-MRR"] and "ndcg_at_10" in scores["og"] and "ndcg_at_10" in scores["changed"]
    )


@pytest.mark.parametrize("name,subset", [("mFollowIR", "fas"), ("mFollowIRCrossLingual", "eng-fas")])
def test_mfollowir_reads_language_suffixed_configs(tmp_path, monkeypatch, name, subset):
    _followir_copy(tmp_path / "data" / name, lang="fas")
    task, scores = _run(
        _entry(name), f"{name}:{subset}", tmp_path / "data", tmp_path, monkeypatch, KeywordEncoder(WORDS)
    )
    assert task.hf_subset == subset and scores["main_score"] == scores["p-MRR"]


def test_instruction_reranking_route_from_a_folder(tmp_path):
    from embedscope.tasks.registry import resolve_task

    _followir_copy(tmp_path / "followir")
    task = resolve_task(f"instructionreranking:{tmp_path / 'followir'}")
    report = evaluate(KeywordEncoder(WORDS), [task], output_folder=tmp_path / "out", cache=False, show_progress=False)
    assert (
        report.outcomes[0].result.scores["test"][0]["main_score"]
        == report.outcomes[0].result.scores["test"][0]["p-MRR"]
    )


def _ifir_copy(folder):
    _jsonl(folder / "corpus" / "corpus.jsonl", [{"_id": f"d{i}", "text": f"{WORDS[i % 6]} law {i}"} for i in range(20)])
    ids = [f"q{i}_v{1 + i % 3}" for i in range(9)]
    _jsonl(
        folder / "queries" / "queries.jsonl", [{"_id": q, "text": f"case on {WORDS[i % 6]}"} for i, q in enumerate(ids)]
    )
    _jsonl(
        folder / "default" / "test.jsonl",
        [{"query-id": q, "corpus-id": f"d{i}", "score": 1} for i, q in enumerate(ids)],
    )
    _jsonl(
        folder / "instruction" / "test.jsonl",
        [{"query-id": q, "instruction": f"about {WORDS[(i + 1) % 6]}"} for i, q in enumerate(ids)],
    )


def test_ifir_instruction_retrieval_from_a_local_copy(tmp_path, monkeypatch):
    _ifir_copy(tmp_path / "data" / "IFIRAila")
    task, scores = _run(_entry("IFIRAila"), "IFIRAila", tmp_path / "data", tmp_path, monkeypatch)
    assert (task.type, task.task_scores) == ("InstructionRetrieval", "level_scores")
    assert set(scores["level_scores"]) == {"level_1", "level_2", "level_3"}


def test_bitext_and_summarization_routes_from_files(tmp_path):
    from embedscope.tasks.registry import resolve_task

    (tmp_path / "b.csv").write_text("sentence1,sentence2\nhello,bonjour\ncat,chat\nstorm,orage\n")
    task = resolve_task(f"bitextmining:{tmp_path / 'b.csv'}")
    assert (
        task.type == "BitextMining"
        and task.evaluate_split("test", HashEncoder(), RunSettings().search_options(show_progress=False)).scores
    )
    _jsonl(
        tmp_path / "s.jsonl",
        [
            {
                "text": "t",
                "human_summaries": ["storm city"],
                "machine_summaries": ["storm", "city vote", "rain"],
                "relevance": [1, 3, 5],
            }
        ],
    )
    task = resolve_task(f"summarization:{tmp_path / 's.jsonl'}")
    assert (
        task.type == "Summarization"
        and "cosine_spearman"
        in task.evaluate_split("test", HashEncoder(), RunSettings().search_options(show_progress=False)).scores
    )


def test_instruction_retrieval_route_from_a_folder(tmp_path):
    from embedscope.tasks.registry import resolve_task

    _ifir_copy(tmp_path / "ifir")
    task = resolve_task(f"instructionretrieval:{tmp_path / 'ifir'}")
    assert (task.type, task.task_scores, task.main_score) == ("InstructionRetrieval", "none", "ndcg_at_10")
    from embedscope.tasks.instructions import with_instructions

    given = task.load_split("test")
    assert with_instructions(given.data.queries, given.instructions).texts[0] == "case on flood about court"
    assert (
        task.evaluate_split("test", HashEncoder(), RunSettings().search_options(show_progress=False)).scores[
            "ndcg_at_10"
        ]
        >= 0
    )
