"""Exact learned-sparse search: an inverted index over term weights, with mteb's scores and tie order.

mteb scores a sparse model's queries against each corpus chunk with sentence-transformers' ``dot_score`` (a torch
sparse × sparse product, scipy's CSR algorithm ported: for each query term in order, its posting list) and keeps
``topk(top_k + 1)`` per chunk. Here each corpus chunk's vectors become an inverted index (the transposed CSR matrix:
one posting list per term), the scores are scipy's product of the same float32 rows in the same order, and the
chunks are merged as dense search merges them (:func:`~embedscope.retrieval.dense.top_k_search`): the same numbers
and the same ranking, in ``query block × chunk`` floats at a time whatever the corpus size.

A sparse model's costs go with every result (the SPLADE papers' measures):

* active dimensions per query and per document (mean and 95th percentile);
* FLOPS, the expected number of multiplications per query-document pair:
  ``FLOPS = Σ_j p_j(q) · p_j(d)``, with ``p_j`` the share of queries (documents) in which term ``j`` is active;
* the inverted index's bytes (postings' positions and weights, and each term's offset).

>>> import numpy as np
>>> from scipy import sparse
>>> q = sparse.csr_matrix(np.array([[1.0, 0.0, 2.0]], dtype=np.float32))
>>> d = sparse.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=np.float32))
>>> index, scores = sparse_top_k_search(q, [d], top_k=2)
>>> index.tolist(), scores.tolist()
([[1, 2]], [[3.0, 2.0]])
>>> round(flops(q, [d]), 4)  # term 0: 1 × 1/3, term 2: 1 × 2/3
1.0
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from embedscope.errors import SettingError
from embedscope.models.base import Encoder, encode_rows
from embedscope.models.sparse_rows import csr_rows
from embedscope.retrieval.base import SearchOptions, encoded_within, merge_top_k
from embedscope.types import Corpus, Queries, RankedRun, Role

# a sparse model's costs, reported among a retrieval task's scores
COST_KEYS = (
    "sparse_active_dims_query_mean",
    "sparse_active_dims_query_p95",
    "sparse_active_dims_document_mean",
    "sparse_active_dims_document_p95",
    "sparse_flops",
    "sparse_index_bytes",
)


def sparse_vectors(
    encoder: Encoder, texts: Sequence[str], *, role: Role, batch_size: int | None, show_progress: bool
) -> Any:
    """The texts' vectors as a float32 CSR matrix: the encoder's (or its cache's) ``encode_sparse``, batch by batch,
    else its dense rows made sparse."""
    own = getattr(encoder, "encode_sparse", None)
    if own is not None:
        return csr_rows(own(list(texts), role=role, batch_size=batch_size, show_progress=show_progress))
    dense = encoder.encode(list(texts), role=role, batch_size=batch_size, show_progress=show_progress)
    return csr_rows(np.asarray(dense, dtype=np.float32))


def inverted_index(documents: Any) -> Any:
    """A chunk's posting lists: the transposed CSR matrix (row ``j``: the documents where term ``j`` is active, and
    its weights), sorted."""
    index = documents.T.tocsr()
    index.sort_indices()
    return index


def index_bytes(index: Any) -> int:
    """Bytes of an inverted index: positions, weights and each term's offset."""
    return int(index.data.nbytes + index.indices.nbytes + index.indptr.nbytes)


COMPILED_WORK = 1e8
"""Multiply-adds of a query block against a chunk above which :func:`block_scores` uses the compiled kernel:
scipy's product builds a sparse result first (about 8 ns per multiply-add on 2 cores, so 1e8 is about 1 s, what
numba's compilation costs the first time; it is cached on disk after); the kernel takes about 2 ns."""


def _accumulate(start, stop, q_indptr, q_indices, q_data, p_indptr, p_indices, p_data, out):
    """scipy's ``csr_matmat`` loop for query rows ``start:stop`` (each query term in order, its posting list), summed
    into the dense rows of ``out`` instead of a sparse result: the same float32 products added in the same order."""
    for i in range(start, stop):
        row = out[i - start]
        for jj in range(q_indptr[i], q_indptr[i + 1]):
            term = q_indices[jj]
            weight = q_data[jj]
            for kk in range(p_indptr[term], p_indptr[term + 1]):
                row[p_indices[kk]] += weight * p_data[kk]


