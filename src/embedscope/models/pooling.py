"""Token embeddings → one vector per text: the single pooling implementation of every backend.

The formulas are those of ``sentence_transformers.sentence_transformer.modules.Pooling``
(sentence-transformers 6.2, padded path, prompt included), written in numpy:

* ``cls``: the first non-pad token (so left padding works);
* ``mean``: ``sum(h * m) / max(sum(m), 1e-9)``;
* ``mean_sqrt_len_tokens``: ``sum(h * m) / sqrt(max(sum(m), 1e-9))``;
* ``max``: maximum over non-pad tokens (pads count as ``-inf``);
* ``weightedmean``: position weights ``1..L``, counted from the first non-pad token;
* ``lasttoken``: the last non-pad token (the last position when the mask is all zero, giving 0).

>>> import numpy as np
>>> h = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
>>> pool(h, np.array([[1, 1, 0]]), "mean").tolist()
[[2.0, 3.0, 4.0, 5.0]]
>>> pool(h, np.array([[1, 1, 0]]), "lasttoken").tolist()
[[4.0, 5.0, 6.0, 7.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embedscope.errors import UnknownNameError

POOLING_MODES: tuple[str, ...] = ("cls", "mean", "max", "lasttoken", "weightedmean", "mean_sqrt_len_tokens")
# a learned-sparse (SPLADE) model pools log(1 + ReLU(MLM logits)) over the tokens by one of these
SPARSE_POOLING_MODES: tuple[str, ...] = ("max", "sum")
ANY_POOLING_MODES: tuple[str, ...] = (*POOLING_MODES, "sum")  # what the ``pooling`` setting takes: a backend decides


def check_pooling_mode(mode: str, modes: tuple[str, ...] = POOLING_MODES) -> str:
    """Return ``mode`` if it is one of ``modes`` (a dense model's pooling modes by default), else raise
    :class:`UnknownNameError`.

    >>> check_pooling_mode("mean"), check_pooling_mode("sum", SPARSE_POOLING_MODES)
    ('mean', 'sum')
    """
    if mode not in modes:
        hint = "sum pools a sparse (SPLADE) model's term weights only." if mode == "sum" else ""
        raise UnknownNameError("pooling mode", str(mode), modes, hint)
    return mode


def _as_numpy(x: Any) -> np.ndarray:
    """A numpy view of ``x``; torch tensors are detached and moved to the CPU first."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch
        x = x.detach().cpu()
        if x.is_floating_point():
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def pool(token_embeddings: Any, attention_mask: Any, mode: str = "mean") -> np.ndarray:
    """Pool ``[batch, seq, hidden]`` token embeddings with a ``[batch, seq]`` mask into float32 ``[batch, hidden]``."""
    check_pooling_mode(mode)
    h = _as_numpy(token_embeddings).astype(np.float32, copy=False)
    m = _as_numpy(attention_mask)
    if h.ndim != 3:
        raise ValueError(f"token_embeddings must be [batch, seq, hidden], got shape {h.shape}")
    if m.shape != h.shape[:2]:
        raise ValueError(f"attention_mask shape {m.shape} does not match token_embeddings {h.shape[:2]}")
    batch, seq, hidden = h.shape
    if batch == 0 or seq == 0:
        return np.zeros((batch, hidden), dtype=np.float32)
    mf = m.astype(np.float32)
    first = m.astype(np.int32).argmax(axis=1)  # first non-pad position (0 if none), as torch argmax
    rows = np.arange(batch)
    if mode == "cls":
        out = h[rows, first]
    elif mode in ("mean", "mean_sqrt_len_tokens"):
        summed = np.matmul(mf[:, None, :], h)[:, 0, :]
        count = np.maximum(mf.sum(axis=1, keepdims=True), np.float32(1e-9))
        out = summed / (count if mode == "mean" else np.sqrt(count))
    elif mode == "max":
        out = np.where(mf[:, :, None] == 0, np.float32(-np.inf), h).max(axis=1)
    elif mode == "weightedmean":
        weights = np.arange(1, seq + 1, dtype=np.float32)[None, :] - first[:, None].astype(np.float32)
        wm = mf * weights
        summed = np.matmul(wm[:, None, :], h)[:, 0, :]
        out = summed / np.maximum(wm.sum(axis=1, keepdims=True), np.float32(1e-9))
    else:  # lasttoken
        flipped = m[:, ::-1]
        values = flipped.max(axis=1)
        idx = np.where(values == 0, seq - 1, flipped.argmax(axis=1))
        last = seq - idx - 1
        out = h[rows, last] * mf[rows, last][:, None]
    return np.ascontiguousarray(out, dtype=np.float32)


def normalize_rows(x: Any, eps: float = 1e-12) -> np.ndarray:
    """L2-normalise each row as ``torch.nn.functional.normalize`` does (``x / max(||x||, eps)``).

    >>> normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    a = _as_numpy(x).astype(np.float32, copy=False)
    norms = np.linalg.norm(a, axis=-1, keepdims=True)
    return (a / np.maximum(norms, np.float32(eps))).astype(np.float32, copy=False)
