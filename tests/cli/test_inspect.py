"""embedscope inspect (issue 51, item 3): a ranking result's worst queries with their texts, relevant documents and
what was retrieved, checked against the per-item rows, the saved predictions and the data files read here on their
own; the Parquet export read back; one-line refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.results.per_item import per_item_path, read_per_item
from embedscope.testing.fakes import HashEncoder, KeywordEncoder

WORDS = ["cat", "dog", "fish", "bird", "cow", "fox", "owl", "bee"]


def _beir(root: Path) -> Path:
    """A BEIR folder: 40 documents, 14 queries of topics a/b (metadata), each with graded judgments, some of them 0
    (judged, not relevant)."""
    rng = np.random.default_rng(3)
    (root / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i:02d}", "title": f"T{i}", "text": " ".join(rng.choice(WORDS, 6))} for i in range(40)]
    queries, qrels = [], []
    for i in range(14):
        queries.append({"_id": f"q{i:02d}", "text": " ".join(rng.choice(WORDS, 3)), "metadata": {"topic": "ab"[i % 2]}})
        for d, grade in zip(rng.choice(40, size=3, replace=False), (2, 1, 0)):
            qrels.append(f"q{i:02d}\td{d:02d}\t{grade}\n")
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return root


def _qrels(data: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, grade = line.split("\t")
        out.setdefault(q, {})[d] = int(grade)
    return out


def _texts(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["_id"]: (f"{r['title']} {r['text']}" if r.get("title") else r["text"]) for r in rows}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The data, a run with predictions and query groups, and a run without predictions (hash vectors: no ties)."""
    root = tmp_path_factory.mktemp("inspect")
    data = _beir(root / "data")
    common = dict(cache=False, show_progress=False)
    embedscope.evaluate(HashEncoder(), [str(data)], output_folder=root / "full", save_predictions=True,
                        group_by="topic", **common)  # fmt: skip
    embedscope.evaluate(HashEncoder(), [str(data)], output_folder=root / "bare", **common)
    return {"data": data, "full": root / "full", "bare": root / "bare"}


