"""Approximate nearest-neighbour indexes for dense search (faiss: ``pip install 'embedscope[ann]'``).

An index is chosen by a spec: a string ``hnsw:M=32,ef_search=64`` or a mapping ``{type: hnsw, M: 32}``, checked
by one small model per type (:func:`parse_index`):

- ``exact``: today's exact search (:func:`embedscope.retrieval.dense.top_k_search`, MTEB's), unchanged;
- ``hnsw``: ``faiss.IndexHNSWFlat`` (``M`` links per node, ``ef_construction``, ``ef_search``; faiss's defaults
  32 / 40 / 16);
- ``ivfpq``: ``faiss.IndexIVFPQ`` over a flat coarse quantizer (``nlist`` lists, ``m`` sub-quantizers of ``nbits``
  bits, ``nprobe`` lists searched; k-means seeded with ``seed``).

Both search by inner product; with the model's similarity ``cosine`` the vectors are L2-normalised first
(``x / max(‖x‖₂, 1e-12)``), so the scores are cosines as MTEB's. Indexes are built with one thread by default, so
the same vectors give the same index and results every time. :func:`recall_of_exact` measures an index against exact
search: ``recall@k = mean_q |A_q ∩ E_q| / |E_q|`` with ``A_q`` the index's top ``k`` and ``E_q`` the exact top
``k`` of query ``q``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from embedscope.errors import ConfigError, MissingDependencyError

_INT_MAX = 2**31 - 1  # faiss stores these in C ints
Count = Annotated[int, Field(ge=1, le=_INT_MAX)]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ExactIndex(_Spec):
    """Exact search (MTEB's): every document scored."""

    type: Literal["exact"] = "exact"


class HNSWIndex(_Spec):
    """faiss ``IndexHNSWFlat``: a graph of ``M`` links per node."""

    type: Literal["hnsw"] = "hnsw"
    M: Count = 32
    ef_construction: Count = 40
    ef_search: Count = 16


class IVFPQIndex(_Spec):
    """faiss ``IndexIVFPQ``: ``nlist`` k-means lists, vectors coded by ``m`` sub-quantizers of ``nbits`` bits."""

    type: Literal["ivfpq"] = "ivfpq"
    nlist: Count = 256
    m: Count = 16
    nbits: int = Field(default=8, ge=1, le=16)
    nprobe: Count = 8
    seed: int = Field(default=1234, ge=-_INT_MAX - 1, le=_INT_MAX)


IndexSpec = Annotated[ExactIndex | HNSWIndex | IVFPQIndex, Field(discriminator="type")]
_ADAPTER: TypeAdapter[ExactIndex | HNSWIndex | IVFPQIndex] = TypeAdapter(IndexSpec)
INDEX_TYPES = ("exact", "hnsw", "ivfpq")
_ALIASES = {"flat": "exact", "ivf-pq": "ivfpq", "ivf_pq": "ivfpq"}


def _value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def parse_index(spec: str | Mapping[str, Any] | BaseModel) -> ExactIndex | HNSWIndex | IVFPQIndex:
    """An index spec checked: ``"hnsw:M=32,ef_search=64"``, ``{"type": "ivfpq", "nlist": 100}`` …; a one-line
    ConfigError naming the bad key otherwise.

    >>> parse_index("hnsw:M=16,ef_search=64")
    HNSWIndex(type='hnsw', M=16, ef_construction=40, ef_search=64)
    """
    if isinstance(spec, (ExactIndex, HNSWIndex, IVFPQIndex)):
        return spec
    if isinstance(spec, BaseModel):
        spec = spec.model_dump()
    if isinstance(spec, str):
        head, _, rest = spec.partition(":")
        values: dict[str, Any] = {"type": head.strip()}
        for part in (p.strip() for p in rest.split(",") if p.strip()):
            key, eq, value = part.partition("=")
            if not eq:
                raise ConfigError(f"index {spec!r}: {part!r} is not key=value (e.g. hnsw:M=32,ef_search=64)")
            if key.strip() in values:  # the last would win silently
                raise ConfigError(f"index {spec!r}: {key.strip()} is given twice: give it once")
            values[key.strip()] = _value(value.strip())
    elif isinstance(spec, Mapping):
        values = dict(spec)
    else:
        raise ConfigError(f"index {spec!r}: give a spec such as hnsw:M=32 or a mapping {{type: hnsw, M: 32}}")
    kind = str(values.get("type", "")).lower()
    values["type"] = _ALIASES.get(kind, kind)
    if values["type"] not in INDEX_TYPES:
        raise ConfigError(f"index type {values.get('type')!r}: use one of {', '.join(INDEX_TYPES)}")
    try:
        return _ADAPTER.validate_python(values)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"][1:]) or "index"
        raise ConfigError(f"index {values['type']} option {where}: {err['msg']}") from None


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as e:
        raise MissingDependencyError("faiss-cpu", "an approximate index (setting index, extra embedscope[ann])") from e
    return faiss


@contextmanager
def _threads(faiss: Any, threads: int | None) -> Iterator[None]:
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads or before)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _prepared(vectors: np.ndarray, similarity: str) -> np.ndarray:
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if similarity == "cosine":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))
    elif similarity != "dot":
        raise ValueError(f"Unknown similarity {similarity!r}: use 'cosine' or 'dot'")
    return np.ascontiguousarray(x, dtype=np.float32)


