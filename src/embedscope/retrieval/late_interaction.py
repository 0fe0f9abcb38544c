"""Late interaction (ColBERT): token-level embeddings scored with MaxSim.

``MaxSim(q, d) = sum over query tokens of max over document tokens of <q_i, d_j>``.

Two ways to apply it, both exact float32 and memory-bounded:

- :func:`maxsim_top_k` — every query against the whole corpus (small corpora), documents in
  length-sorted chunks, queries in blocks so the score buffer stays under ``budget_mb``; padding
  document tokens repeat a real token, so padding never changes a max.
- :func:`maxsim_candidates` — only given (query, document) pairs (reranking). It works
  document-major: for each distinct candidate document, one matmul against the stacked queries
  that have it as a candidate, so no document embedding is ever gathered or copied.

Token embeddings come from a :class:`TokenEncoder`: a ColBERT / PyLate / Stanford checkpoint
through sentence-transformers' ``MultiVectorEncoder`` (which applies the checkpoint's query and
document markers, query length and expansion, projection, skiplist and normalisation), or any
sentence-transformers model's token outputs, L2-normalised (the MiniLM stand-in).

>>> import numpy as np
>>> q = [np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)]
>>> d = [np.array([[1.0, 0.0]], dtype=np.float32), np.array([[0.6, 0.8], [0.0, 1.0]], dtype=np.float32)]
>>> maxsim_top_k(q, [d], top_k=2)[1].round(3).tolist()
[[1.6, 1.0]]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import ModelBase
from embedscope.models.device import compute_device, default_batch_size, free_memory_mb, with_oom_halving
from embedscope.models.fingerprint import hash_dict, short
from embedscope.retrieval.base import SearchOptions, search_each_group, unique_candidates
from embedscope.types import Corpus, Queries, RankedRun, Role

logger = logging.getLogger(__name__)


@runtime_checkable
class TokenEncoder(Protocol):
    """Texts → one float32 ``[n_tokens, dim]`` matrix per text."""

    # Read-only properties: encoders expose these as properties of ModelBase.
    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def encode_tokens(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> list[np.ndarray]: ...


# ---------------------------------------------------------------------------------------------
# MaxSim kernels


def _padded_queries(queries: Sequence[np.ndarray]):  # -> torch.Tensor [n, Lq, dim], zero padding
    import torch

    length = max((len(q) for q in queries), default=0)
    dim = queries[0].shape[1] if queries else 0
    out = torch.zeros((len(queries), max(length, 1), dim), dtype=torch.float32)
    for i, q in enumerate(queries):
        out[i, : len(q)] = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32))
    return out


def _padded_documents(docs: Sequence[np.ndarray]):  # -> [n, L, dim]; padding repeats the doc's first token
    import torch

    length = max(len(d) for d in docs)
    out = np.empty((len(docs), length, docs[0].shape[1]), dtype=np.float32)
    for i, d in enumerate(docs):
        out[i, : len(d)] = d
        if len(d) < length:
            out[i, len(d) :] = d[0]
    return torch.from_numpy(out)


def _check_tokens(matrices: Sequence[np.ndarray], what: str) -> None:
    for i, m in enumerate(matrices):
        if m.ndim != 2 or len(m) == 0:
            raise ValueError(f"{what} {i}: token embeddings must be a non-empty [n_tokens, dim] matrix, got {m.shape}")


def maxsim_top_k(
    query_tokens: Sequence[np.ndarray],
    document_chunks: Iterable[Sequence[np.ndarray]],
    *,
    top_k: int = 1000,
    budget_mb: float = 256.0,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Exhaustive MaxSim: each query's top ``top_k`` over a corpus given as consecutive chunks.

    Returns ``(doc_index, scores)`` ``[n_queries, min(top_k, n_docs)]``, sorted by score. On an
    accelerator (``device``) the same float32 operations run there, the budget set by its free memory.
    """
    import torch

    _check_tokens(query_tokens, "query")
    budget_mb = free_memory_mb(device) or budget_mb
    q_all = _padded_queries(query_tokens).to(device)
    n_q, l_q = q_all.shape[0], q_all.shape[1]
    best: tuple[torch.Tensor, torch.Tensor] | None = None  # (scores, doc indices) kept so far
    offset = 0
    with torch.inference_mode():
        for chunk in document_chunks:
            if not len(chunk):
                continue
            _check_tokens(chunk, "document")
            scores = torch.empty((n_q, len(chunk)), dtype=torch.float32, device=device)
            order = np.argsort([len(d) for d in chunk], kind="stable")
            for group in _length_groups(order, [len(d) for d in chunk], l_q, n_q, budget_mb):
                docs = _padded_documents([chunk[i] for i in group])
                n_d, l_d, dim = docs.shape
                q_block = max(1, int(budget_mb * 2**20 / 4 / (l_q * n_d * l_d)))
                cols = torch.from_numpy(np.asarray(group, dtype=np.int64)).to(device)
                if device == "cpu":
                    flat_np = docs.reshape(n_d * l_d, dim).numpy().T  # numpy (OpenBLAS) sgemm: faster here
                else:
                    flat_dev = docs.reshape(n_d * l_d, dim).to(device).T
                for s in range(0, n_q, q_block):
                    q = q_all[s : s + q_block]
                    flat_q = q.reshape(-1, dim)
                    product = torch.from_numpy(flat_q.numpy() @ flat_np) if device == "cpu" else flat_q @ flat_dev
                    sim = product.view(q.shape[0], l_q, n_d, l_d)
                    scores[s : s + q.shape[0]].index_copy_(1, cols, sim.amax(dim=3).sum(dim=1))
            k = min(top_k, len(chunk))
            values, idx = torch.topk(scores, k, dim=1)
            idx = idx + offset
            if best is not None:
                values, idx = torch.cat([best[0], values], 1), torch.cat([best[1], idx], 1)
                values, pos = torch.topk(values, min(top_k, values.shape[1]), dim=1)
                idx = torch.gather(idx, 1, pos)
            best = (values, idx)
            offset += len(chunk)
    if best is None:
        return np.zeros((n_q, 0), dtype=np.int64), np.zeros((n_q, 0))
    best_scores, best_idx = best
    return best_idx.cpu().numpy().astype(np.int64), best_scores.cpu().numpy().astype(np.float64)


