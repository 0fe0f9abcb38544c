"""``encode_rows``: some rows of a call, encoded as the call itself batches them (a screen's proxy documents), so the
call is later served those batches and a warm, a resumed and an uncached call hold the same bits."""

from __future__ import annotations

import random

import numpy as np
import pytest

from embedscope.models.base import encode_rows
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.testing.fakes import PaddedHashEncoder, RowPaddedHashEncoder


def _texts(n: int, seed: int = 0) -> list[str]:
    """Texts of few distinct lengths, so that length ties cross batch edges."""
    rng = random.Random(seed)
    words = "the of and a to in is news market government said year people new game film music company".split()
    return [" ".join(rng.choices(words, k=rng.randint(2, 12))) for _ in range(n)]


class Counting(RowPaddedHashEncoder):
    """A row depends on its batch's size and longest text; counts the texts it encodes."""

    def __init__(self) -> None:
        super().__init__(dim=8, batch_nudge=True)
        self.seen = 0

    def _encode(self, texts, role, batch_size, show_progress):  # type: ignore[no-untyped-def]
        self.seen += len(texts)
        return super()._encode(texts, role, batch_size, show_progress)


def _plan_rows(encoder, texts: list[str], rows: list[int], batch_size: int) -> set[int]:
    plan = encoder.batch_plan([len(t) for t in texts], batch_size)
    return {i for b in plan if set(b) & set(rows) for i in b}


@pytest.mark.parametrize("rows", [[0], [5, 70, 3], [0, 1, 2, 3]])
def test_a_backends_rows_are_the_calls_rows_and_only_their_batches_are_encoded(rows):
    texts = _texts(90)
    whole = Counting().encode(texts, role="document", batch_size=16)
    encoder = Counting()
    got = encoder.encode_rows(texts, rows, role="document", batch_size=16)
    assert got.tobytes() == whole[rows].tobytes()
    assert encoder.seen == len(_plan_rows(encoder, texts, rows, 16)) < len(texts)


def test_the_cache_serves_a_call_the_batches_its_rows_were_encoded_in(tmp_path):
    texts, rows = _texts(100, seed=3), [2, 40, 41, 99]
    inner = Counting()
    cached = CachedEncoder(inner, EmbeddingCache(tmp_path))
    part = cached.encode_rows(texts, rows, role="document", batch_size=16)
    in_batches = len(_plan_rows(inner, texts, rows, 16))
    assert cached.stats.encoded == inner.seen == in_batches
    full = cached.encode(texts, role="document", batch_size=16)
    assert cached.stats.hits == in_batches and inner.seen == len(texts)  # each text encoded once
    reference = Counting().encode(texts, role="document", batch_size=16)
    assert full.tobytes() == reference.tobytes() and part.tobytes() == reference[rows].tobytes()
    other_batches = PaddedHashEncoder(dim=8).encode(texts, role="document", batch_size=8)
    assert not np.array_equal(reference, other_batches)  # the nudges are real: a vector depends on its batch
    again = cached.encode_rows(texts, rows, role="document", batch_size=16)
    assert again.tobytes() == part.tobytes() and inner.seen == len(texts)


def test_an_encoder_without_encode_rows_encodes_the_whole_call():
    class Plain:
        name, revision, fingerprint, similarity, prompts = "plain", "1", None, "cosine", {}

        def encode(self, texts, *, role, batch_size=None, show_progress=False):  # type: ignore[no-untyped-def]
            return np.arange(len(texts), dtype=np.float32)[:, None] * len(texts)

    assert encode_rows(Plain(), ["a", "b", "c"], [2, 0], role="query").tolist() == [[6.0], [0.0]]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["minilm", "minilm_transformers"])
def test_rows_encoded_within_a_call_serve_it_the_uncached_bits_on_minilm(fixture, request, tmp_path):
    """all-MiniLM-L6-v2 on the CPU: rows encoded within a call of 200 texts with many length ties, then the call
    itself through the cache, equal the uncached call bit for bit."""
    from embedscope.data.builtin import bbc_news_retrieval

    encoder = request.getfixturevalue(fixture)
    texts = [t[: 40 + (i % 7) * 30] for i, t in enumerate(bbc_news_retrieval().corpus.texts[:200])]
    rows = sorted(random.Random(1).sample(range(200), 12))
    uncached = encoder.encode(texts, role="document", batch_size=32)
    cached = CachedEncoder(encoder, EmbeddingCache(tmp_path))
    part = cached.encode_rows(texts, rows, role="document", batch_size=32)
    first = cached.stats.encoded
    assert 0 < first < len(texts)
    full = cached.encode(texts, role="document", batch_size=32)
    assert (cached.stats.hits, cached.stats.encoded) == (first, len(texts))  # each text encoded once
    assert full.tobytes() == uncached.tobytes()
    assert part.tobytes() == uncached[rows].tobytes()
