"""Per-query latency of dense (or learned-sparse) search: a seeded sample of queries timed one at a time (``latency_sample``).

The batch evaluation gives a mean cost per query (its phases over its query count); this gives the latency
distribution one user sees. What is timed, per sampled query (``time.perf_counter``):

1. encoding the query text alone (batch of one) with the **model itself, never the embedding cache**: a vector
   served from the cache is not a latency;
2. searching the prepared corpus for its top ``top_k``: exact fp32 search is one inner product against the corpus
   vectors (truncated to ``truncate_dim`` and normalised once, as a flat inner-product index holds them) and a
   top-k; an approximate index (``index``) is built once and searched with the one query; a learned-sparse
   model's corpus is one inverted index, built once, which the query's term weights are scored against.

Not timed: reading the corpus vectors (through the cache, as the batch run did), normalising them and building
the index, and one warm-up query (the first sampled one) run before the clock starts. The sample is
``min(latency_sample, queries)`` queries drawn without replacement by ``numpy.random.default_rng(LATENCY_SEED)``,
in query order. Nothing here changes a score: the batch run's ranking is computed before and apart.

p50 and p95 are ``numpy.percentile`` (linear interpolation) of the per-query milliseconds; ``qps_single`` =
sampled queries / their summed seconds (one query at a time, one process).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.retrieval.base import SearchOptions
from embedscope.types import Corpus, Queries

LATENCY_SEED = 0
WHAT_IS_TIMED = "query encode by the model (not the cache), batch of one, + search of the corpus prepared once"


def sample_positions(n_queries: int, sample: int, seed: int = LATENCY_SEED) -> list[int]:
    """Positions of the sampled queries: ``min(sample, n_queries)`` drawn without replacement, in query order.

    >>> sample_positions(5, 10)
    [0, 1, 2, 3, 4]
    >>> sample_positions(1000, 3) == sample_positions(1000, 3)
    True
    """
    size = min(sample, n_queries)
    picks = np.random.default_rng(seed).choice(n_queries, size=size, replace=False)
    return sorted(int(i) for i in picks)


def uncached(encoder: Any) -> Any:
    """The model under any embedding-cache wrapper (:class:`~embedscope.models.cache.CachedEncoder`)."""
    from embedscope.models.cache import CachedEncoder

    while isinstance(encoder, CachedEncoder):
        encoder = encoder.encoder
    return encoder


def latency_summary(total_ms: list[float], encode_ms: list[float]) -> dict[str, Any]:
    """The recorded samples with their p50/p95 (``numpy.percentile``) and single-stream queries per second."""
    total = np.asarray(total_ms, dtype=np.float64)
    search = total - np.asarray(encode_ms, dtype=np.float64)
    return {
        "queries": len(total_ms),
        "seed": LATENCY_SEED,
        "timed": WHAT_IS_TIMED,
        "p50_ms": float(np.percentile(total, 50)),
        "p95_ms": float(np.percentile(total, 95)),
        "encode_p50_ms": float(np.percentile(encode_ms, 50)),
        "search_p50_ms": float(np.percentile(search, 50)),
        "qps_single": float(len(total) / (total.sum() / 1000)) if total.sum() > 0 else None,
        "total_ms": [float(x) for x in total_ms],
        "encode_ms": [float(x) for x in encode_ms],
    }


class _Prepared:
    """The corpus made searchable once: normalised (truncated) fp32 vectors, or an approximate index over them."""

    def __init__(self, encoder: Encoder, corpus: Corpus, options: SearchOptions) -> None:
        from embedscope.retrieval import ann
        from embedscope.retrieval.compression import truncate

        self.options, self.similarity = options, encoder.similarity
        chunks = [
            truncate(
                encoder.encode(
                    list(corpus.texts[s : s + options.corpus_chunk_size]),
                    role="document",
                    batch_size=options.batch_size,
                ),
                options.truncate_dim,
            )
            for s in range(0, len(corpus), options.corpus_chunk_size)
        ]
        docs = np.concatenate(chunks) if chunks else np.zeros((0, 1), np.float32)
        self.docs = self._normalised(docs)  # an index holds them too; a query is normalised as they are
        spec = ann.parse_index(options.index) if options.index is not None else None
        exact = spec is None or isinstance(spec, ann.ExactIndex)
        self.index = None if exact else ann.build_index(self.docs, spec, "dot", threads=None)  # type: ignore[arg-type]

    def _normalised(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        if self.similarity == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))
        return x

    def search(self, query_vector: np.ndarray) -> np.ndarray:
        """The one query's top ``top_k`` document positions."""
        from embedscope.retrieval import ann
        from embedscope.retrieval.compression import truncate
        from embedscope.retrieval.dense import top_k_search

        q = self._normalised(truncate(query_vector, self.options.truncate_dim))
        if self.index is not None:
            return ann.index_search(self.index, q, self.options.top_k, "dot")[0]
        return top_k_search(q, [self.docs], top_k=self.options.top_k, similarity="dot")[0]


