"""Paired significance tests for two systems scored on the same items, and multiple-comparison corrections.

Every function takes the per-item scores ``a`` (control) and ``b`` (treatment) of the same items in
the same order and is about ``d_i = b_i − a_i``; randomised ones take a ``seed`` and give the same
answer for the same seed. All p-values are two-sided.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

CHUNK_ELEMENTS = 1 << 22  # resamples × items per block: bounded memory (32 MB of float64)


@dataclass(frozen=True)
class PairedOutcome:
    """One paired test: the observed difference, its confidence interval and the p-value."""

    test: str
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


def _diffs(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores need equal 1-D shapes, got {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError("a paired test needs at least two items")
    return b - a


def paired_t_test(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> PairedOutcome:
    """Student's paired t-test.

    ``t = d̄ / (s_d / √n)`` with ``s_d`` the sample standard deviation (n − 1); ``p = 2 (1 − F_{n−1}(|t|))``;
    CI ``d̄ ± t_{(1+c)/2, n−1} · s_d / √n``. Equals ``scipy.stats.ttest_rel(b, a)``.
    """
    from scipy.stats import t as student_t

    d = _diffs(a, b)
    n = len(d)
    mean, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))
    if se == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return PairedOutcome("t-test", mean, mean, mean, p, n)
    t = mean / se
    p = float(2 * student_t.sf(abs(t), n - 1))
    half = float(student_t.ppf((1 + confidence) / 2, n - 1) * se)
    return PairedOutcome("t-test", mean, mean - half, mean + half, p, n)


def _sign_blocks(n: int, rounds: int, seed: int) -> tuple[Iterator[np.ndarray], bool]:
    """Sign vectors (±1) for a paired randomisation test: all ``2^n`` when ``2^n ≤ rounds`` (exact), else
    ``rounds`` random ones from ``numpy.random.default_rng(seed)``, in blocks."""
    per_block = max(1, CHUNK_ELEMENTS // n)
    if n < 63 and 2**n <= rounds:
        codes = np.arange(2**n, dtype=np.int64)

        def exact() -> Iterator[np.ndarray]:
            for start in range(0, len(codes), per_block):
                bits = (codes[start : start + per_block, None] >> np.arange(n)) & 1
                yield 1.0 - 2.0 * bits

        return exact(), True
    rng = np.random.default_rng(seed)

    def sampled() -> Iterator[np.ndarray]:
        for start in range(0, rounds, per_block):
            yield 1.0 - 2.0 * rng.integers(0, 2, size=(min(per_block, rounds - start), n))

    return sampled(), False


def permutation_test(a: Sequence[float], b: Sequence[float], rounds: int = 10_000, seed: int = 42) -> float:
    """Fisher's randomisation test of the mean difference (paired: each item's two scores may swap).

    Null distribution of ``T* = mean(s_i d_i)`` over sign vectors ``s ∈ {±1}^n``: all ``2^n`` when
    ``2^n ≤ rounds`` (exact), else ``rounds`` random ones. ``p = min(1, 2 min(p_≤, p_≥))`` with
    ``p_≥ = (#{T* ≥ T − γ} + c) / (N + c)`` (``p_≤`` likewise), ``γ = 100 ε |T|``, ``c = 0`` when exact
    and 1 when sampled — ``scipy.stats.permutation_test(..., permutation_type="samples")``'s definition.
    """
    d = _diffs(a, b)
    observed = float(d.mean())
    gamma = abs(observed) * 100 * np.finfo(np.float64).eps
    less = greater = total = 0
    blocks, exact = _sign_blocks(len(d), rounds, seed)
    for signs in blocks:
        null = signs @ d / len(d)
        less += int(np.count_nonzero(null <= observed + gamma))
        greater += int(np.count_nonzero(null >= observed - gamma))
        total += len(null)
    c = 0 if exact else 1
    return float(min(1.0, 2 * min((less + c) / (total + c), (greater + c) / (total + c))))


def bootstrap_index_blocks(n: int, rounds: int, seed: int) -> Iterator[np.ndarray]:
    """``rounds`` resamples of ``range(n)`` with replacement (``numpy.random.default_rng(seed)``), in blocks."""
    rng = np.random.default_rng(seed)
    per_block = max(1, CHUNK_ELEMENTS // n)
    for start in range(0, rounds, per_block):
        yield rng.integers(0, n, size=(min(per_block, rounds - start), n))


def bootstrap_test(
    statistic: Callable[[np.ndarray], np.ndarray],
    observed: float,
    n: int,
    rounds: int = 10_000,
    seed: int = 42,
    confidence: float = 0.95,
    name: str = "bootstrap",
) -> PairedOutcome:
    """Paired bootstrap of any difference ``statistic(index_block) → one difference per resample``.

    CI: the ``(1 ∓ c)/2`` percentiles of the resampled differences ``δ*``. p-value (shift method, the
    differences centred on the null): ``p = (1 + #{|δ*_r − δ̂| ≥ |δ̂|}) / (R + 1)``.
    """
    if n < 2:
        raise ValueError("a bootstrap needs at least two items")
    deltas = np.concatenate([statistic(idx) for idx in bootstrap_index_blocks(n, rounds, seed)])
    deltas = deltas[np.isfinite(deltas)]
    if not len(deltas):
        return PairedOutcome(name, observed, float("nan"), float("nan"), float("nan"), n)
    low, high = np.quantile(deltas, [(1 - confidence) / 2, (1 + confidence) / 2])
    extreme = int(np.count_nonzero(np.abs(deltas - observed) >= abs(observed)))
    return PairedOutcome(name, observed, float(low), float(high), (1 + extreme) / (len(deltas) + 1), n)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], rounds: int = 10_000, seed: int = 42, confidence: float = 0.95
) -> PairedOutcome:
    """Paired bootstrap of the mean difference: resample items, ``δ*_r = mean(d[idx_r])`` (see :func:`bootstrap_test`)."""
    d = _diffs(a, b)
    return bootstrap_test(lambda idx: d[idx].mean(axis=1), float(d.mean()), len(d), rounds, seed, confidence)


# ---------------------------------------------------------------------------------------------
# Statistics of pairs, one per resample row (for bootstraps over pairs)


def rank_rows(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share the mean rank) along the last axis, as ``scipy.stats.rankdata``."""
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair: ``Σ(x−x̄)(y−ȳ) / √(Σ(x−x̄)² Σ(y−ȳ)²)`` (nan when a row is constant)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    denom = np.sqrt((xc * xc).sum(axis=-1) * (yc * yc).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(axis=-1) / denom


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row pair: Pearson's r of the average ranks (``scipy.stats.spearmanr``)."""
    return pearson_rows(rank_rows(x), rank_rows(y))


def average_precision_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Average precision of each row, as ``sklearn.metrics.average_precision_score`` (tied scores form one step).

    ``AP = Σ_i y_i / P · precision(end of i's tie group)`` over items sorted by descending score, with
    ``P = Σ y`` and ``precision(k) = TP(k) / k``; nan when a row has no positive.
    """
    order = np.argsort(-scores, axis=-1, kind="stable")
    s = np.take_along_axis(scores, order, axis=-1)
    y = np.take_along_axis(labels, order, axis=-1).astype(np.float64)
    n = s.shape[-1]
    precision = np.cumsum(y, axis=-1) / np.arange(1, n + 1)
    is_end = np.ones_like(s, dtype=bool)
    is_end[..., :-1] = s[..., 1:] != s[..., :-1]
    end_index = np.where(is_end, np.arange(n), n)
    group_end = np.minimum.accumulate(end_index[..., ::-1], axis=-1)[..., ::-1]
    positives = y.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (y * np.take_along_axis(precision, group_end, axis=-1)).sum(axis=-1) / positives


# ---------------------------------------------------------------------------------------------
# Multiple comparisons

CORRECTIONS = ("holm", "bonferroni", "none")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values: with ``p_(1) ≤ … ≤ p_(m)``,
    ``p̃_(i) = min(1, max_{j ≤ i} (m − j + 1) p_(j))`` (nan p-values are left out and stay nan).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(len(p), np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * p[i]))
        out[i] = running
    return [float(v) for v in out]


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni adjusted p-values: ``min(1, m p_i)`` over the ``m`` non-nan p-values."""
    p = np.asarray(p_values, dtype=np.float64)
    m = int(np.count_nonzero(~np.isnan(p)))
    return [float(min(1.0, m * v)) if not np.isnan(v) else float("nan") for v in p]


def adjust(p_values: Sequence[float], correction: str) -> list[float]:
    """p-values adjusted by ``correction`` (one of :data:`CORRECTIONS`)."""
    from embedscope.errors import UnknownNameError

    if correction == "holm":
        return holm(p_values)
    if correction == "bonferroni":
        return bonferroni(p_values)
    if correction == "none":
        return [float(v) for v in p_values]
    raise UnknownNameError("correction", correction, CORRECTIONS)
