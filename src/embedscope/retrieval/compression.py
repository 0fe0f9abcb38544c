"""Embedding post-processing for dense search: Matryoshka truncation, int8 and binary quantization, rescoring.

Everything here acts on vectors already encoded (the embedding cache's), never on the encoder. The steps, in
order, follow sentence-transformers (``truncate_dim``, ``quantize_embeddings``, ``semantic_search_faiss`` /
``semantic_search_usearch`` in ``sentence_transformers.util.quantization``, version 6.2):

1. **truncate** to the first ``d`` dimensions: ``x[:, :d]`` (sentence-transformers' ``truncate_embeddings``,
   applied before it normalises, as its ``encode`` does);
2. with the model's similarity ``cosine``, **normalise** each row: ``x / max(‖x‖₂, 1e-12)``
   (``torch.nn.functional.normalize``, what MTEB's cosine scoring does); with ``dot`` the rows stay as they are;
3. **quantize** the corpus, and the query with the corpus's calibration:

   - int8: per dimension ``j``, ``lo_j = min_i d_ij``, ``hi_j = max_i d_ij`` over the corpus vectors
     (``quantize_embeddings``' default calibration: the embeddings quantized), ``step_j = (hi_j − lo_j) / 255``
     (1 where 0), ``code = clip(floor((x − lo) / step), 0, 255) − 128`` as int8 (float32 arithmetic, bit-identical
     to ``quantize_embeddings(x, "int8", ranges)``);
   - binary: ``packbits(x > 0)`` (``quantize_embeddings(x, "ubinary")``; its ``"binary"`` is these bytes − 128);

4. **search** the quantized corpus: int8 by the inner product of the codes ``s = Σ_j q_j d_j`` (exact integers),
   binary by the Hamming distance ``H(q, d) = popcount(q ⊕ d)``, scored ``dims − H`` (the bits that agree);
   ties go to the earlier document;
5. optionally **rescore** (``rescore_multiplier = r``): keep the ``r × top_k`` best candidates of step 4 and score
   each with the float query against the document as the quantized index holds it, as sentence-transformers
   does: ``q · dequant(d)`` with ``dequant(code) = (code + 128) · step + lo`` for int8, and ``q · bits(d)``
   (the unpacked 0/1 bits) for binary, in float64; then keep the ``top_k`` best.

Bytes per vector: fp32 ``4·dims``, int8 ``dims``, binary ``⌈dims / 8⌉`` (:func:`bytes_per_vector`).

>>> import numpy as np
>>> d = np.array([[1.0, -1.0], [-1.0, 1.0], [0.5, -0.2]], dtype=np.float32)
>>> q = np.array([[1.0, -0.5]], dtype=np.float32)
>>> idx, _ = compressed_search(q, d, similarity="cosine", top_k=2, precision="binary")
>>> idx.tolist()
[[0, 2]]
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from embedscope.errors import ConfigError

Precision = Literal["fp32", "int8", "binary"]
PRECISIONS: tuple[str, ...] = ("fp32", "int8", "binary")
_EPS = 1e-12  # torch.nn.functional.normalize's
_BLOCK_CELLS = 1 << 24  # query block × documents scored at once (float64: 128 MiB)


def bytes_per_vector(dims: int, precision: str) -> int:
    """Bytes one vector takes in the index: fp32 ``4·dims``, int8 ``dims``, binary ``⌈dims / 8⌉``.

    >>> [bytes_per_vector(384, p) for p in ("fp32", "int8", "binary")]
    [1536, 384, 48]
    """
    if precision == "fp32":
        return 4 * dims
    if precision == "int8":
        return dims
    if precision == "binary":
        return (dims + 7) // 8
    raise ConfigError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")


def truncate(embeddings: np.ndarray, dims: int | None) -> np.ndarray:
    """The first ``dims`` dimensions of each row (all for None): ``x[:, :dims]``; more than the vectors hold is a
    ConfigError naming truncate_dim."""
    if dims is None:
        return embeddings
    if dims > embeddings.shape[1]:
        raise ConfigError(
            f"truncate_dim {dims}: the model's vectors have {embeddings.shape[1]} dimensions; give at most that"
        )
    return embeddings[:, :dims]


def normalize_rows(embeddings: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm: ``x / max(‖x‖₂, 1e-12)`` (float32, as ``torch.nn.functional.normalize``
    computes it)."""
    x = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, np.float32(_EPS))


def calibration_ranges(embeddings: np.ndarray) -> np.ndarray:
    """``[[min_j], [max_j]]`` over the rows (float32, shape ``[2, dims]``): int8's per-dimension calibration."""
    x = np.asarray(embeddings, dtype=np.float32)
    if x.shape[0] == 0:
        raise ConfigError("precision int8: no document vectors to calibrate the quantization on")
    return np.vstack((x.min(axis=0), x.max(axis=0)))


