"""numpy paired distances are scikit-learn's, bit for bit (float32 and float64, zero rows included)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import pairwise

from embedscope.metrics import paired


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "name", ["paired_cosine_distances", "paired_euclidean_distances", "paired_manhattan_distances"]
)
def test_bit_identical_to_sklearn(dtype, name):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((500, 384)).astype(dtype)
    y = rng.standard_normal((500, 384)).astype(dtype)
    x[3] = 0.0  # a zero vector: scikit-learn's normalize keeps it at zero
    y[4] = 1e-30
    ours, theirs = getattr(paired, name)(x, y), getattr(pairwise, name)(x, y)
    assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes()


def test_mixed_precision_and_shapes():
    x32 = np.ones((2, 3), dtype=np.float32)
    assert paired.paired_cosine_distances(x32, x32.astype(np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match="one shape"):
        paired.paired_euclidean_distances(x32, np.ones((3, 3)))
