"""embedscope's numpy pooling equals sentence-transformers' Pooling module, padding included."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.errors import UnknownNameError
from embedscope.models.pooling import POOLING_MODES, check_pooling_mode, normalize_rows, pool
from support.lazy import lazy_module

torch = lazy_module("torch")  # imported by the first test that uses it: collection imports nothing heavy
st_models = lazy_module("sentence_transformers.models")


def _batch(seed: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    batch, seq, hidden = 5, 9, 7
    h = torch.randn(batch, seq, hidden, generator=g)
    lengths = [9, 4, 1, 6, 2]
    mask = torch.zeros(batch, seq, dtype=torch.int64)
    for i, n in enumerate(lengths):
        if left:
            mask[i, seq - n :] = 1
        else:
            mask[i, :n] = 1
    return h, mask


@pytest.mark.parametrize("left", [False, True], ids=["right-pad", "left-pad"])
@pytest.mark.parametrize("mode", POOLING_MODES)
def test_pool_equals_sentence_transformers_pooling(mode, left):
    h, mask = _batch(7, left)
    module = st_models.Pooling(h.shape[-1], pooling_mode=mode)
    with torch.inference_mode():
        theirs = module({"token_embeddings": h.clone(), "attention_mask": mask.clone()})["sentence_embedding"].numpy()
    ours = pool(h, mask, mode)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pool(h.numpy(), mask.numpy(), mode), ours)  # numpy input gives the same


def test_padding_values_never_leak_into_mean_and_max():
    h, mask = _batch(1, False)
    noisy = h.clone()
    noisy[mask == 0] = 1e6
    for mode in ("mean", "max", "weightedmean", "cls", "lasttoken", "mean_sqrt_len_tokens"):
        np.testing.assert_allclose(pool(noisy, mask, mode), pool(h, mask, mode), rtol=1e-6, atol=1e-6)


def test_unknown_mode_suggests_a_close_one():
    with pytest.raises(UnknownNameError, match="Did you mean 'mean'"):
        check_pooling_mode("meen")
    with pytest.raises(ValueError):
        pool(np.zeros((2, 3)), np.zeros((2, 3)), "mean")


def test_normalize_rows_matches_torch():
    x = torch.randn(4, 6)
    x[2] = 0
    np.testing.assert_allclose(
        normalize_rows(x), torch.nn.functional.normalize(x, dim=-1).numpy(), rtol=1e-6, atol=1e-7
    )
