"""Whether an encoder's rows follow its batch's padded length, measured bit for bit: whether a row depends only on
its own text and how wide its batch is padded, or also on the rest of its batch. The embedding cache makes no such
claim (:mod:`embedscope.models.cache`): on some CPUs a transformer's row moves in its last bits with the batch's
shape (``bench/bench_row_invariance.py``).

Every batch of the encoder's own plan is encoded whole, then as its longest row with 0, 1, half and all but one of
the others (a seeded draw); each row is compared with the whole batch's. The same padded length, different
company: where rows follow the padded length, every row is equal.

>>> from embedscope.testing.fakes import RowPaddedHashEncoder
>>> texts = [("word " * n).strip() for n in range(1, 41)]
>>> rows = compare_rows(RowPaddedHashEncoder(dim=8), texts, batch_size=8)
>>> rows.compared, rows.equal, rows.largest
(70, 70, 0.0)
>>> nudged = compare_rows(RowPaddedHashEncoder(dim=8, batch_nudge=True), texts, batch_size=8)
>>> nudged.equal < nudged.compared  # a row that also depends on the batch's size
True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RowComparison:
    """Rows compared, rows bit-equal to their whole batch's, and the largest absolute difference."""

    compared: int
    equal: int
    largest: float


def compare_rows(encoder: Any, texts: Sequence[str], batch_size: int, seed: int = 1) -> RowComparison:
    """Each planned batch of ``texts`` (as documents) against its longest row with subsets of the others (see the
    module docstring); ``encoder`` has ``batch_plan``, ``encode_batch`` and ``padded_lengths``."""
    rng = random.Random(seed)
    lengths = encoder.padded_lengths(texts, role="document")
    compared = equal = 0
    largest = 0.0
    for batch in encoder.batch_plan([len(t) for t in texts], batch_size):
        whole = encoder.encode_batch([texts[i] for i in batch], role="document")
        longest = max(batch, key=lambda i: lengths[i])
        others = [i for i in batch if i != longest]
        for k in sorted({0, 1, len(others) // 2, len(others) - 1} & set(range(len(others) + 1))):
            part = [longest, *rng.sample(others, k)]
            for i, row in zip(part, encoder.encode_batch([texts[i] for i in part], role="document")):
                reference = whole[batch.index(i)]
                compared += 1
                equal += bool(np.array_equal(row, reference))
                largest = max(largest, float(np.abs(row - reference).max()))
    return RowComparison(compared, equal, largest)
