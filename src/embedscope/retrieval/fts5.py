r"""Full-text search with SQLite FTS5, ranked by FTS5's built-in bm25 (k1=1.2, b=0.75).

The corpus goes into an in-memory FTS5 table. A query becomes a safe MATCH expression: every
word (``\w+``) of the query text is double-quoted (so FTS5 operators and punctuation in user text
are inert) and the words are joined with ``OR`` (``match="any"``, the default, like a search box) or
``AND`` (``match="all"``, FTS5's own default). A query can instead be given as a list of
keywords (``keywords={query_id: [...]}``): whitespace-separated terms, each quoted (a term with
punctuation inside, such as ``x-ray``, is an FTS5 phrase) and joined with ``OR``, as in the
fastbook study; a QA folder's per-stage keywords (the queries' metadata field ``query:fts5``,
:func:`embedscope.data.qa.stage_query_field`) act the same way for the queries the retriever has none for. Results
come back ``ORDER BY rank``; the score is ``-rank`` so that higher is better. A query that
matches nothing gets no documents.

>>> from embedscope.settings import RunSettings
>>> from embedscope.types import Corpus, Queries
>>> corpus = Corpus(("d1", "d2"), ("cats purr", "dogs bark"))
>>> run = FTS5Retriever().retrieve(Queries(("q",), ('dogs "OR" NEAR(',)), corpus, RunSettings(top_k=5).search_options())
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

from embedscope.data.qa import stage_query_field
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.retrieval.base import SearchOptions, filter_groups, filter_values, run_from_rows
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

    def expression(self, query_id: str, text: str, stage_query: str | None = None) -> str:
        """The MATCH expression for one query: the retriever's own keywords for it, else the data's keywords for
        full-text stages (``stage_query``, a QA folder's ``fts_keywords.csv``), else its text."""
        if query_id in self.keywords:
            return match_expression(self.keywords[query_id], "OR")
        if stage_query is not None:
            return match_expression(keyword_terms(stage_query), "OR")
        return text_expression(text, "OR" if self.match == "any" else "AND")

    def index(self, corpus: Corpus) -> FTS5Index:
        return FTS5Index.build(corpus.texts, self.tokenize)

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        """Each query's top ``options.top_k`` passages. With ``options.filter_field`` the table has the
        field as a second indexed column (the fastbook study's ``fts5(chapter, text)``) and each query
        adds ``AND <field> = ?``: one table, so FTS5's statistics come from the whole corpus."""
        field = options.filter_field
        if field is None:
            index = self.index(corpus)
            values: list[str | None] = [None] * len(queries)
        else:
            filter_groups(queries, corpus, field)  # the checks: both sides have the field, every query a value
            index = FTS5Index.build(corpus.texts, self.tokenize, (field, filter_values(corpus, field, "documents")))
            values = filter_values(queries, field, "queries")
        stage_queries = queries.metadata.get(stage_query_field("fts5"), (None,) * len(queries))
        try:
            rows = [
                index.search(self.expression(q, t, s), options.top_k, value)
                for q, t, s, value in zip(queries.ids, queries.texts, stage_queries, values)
            ]
        finally:
            index.close()
        return run_from_rows(tuple(queries.ids), tuple(corpus.ids), rows)


def quote_identifier(name: str) -> str:
    """An SQL identifier in double quotes (inner quotes doubled), so a keyword such as ``group`` is a plain name.

    >>> quote_identifier("group"), quote_identifier('a"b')
    ('"group"', '"a""b"')
    """
    return '"' + name.replace('"', '""') + '"'


def filter_column(field: str) -> str:
    """The FTS5 column that holds a filter field: the field's own name when it is a plain identifier other
    than ``text``, ``rank``, ``rowid`` or the table's name, else ``filter_value`` (the name does not change any
    score). The column is always quoted as an identifier in SQL, so SQL keywords (``group``, ``order``) work.

    >>> filter_column("chapter"), filter_column("a-b"), filter_column("group")
    ('chapter', 'filter_value', 'group')
    """
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", field) and field.lower() not in (
        "text",
        "rank",
        "rowid",
        "passages",
    )
    return field if plain else "filter_value"


class FTS5Index:
    """An in-memory FTS5 table over a list of texts (rowid = position + 1); with a filter, a second
    indexed column before the text holds each passage's value (``fts5(chapter, text)``)."""

    def __init__(self, connection: sqlite3.Connection, column: str | None = None) -> None:
        self.connection = connection
        self.column = column

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        tokenize: str = "unicode61",
        filter_by: tuple[str, Sequence[str | None]] | None = None,
    ) -> FTS5Index:
        con = sqlite3.connect(":memory:")
        column = None if filter_by is None else quote_identifier(filter_column(filter_by[0]))
        columns = "text" if column is None else f"{column}, text"
        try:
            con.execute(f"CREATE VIRTUAL TABLE passages USING fts5({columns}, tokenize='{tokenize}')")
        except sqlite3.OperationalError as e:
            con.close()
            field = "" if filter_by is None else f" and filter field {filter_by[0]!r}"
            raise ConfigError(f"SQLite FTS5 cannot build a table with tokenize={tokenize!r}{field}: {e}") from e
        if filter_by is None:
            rows: Iterable[tuple] = ((i + 1, t) for i, t in enumerate(texts))
            con.executemany("INSERT INTO passages(rowid, text) VALUES (?, ?)", rows)
        else:
            rows = ((i + 1, v, t) for i, (v, t) in enumerate(zip(filter_by[1], texts)))
            con.executemany(f"INSERT INTO passages(rowid, {column}, text) VALUES (?, ?, ?)", rows)
        con.execute("INSERT INTO passages(passages) VALUES ('optimize')")
        con.commit()
        return cls(con, column)

    def search(self, expression: str, top_k: int, value: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, scores)`` of the best ``top_k`` matches (with a filter column: among the passages
        whose value is ``value``); empty for an empty expression."""
        if not expression:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        where = "passages MATCH ?" if self.column is None else f"passages MATCH ? AND {self.column} = ?"
        args: tuple[str | None, ...] = (expression,) if self.column is None else (expression, value)
        rows = self.connection.execute(
            f"SELECT rowid, rank FROM passages WHERE {where} ORDER BY rank LIMIT ?", (*args, top_k)
        ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ids, ranks = zip(*rows)
        return np.asarray(ids, dtype=np.int64) - 1, -np.asarray(ranks, dtype=np.float64)

    def close(self) -> None:
        self.connection.close()
