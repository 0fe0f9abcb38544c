"""The command line: each command on real files, output checked against independent references."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedscope.cli.main import main


def _write_run_and_qrels(tmp_path):
    rng = np.random.default_rng(7)
    run_lines, qrels_lines, run, qrels = [], [], {}, {}
    for q in range(30):
        qid = f"q{q}"
        docs = rng.choice(200, size=50, replace=False)
        scores = np.round(rng.random(50), 2)  # few distinct values: many ties
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs, scores)}
        for rank, (d, s) in enumerate(sorted(run[qid].items(), key=lambda x: -x[1]), 1):
            run_lines.append(f"{qid} Q0 {d} {rank} {s} test")
        rel = rng.choice(200, size=4, replace=False)
        qrels[qid] = {f"d{d}": int(rng.integers(0, 3)) for d in rel}
        qrels_lines += [f"{qid} 0 {d} {r}" for d, r in qrels[qid].items()]
    (tmp_path / "run.trec").write_text("\n".join(run_lines) + "\n")
    (tmp_path / "qrels.trec").write_text("\n".join(qrels_lines) + "\n")
    return run, qrels


def test_score_json_matches_pytrec_eval(tmp_path, capsys):
    import pytrec_eval

    run, qrels = _write_run_and_qrels(tmp_path)
    assert main(["score", "--qrels", str(tmp_path / "qrels.trec"), "--run", str(tmp_path / "run.trec"), "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map_cut.100", "recall.5", "P.3"})
    per_query = ev.evaluate(run)
    for ours_key, trec_key in [
        ("ndcg_at_10", "ndcg_cut_10"),
        ("map_at_100", "map_cut_100"),
        ("recall_at_5", "recall_5"),
        ("precision_at_3", "P_3"),
    ]:
        expected = round(sum(v[trec_key] for v in per_query.values()) / len(per_query), 5)
        assert ours[ours_key] == expected, ours_key


def test_score_table(tmp_path, capsys):
    _write_run_and_qrels(tmp_path)
    main(["score", "--qrels", str(tmp_path / "qrels.trec"), "--run", str(tmp_path / "run.trec"), "--k", "1", "10"])
    out = capsys.readouterr().out
    assert "| metric | @1 | @10 |" in out and "| ndcg |" in out


def test_errors_are_reported_without_traceback(tmp_path, capsys):
    assert main(["run", "--model", "static-64", "--tasks", "BBCNewsRetreival", "--output-folder", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'BBCNewsRetrieval'" in err


def test_models_and_tasks_lists(capsys):
    main(["models"])
    out = capsys.readouterr().out
    for alias in ("minilm", "minilm-int8", "paraphrase-minilm-l3", "static-64"):
        assert alias in out
    main(["tasks"])
    assert "BBCNewsRetrieval" in capsys.readouterr().out


@pytest.mark.slow
def test_run_on_a_beir_folder_with_the_static_model(tmp_path, capsys):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "Cats purr and sleep all day.", "d2": "The stock market fell sharply.", "d3": "Rain is expected."}
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "stock market crash"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    args = [
        "run",
        "--model",
        "static-64",
        "--tasks",
        str(folder),
        "--output-folder",
        str(tmp_path / "out"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--save-predictions",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| beir | Retrieval | test |" in out
    assert main([*args, "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["task_name"] == "beir" and result["scores"]["test"][0]["recall_at_3"] == 1.0


def test_score_per_query_csv_matches_pytrec_eval(tmp_path, capsys):
    import csv

    import pytrec_eval

    run, qrels = _write_run_and_qrels(tmp_path)
    out = tmp_path / "per_query.csv"
    assert (
        main(
            [
                "score",
                "--qrels",
                str(tmp_path / "qrels.trec"),
                "--run",
                str(tmp_path / "run.trec"),
                "--k",
                "5",
                "10",
                "--per-query",
                str(out),
            ]
        )
        == 0
    )
    rows = {r["query_id"]: r for r in csv.DictReader(out.open())}
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.5"}).evaluate(run)
    assert set(rows) == set(expected) and "mrr_at_10" in next(iter(rows.values()))
    for qid, values in expected.items():
        assert float(rows[qid]["ndcg_at_10"]) == values["ndcg_cut_10"]
        assert float(rows[qid]["precision_at_5"]) == values["P_5"]
