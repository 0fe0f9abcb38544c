"""Length-sorted batching: longest texts first (as sentence-transformers does), order restored after.

>>> import numpy as np
>>> texts = ["a", "ccc", "bb"]
>>> encode_sorted(texts, lambda batch: np.array([[len(t)] for t in batch], dtype=np.float32), batch_size=2).tolist()
[[1.0], [3.0], [2.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from embedscope.models.base import batches, length_order
from embedscope.models.device import CPU_BATCH_SIZE


def encode_sorted(
    texts: Sequence[str],
    encode_batch: Callable[[list[str]], np.ndarray],
    *,
    batch_size: int = CPU_BATCH_SIZE,
    show_progress: bool = False,
    desc: str | None = None,
    dim: int | None = None,
) -> np.ndarray:
    """Encode ``texts`` in length-sorted batches with ``encode_batch``; rows come back in input order.

    ``encode_batch`` maps a list of texts to a ``[len(batch), dim]`` array. ``dim`` gives the
    width of the empty result when ``texts`` is empty.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, dim or 0), dtype=np.float32)
    order = length_order(texts)
    chunks = batches(order, batch_size)
    iterator: Sequence[list[int]] | Iterator[list[int]] = chunks
    if show_progress:
        from tqdm.auto import tqdm

        from embedscope.progress import current_label

        iterator = tqdm(chunks, desc=desc or current_label(), unit="batch")
    out: np.ndarray | None = None
    for chunk in iterator:
        vectors = np.asarray(encode_batch([texts[i] for i in chunk]), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
            raise ValueError(f"encode_batch returned shape {vectors.shape} for {len(chunk)} texts")
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[chunk] = vectors
    assert out is not None
    return out


def cpu_threads() -> int:
    """Threads for intra-op parallelism: ``$EMBEDSCOPE_THREADS`` or the number of usable cores."""
    import os

    env = os.environ.get("EMBEDSCOPE_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