@functools.cache
def _compiled_accumulate() -> Any:
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; scipy's product gives the same scores
        return None
    try:
        return numba.njit(nogil=True, cache=True)(_accumulate)
    except RuntimeError:  # no writable cache folder: compiled in each process
        return numba.njit(nogil=True)(_accumulate)


def block_scores(queries: Any, start: int, stop: int, index: Any) -> np.ndarray:
    """Scores ``[stop - start, documents]`` (float32) of query rows ``start:stop`` against an inverted index:
    scipy's sparse product made dense, or for a large block (:data:`COMPILED_WORK`) the same sums accumulated
    straight into a dense array by a compiled kernel (bit for bit the same numbers)."""
    terms = queries.indices[queries.indptr[start] : queries.indptr[stop]]
    work = int(np.diff(index.indptr)[terms].sum()) if len(terms) else 0
    kernel = _compiled_accumulate() if work > COMPILED_WORK else None
    if kernel is None:
        return np.asarray((queries[start:stop] @ index).toarray(), dtype=np.float32)
    out = np.zeros((stop - start, index.shape[1]), dtype=np.float32)
    kernel(start, stop, queries.indptr, queries.indices, queries.data, index.indptr, index.indices, index.data, out)
    return out


def sparse_top_k_search(
    queries: Any,
    document_chunks: Iterable[Any],
    *,
    top_k: int = 1000,
    query_block: int = 1024,
    sizes: list[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``top_k`` documents per query by dot product over consecutive CSR chunks of document vectors.

    Returns ``(doc_index, scores)`` as :func:`~embedscope.retrieval.dense.top_k_search` does. ``sizes`` (when
    given) gets each chunk's inverted-index bytes.
    """
    import torch

    queries = csr_rows(queries)
    n_q = queries.shape[0]
    blocks = [(start, min(start + query_block, n_q)) for start in range(0, n_q, max(1, query_block))]
    best: list[tuple[Any, Any]] = [(None, None)] * len(blocks)
    offset = 0
    with torch.inference_mode():
        for chunk in document_chunks:
            if chunk.shape[0] == 0:
                continue
            index = inverted_index(chunk)
            if sizes is not None:
                sizes.append(index_bytes(index))
            k_chunk = min(top_k + 1, chunk.shape[0])
            for b, (start, stop) in enumerate(blocks):
                scores = block_scores(queries, start, stop, index)
                vals, idx = torch.topk(torch.from_numpy(scores), k_chunk, dim=1, largest=True, sorted=True)
                best[b] = merge_top_k(*best[b], vals, idx + offset, top_k)
            offset += chunk.shape[0]
    if offset == 0 or n_q == 0:
        return np.zeros((n_q, 0), dtype=np.int64), np.zeros((n_q, 0), dtype=np.float64)
    scores_out = torch.cat([s for s, _ in best]).numpy().astype(np.float64)
    index_out = torch.cat([i for _, i in best]).numpy().astype(np.int64)
    return index_out, scores_out


def active_share(vectors: Iterable[Any], dim: int) -> tuple[np.ndarray, int]:
    """Per term, the number of rows in which it is active, and the number of rows."""
    counts = np.zeros(dim, dtype=np.int64)
    rows = 0
    for matrix in vectors:
        counts += np.bincount(matrix.indices, minlength=dim)[:dim]
        rows += matrix.shape[0]
    return counts, rows


def flops(queries: Any, document_chunks: Sequence[Any]) -> float:
    """``Σ_j p_j(q) · p_j(d)``: the expected number of multiplications per query-document pair."""
    dim = queries.shape[1]
    q_counts, n_q = active_share([csr_rows(queries)], dim)
    d_counts, n_d = active_share([csr_rows(c) for c in document_chunks], dim)
    if not n_q or not n_d:
        return 0.0
    return float((q_counts / n_q) @ (d_counts / n_d))


def active_dims(per_row: np.ndarray) -> tuple[float, float]:
    """Mean and 95th percentile (linear interpolation) of the active dimensions per row."""
    if not len(per_row):
        return 0.0, 0.0
    return float(np.mean(per_row)), float(np.percentile(per_row, 95))


def refuse_post_processing(name: str, options: SearchOptions) -> None:
    """A sparse model's vectors are term weights searched by an inverted index: dense post-processing is refused."""
    if options.truncate_dim is not None:
        raise SettingError(
            "truncate_dim",
            f"{{truncate_dim}} cannot apply to {name}: a sparse model's dimensions are vocabulary terms, so "
            "truncating would drop terms (its index size is reported as sparse_index_bytes)",
        )
    if options.precision != "fp32":
        raise SettingError(
            "precision",
            f"{{precision}} {options.precision} cannot apply to {name}: int8 and binary quantize dense vectors, and "
            "a sparse model's index holds term weights (its size is reported as sparse_index_bytes)",
        )
    if options.index is not None:
        raise SettingError(
            "index",
            f"{{index}} cannot apply to {name}: approximate indexes search dense vectors; a sparse model is "
            "searched exactly by its inverted index",
        )


def sparse_search(
    encoder: Encoder, queries: Queries, corpus: Corpus, options: SearchOptions, timings: dict[str, float]
) -> RankedRun:
    """Encode queries and corpus (in the corpus chunks of dense search, so the batches are mteb's) as sparse
    vectors, search them exactly, and put the sparse costs (:data:`COST_KEYS`) into ``timings``."""
    refuse_post_processing(encoder.name, options)
    batch_size, show_progress = options.batch_size, options.show_progress
    t0 = time.perf_counter()
    if queries.within is None:
        q_vectors = sparse_vectors(
            encoder, list(queries.texts), role="query", batch_size=batch_size, show_progress=show_progress
        )
    else:  # a screen's proxy: the rows of the full query set's call, as that call makes them
        q_vectors = csr_rows(
            encode_rows(encoder, queries.within.texts, queries.within.rows, role="query", batch_size=batch_size)
        )
    timings["encode_queries"] = time.perf_counter() - t0
    dim = q_vectors.shape[1]
    d_counts = np.zeros(dim, dtype=np.int64)
    per_document: list[np.ndarray] = []
    sizes: list[int] = []

    def chunks() -> Iterator[Any]:
        for start in range(0, len(corpus), options.corpus_chunk_size):
            t = time.perf_counter()
            stop = start + options.corpus_chunk_size
            if corpus.within is None:
                texts = list(corpus.texts[start:stop])
                chunk = sparse_vectors(
                    encoder, texts, role="document", batch_size=batch_size, show_progress=show_progress
                )
            else:  # a screen's proxy documents: rows of the full corpus' chunked calls
                chunk = csr_rows(encoded_within(encoder, corpus.within, corpus.within.rows[start:stop], options))
            timings["encode_corpus"] = timings.get("encode_corpus", 0.0) + time.perf_counter() - t
            d_counts[:] += np.bincount(chunk.indices, minlength=dim)[:dim]
            per_document.append(np.diff(chunk.indptr))
            yield chunk

    t1 = time.perf_counter()
    index, scores = sparse_top_k_search(q_vectors, chunks(), top_k=options.top_k, sizes=sizes)
    timings["search"] = time.perf_counter() - t1 - timings.get("encode_corpus", 0.0)
    q_counts = np.bincount(q_vectors.indices, minlength=dim)[:dim]
    n_q, n_d = q_vectors.shape[0], len(corpus)
    timings["sparse_active_dims_query_mean"], timings["sparse_active_dims_query_p95"] = active_dims(
        np.diff(q_vectors.indptr)
    )
    timings["sparse_active_dims_document_mean"], timings["sparse_active_dims_document_p95"] = active_dims(
        np.concatenate(per_document) if per_document else np.zeros(0)
    )
    timings["sparse_flops"] = float((q_counts / max(n_q, 1)) @ (d_counts / max(n_d, 1)))
    timings["sparse_index_bytes"] = float(sum(sizes))
    return RankedRun(tuple(queries.ids), tuple(corpus.ids), index, scores)