def _result(folder: Path, task: str = "data") -> Path:
    """The one result file of ``task`` under ``folder``."""
    (path,) = list(folder.rglob(f"{task}.json"))
    return path


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("embedscope: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_the_worst_queries_with_their_judgments_rankings_scores_and_texts(runs):
    found = embedscope.inspect(runs["full"], task="data", worst=0)  # 0: every query
    path = _result(runs["full"])
    rows = read_per_item(per_item_path(path))
    worst = sorted(rows, key=lambda r: (r["ndcg_at_10"], r["id"]))  # independently: by nDCG@10, ties by id
    assert [q.id for q in found.queries] == [r["id"] for r in worst]
    assert [q.value for q in found.queries] == [r["ndcg_at_10"] for r in worst]
    assert found.total == 14 and found.metric == "ndcg_at_10" and found.path == path
    values = [r["ndcg_at_10"] for r in worst]
    assert len(set(values)) > 2 and len(set(values)) < len(values)  # the order and the ties by id are exercised
    five = embedscope.inspect(runs["full"], task="data", worst=5)
    assert [q.id for q in five.queries] == [r["id"] for r in worst[:5]]
    saved = json.loads((path.parent / "predictions" / "data_predictions.json").read_text())["default"]["test"]
    qrels, queries = _qrels(runs["data"]), _texts(runs["data"] / "queries.jsonl")
    corpus = _texts(runs["data"] / "corpus.jsonl")
    for q, row in zip(found.queries, worst):
        assert q.text == queries[q.id] and q.group == "ab"[int(q.id[1:]) % 2]
        assert [d.id for d in q.retrieved] == row["top_10"]  # the per-item rows' top 10, in order
        assert [d.rank for d in q.retrieved] == list(range(1, 11))
        assert [d.score for d in q.retrieved] == [saved[q.id][d.id] for d in q.retrieved]  # the saved scores
        assert [d.text for d in q.retrieved] == [corpus[d.id] for d in q.retrieved]
        assert [d.relevance for d in q.retrieved] == [qrels[q.id].get(d.id, 0) for d in q.retrieved]
        # the relevant documents are the qrels' judgments above 0, each ranked where the saved run ranks it
        assert {d.id: d.relevance for d in q.relevant} == {d: g for d, g in qrels[q.id].items() if g > 0}
        by_score = sorted(saved[q.id], key=lambda d: -saved[q.id][d])
        assert all(d.rank == by_score.index(d.id) + 1 and d.score == saved[q.id][d.id] for d in q.relevant)
        assert q.complete and q.ranked == 40  # the saved run holds every document
    assert not any(n.startswith("no predictions") for n in found.notes)


@pytest.mark.slow
def test_the_command_prints_the_report_and_writes_a_flat_parquet_file(runs, tmp_path, capsys):
    target = tmp_path / "worst.parquet"
    assert main(["inspect", str(runs["full"]), "--worst", "3", "--parquet", str(target)]) == 0  # one task: no --task
    out = capsys.readouterr().out
    found = embedscope.inspect(runs["full"], worst=3)
    lines = out.splitlines()
    assert lines[0] == "data (Retrieval): the 3 worst queries of 14 by ndcg_at_10"
    heads = [line for line in lines if line[:2] in ("1.", "2.", "3.")]
    assert [h.split(":")[0] for h in heads] == [f"{n}. {q.id}" for n, q in enumerate(found.queries, 1)]
    first = found.queries[0]
    assert f"   query: {first.text}" in lines
    assert any(line.split()[:2] == ["1", first.retrieved[0].id] for line in lines)  # rank 1 of the worst query
    table = pq.read_table(target).to_pylist()
    assert {r["query_id"] for r in table} == {q.id for q in found.queries}
    for n, q in enumerate(found.queries, 1):
        mine = [r for r in table if r["query_id"] == q.id]
        top = [r for r in mine if r["in_top_10"]]
        assert [(r["doc_id"], r["rank"], r["score"]) for r in top] == [(d.id, d.rank, d.score) for d in q.retrieved]
        others = [(r["doc_id"], r["rank"], r["score"]) for r in mine if not r["in_top_10"]]
        below = [(d.id, d.rank, d.score) for d in q.relevant if d.id not in {t.id for t in q.retrieved}]
        assert others == below and all(r["relevant"] for r in mine if not r["in_top_10"])  # relevant, below the top 10
        assert all(r["order"] == n and r["query_text"] == q.text and r["value"] == q.value for r in mine)
        assert {r["doc_id"] for r in mine if r["relevant"]} == {d.id for d in q.relevant}
    assert main(["inspect", str(_result(runs["full"])), "--worst", "2", "--json"]) == 0  # the result file itself
    printed = json.loads(capsys.readouterr().out)
    assert [q["id"] for q in printed["queries"]] == [q.id for q in found.queries[:2]]


@pytest.mark.slow
def test_a_group_keeps_its_queries_and_an_unknown_group_is_refused_naming_the_known(runs, capsys):
    rows = read_per_item(per_item_path(_result(runs["full"])))
    for spelling in ("b", "topic=b"):
        found = embedscope.inspect(runs["full"], group=spelling, worst=0)  # 0: every query of the group
        expected = sorted((r for r in rows if r["group"] == "b"), key=lambda r: (r["ndcg_at_10"], r["id"]))
        assert [q.id for q in found.queries] == [r["id"] for r in expected] and found.total == 7
    assert main(["inspect", str(runs["full"]), "--group", "c"]) == 2
    err = _one_error_line(capsys)
    assert "--group 'c'" in err and "topic groups are: a, b" in err
    assert main(["inspect", str(runs["bare"]), "--group", "a"]) == 2  # a run without --group-by
    assert "--group 'a'" in _one_error_line(capsys)


@pytest.mark.slow
def test_without_predictions_ranks_come_from_the_top_10_and_a_note_says_so(runs):
    found = embedscope.inspect(runs["bare"], task="data", worst=0)
    rows = {r["id"]: r for r in read_per_item(per_item_path(_result(runs["bare"])))}
    assert sum(n.startswith("no predictions saved") for n in found.notes) == 1
    missed = 0
    for q in found.queries:
        assert [d.id for d in q.retrieved] == rows[q.id]["top_10"] and all(d.score is None for d in q.retrieved)
        top = rows[q.id]["top_10"]
        for d in q.relevant:
            assert d.rank == (top.index(d.id) + 1 if d.id in top else None)
            missed += d.rank is None
    assert missed  # some relevant document lies below the top 10: "not in top 10"
    assert "not in top 10" in found.table() and "not retrieved" not in found.table()


@pytest.mark.slow
def test_unreadable_data_leaves_ids_ranks_and_scores_with_one_note(runs, tmp_path):
    data, out = _beir(tmp_path / "moving"), tmp_path / "out"
    embedscope.evaluate(HashEncoder(), [str(data)], output_folder=out, cache=False, show_progress=False,
                        save_predictions=True)  # fmt: skip
    shutil.rmtree(data)
    found = embedscope.inspect(out, worst=3)
    (note,) = [n for n in found.notes if "unavailable" in n]
    assert "no longer there" in note and str(data.resolve()) in note
    rows = {r["id"]: r for r in read_per_item(per_item_path(_result(out, "moving")))}
    for q in found.queries:
        assert q.text is None and q.relevant is None
        assert [d.id for d in q.retrieved] == rows[q.id]["top_10"] and all(d.score is not None for d in q.retrieved)


@pytest.mark.slow
def test_refusals_are_one_line_with_exit_code_2(runs, tmp_path, capsys):
    assert main(["inspect", str(runs["full"]), "--task", "Nope"]) == 2
    err = _one_error_line(capsys)
    assert "--task 'Nope'" in err and "it holds: data" in err
    assert main(["inspect", str(runs["full"]), "--worst", "-1"]) == 2
    assert "--worst" in _one_error_line(capsys)
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2
    assert "no such results folder" in _one_error_line(capsys)
    bare = tmp_path / "no_rows"
    shutil.copytree(runs["bare"], bare)
    per_item_path(_result(bare)).unlink()  # a result without per-item rows
    assert main(["inspect", str(bare), "--task", "data"]) == 2
    assert "data.per_item.jsonl.gz" in _one_error_line(capsys)
    assert main(["inspect", str(bare)]) == 2
    assert "no ranking result there has per-item rows" in _one_error_line(capsys)


@pytest.mark.slow
def test_reranking_results_are_inspected_and_the_legacy_protocol_is_refused(tmp_path, capsys):
    from embedscope.testing.tiny import TINY_WORDS, tiny_tasks_of_every_type

    tasks = [t for t in tiny_tasks_of_every_type() if t.name in ("TinyReranking", "TinyRerankingV1", "TinySTS")]
    embedscope.evaluate(KeywordEncoder(TINY_WORDS), tasks, output_folder=tmp_path, cache=False, show_progress=False,
                        save_predictions=True)  # fmt: skip
    found = embedscope.inspect(tmp_path, task="TinyReranking", worst=3)
    rows = read_per_item(per_item_path(_result(tmp_path, "TinyReranking")))
    worst = sorted(rows, key=lambda r: (r["map_at_1000"], r["id"]))[:3]
    assert found.metric == "map_at_1000" and [q.id for q in found.queries] == [r["id"] for r in worst]
    assert [[d.id for d in q.retrieved] for q in found.queries] == [r["top_10"] for r in worst]
    assert any("texts and relevance judgments unavailable" in n for n in found.notes)  # an in-memory task
    assert main(["inspect", str(tmp_path), "--task", "TinyRerankingV1"]) == 2
    assert "keeps no ranking per query" in _one_error_line(capsys)
    assert main(["inspect", str(tmp_path), "--task", "TinySTS"]) == 2
    assert "TinySTS (STS) ranks no documents per query" in _one_error_line(capsys)


@pytest.mark.slow
def test_a_pipeline_query_shows_its_failure_class(tmp_path):
    from embedscope.retrieval.pipeline import Pipeline

    data = _beir(tmp_path / "data")
    pipeline = Pipeline.build(["bm25", "fts5:match=any"], fusion="rrf")
    embedscope.evaluate(pipeline, [str(data)], output_folder=tmp_path / "out", cache=False, show_progress=False)
    found = embedscope.inspect(tmp_path / "out", worst=0)
    rows = {r["id"]: r for r in read_per_item(per_item_path(_result(tmp_path / "out")))}
    for q in found.queries:
        row = rows[q.id]
        assert (q.failure, q.candidates_recall, q.ceiling_ndcg_at_10) == (
            row["failure"], row["candidates_recall"], row["ceiling_ndcg_at_10"]
        )  # fmt: skip
    assert {q.failure for q in found.queries} - {"none"}  # some query is lost
    first = found.queries[0]
    assert f"failure {first.failure} (candidates recall {first.candidates_recall:.2f}" in found.table()
