"""Each text's padded length, as a batch pads it (``padded_lengths``, what ``bench/bench_row_invariance.py`` groups
rows by); and the embedding cache's refusal to serve a row across batches even at one padded length, because on some
CPUs a row also depends on its batch's shape.

Measured on an Intel Xeon with AVX-512 (2026-11-28), all-MiniLM-L6-v2 on the CPU in float32: a row encoded in a
batch of 2 differs in its last bits from the same row in a batch of 8 padded to the same width. A cache that served
rows by padded length (as it did on 2026-11-27, when the AMD EPYC of that day measured every row equal) gave a
warm run other bits than a cold one; the last test here failed on it.
"""

from __future__ import annotations

import random

import pytest

from embedscope.models.cache import CachedEncoder, CacheStats, EmbeddingCache


def _texts(n: int, longest: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = "the of and a to in is news market government said year people new game film music company".split()
    return [" ".join(rng.choices(words, k=rng.randint(2, longest))) for _ in range(n)]


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


def test_the_transformers_backends_padded_lengths_are_its_batch_widths(tiny_folder):
    from embedscope.models.transformers_backend import TransformersEncoder

    encoder = TransformersEncoder(tiny_folder, pooling="mean", device="cpu", prompts={"query": "q: "})
    texts = _texts(64, 80)
    for batch in ([texts[0]], texts[:5], texts[10:40]):  # the batch's tensor is as wide as its longest row
        features = encoder.tokenizer(
            ["q: " + t for t in batch], padding=True, truncation=True, max_length=encoder.max_seq_length,
            return_tensors="pt",
        )  # fmt: skip
        assert features["input_ids"].shape[1] == max(encoder.padded_lengths(batch, role="query"))
    assert encoder.padded_lengths(["x"], role="query")[0] > encoder.padded_lengths(["x"], role="document")[0]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["minilm", "minilm_transformers"])
@pytest.mark.parametrize("width", [12, 40, 70])
def test_rows_of_one_padded_length_in_other_batches_are_not_served(fixture, width, request, tmp_path):
    """Every row of the full call was encoded before, by calls of two texts padded to the full call's width: the
    full call encodes them again, in its own batch, and keeps the uncached call's bits."""
    encoder = request.getfixturevalue(fixture)
    words = "news market government year people game film music company league".split()
    longest = [" ".join(words[(i + k) % 10] for k in range(width)) for i in range(2)]
    others = [" ".join(words[(i * 3 + k) % 10] for k in range(width // 2 + i)) for i in range(6)]
    full = longest + others
    lengths = encoder.padded_lengths(full, role="document")
    assert lengths[0] == lengths[1] == max(lengths) > max(lengths[2:])  # each pair is padded as the full call is
    uncached = encoder.encode(full, role="document", batch_size=32)
    cached = CachedEncoder(encoder, EmbeddingCache(tmp_path))
    for other in others:
        cached.encode([longest[0], other], role="document", batch_size=32)
    cached.encode([longest[1], others[0]], role="document", batch_size=32)
    cached.stats = CacheStats()
    assert cached.encode(full, role="document", batch_size=32).tobytes() == uncached.tobytes()
    assert (cached.stats.hits, cached.stats.encoded) == (0, len(full))