def _length_groups(order: np.ndarray, lengths: list[int], l_q: int, n_q: int, budget_mb: float) -> Iterator[list[int]]:
    """Consecutive runs of length-sorted documents whose padded block fits the budget together with a
    block of up to 64 queries (large enough for efficient matmuls)."""
    group: list[int] = []
    cap = max(1, int(budget_mb * 2**20 / 4 / max(l_q, 1) / max(1, min(n_q, 64))))  # doc tokens per group
    for i in order.tolist():
        if group and (len(group) + 1) * lengths[i] > cap:
            yield group
            group = []
        group.append(i)
    if group:
        yield group


def maxsim_candidates(
    query_tokens: Sequence[np.ndarray],
    doc_tokens: Sequence[np.ndarray],
    candidates: np.ndarray,
    device: str = "cpu",
) -> np.ndarray:
    """MaxSim of each query (row) with its candidate documents (``candidates[i, j]`` indexes ``doc_tokens``).

    Empty slots (−1) score −inf. Document-major: one matmul per distinct candidate document (in
    numpy on the CPU, in torch on an accelerator).
    """
    _check_tokens(query_tokens, "query")
    q_all = _padded_queries(query_tokens)
    n_q, l_q, dim = q_all.shape
    flat = candidates.ravel()
    valid = np.flatnonzero(flat >= 0)
    out = np.full(flat.shape, -np.inf, dtype=np.float64)
    if not len(valid):
        return out.reshape(candidates.shape)
    order = valid[np.argsort(flat[valid], kind="stable")]
    docs_sorted = flat[order]
    cuts = np.flatnonzero(np.diff(docs_sorted)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(order)]
    rows = order // candidates.shape[1]
    q_np = q_all.numpy()
    q_dev = None if device == "cpu" else q_all.to(device)
    for s, e in zip(starts.tolist(), ends.tolist()):
        d = doc_tokens[int(docs_sorted[s])]
        if d.ndim != 2 or len(d) == 0:
            raise ValueError(f"document {int(docs_sorted[s])}: empty token embeddings")
        d32 = np.ascontiguousarray(d, dtype=np.float32)
        if q_dev is None:
            sim = q_np[rows[s:e]].reshape(-1, dim) @ d32.T
            out[order[s:e]] = sim.max(axis=1).reshape(e - s, l_q).sum(axis=1, dtype=np.float32)
        else:
            import torch

            picked = q_dev[torch.from_numpy(rows[s:e]).to(device)].reshape(-1, dim)
            sim = picked @ torch.from_numpy(d32).to(device).T
            out[order[s:e]] = sim.amax(dim=1).reshape(e - s, l_q).sum(dim=1).cpu().numpy()
    return out.reshape(candidates.shape)


