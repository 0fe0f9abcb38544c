"""``embedscope compare`` on results of real (fake-model) runs: numbers against scipy and ranx on the same
per-item inputs, corrections, tables, JSON and one-line errors."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy import stats

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.compare.items import load_model_results
from embedscope.compare.render import comparison_text
from embedscope.compare.stats import bootstrap_index_blocks, holm, permutation_test
from embedscope.data.builtin import bbc_news_retrieval
from embedscope.results.per_item import per_item_path, read_per_item
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.testing.tiny import TINY_WORDS, tiny_tasks_of_every_type

BBC = RetrievalTask("BBC300", lambda split: bbc_news_retrieval(300))


def _evaluate(encoder, tasks, out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return embedscope.evaluate(
            encoder, tasks, output_folder=out, cache=False, show_progress=False, save_predictions=True
        )


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    _evaluate(HashEncoder(dim=16), tiny_tasks_of_every_type(), root / "a")
    _evaluate(KeywordEncoder(TINY_WORDS, similarity="cosine"), tiny_tasks_of_every_type(), root / "b")
    return root / "a", root / "b"


@pytest.fixture(scope="module")
def bbc(tmp_path_factory):
    """Two pseudo-random models on 300 BBC News queries (one relevant document each)."""
    root = tmp_path_factory.mktemp("compare-bbc")
    _evaluate(HashEncoder(dim=16), [BBC], root / "a")
    _evaluate(HashEncoder(dim=64), [BBC], root / "b")
    return root / "a", root / "b"


def _per_query(folder, task="BBC300", metric="ndcg_at_10"):
    path = next(folder.rglob(f"{task}.json"))
    return {r["id"]: r[metric] for r in read_per_item(per_item_path(path))}


def _row(comparison, task):
    return next(r for r in comparison.rows if r.task == task)


@pytest.mark.slow
def test_t_test_and_permutation_on_the_per_query_scores(bbc):
    folders = bbc
    a, b = (_per_query(f) for f in folders)
    x, y = np.array(list(a.values())), np.array([b[q] for q in a])
    t = _row(compare_folders(folders, CompareOptions(test="t-test"), ["BBC300"]), "BBC300")
    ref = stats.ttest_rel(y, x)
    assert t.p_value == pytest.approx(ref.pvalue, rel=1e-10) and t.n == 300
    assert (t.ci_low, t.ci_high) == pytest.approx(tuple(ref.confidence_interval()), rel=1e-10)
    assert t.delta == pytest.approx(y.mean() - x.mean(), abs=1e-5)  # the stored scores are rounded to 5 decimals
    perm = _row(compare_folders(folders, CompareOptions(), ["BBC300"]), "BBC300")
    assert perm.test == "permutation" and perm.p_value == permutation_test(x, y, 10_000, 42)
    scipy_p = stats.permutation_test(
        (y, x),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        permutation_type="samples",
        n_resamples=10_000,
        rng=np.random.default_rng(0),
    ).pvalue
    assert abs(perm.p_value - scipy_p) < 5 * np.sqrt(scipy_p * (1 - scipy_p) / 10_000) + 1e-3


@pytest.mark.slow
def test_exact_permutation_on_per_experiment_scores_equals_scipy(folders):
    a, b = (load_model_results(f).tasks["TinyClusteringLegacy"] for f in folders)
    row = _row(compare_folders(folders, CompareOptions(), ["TinyClusteringLegacy"]), "TinyClusteringLegacy")
    ref = stats.permutation_test(
        (b.values, a.values),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        permutation_type="samples",
        n_resamples=10_000,
    )
    assert row.n == len(a.values) == 4 and row.p_value == ref.pvalue


@pytest.mark.slow
def test_ranx_compare_on_the_saved_runs(bbc):
    folders = bbc
    from ranx import Qrels, Run, compare

    data = bbc_news_retrieval(300)
    runs = []
    for name, folder in zip(("a", "b"), folders):
        preds = json.loads(next(folder.rglob("BBC300_predictions.json")).read_text())["default"]["test"]
        top = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:20]) for q, docs in preds.items()}  # ndcg@10 only
        runs.append(Run(top, name=name))
    qrels = Qrels({q: dict(d) for q, d in data.qrels.items()})
    report = compare(qrels, runs, metrics=["ndcg@10"], stat_test="student", max_p=0.05)
    ours = _row(compare_folders(folders, CompareOptions(test="t-test"), ["BBC300"]), "BBC300")
    assert ours.p_value == pytest.approx(report.comparisons[("a", "b")]["ndcg@10"]["p_value"], rel=1e-6)
    assert ours.score_a == pytest.approx(report.results["a"]["ndcg@10"], abs=1e-5)


@pytest.mark.slow
def test_sts_is_bootstrapped_over_pairs(folders):
    a, b = (load_model_results(f).tasks["TinySTS"] for f in folders)
    row = _row(compare_folders(folders, CompareOptions(rounds=300, seed=3), ["TinySTS"]), "TinySTS")
    deltas = [
        stats.spearmanr(b.columns["cosine"][i], b.columns["gold"][i])[0]
        - stats.spearmanr(a.columns["cosine"][i], a.columns["gold"][i])[0]
        for block in bootstrap_index_blocks(24, 300, 3)
        for i in block
    ]
    assert row.test == "bootstrap-pairs" and row.n == 24
    assert (row.ci_low, row.ci_high) == pytest.approx(tuple(np.quantile(deltas, [0.025, 0.975])), abs=1e-12)
    assert row.delta == pytest.approx(b.score - a.score)
    extreme = np.sum(np.abs(np.array(deltas) - row.delta) >= abs(row.delta))
    assert row.p_value == pytest.approx((1 + extreme) / 301)


@pytest.mark.slow
def test_holm_over_every_comparison_and_markers(folders):
    comparison = compare_folders(folders)
    ps = [r.p_value for r in comparison.rows]
    assert [r.p_adjusted for r in comparison.rows] == pytest.approx(holm(ps), nan_ok=True)
    sts = _row(comparison, "TinySTS")
    assert sts.significant and sts.delta > 0
    table = comparison_text(comparison)
    line = next(ln for ln in table.splitlines() if ln.startswith("| b | fake/keyword-encoder"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2 + comparison.tasks.index("TinySTS")] == f"{sts.score_b:.4f}ᵃ"
    none = compare_folders(folders, CompareOptions(correction="none"))
    assert [r.p_adjusted for r in none.rows] == pytest.approx(ps, nan_ok=True)


@pytest.mark.slow
def test_fidelity_measures(folders):
    comparison = compare_folders(folders, tasks=["TinyRetrieval", "TinySTS"], fidelity=True)
    retrieval, sts = _row(comparison, "TinyRetrieval"), _row(comparison, "TinySTS")
    assert set(retrieval.extra) == {"top10_jaccard", "top10_rbo", "queries"} and retrieval.extra["queries"] == 3
    a, b = (load_model_results(f).tasks["TinySTS"] for f in folders)
    assert sts.extra["similarity_spearman"] == pytest.approx(
        stats.spearmanr(a.columns["cosine"], b.columns["cosine"])[0]
    )
    tau = stats.kendalltau(a.columns["cosine"], b.columns["cosine"], variant="c")
    assert sts.extra["pairs"] == 24 and 0 < sts.extra["discordant_pairs"] < 276
    assert "top10_rbo" in comparison_text(comparison) and np.isfinite(tau.statistic)


@pytest.mark.slow
def test_cli_table_json_and_errors(folders, capsys, tmp_path):
    a, b = folders
    assert main(["compare", str(a), str(b), "--tasks", "TinyRetrieval", "--json", "--rounds", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tasks"] == ["TinyRetrieval"] and data["options"]["rounds"] == 100
    assert data["comparisons"][0]["p_value"] == 1.0  # three queries: the exact test cannot reject
    assert main(["compare", str(a), str(b), "--tasks", "TinySTS"]) == 0
    assert "| a | fake/hash-encoder |" in capsys.readouterr().out
    for args, message in (
        ([str(a), str(b), "--test", "wilcoxon"], "--test: Input should be 'permutation', 't-test' or 'bootstrap'"),
        ([str(a), str(b), "--correction", "hochberg"], "--correction: Input should be 'holm', 'bonferroni' or 'none'"),
        ([str(a), str(a.parent)], "holds results of"),
        ([str(a), str(tmp_path / "missing")], "no such results folder"),
        ([str(a)], "at least two"),
        ([str(a), str(b), "--tasks", "Nope"], "Unknown shared task"),
    ):
        assert main(["compare", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_results_without_per_item_scores_compare_without_a_test(folders, tmp_path, capsys):
    import shutil

    a = shutil.copytree(folders[0], tmp_path / "a")
    for path in a.rglob("TinyRetrieval.per_item.jsonl.gz"):
        path.unlink()
    row = _row(compare_folders([a, folders[1]], tasks=["TinyRetrieval"]), "TinyRetrieval")
    assert row.test == "" and np.isnan(row.p_value) and not row.significant and row.delta > 0
    assert main(["compare", str(a), str(folders[1]), "--tasks", "TinyRetrieval", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["comparisons"][0]["p_value"] is None
    assert main(["compare", str(a), str(folders[1]), "--tasks", "TinyRetrieval"]) == 0
    assert "no per-item scores" in capsys.readouterr().out
