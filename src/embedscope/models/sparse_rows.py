"""Sparse vectors (a learned-sparse model's term weights) as rows: the embedding cache's codec and CSR assembly.

A row is stored as its active positions (little-endian int32) followed by their values (float32), every value whose
bits are not zero kept, so a row read back gives the dense vector bit for bit. Rows become a
``scipy.sparse.csr_matrix`` (float32, sorted indices, explicit zeros dropped), the form sparse search reads.

>>> import numpy as np
>>> row = np.array([0.0, 1.5, 0.0, 0.25], dtype=np.float32)
>>> pair = pair_from_blob(pair_blob(row_pair(row)), 4)
>>> pair[0].tolist(), pair[1].tolist(), csr_from_pairs([pair, pair], 4).toarray()[1].tolist()
([1, 3], [1.5, 0.25], [0.0, 1.5, 0.0, 0.25])
>>> csr_rows(np.stack([row, row * 2])).nnz
4
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SparsePair = tuple[np.ndarray, np.ndarray]  # (active positions, int32 ascending; their float32 values)


def row_pair(row: np.ndarray) -> SparsePair:
    """One dense float32 row → its active positions and values (every value whose bits are not zero: -0.0 is kept,
    so the dense row comes back bit for bit)."""
    row = np.ascontiguousarray(row, dtype=np.float32)
    where = np.flatnonzero(row.view(np.uint32)).astype(np.int32)
    return where, row[where]


def csr_pairs(matrix: Any) -> list[SparsePair]:
    """Each row of a CSR matrix (sorted indices) as a pair."""
    return [
        (matrix.indices[a:b].astype(np.int32), matrix.data[a:b].astype(np.float32))
        for a, b in zip(matrix.indptr[:-1], matrix.indptr[1:])
    ]


def pair_blob(pair: SparsePair) -> bytes:
    """A pair as bytes: the positions (little-endian int32), then the values (float32)."""
    return pair[0].astype("<i4").tobytes() + pair[1].astype("<f4").tobytes()


def pair_from_blob(blob: bytes, dim: int) -> SparsePair | None:
    """The pair a blob of :func:`pair_blob` stands for; None when it is not one (a damaged or foreign value: the
    cache drops it and encodes the text again)."""
    if len(blob) % 8:
        return None
    n = len(blob) // 8
    where = np.frombuffer(blob, dtype="<i4", count=n).astype(np.int32)
    values = np.frombuffer(blob, dtype="<f4", offset=4 * n).astype(np.float32)
    if n and (where[0] < 0 or where[-1] >= dim or np.any(np.diff(where) <= 0)):
        return None
    return where, values


def csr_from_pairs(pairs: Sequence[SparsePair], dim: int) -> Any:
    """Pairs as the rows of one float32 CSR matrix ``[len(pairs), dim]`` (explicit zeros dropped)."""
    from scipy import sparse

    indptr = np.zeros(len(pairs) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p[0]) for p in pairs])
    indices = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0, np.int32)
    data = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0, np.float32)
    matrix = sparse.csr_matrix((data, indices, indptr), shape=(len(pairs), dim), dtype=np.float32)
    matrix.eliminate_zeros()
    return matrix


def csr_rows(vectors: Any) -> Any:
    """A float32 CSR matrix of ``vectors`` (dense rows or a scipy sparse matrix): sorted indices, no explicit zeros."""
    from scipy import sparse

    matrix = sparse.csr_matrix(vectors, dtype=np.float32)
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


def stack_csr(parts: Sequence[Any], dim: int) -> Any:
    """CSR matrices stacked by rows (an empty ``[0, dim]`` matrix when there are none)."""
    from scipy import sparse

    if not parts:
        return sparse.csr_matrix((0, dim), dtype=np.float32)
    return sparse.vstack(list(parts), format="csr", dtype=np.float32)


def in_order(matrix: Any, order: Sequence[int]) -> Any:
    """The rows of ``matrix`` put back in call order: row ``j`` of ``matrix`` is text ``order[j]``."""
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return matrix[inverse]