def build_index(
    doc_embeddings: np.ndarray, spec: HNSWIndex | IVFPQIndex, similarity: str, *, threads: int | None = 1
) -> Any:
    """A faiss index over the documents (inner product on the vectors, normalised for cosine), the spec's search
    parameters set. Built with ``threads`` threads: one (the default) gives the same index on every build; None
    uses faiss's own count (faster, and an HNSW graph may then differ between builds)."""
    faiss = _faiss()
    docs = _prepared(doc_embeddings, similarity)
    n, dims = docs.shape
    with _threads(faiss, threads):
        if isinstance(spec, HNSWIndex):
            index = faiss.IndexHNSWFlat(dims, spec.M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = spec.ef_construction
            index.hnsw.efSearch = spec.ef_search
        else:
            if dims % spec.m:
                raise ConfigError(f"index ivfpq option m={spec.m}: must divide the vectors' {dims} dimensions")
            if n < spec.nlist or n < 2**spec.nbits:
                raise ConfigError(
                    f"index ivfpq: nlist={spec.nlist} and nbits={spec.nbits} need at least "
                    f"{max(spec.nlist, 2**spec.nbits)} documents to train on, and the corpus has {n}"
                )
            quantizer = faiss.IndexFlatIP(dims)
            index = faiss.IndexIVFPQ(quantizer, dims, spec.nlist, spec.m, spec.nbits, faiss.METRIC_INNER_PRODUCT)
            for clustering in (index.cp, index.pq.cp):  # seeded k-means; too few points is our check above
                clustering.seed = spec.seed
                clustering.min_points_per_centroid = 1
            index.train(docs)
            index.nprobe = spec.nprobe
        index.add(docs)
    return index


def index_search(
    index: Any, query_embeddings: np.ndarray, top_k: int, similarity: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_index, scores)`` of each query's top ``top_k`` in a faiss index (−1 / −inf where it found fewer),
    float64 scores holding faiss's float32 inner products (each query's search is independent of the threads)."""
    k = min(top_k, index.ntotal)
    if k == 0 or len(query_embeddings) == 0:
        return np.zeros((len(query_embeddings), 0), dtype=np.int64), np.zeros((len(query_embeddings), 0))
    scores, ids = index.search(_prepared(query_embeddings, similarity), k)
    scores = scores.astype(np.float64)
    scores[ids < 0] = -np.inf
    return ids.astype(np.int64), scores


def ann_search(
    query_embeddings: np.ndarray,
    doc_embeddings: np.ndarray,
    spec: HNSWIndex | IVFPQIndex,
    *,
    top_k: int,
    similarity: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Build the index on the documents and search it: ``(doc_index, scores)`` as :func:`index_search`."""
    return index_search(build_index(doc_embeddings, spec, similarity), query_embeddings, top_k, similarity)


def index_bytes(index: Any) -> int:
    """The serialised size of a faiss index, in bytes."""
    return int(_faiss().serialize_index(index).nbytes)


def recall_of_exact(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """``mean_q |A_q ∩ E_q| / |E_q|`` over the first ``k`` columns (−1 slots ignored; queries whose exact list is
    empty are left out).

    >>> recall_of_exact(np.array([[1, 2, 3]]), np.array([[3, 1, 4]]), 3)
    0.6666666666666666
    """
    total, n = 0.0, 0
    for a, e in zip(found[:, :k], exact[:, :k]):
        truth = set(e[e >= 0].tolist())
        if truth:
            total += len(truth & set(a[a >= 0].tolist())) / len(truth)
            n += 1
    return total / n if n else 1.0