def _steps(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ranges = ranges.astype(np.float32, copy=False)
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    return starts, np.where(steps == 0, 1, steps)


def quantize_int8(embeddings: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """int8 codes ``clip(floor((x − lo) / step), 0, 255) − 128``, ``step = (hi − lo) / 255`` (1 where 0), with
    ``ranges = [lo, hi]`` (:func:`calibration_ranges`); float32 arithmetic as ``quantize_embeddings``."""
    starts, steps = _steps(ranges)
    x = np.asarray(embeddings, dtype=np.float32)
    return (np.clip(np.floor((x - starts) / steps), 0, 255) - 128).astype(np.int8)


def dequantize_int8(codes: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """float64 ``(code + 128) · step + lo``: the vector an int8 code stands for (sentence-transformers' rescoring)."""
    starts, steps = _steps(ranges)
    return (codes.astype(np.float64) + 128) * steps + starts


def quantize_binary(embeddings: np.ndarray) -> np.ndarray:
    """uint8 ``packbits(x > 0)`` per row, ``⌈dims / 8⌉`` bytes (``quantize_embeddings(x, "ubinary")``)."""
    return np.packbits(np.asarray(embeddings) > 0, axis=-1)


def unpack_bits(packed: np.ndarray, dims: int) -> np.ndarray:
    """The 0/1 bits of packed rows, the padding of the last byte dropped (``[n, dims]`` uint8)."""
    return np.unpackbits(packed, axis=-1)[..., :dims]


def hamming_distances(query_packed: np.ndarray, doc_packed: np.ndarray, dims: int) -> np.ndarray:
    """int64 ``[n_q, n_d]`` ``popcount(q ⊕ d)``, computed as ``|q| + |d| − 2 q·d`` on the unpacked bits (exact: the
    float32 sums stay below 2²⁴)."""
    q = unpack_bits(query_packed, dims).astype(np.float32)
    d = unpack_bits(doc_packed, dims).astype(np.float32)
    common = q @ d.T
    return (q.sum(axis=1)[:, None] + d.sum(axis=1)[None, :] - 2 * common).round().astype(np.int64)


def top_k_rows(scores: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``top_k`` highest scores, sorted descending, ties by the lower column; ``(index, scores)``.

    >>> top_k_rows(np.array([[1.0, 3.0, 3.0, 2.0]]), 2)[0].tolist()
    [[1, 2]]
    """
    n_rows, n = scores.shape
    k = min(top_k, n)
    index = np.zeros((n_rows, k), dtype=np.int64)
    values = np.zeros((n_rows, k), dtype=np.float64)
    if k == 0:
        return index, values
    kth = np.partition(scores, n - k, axis=1)[:, n - k]
    for r in range(n_rows):
        cand = np.flatnonzero(scores[r] >= kth[r])
        order = np.lexsort((cand, -scores[r, cand]))[:k]
        index[r] = cand[order]
        values[r] = scores[r, index[r]]
    return index, values


def prepare(embeddings: np.ndarray, similarity: str, truncate_dim: int | None) -> np.ndarray:
    """Steps 1–2: truncated, then row-normalised when the similarity is cosine (float32)."""
    x = truncate(np.asarray(embeddings, dtype=np.float32), truncate_dim)
    return normalize_rows(x) if similarity == "cosine" else np.ascontiguousarray(x)


def compressed_search(
    query_embeddings: np.ndarray,
    doc_embeddings: np.ndarray,
    *,
    similarity: str,
    top_k: int,
    precision: str,
    truncate_dim: int | None = None,
    rescore_multiplier: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``top_k`` documents per query over int8 or binary vectors (steps 1–5 of the module docstring):
    ``(doc_index, scores)``, ``[n_queries, min(top_k, n_docs)]``, sorted by score descending (ties: earlier
    document). ``precision`` fp32 is the caller's (MTEB's exact search on the truncated vectors)."""
    if precision not in ("int8", "binary"):
        raise ConfigError(f"precision {precision!r}: compressed search takes int8 or binary")
    q = prepare(query_embeddings, similarity, truncate_dim)
    d = prepare(doc_embeddings, similarity, truncate_dim)
    n_q, n_d, dims = len(q), len(d), d.shape[1]
    if precision == "int8":
        ranges = calibration_ranges(d)
        starts, steps = _steps(ranges)
        q_codes = quantize_int8(q, ranges).astype(np.float64)
        d_codes = quantize_int8(d, ranges).astype(np.float64)  # integer sums below 2**53: exact
        first = lambda a, b: q_codes[a:b] @ d_codes.T  # noqa: E731
        q_scaled = q.astype(np.float64) * steps  # q · dequant(d) = (q∘step) · (code + 128) + q · lo
        offset = q_scaled.sum(axis=1) * 128 + q.astype(np.float64) @ starts.astype(np.float64)
        full = lambda a, b: q_scaled[a:b] @ d_codes.T + offset[a:b, None]  # noqa: E731
    else:
        d_bits = unpack_bits(quantize_binary(d), dims).astype(np.float64)
        q_bits = unpack_bits(quantize_binary(q), dims).astype(np.float64)
        d_ones = d_bits.sum(axis=1)

        # dims − Hamming = dims − (|q| + |d| − 2 q·d), exact on 0/1 bits
        def first(a: int, b: int) -> np.ndarray:
            return dims - (q_bits[a:b].sum(axis=1)[:, None] + d_ones[None, :] - 2 * (q_bits[a:b] @ d_bits.T))

        full = lambda a, b: q[a:b].astype(np.float64) @ d_bits.T  # noqa: E731
    k = top_k * rescore_multiplier if rescore_multiplier else top_k
    step = max(1, _BLOCK_CELLS // max(n_d, 1))
    out_index, out_scores = [], []
    for a in range(0, n_q, step):
        b = min(a + step, n_q)
        index, scores = top_k_rows(first(a, b), k)
        if rescore_multiplier:
            scores = np.take_along_axis(full(a, b), index, axis=1)
            order = np.lexsort((index, -scores), axis=1)[:, :top_k]  # ties: earlier document
            index, scores = np.take_along_axis(index, order, axis=1), np.take_along_axis(scores, order, axis=1)
        out_index.append(index)
        out_scores.append(scores)
    if not out_index:
        width = min(top_k, n_d)
        return np.zeros((0, width), dtype=np.int64), np.zeros((0, width), dtype=np.float64)
    return np.concatenate(out_index), np.concatenate(out_scores)
