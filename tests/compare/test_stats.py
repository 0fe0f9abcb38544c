"""The paired tests against scipy and ranx on the same inputs; corrections by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import average_precision_score

from embedscope.compare.stats import (
    adjust,
    average_precision_rows,
    bonferroni,
    bootstrap_index_blocks,
    holm,
    paired_bootstrap,
    paired_t_test,
    pearson_rows,
    permutation_test,
    spearman_rows,
)
from embedscope.errors import UnknownNameError


def _pair(n: int, shift: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.random(n)
    return a, np.clip(a + shift + 0.2 * rng.standard_normal(n), 0, 1)


@pytest.mark.parametrize("n,shift", [(30, 0.05), (200, 0.0), (12, 0.3)])
def test_t_test_equals_scipy_ttest_rel(n, shift):
    a, b = _pair(n, shift)
    ours = paired_t_test(a, b)
    ref = stats.ttest_rel(b, a)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    ci = ref.confidence_interval(0.95)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert ours.delta == pytest.approx(np.mean(b - a))


@pytest.mark.parametrize("n,shift", [(8, 0.1), (11, 0.02), (13, 0.0)])
def test_exact_permutation_test_equals_scipy(n, shift):
    """2^n ≤ 10,000 rounds: both enumerate every sign vector, so the p-values are identical."""
    a, b = _pair(n, shift, seed=n)
    ref = stats.permutation_test(
        (b, a),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=10_000,
        alternative="two-sided",
    )
    assert permutation_test(a, b, rounds=10_000) == ref.pvalue


@pytest.mark.slow
def test_sampled_permutation_test_matches_scipy_and_ranx():
    from ranx.statistical_tests import fisher_randomization_test

    a, b = _pair(300, 0.01, seed=3)
    ours = permutation_test(a, b, rounds=10_000, seed=1)
    ref = stats.permutation_test(
        (b, a),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=10_000,
        alternative="two-sided",
        rng=np.random.default_rng(7),
    )
    ranx_p, _ = fisher_randomization_test(a, b, 10_000, 0.01, 42)
    assert 0.01 < ref.pvalue < 0.5  # a borderline case, where Monte Carlo error shows
    se = np.sqrt(ref.pvalue * (1 - ref.pvalue) / 10_000)
    assert abs(ours - ref.pvalue) < 5 * se and abs(ours - ranx_p) < 5 * se
    assert permutation_test(a, b, rounds=10_000, seed=1) == ours  # seeded


def test_permutation_of_identical_systems_is_one():
    a, _ = _pair(50, 0.0)
    assert permutation_test(a, a.copy()) == 1.0


@pytest.mark.slow
def test_ranx_compare_agrees_on_per_query_scores():
    from ranx import Qrels, Run, compare

    rng = np.random.default_rng(5)
    qrels = {f"q{i}": {f"d{j}": 1 for j in rng.choice(20, 3, replace=False)} for i in range(60)}
    runs = []
    for name, boost in (("a", 0.5), ("b", 0.9)):  # relevant documents get a boost over uniform noise
        runs.append(
            Run(
                {q: {f"d{j}": float(rng.random() + boost * (f"d{j}" in qrels[q])) for j in range(20)} for q in qrels},
                name=name,
            )
        )
    report = compare(Qrels(qrels), runs, metrics=["ndcg@10"], stat_test="student", max_p=0.05)
    a, b = (np.array(list(r.scores["ndcg@10"].values())) for r in runs)
    assert paired_t_test(a, b).p_value == pytest.approx(report.comparisons[("a", "b")]["ndcg@10"]["p_value"], rel=1e-9)
    fisher = compare(Qrels(qrels), runs, metrics=["ndcg@10"], stat_test="fisher", n_permutations=10_000, max_p=0.05)
    ranx_p = fisher.comparisons[("a", "b")]["ndcg@10"]["p_value"]
    ours = permutation_test(a, b)
    assert abs(ours - ranx_p) < 5 * np.sqrt(max(ranx_p, 1e-3) / 10_000) + 2e-4


def test_paired_bootstrap_by_hand():
    a, b = _pair(40, 0.05, seed=2)
    ours = paired_bootstrap(a, b, rounds=2_000, seed=9)
    d = b - a
    deltas = np.array([d[idx].mean() for block in bootstrap_index_blocks(40, 2_000, 9) for idx in block])
    assert (ours.ci_low, ours.ci_high) == pytest.approx(tuple(np.quantile(deltas, [0.025, 0.975])))
    observed = d.mean()
    assert ours.p_value == (1 + np.sum(np.abs(deltas - observed) >= abs(observed))) / 2_001
    assert ours.ci_low < observed < ours.ci_high


def test_bootstrap_agrees_with_scipy_bootstrap_ci():
    a, b = _pair(100, 0.05, seed=4)
    ours = paired_bootstrap(a, b, rounds=10_000, seed=1)
    ref = stats.bootstrap((b - a,), np.mean, n_resamples=10_000, method="percentile", rng=np.random.default_rng(2))
    assert ours.ci_low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours.ci_high == pytest.approx(ref.confidence_interval.high, abs=0.01)


def test_row_statistics_equal_scipy_and_sklearn():
    rng = np.random.default_rng(0)
    x = np.round(rng.random((5, 40)), 1)  # ties
    y = np.round(rng.random((5, 40)), 1)
    labels = (rng.random((5, 40)) < 0.4).astype(int)
    for i in range(5):
        assert spearman_rows(x, y)[i] == pytest.approx(stats.spearmanr(x[i], y[i])[0], abs=1e-12)
        assert pearson_rows(x, y)[i] == pytest.approx(stats.pearsonr(x[i], y[i])[0], abs=1e-12)
        assert average_precision_rows(x, labels)[i] == pytest.approx(
            average_precision_score(labels[i], x[i]), abs=1e-12
        )


def test_holm_and_bonferroni_by_hand():
    p = [0.01, 0.04, 0.03, 0.005, float("nan")]
    # sorted: 0.005×4=0.02, 0.01×3=0.03, 0.03×2=0.06, 0.04×1=0.04→0.06 (monotone)
    assert holm(p)[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and np.isnan(holm(p)[4])
    assert bonferroni(p)[:4] == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust(p, "none")[:4] == p[:4]
    with pytest.raises(UnknownNameError, match="holm"):
        adjust(p, "hochberg")
