"""A sentence-transformers (or plain transformers) row on the CPU in float32 depends only on its tokens and its batch's padded length, so the
cache serves it for any batch of that length (``rows_follow_padded_length``; :mod:`embedscope.models.cache`).

The claim is checked bit for bit: each planned batch encoded whole, against its longest row with subsets of the
others (1 row up to all but one); and a subset call then the full call through the cache, against the full call
uncached. The tiny model runs in the fast tier; all-MiniLM-L6-v2, at its real widths and lengths up to 256, in the
slow one.
"""

from __future__ import annotations

import random

import pytest

from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.testing.rows import compare_rows


def _texts(n: int, longest: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = "the of and a to in is news market government said year people new game film music company".split()
    return [" ".join(rng.choices(words, k=rng.randint(2, longest))) for _ in range(n)]


def _served_across_calls(encoder, texts: list[str], tmp_path) -> None:
    subset = texts[3::4]
    uncached = encoder.encode(texts, role="document", batch_size=16)
    cached = CachedEncoder(encoder, EmbeddingCache(tmp_path))
    cached.encode(subset, role="document", batch_size=16)
    before = cached.stats.encoded
    got = cached.encode(texts, role="document", batch_size=16)
    assert got.tobytes() == uncached.tobytes()
    assert cached.stats.hits > 0  # rows of the subset call were served
    assert cached.stats.encoded - before == len(texts) - cached.stats.hits
    assert cached.rows_trusted  # no witness row came out different


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> str:
    from tests.support.tiny_models import build_tiny_sentence_transformer

    return str(build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny")))


@pytest.fixture(scope="module")
def tiny(tiny_folder):
    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder

    return SentenceTransformerEncoder(tiny_folder)


def test_padded_lengths_are_the_tokenizers_counts_with_the_prompt(tiny):
    tiny.prompts = {"query": "query: "}
    try:
        texts = ["a b c", "a much longer text " * 20, ""]
        counts = tiny.padded_lengths(texts, role="query")
        expected = tiny.model.preprocess(texts, prompt="query: ")["attention_mask"].sum(dim=1).tolist()
        assert counts == expected
        assert counts[1] == tiny.max_seq_length  # truncated
        assert tiny.padded_lengths(["a b c"], role="document")[0] < counts[0]  # no prompt for documents
    finally:
        tiny.prompts = {}


def test_rows_follow_the_padded_length_on_the_tiny_model(tiny, tmp_path):
    assert tiny.rows_follow_padded_length
    rows = compare_rows(tiny, _texts(96, 80), batch_size=16)
    assert rows.compared > 100 and rows.equal == rows.compared
    _served_across_calls(tiny, _texts(96, 80), tmp_path)


def test_the_transformers_backend_follows_the_padded_length_too(tiny_folder, tmp_path):
    from embedscope.models.transformers_backend import TransformersEncoder

    encoder = TransformersEncoder(tiny_folder, pooling="mean", device="cpu", prompts={"query": "q: "})
    assert encoder.rows_follow_padded_length
    texts = _texts(64, 80)
    for batch in ([texts[0]], texts[:5], texts[10:40]):  # the batch's tensor is as wide as its longest row
        features = encoder.tokenizer(
            ["q: " + t for t in batch], padding=True, truncation=True, max_length=encoder.max_seq_length,
            return_tensors="pt",
        )  # fmt: skip
        assert features["input_ids"].shape[1] == max(encoder.padded_lengths(batch, role="query"))
    assert encoder.padded_lengths(["x"], role="query")[0] > encoder.padded_lengths(["x"], role="document")[0]
    rows = compare_rows(encoder, texts, batch_size=16)
    assert rows.compared > 50 and rows.equal == rows.compared
    _served_across_calls(encoder, texts, tmp_path)


def test_not_claimed_in_half_precision(tmp_path):
    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder
    from tests.support.tiny_models import build_tiny_sentence_transformer

    encoder = SentenceTransformerEncoder(str(build_tiny_sentence_transformer(tmp_path / "m")), dtype="bfloat16")
    assert not encoder.rows_follow_padded_length


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["minilm", "minilm_transformers"])
def test_rows_follow_the_padded_length_on_minilm(fixture, request, tmp_path):
    encoder = request.getfixturevalue(fixture)
    texts = _texts(128, 300)  # up to 256 tokens: truncated batches and shorter ones
    lengths = encoder.padded_lengths(texts, role="document")
    assert max(lengths) == 256 and min(lengths) < 64
    rows = compare_rows(encoder, texts, batch_size=32)
    assert rows.compared > 100 and rows.equal == rows.compared
    _served_across_calls(encoder, texts, tmp_path)
