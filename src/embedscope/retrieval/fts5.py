r"""Full-text search with SQLite FTS5, ranked by FTS5's built-in bm25 (k1=1.2, b=0.75).

The corpus goes into an in-memory FTS5 table. A query becomes a safe MATCH expression: every
word (``\w+``) of the query text is double-quoted (so FTS5 operators and punctuation in user text
are inert) and the words are joined with ``OR`` (``match="any"``, the default, like a search box) or
``AND`` (``match="all"``, FTS5's own default). A query can instead be given as a list of
keywords (``keywords={query_id: [...]}``): whitespace-separated terms, each quoted (a term with
punctuation inside, such as ``x-ray``, is an FTS5 phrase) and joined with ``OR``, as in the
fastbook study. Results
come back ``ORDER BY rank``; the score is ``-rank`` so that higher is better. A query that
matches nothing gets no documents.

>>> from embedscope.types import Corpus, Queries
>>> corpus = Corpus(("d1", "d2"), ("cats purr", "dogs bark"))
>>> run = FTS5Retriever().retrieve(Queries(("q",), ('dogs "OR" NEAR(',)), corpus, SearchOptions(top_k=5))
>>> [corpus.ids[i] for i in run.doc_index[0] if i >= 0]
['d2']
>>> text_expression("NEAR(x-ray vision")
'"NEAR" OR "x" OR "ray" OR "vision"'
>>> match_expression(["x-ray  vision", "-"])
'"x-ray" OR "vision"'
>>> quote_term('a"b')
'"a""b"'
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.retrieval.base import SearchOptions, run_from_rows
from embedscope.types import Corpus, Queries, RankedRun

_WORD = re.compile(r"\w", re.UNICODE)


def quote_term(term: str) -> str:
    """One FTS5 string literal: the term in double quotes, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: Iterable[str], operator: str = "OR") -> str:
    """Terms (split on whitespace) quoted and joined with ``operator``; terms without a word character are dropped."""
    words = [w for t in terms for w in t.split() if _WORD.search(w)]
    return f" {operator} ".join(quote_term(w) for w in words)


def text_expression(text: str, operator: str = "OR") -> str:
    r"""The words (``\w+``) of free text, quoted and joined with ``operator``."""
    return f" {operator} ".join(quote_term(w) for w in re.findall(r"\w+", text))


def keyword_terms(keywords: str | Sequence[str]) -> list[str]:
    """The fastbook study's keyword cleaning: strip double quotes, split on whitespace, strip commas.

    >>> keyword_terms('"neural network, GPU"')
    ['neural', 'network', 'GPU']
    """
    text = keywords if isinstance(keywords, str) else " ".join(keywords)
    return [w.strip(",") for w in text.replace('"', "").split() if w.strip(",")]


@dataclass(frozen=True)
class FTS5Retriever:
    """SQLite FTS5 search; see the module docstring.

    Args:
        tokenize: the FTS5 tokenizer, e.g. ``unicode61`` (default) or ``porter unicode61``.
        match: ``any`` (terms joined with OR) or ``all`` (AND) for query texts.
        keywords: per query id, keywords used instead of the query text (always OR).
    """

    tokenize: str = "unicode61"
    match: str = "any"
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    name: str = "fts5"

    def __post_init__(self) -> None:
        if self.match not in ("any", "all"):
            raise UnknownNameError("FTS5 match mode", self.match, ("any", "all"))
        if not re.fullmatch(r"[\w ]+", self.tokenize):
            raise ConfigError(f"FTS5 tokenize={self.tokenize!r}: use tokenizer names such as 'porter unicode61'")
        object.__setattr__(self, "keywords", {q: tuple(keyword_terms(k)) for q, k in self.keywords.items()})

    @property
    def fingerprint(self) -> str:
        params = {"tokenize": self.tokenize, "match": self.match, "keywords": sorted(self.keywords.items())}
        return hashlib.sha256(json.dumps(params).encode()).hexdigest()[:16]

    @property
    def revision(self) -> str:
        return f"{self.tokenize.replace(' ', '-')}_{self.match}_{self.fingerprint[:8]}"

    def expression(self, query_id: str, text: str) -> str:
        """The MATCH expression for one query."""
        if query_id in self.keywords:
            return match_expression(self.keywords[query_id], "OR")
        return text_expression(text, "OR" if self.match == "any" else "AND")

    def index(self, corpus: Corpus) -> FTS5Index:
        return FTS5Index.build(corpus.texts, self.tokenize)

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        index = self.index(corpus)
        try:
            rows = [index.search(self.expression(q, t), options.top_k) for q, t in zip(queries.ids, queries.texts)]
        finally:
            index.close()
        return run_from_rows(tuple(queries.ids), tuple(corpus.ids), rows)


class FTS5Index:
    """An in-memory FTS5 table over a list of texts (rowid = position + 1)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    @classmethod
    def build(cls, texts: Sequence[str], tokenize: str = "unicode61") -> FTS5Index:
        con = sqlite3.connect(":memory:")
        try:
            con.execute(f"CREATE VIRTUAL TABLE passages USING fts5(text, tokenize='{tokenize}')")
        except sqlite3.OperationalError as e:
            con.close()
            raise ConfigError(f"SQLite FTS5 cannot build a table with tokenize={tokenize!r}: {e}") from e
        con.executemany("INSERT INTO passages(rowid, text) VALUES (?, ?)", ((i + 1, t) for i, t in enumerate(texts)))
        con.execute("INSERT INTO passages(passages) VALUES ('optimize')")
        con.commit()
        return cls(con)

    def search(self, expression: str, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, scores)`` of the best ``top_k`` matches; empty for an empty expression."""
        if not expression:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = self.connection.execute(
            "SELECT rowid, rank FROM passages WHERE passages MATCH ? ORDER BY rank LIMIT ?", (expression, top_k)
        ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ids, ranks = zip(*rows)
        return np.asarray(ids, dtype=np.int64) - 1, -np.asarray(ranks, dtype=np.float64)

    def close(self) -> None:
        self.connection.close()
