"""Row-wise (paired) distances, exactly as scikit-learn 1.x computes them, in plain numpy; and the model's paired
similarity, as sentence-transformers computes it.

MTEB's STS and pair-classification protocols call ``sklearn.metrics.pairwise.paired_*_distances``;
importing scikit-learn costs seconds, which a warm run served from the cache cannot afford. These
are the same operations in the same order (float32 stays float32), checked bit for bit against
scikit-learn in the tests.

>>> import numpy as np
>>> a, b = np.array([[3.0, 4.0]]), np.array([[0.0, 1.0]])
>>> paired_euclidean_distances(a, b).tolist(), paired_manhattan_distances(a, b).tolist()
([4.242640687119285], [6.0])
>>> round(float(1 - paired_cosine_distances(a, b)[0]), 6)
0.8
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from embedscope.models.base import Similarity


def _paired(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both as float32 when both are float32, else float64 (scikit-learn's ``check_paired_arrays``)."""
    x, y = np.asarray(x), np.asarray(y)
    dtype = np.float32 if x.dtype == np.float32 and y.dtype == np.float32 else np.float64
    x, y = np.atleast_2d(x.astype(dtype, copy=False)), np.atleast_2d(y.astype(dtype, copy=False))
    if x.shape != y.shape:
        raise ValueError(f"paired distances need arrays of one shape, got {x.shape} and {y.shape}")
    return x, y


def row_norms(x: np.ndarray, squared: bool = False) -> np.ndarray:
    """``sqrt(Σ x_ij²)`` per row (``einsum``, as scikit-learn), or its square."""
    norms = np.einsum("ij,ij->i", x, x)
    return norms if squared else np.sqrt(norms)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows divided by their norms; a norm below ``10 · eps`` counts as 1 (scikit-learn's ``normalize``)."""
    norms = row_norms(x)
    norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0
    return x / norms[:, None]


def paired_cosine_distances(x: Any, y: Any) -> np.ndarray:
    """``0.5 · ||x/|x| − y/|y|||²`` per row (= 1 − cosine)."""
    x, y = _paired(x, y)
    return 0.5 * row_norms(l2_normalize(x) - l2_normalize(y), squared=True)


def paired_euclidean_distances(x: Any, y: Any) -> np.ndarray:
    """``||x − y||`` per row."""
    x, y = _paired(x, y)
    return row_norms(x - y)


def paired_manhattan_distances(x: Any, y: Any) -> np.ndarray:
    """``Σ |x_j − y_j|`` per row."""
    x, y = _paired(x, y)
    return np.abs(x - y).sum(axis=-1)


def pairwise_similarity(e1: np.ndarray, e2: np.ndarray, similarity: Similarity) -> np.ndarray:
    """The model's pairwise similarity as sentence-transformers computes it (float32 torch).

    ``cosine``: ``a_i·b_i / (‖a_i‖ ‖b_i‖)`` (each row L2-normalised first); ``dot``: ``a_i·b_i``.
    """
    import torch

    a, b = (
        torch.from_numpy(np.ascontiguousarray(e1, dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(e2, dtype=np.float32)),
    )
    if similarity == "cosine":
        a, b = torch.nn.functional.normalize(a, p=2, dim=-1), torch.nn.functional.normalize(b, p=2, dim=-1)
    return (a * b).sum(dim=-1).numpy()