class _PreparedSparse:
    """A learned-sparse model's corpus made searchable once: one inverted index over its term weights
    (:mod:`embedscope.retrieval.sparse`); a query is scored against it and its top ``top_k`` kept."""

    def __init__(self, encoder: Encoder, corpus: Corpus, options: SearchOptions) -> None:
        from embedscope.models.sparse_rows import stack_csr
        from embedscope.retrieval.sparse import inverted_index, sparse_vectors

        self.top_k = options.top_k
        chunks = [
            sparse_vectors(
                encoder,
                list(corpus.texts[s : s + options.corpus_chunk_size]),
                role="document",
                batch_size=options.batch_size,
                show_progress=False,
            )
            for s in range(0, len(corpus), options.corpus_chunk_size)
        ]
        self.index = inverted_index(stack_csr(chunks, chunks[0].shape[1] if chunks else 0))

    def search(self, query_vector: np.ndarray) -> np.ndarray:
        """The one query's top ``top_k`` document positions (its term weights against the posting lists)."""
        import torch

        from embedscope.models.sparse_rows import csr_rows
        from embedscope.retrieval.sparse import block_scores

        scores = torch.from_numpy(block_scores(csr_rows(query_vector), 0, 1, self.index))
        return torch.topk(scores, min(self.top_k, scores.shape[1]), dim=1).indices.numpy()


def check_latency_options(options: SearchOptions) -> None:
    """``latency_sample`` times fp32 dense search (exact or an index), unfiltered; the rest is refused."""
    if options.precision != "fp32":
        raise ConfigError(
            f"latency_sample: per-query latency is measured for fp32 dense search (exact or an index), and the "
            f"precision is {options.precision}; drop latency_sample or the precision"
        )
    if options.filter_field is not None:
        raise ConfigError("latency_sample: per-query latency is not measured with filter_field; drop one of them")


def measure_latency(
    encoder: Encoder, queries: Queries, corpus: Corpus, options: SearchOptions
) -> dict[str, Any] | None:
    """Time a seeded sample of ``options.latency_sample`` queries one at a time (see the module docstring); None
    when there is no query."""
    check_latency_options(options)
    picks = sample_positions(len(queries), options.latency_sample or 0)
    if not picks:
        return None
    from embedscope.models.backends import vector_kind

    sparse = vector_kind(encoder) == "sparse"  # term weights: an inverted index (its backend's record says so)
    prepared = _PreparedSparse(encoder, corpus, options) if sparse else _Prepared(encoder, corpus, options)
    model = uncached(encoder)
    texts = [queries.texts[i] for i in picks]
    prepared.search(model.encode(texts[:1], role="query", batch_size=1))  # warm-up, not timed
    total_ms, encode_ms = [], []
    for text in texts:
        t0 = time.perf_counter()
        vector = model.encode([text], role="query", batch_size=1)
        t1 = time.perf_counter()
        prepared.search(vector)
        t2 = time.perf_counter()
        total_ms.append(1000 * (t2 - t0))
        encode_ms.append(1000 * (t1 - t0))
    return latency_summary(total_ms, encode_ms)