# ---------------------------------------------------------------------------------------------
# Token encoders


class SentenceTransformerTokens(ModelBase):
    """Token outputs of any sentence-transformers model, L2-normalised per token (ColBERT stand-in)."""

    backend = "st-tokens"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool = True,
        revision: str | None = None,
        device: str | None = "auto",
        dtype: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        self._place(device, dtype)
        self.model = self._load_torch_model(SentenceTransformer(str(path), device=self.device))
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        self.normalize = normalize
        self.path = str(path)
        self.name = f"{name or Path(str(path)).name}-tokens"
        self.revision = revision or "tokens"

    def settings(self) -> dict:
        return {"path": self.path, "max": self.model.max_seq_length, "normalize": self.normalize, "kind": "st-tokens"}

    def encode_tokens(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> list[np.ndarray]:
        import torch

        def run(bs: int) -> list:
            return self.model.encode(
                list(texts),
                output_value="token_embeddings",
                batch_size=bs,
                show_progress_bar=show_progress,
                convert_to_numpy=False,
            )

        out = with_oom_halving(run, batch_size or default_batch_size(self.device), what=f"{self.name}: encoding")
        if self.normalize:
            out = [torch.nn.functional.normalize(t.float(), p=2, dim=-1) for t in out]
        return [t.float().cpu().numpy() for t in out]


class MultiVectorTokens(ModelBase):
    """A ColBERT / PyLate / Stanford checkpoint through sentence-transformers' ``MultiVectorEncoder``."""

    backend = "multi-vector"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        query_length: int | None = None,
        document_length: int | None = None,
        device: str | None = "auto",
        dtype: str | None = None,
    ) -> None:
        from sentence_transformers import MultiVectorEncoder

        self._place(device, dtype)
        self.model = self._load_torch_model(
            MultiVectorEncoder(
                str(path), device=self.device, revision=revision if not Path(str(path)).exists() else None
            )
        )
        transformer = self.model[0]
        if query_length is not None:
            transformer.query_length = query_length
        if document_length is not None:
            transformer.document_length = document_length
        self.path = str(path)
        self.name = name or str(path)
        self.revision = revision or "local"

    def settings(self) -> dict:
        transformer = self.model[0]
        return {
            "path": self.path,
            "q": getattr(transformer, "query_length", None),
            "d": getattr(transformer, "document_length", None),
            "kind": "mve",
        }

    def encode_tokens(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> list[np.ndarray]:
        encode = self.model.encode_query if role == "query" else self.model.encode_document
        out = with_oom_halving(
            lambda bs: encode(list(texts), batch_size=bs, show_progress_bar=show_progress, convert_to_numpy=True),
            batch_size or default_batch_size(self.device),
            what=f"{self.name}: encoding",
        )
        return [np.asarray(t, dtype=np.float32) for t in out]


def is_multi_vector_checkpoint(folder: Path) -> bool:
    """A ColBERT-style checkpoint: PyLate / native MultiVectorEncoder config, or Stanford ``artifact.metadata``."""
    import json

    if (folder / "artifact.metadata").is_file():
        return True
    config = folder / "config_sentence_transformers.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return False
        if data.get("model_type") == "MultiVectorEncoder" or "query_prefix" in data or "document_length" in data:
            return True
    modules = folder / "modules.json"
    return modules.is_file() and "pylate" in modules.read_text(encoding="utf-8")


def load_token_encoder(
    spec: str,
    *,
    max_seq_length: int | None = None,
    query_length: int | None = None,
    document_length: int | None = None,
    device: str | None = "auto",
    dtype: str | None = None,
) -> TokenEncoder:
    """A token encoder for ``spec``: a ColBERT checkpoint folder, a model alias or folder (its token
    outputs), or a hub id (online)."""
    from embedscope.models.specs import ALIASES, alias_path

    key = spec.strip().lower()
    if key in ALIASES:
        alias = ALIASES[key]
        if alias.backend != "sentence-transformers":
            raise ConfigError(f"alias {key!r} ({alias.backend}) has no token outputs; use 'minilm' or a ColBERT folder")
        return SentenceTransformerTokens(
            alias_path(key), name=alias.name, max_seq_length=max_seq_length, device=device, dtype=dtype
        )
    path = Path(spec).expanduser()
    if path.is_dir():
        if is_multi_vector_checkpoint(path):
            return MultiVectorTokens(
                path, query_length=query_length, document_length=document_length, device=device, dtype=dtype
            )
        return SentenceTransformerTokens(path, max_seq_length=max_seq_length, device=device, dtype=dtype)
    if path.exists():
        raise ConfigError(f"{spec}: a ColBERT model must be a folder (checkpoint) or a model alias")
    from embedscope.hub import hub_offline, looks_like_hub_id, offline_reason

    if not looks_like_hub_id(spec):
        raise ConfigError(f"{spec}: no such file or folder (nor a model alias or hub id owner/name)")
    if hub_offline():
        raise ConfigError(f"{spec}: not a local folder, and the Hugging Face hub is offline ({offline_reason()})")
    return MultiVectorTokens(
        spec, name=spec, query_length=query_length, document_length=document_length, device=device, dtype=dtype
    )


# ---------------------------------------------------------------------------------------------
# Retriever / reranker


class LateInteraction:
    """ColBERT-style retrieval and reranking with a :class:`TokenEncoder`.

    As a retriever it scores every document (exact, for small corpora: about 0.1 s per query per
    10k documents on 2 cores); as a reranker it scores only each query's candidates.
    """

    def __init__(
        self,
        encoder: TokenEncoder,
        *,
        doc_chunk_size: int = 2048,
        max_documents: int = 50_000,
        budget_mb: float = 256.0,
        name: str | None = None,
    ) -> None:
        self.encoder = encoder
        self.doc_chunk_size = doc_chunk_size
        self.max_documents = max_documents
        self.budget_mb = budget_mb
        self.name = name or f"colbert-{encoder.name}"
        self.revision = encoder.revision
        self.fingerprint = short(hash_dict({"encoder": encoder.fingerprint, "kind": "maxsim"}))

    def _encode(self, texts: Sequence[str], role: Role, options: SearchOptions) -> list[np.ndarray]:
        return self.encoder.encode_tokens(
            list(texts), role=role, batch_size=options.batch_size, show_progress=options.show_progress
        )

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        """Exhaustive MaxSim top ``options.top_k``; with ``options.filter_field``, over each query's
        matching documents (:func:`~embedscope.retrieval.base.search_each_group`)."""
        if options.filter_field is not None:
            return search_each_group(self.retrieve, queries, corpus, options)
        if len(corpus) > self.max_documents:
            logger.warning(
                "exhaustive MaxSim over %d documents is slow: rerank a first stage's candidates instead", len(corpus)
            )
        q_tokens = self._encode(queries.texts, "query", options)
        chunks = (
            self._encode(corpus.texts[s : s + self.doc_chunk_size], "document", options)
            for s in range(0, len(corpus), self.doc_chunk_size)
        )
        index, scores = maxsim_top_k(
            q_tokens, chunks, top_k=options.top_k, budget_mb=self.budget_mb, device=compute_device(self.encoder)
        )
        return RankedRun(tuple(queries.ids), tuple(corpus.ids), index, scores)

    def score_candidates(
        self, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
    ) -> np.ndarray:
        out = np.full(candidates.doc_index.shape, -np.inf)
        q_tokens = self._encode(queries.texts, "query", options)
        for rows in _query_blocks(candidates.doc_index, self.max_documents):
            uniq, pos = unique_candidates(candidates.doc_index[rows])
            doc_tokens = self._encode([corpus.texts[i] for i in uniq.tolist()], "document", options)
            out[rows] = maxsim_candidates(
                [q_tokens[i] for i in rows], doc_tokens, pos, device=compute_device(self.encoder)
            )
        return out


def _query_blocks(doc_index: np.ndarray, max_documents: int) -> Iterator[list[int]]:
    """Consecutive query rows whose candidates together hold at most ``max_documents`` distinct documents."""
    block: list[int] = []
    seen: set[int] = set()
    for i, row in enumerate(doc_index):
        docs = set(row[row >= 0].tolist())
        if block and len(seen | docs) > max_documents:
            yield block
            block, seen = [], set()
        block.append(i)
        seen |= docs
    if block:
        yield block
