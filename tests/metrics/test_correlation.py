"""metrics.correlation against scipy.stats, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from embedscope.metrics.correlation import average_ranks, pearson, spearman


def _cases() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    cases = []
    for n in (2, 3, 5, 17, 100, 1225, 5000):
        x = rng.normal(size=n)
        cases.append((x, x * 0.3 + rng.normal(size=n)))
        cases.append((np.round(rng.uniform(0, 5, n) * 2) / 2, rng.normal(size=n).astype(np.float32)))  # gold ties
        cases.append((rng.integers(0, 3, n).astype(float), rng.integers(0, 4, n).astype(float)))  # heavy ties
        cases.append((rng.normal(size=n) * 1e12 + 5e13, rng.normal(size=n) * 1e-9))  # scale extremes
        cases.append((rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)))
    return [(a, b) for a, b in cases if np.ptp(a) > 0 and np.ptp(b) > 0]


@pytest.mark.parametrize("x, y", _cases())
def test_pearson_is_scipys_bits(x: np.ndarray, y: np.ndarray) -> None:
    assert pearson(x, y) == float(pearsonr(x, y)[0])
    assert pearson(x.tolist(), y.tolist()) == float(pearsonr(x.tolist(), y.tolist())[0])


@pytest.mark.parametrize("x, y", _cases())
def test_spearman_is_scipys_bits(x: np.ndarray, y: np.ndarray) -> None:
    assert spearman(x, y) == float(spearmanr(x, y)[0])
    assert spearman(x.tolist(), y.tolist()) == float(spearmanr(x.tolist(), y.tolist())[0])


def test_average_ranks_is_rankdata() -> None:
    from scipy.stats import rankdata

    values = np.random.default_rng(1).integers(0, 20, 500).astype(float)
    assert np.array_equal(average_ranks(values), rankdata(values))


def test_constant_input_is_nan() -> None:
    assert math.isnan(pearson([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]))
    assert math.isnan(spearman([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]))


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError):
        pearson([1.0, 2.0], [1.0, 2.0, 3.0])
