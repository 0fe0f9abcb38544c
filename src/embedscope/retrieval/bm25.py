"""BM25 lexical retrieval with bm25s (its numba backend when numba is installed).

The variants are bm25s' (Kamphuis et al., 2020): ``lucene`` (default), ``robertson``, ``atire``,
``bm25l`` and ``bm25+``. Texts are tokenized by bm25s' tokenizer: lowercased, split on
``\\w\\w+``, English stopwords removed and words stemmed with PyStemmer's Snowball stemmer
(all configurable). Documents that share no term with the query are not returned (they score 0,
or only BM25L's / BM25+'s constant for absent terms), so a query may get fewer than ``top_k``
documents, as from a search engine.

>>> from embedscope.settings import RunSettings
>>> from embedscope.types import Corpus, Queries
>>> corpus = Corpus(("d1", "d2"), ("cats purr", "dogs bark"))
>>> run = BM25Retriever().retrieve(Queries(("q",), ("barking dog",)), corpus, RunSettings(top_k=10).search_options())
>>> [corpus.ids[i] for i in run.doc_index[0] if i >= 0]
['d2']
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.retrieval.base import SearchOptions, assemble_groups, filter_groups
from embedscope.types import Corpus, Queries, RankedRun

logger = logging.getLogger(__name__)

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@dataclass(frozen=True)
class BM25Retriever:
    """BM25 over bm25s; see the module docstring for the variants and tokenization.

    Args:
        method: lucene | robertson | atire | bm25l | bm25+.
        k1, b: term-frequency saturation and length normalisation.
        delta: the lower bound of BM25L and BM25+ (ignored by the others).
        lower: lowercase before splitting.
        stopwords: ``"en"`` (bm25s' English list), ``"none"``, or a list of words.
        stemmer: a PyStemmer (Snowball) language such as ``"english"``, or ``"none"``.
        backend: ``auto``, ``numba`` or ``numpy``. ``auto`` picks numba (about 100x faster per query
            on large corpora, but about 10 s of JIT compilation per process) when the work is large
            enough to repay the compilation (queries x documents > 1.5e8), and numpy otherwise.
        n_threads: query threads (``-1``: one per CPU).
    """

    method: str = "lucene"
    k1: float = 1.5
    b: float = 0.75
    delta: float = 0.5
    lower: bool = True
    stopwords: str | tuple[str, ...] = "en"
    stemmer: str = "english"
    backend: str = "auto"
    n_threads: int = -1
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.method not in BM25_METHODS:
            raise UnknownNameError("BM25 method", self.method, BM25_METHODS)
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ConfigError(f"BM25 needs k1 >= 0 and 0 <= b <= 1 (got k1={self.k1}, b={self.b})")
        if self.backend not in ("auto", "numba", "numpy"):
            raise UnknownNameError("BM25 backend", self.backend, ("auto", "numba", "numpy"))
        if isinstance(self.stopwords, list):
            object.__setattr__(self, "stopwords", tuple(self.stopwords))
        if not self.name:
            object.__setattr__(self, "name", f"bm25-{self.method}")

    @property
    def fingerprint(self) -> str:
        params = {k: v for k, v in asdict(self).items() if k not in ("name", "backend", "n_threads")}
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def revision(self) -> str:
        return f"k1={self.k1}_b={self.b}_{self.fingerprint[:8]}"

    def tokenizer(self) -> Any:
        """A fresh bm25s tokenizer with this retriever's options."""
        from bm25s.tokenization import Tokenizer

        return Tokenizer(lower=self.lower, stopwords=_stopwords(self.stopwords), stemmer=_stemmer(self.stemmer))

    def index(self, corpus: Corpus, show_progress: bool = False, n_queries: int | None = None) -> BM25Index:
        """Tokenize and index ``corpus``; the index answers any number of query sets.

        ``n_queries`` (when known) lets ``backend="auto"`` choose between numba and numpy.
        """
        import bm25s

        quiet = logging.getLogger("bm25s")
        if quiet.level == logging.DEBUG:  # bm25s sets DEBUG on import, which floods any root handler
            quiet.setLevel(logging.WARNING)
        tokenizer = self.tokenizer()
        tokens = tokenizer.tokenize(list(corpus.texts), return_as="tuple", show_progress=show_progress)
        backend = _backend(self.backend, len(corpus), n_queries)
        model = bm25s.BM25(method=self.method, k1=self.k1, b=self.b, delta=self.delta, backend=backend)
        model.index(tokens, show_progress=show_progress)
        return BM25Index(self, tokenizer, model, len(corpus))

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        """Index the corpus, then search every query (top ``options.top_k``). With ``options.filter_field``
        the index still holds the whole corpus (its statistics: idf, average length), and each query's
        documents are those of its own value: bm25s' scores of the others are masked to 0 and dropped."""
        index = self.index(corpus, options.show_progress, n_queries=len(queries))
        if options.filter_field is None:
            doc_index, scores = index.search(list(queries.texts), options.top_k, options.show_progress)
            return RankedRun(tuple(queries.ids), tuple(corpus.ids), doc_index, scores)
        parts = []
        for group in filter_groups(queries, corpus, options.filter_field):
            mask = np.zeros(len(corpus), dtype=bool)
            mask[group.doc_rows] = True
            texts = [queries.texts[i] for i in group.query_rows.tolist()]
            parts.append((group, *index.search(texts, options.top_k, options.show_progress, mask=mask)))
        return assemble_groups(queries, corpus, parts)


@dataclass
class BM25Index:
    """A corpus indexed by bm25s, with the tokenizer that built its vocabulary."""

    retriever: BM25Retriever
    tokenizer: Any
    model: Any
    n_documents: int

    def search(
        self, queries: list[str], top_k: int, show_progress: bool = False, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(doc_index, scores)`` ``[n_queries, min(top_k, n_docs)]``; −1 / −inf where nothing matched.
        With ``mask`` (bool per document) only the documents it marks can be returned."""
        k = min(top_k, self.n_documents)
        if k == 0 or not queries:
            return np.full((len(queries), k), -1, dtype=np.int64), np.full((len(queries), k), -np.inf)
        ids = self.tokenizer.tokenize(queries, update_vocab=False, return_as="ids", show_progress=show_progress)
        threads = (os.cpu_count() or 1) if self.retriever.n_threads < 0 else self.retriever.n_threads
        weights = None if mask is None else mask.astype(np.float32)
        docs, scores = self.model.retrieve(
            ids, k=k, show_progress=show_progress, n_threads=threads, weight_mask=weights
        )
        doc_index = np.asarray(docs, dtype=np.int64)
        values = np.asarray(scores, dtype=np.float32).astype(np.float64)
        if self.retriever.method in ("bm25l", "bm25+"):  # absent terms add a constant: test membership
            no_match = ~self._contains_a_query_term(ids, doc_index)
        else:
            no_match = values == 0.0
        if mask is not None:
            no_match |= ~mask[doc_index]
        doc_index[no_match] = -1
        values[no_match] = -np.inf
        return doc_index, values

    def _contains_a_query_term(self, query_ids: list[list[int]], doc_index: np.ndarray) -> np.ndarray:
        """Whether each retrieved document holds at least one of its query's tokens (from the CSC index)."""
        indptr, indices = self.model.scores["indptr"], self.model.scores["indices"]
        out = np.zeros(doc_index.shape, dtype=bool)
        for i, tokens in enumerate(query_ids):
            spans = [indices[indptr[t] : indptr[t + 1]] for t in set(tokens) if 0 <= t < len(indptr) - 1]
            if spans:
                out[i] = np.isin(doc_index[i], np.concatenate(spans))
        return out


NUMBA_WORTH_IT = 1.5e8
"""queries x documents above which numba's ~10 s JIT pays off: bm25s' numpy backend scores about
145 queries/s on 100k documents (performance-anchors.md), i.e. ~6.9e-8 s per query-document."""


def _backend(backend: str, n_documents: int, n_queries: int | None) -> str:
    if backend != "auto":
        return backend
    import importlib.util

    if n_queries is not None and n_queries * n_documents <= NUMBA_WORTH_IT:
        return "numpy"
    if importlib.util.find_spec("numba") is None:
        logger.info("numba is not installed: BM25 uses bm25s' numpy backend (slower)")
        return "numpy"
    return "numba"


def _stopwords(stopwords: str | tuple[str, ...]) -> Any:
    if isinstance(stopwords, tuple):
        return list(stopwords)
    if stopwords.lower() in ("none", "", "false"):
        return None
    return stopwords


def _stemmer(language: str) -> Any:
    if language.lower() in ("none", "", "false"):
        return None
    import Stemmer

    languages = Stemmer.algorithms()
    if language.lower() not in languages:
        raise UnknownNameError("stemmer language", language, languages)
    return Stemmer.Stemmer(language.lower())
