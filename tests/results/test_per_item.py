"""Per-item score files: written beside each result by real runs, and they reproduce the task scores."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr

import embedscope
from embedscope.metrics.pairs import HIGHER_IS_SIMILAR, threshold_metrics
from embedscope.results.per_item import encode_rows, item_rows, merge_rows, per_item_path, read_per_item
from embedscope.testing.fakes import HashEncoder
from embedscope.testing.tiny import tiny_tasks_of_every_type


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("per-item")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = [t for t in tiny_tasks_of_every_type() if t.type != "Clustering"]
        report = embedscope.evaluate(
            HashEncoder(), tasks, output_folder=out, cache=False, show_progress=False, save_predictions=True
        )
    return {o.task.name: o for o in report.outcomes}


def _rows(outcome):
    return read_per_item(per_item_path(outcome.path))


@pytest.mark.slow
def test_files_only_for_per_item_task_types(run):
    have = {name for name, o in run.items() if per_item_path(o.path).exists()}
    assert have == {"TinyRetrieval", "TinyReranking", "TinyRerankingV1", "TinySTS", "TinyPairClassification"}
    assert not list(run["TinyRetrieval"].path.parent.glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["TinyRetrieval", "TinyReranking"])
def test_ranking_columns_average_to_the_scores(run, task):
    outcome = run[task]
    rows = _rows(outcome)
    entry = outcome.result.scores["test"][0]
    assert [r["id"] for r in rows] == sorted({r["id"] for r in rows}, key=[r["id"] for r in rows].index)
    for metric in ("ndcg_at_10", "map_at_1000", "recall_at_3", "precision_at_5", "hit_rate_at_1"):
        assert round(sum(r[metric] for r in rows) / len(rows), 5) == entry[metric]
    assert sum(r["mrr_at_10"] for r in rows) / len(rows) == pytest.approx(entry["mrr_at_10"], abs=1e-15)


@pytest.mark.slow
def test_top_10_is_the_saved_ranking(run):
    outcome = run["TinyRetrieval"]
    preds = __import__("json").loads(
        (outcome.path.parent / "predictions" / "TinyRetrieval_predictions.json").read_text()
    )["default"]["test"]
    for row in _rows(outcome):
        ranked = sorted(preds[row["id"]].items(), key=lambda kv: -kv[1])
        assert row["top_10"] == [d for d, _ in ranked][:10]


@pytest.mark.slow
def test_legacy_reranking_per_query_map(run):
    outcome = run["TinyRerankingV1"]
    rows = _rows(outcome)
    assert np.mean([r["map"] for r in rows]) == pytest.approx(outcome.result.scores["test"][0]["map"], abs=1e-15)


def test_sts_pairs_reproduce_spearman(run):
    outcome = run["TinySTS"]
    rows = _rows(outcome)
    entry = outcome.result.scores["test"][0]
    gold = [r["gold"] for r in rows]
    for fn, key in (("cosine", "cosine_spearman"), ("similarity", "spearman"), ("euclidean", "euclidean_spearman")):
        assert spearmanr([r[fn] for r in rows], gold)[0] == pytest.approx(entry[key], abs=1e-12)


def test_pair_classification_pairs_reproduce_ap(run):
    outcome = run["TinyPairClassification"]
    rows = _rows(outcome)
    entry = outcome.result.scores["test"][0]
    labels = [r["gold"] for r in rows]
    for fn in ("cosine", "manhattan", "dot"):
        got = threshold_metrics([r[fn] for r in rows], labels, HIGHER_IS_SIMILAR[fn])
        assert got["ap"] == pytest.approx(entry[f"{fn}_ap"], abs=1e-12)


def test_rerun_of_a_missing_split_keeps_stored_rows():
    old = item_rows("dev", "default", {"id": ["a"], "x": [1.0]}) + item_rows(
        "test", "default", {"id": ["a"], "x": [2.0]}
    )
    new = item_rows("test", "default", {"id": ["a"], "x": [3.0]})
    assert [(r["split"], r["x"]) for r in merge_rows(old, new)] == [("dev", 1.0), ("test", 3.0)]


def test_encoding_is_deterministic_and_round_trips(tmp_path):
    rows = item_rows("test", "default", {"id": ["q1", "q2"], "ndcg_at_10": [1.0, float("nan")]})
    assert encode_rows(rows) == encode_rows(rows)
    path = tmp_path / "T.per_item.jsonl.gz"
    path.write_bytes(encode_rows(rows))
    back = read_per_item(path)
    assert back[0] == rows[0] and np.isnan(back[1]["ndcg_at_10"])


def test_damaged_file_is_named(tmp_path):
    from embedscope.errors import DataFormatError

    path = tmp_path / "T.per_item.jsonl.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(DataFormatError, match="T.per_item.jsonl.gz"):
        read_per_item(path)


def test_two_stage_results_have_per_item_files_per_stage(tmp_path):
    from embedscope.compare.core import compare_folders
    from embedscope.retrieval.late_interaction import LateInteraction
    from embedscope.retrieval.pipeline import Pipeline, RerankStep
    from embedscope.testing.fakes import OverlapReranker, WordTokenEncoder
    from embedscope.testing.tiny import tiny_retrieval_task

    pipeline = Pipeline(
        [LateInteraction(WordTokenEncoder())], rerankers=[RerankStep(OverlapReranker({"d4": 9.0}))], name="p"
    )
    report = embedscope.evaluate(
        pipeline, [tiny_retrieval_task()], output_folder=tmp_path, top_k=2, cache=False, show_progress=False
    )
    folder = report.outcomes[0].path.parent
    for stage in ("stage1", "stage2"):
        rows = read_per_item(per_item_path(folder / stage / "TinyRetrieval.json"))
        stored = __import__("json").loads((folder / stage / "TinyRetrieval.json").read_text())
        assert round(np.mean([r["ndcg_at_10"] for r in rows]), 5) == stored["scores"]["test"][0]["ndcg_at_10"]
    comparison = compare_folders([folder / "stage1", folder / "stage2"])
    row = comparison.rows[0]
    assert row.metric == "ndcg_at_10" and row.n == 3 and row.delta < 0  # the bonus drags d4 to the top
