"""Exact dense search with MTEB's semantics and bounded memory.

MTEB scores each corpus chunk with ``normalize(Q) @ normalize(D).T`` in float32 torch, takes
``topk(top_k + 1)`` per chunk and merges chunks in a heap. We compute the same float32 scores with
the same torch operations (so the numbers are bit-identical), merge chunks with a vectorised
running top-k instead of a Python heap, and also block the queries so the score matrix never
exceeds ``query_block × chunk`` floats whatever the corpus size.

>>> import numpy as np
>>> q = np.array([[1.0, 0.0]], dtype=np.float32)
>>> d = np.array([[0.0, 1.0], [1.0, 0.1], [1.0, 0.0]], dtype=np.float32)
>>> idx, scores = top_k_search(q, [d], top_k=2, similarity="cosine")
>>> idx.tolist()
[[2, 1]]
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from embedscope.models.backends import vector_kind
from embedscope.models.base import Encoder, Similarity, encode_rows
from embedscope.models.device import compute_device, free_memory_mb
from embedscope.retrieval.base import SearchOptions, encoded_within, merge_top_k, search_each_group, unique_candidates
from embedscope.types import Corpus, Queries, RankedRun


def similarity_matrix(queries, documents, similarity: Similarity):  # torch tensors in, torch out
    """Scores of every query against every document, exactly as MTEB computes them.

    cosine: ``normalize(q) @ normalize(d).T`` (``torch.nn.functional.normalize``); dot: ``q @ d.T``.
    """
    import torch

    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, p=2, dim=1)
        documents = torch.nn.functional.normalize(documents, p=2, dim=1)
    elif similarity != "dot":
        raise ValueError(f"Unknown similarity {similarity!r}: use 'cosine' or 'dot'")
    return queries @ documents.transpose(0, 1)


def top_k_search(
    query_embeddings: np.ndarray,
    document_chunks: Iterable[np.ndarray],
    *,
    top_k: int = 1000,
    similarity: Similarity = "cosine",
    query_block: int = 4096,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``top_k`` documents per query over a corpus given as consecutive chunks of vectors.

    Returns ``(doc_index, scores)``, both ``[n_queries, min(top_k, n_docs)]``, sorted by score
    descending; ``doc_index`` counts from the first document of the first chunk. Scores are
    float32 values (returned as float64 arrays holding float32-exact numbers). On an accelerator
    (``device``) the same torch operations run there, query blocks sized by its free memory.
    """
    import torch

    q_all = torch.from_numpy(np.ascontiguousarray(query_embeddings, dtype=np.float32)).to(device)
    n_q = q_all.shape[0]
    query_block = max(1, query_block)
    best: list[tuple[Any, Any]] = []  # per query block: (scores, doc indices), torch tensors or None
    offset = 0
    with torch.inference_mode():
        for chunk in document_chunks:
            d = torch.from_numpy(np.ascontiguousarray(chunk, dtype=np.float32)).to(device)
            if d.shape[0] == 0:
                continue
            if not best:  # the block size is fixed by the first chunk, so every chunk merges per block
                query_block = min(query_block, _fitting_query_block(device, d.shape[0]))
                best = [(None, None)] * ((n_q + query_block - 1) // query_block)
            k_chunk = min(top_k + 1, d.shape[0])
            for b, start in enumerate(range(0, n_q, query_block)):
                s = similarity_matrix(q_all[start : start + query_block], d, similarity)
                vals, idx = torch.topk(s, k_chunk, dim=1, largest=True, sorted=True)
                best[b] = merge_top_k(*best[b], vals, idx + offset, top_k)
            offset += d.shape[0]
    if offset == 0 or n_q == 0:
        return np.zeros((n_q, 0), dtype=np.int64), np.zeros((n_q, 0), dtype=np.float64)
    scores = torch.cat([s for s, _ in best]).cpu().numpy().astype(np.float64)
    index = torch.cat([i for _, i in best]).cpu().numpy().astype(np.int64)
    return index, scores


def _fitting_query_block(device: str, n_docs: int) -> int:
    """Queries whose ``[block, n_docs]`` float32 scores (plus top-k work, 3x) fit in a quarter of the
    accelerator's free memory; unbounded on the CPU (the caller's ``query_block`` applies)."""
    free_mb = free_memory_mb(device)
    return 1 << 30 if free_mb is None else max(1, int(free_mb * 2**20) // (4 * 3 * max(n_docs, 1)))


def _corpus_chunks(
    encoder: Encoder, corpus: Corpus, options: SearchOptions, timings: dict[str, float]
) -> Iterator[np.ndarray]:
    for start in range(0, len(corpus), options.corpus_chunk_size):
        stop = start + options.corpus_chunk_size
        t0 = time.perf_counter()
        if corpus.within is None:
            texts = list(corpus.texts[start:stop])
            vectors = encoder.encode(
                texts, role="document", batch_size=options.batch_size, show_progress=options.show_progress
            )
        else:
            vectors = encoded_within(encoder, corpus.within, corpus.within.rows[start:stop], options)
        timings["encode_corpus"] = timings.get("encode_corpus", 0.0) + time.perf_counter() - t0
        yield vectors


def _query_vectors(encoder: Encoder, queries: Queries, options: SearchOptions) -> np.ndarray:
    """The queries' vectors: as one call, or, for queries encoded within a full set (a proxy's), as that set's call
    makes them (:func:`~embedscope.models.base.encode_rows`)."""
    batch_size, show_progress = options.batch_size, options.show_progress
    if queries.within is None:
        return encoder.encode(list(queries.texts), role="query", batch_size=batch_size, show_progress=show_progress)
    within = queries.within
    return encode_rows(
        encoder, within.texts, within.rows, role="query", batch_size=batch_size, show_progress=show_progress
    )


RECALL_K = 10  # an approximate index's recall is measured on each query's exact top 10


def post_processed_search(
    q_vectors: np.ndarray,
    doc_chunks: Iterable[np.ndarray],
    similarity: Similarity,
    options: SearchOptions,
    timings: dict[str, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Dense search on the vectors as encoded, post-processed by ``options`` (:mod:`~embedscope.retrieval.compression`
    and :mod:`~embedscope.retrieval.ann`): fp32 with truncation is MTEB's exact search on the first
    ``truncate_dim`` dimensions; int8/binary is :func:`~embedscope.retrieval.compression.compressed_search`; an
    approximate index is built on the (truncated) vectors and its recall of the exact top 10 is recorded in
    ``timings["ann_recall_at_10"]`` (a retrieval task reports it among its scores; ``index_build`` and
    ``recall_check`` are timed apart from ``search``)."""
    from embedscope.retrieval import ann
    from embedscope.retrieval.compression import compressed_search, truncate

    dims = options.truncate_dim
    spec = ann.parse_index(options.index) if options.index is not None else None
    if isinstance(spec, ann.ExactIndex):
        spec = None
    if options.precision == "fp32" and spec is None:
        return top_k_search(
            truncate(q_vectors, dims),
            (truncate(c, dims) for c in doc_chunks),
            top_k=options.top_k,
            similarity=similarity,
        )
    docs = np.concatenate([truncate(c, dims) for c in doc_chunks] or [np.zeros((0, q_vectors.shape[1]), np.float32)])
    queries = truncate(q_vectors, dims)
    if spec is None:
        return compressed_search(
            queries,
            docs,
            similarity=similarity,
            top_k=options.top_k,
            precision=options.precision,
            rescore_multiplier=options.rescore_multiplier,
        )
    t0 = time.perf_counter()
    built = ann.build_index(docs, spec, similarity)
    timings["index_build"] = time.perf_counter() - t0
    index, scores = ann.index_search(built, queries, options.top_k, similarity)
    t1 = time.perf_counter()
    exact, _ = top_k_search(queries, [docs], top_k=min(RECALL_K, options.top_k), similarity=similarity)
    timings["recall_check"] = time.perf_counter() - t1
    timings[f"ann_recall_at_{RECALL_K}"] = ann.recall_of_exact(index, exact, RECALL_K)
    return index, scores


def dense_search(
    encoder: Encoder, queries: Queries, corpus: Corpus, options: SearchOptions, timings: dict[str, float] | None = None
) -> RankedRun:
    """Encode queries and corpus (chunked) and keep each query's top ``top_k`` documents; with
    ``options.filter_field``, among each query's matching documents
    (:func:`~embedscope.retrieval.base.search_each_group`: the ranking dense search gives them alone). A sparse
    model's vectors are searched by an inverted index (:func:`~embedscope.retrieval.sparse.sparse_search`)."""
    timings = {} if timings is None else timings
    if options.filter_field is not None:

        def one_group(q: Queries, c: Corpus, o: SearchOptions) -> RankedRun:
            part: dict[str, float] = {}
            run = dense_search(encoder, q, c, o, part)
            for key, seconds in part.items():
                timings[key] = timings.get(key, 0.0) + seconds
            return run

        return search_each_group(one_group, queries, corpus, options)
    if vector_kind(encoder) == "sparse":  # term weights: an inverted index (its backend's record says so)
        from embedscope.retrieval.sparse import sparse_search

        return sparse_search(encoder, queries, corpus, options, timings)
    t0 = time.perf_counter()
    q_vectors = _query_vectors(encoder, queries, options)
    timings["encode_queries"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    if options.post_processes:
        index, scores = post_processed_search(
            q_vectors, _corpus_chunks(encoder, corpus, options, timings), encoder.similarity, options, timings
        )
    else:
        index, scores = top_k_search(
            q_vectors,
            _corpus_chunks(encoder, corpus, options, timings),
            top_k=options.top_k,
            similarity=encoder.similarity,
            device=compute_device(encoder),
        )
    # Exact search builds no index: corpus chunks stream straight into the scoring, and MTEB normalises each chunk
    # inside its score computation (done apart, the bits would change), so index_build is 0 and search holds it all.
    # Only an approximate index (post_processed_search) times a build; int8/binary quantize inside their search.
    timings.setdefault("index_build", 0.0)
    other = sum(timings.get(k, 0.0) for k in ("encode_corpus", "index_build", "recall_check"))
    timings["search"] = time.perf_counter() - t1 - other
    return RankedRun(tuple(queries.ids), tuple(corpus.ids), index, scores)


class DenseRetriever:
    """Single-vector retrieval with an :class:`~embedscope.models.base.Encoder` (MTEB's protocol);
    also a reranker: the encoder's similarity of each query with its candidates."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.revision = encoder.revision
        self.fingerprint = encoder.fingerprint

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        return dense_search(self.encoder, queries, corpus, options)

    def score_candidates(
        self, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
    ) -> np.ndarray:
        import torch

        batch_size, show_progress = options.batch_size, options.show_progress
        q_vectors = self.encoder.encode(
            list(queries.texts), role="query", batch_size=batch_size, show_progress=show_progress
        )
        q = torch.from_numpy(np.ascontiguousarray(q_vectors, dtype=np.float32))
        uniq, pos = unique_candidates(candidates.doc_index)
        d_vectors = self.encoder.encode(
            [corpus.texts[i] for i in uniq.tolist()],
            role="document",
            batch_size=batch_size,
            show_progress=show_progress,
        )
        d = torch.from_numpy(np.ascontiguousarray(d_vectors, dtype=np.float32))
        if self.encoder.similarity == "cosine":
            q, d = torch.nn.functional.normalize(q, p=2, dim=1), torch.nn.functional.normalize(d, p=2, dim=1)
        out = np.full(pos.shape, -np.inf)
        rows, cols = np.nonzero(pos >= 0)
        with torch.inference_mode():
            values = (q[torch.from_numpy(rows)] * d[torch.from_numpy(pos[rows, cols])]).sum(dim=1)
        out[rows, cols] = values.numpy()
        return out
