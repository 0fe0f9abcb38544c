"""--filter-field from the command line, config files and evaluate(): filtered search on the user's own corpus, stored
apart from unfiltered results, refused where no task retrieves (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.testing.fakes import KeywordEncoder

# two chapters: q1 (chapter a) would find d3 (chapter b) first without the filter
CORPUS = [("d1", "cat", "a"), ("d2", "dog", "a"), ("d3", "cat cat cat", "b"), ("d4", "fish", "b")]
QUERIES = [("q1", "cat", "a"), ("q2", "fish", "b")]
QRELS = {"q1": "d1", "q2": "d4"}


def _folder(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    rows = [{"_id": i, "text": t, "metadata": {"chapter": c}} for i, t, c in CORPUS]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": i, "text": t, "metadata": {"chapter": c}} for i, t, c in QUERIES]
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    )
    return root


def test_filtered_search_ranks_only_the_query_s_chapter(tmp_path):
    data = _folder(tmp_path / "data")
    encoder = KeywordEncoder(["cat", "dog", "fish"])
    common = dict(output_folder=tmp_path / "out", cache=False, save_predictions=True)
    plain = embedscope.evaluate(encoder, [str(data)], **common).outcomes[0]
    filtered = embedscope.evaluate(encoder, [str(data)], filter_field="chapter", **common).outcomes[0]
    assert plain.path != filtered.path and "experiments" in str(filtered.path)
    run = json.loads(next(filtered.path.parent.glob("predictions/*.json")).read_text())["default"]["test"]
    assert set(run["q1"]) <= {"d1", "d2"} and set(run["q2"]) <= {"d3", "d4"}
    assert filtered.result.scores["test"][0]["mrr_at_10"] == 1.0 > plain.result.scores["test"][0]["mrr_at_10"]
    assert filtered.result.extra["run_settings"]["filter_field"] == "chapter"


def test_the_flag_reaches_the_run_and_is_refused_without_retrieval(tmp_path, capsys):
    data = _folder(tmp_path / "data")
    argv = ["run", "--model", "fts5", "--tasks", str(data), "--output-folder", str(tmp_path / "o")]
    assert main([*argv, "--filter-field", "chapter", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["scores"]["test"][0]["mrr_at_10"] == 1.0
    assert main(["run", "--tasks", "LeeDocumentSimilarity", "--filter-field", "chapter"]) == 2
    assert "--filter-field has no effect" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="filter_field has no effect"):
        embedscope.evaluate(KeywordEncoder(["a"]), ["LeeDocumentSimilarity"], filter_field="chapter", cache=False)
