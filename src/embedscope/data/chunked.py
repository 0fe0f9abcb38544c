"""Retrieval data chunked into passages: the corpus each chunking setting searches, and the relevance it is scored by.

Each document of the corpus is split by :class:`~embedscope.data.documents.ChunkOptions` (documents read from files
are read again, so a notebook's cells reach the paragraph strategies; passage ids are then the ids
:func:`~embedscope.data.documents.chunk_documents` gives, ``<name>-<n>``; otherwise ``<doc id>#<n>``). Each passage
keeps its document's metadata, so filtered search still works. Relevance:

* **by document** (qrels name documents): the qrels stay; a document's score is its best passage's (MaxP, applied
  to the ranked passages by :func:`embedscope.retrieval.passages.best_passage_per_document`), so the metrics are
  those of the same documents at every chunking.
* **by context** (QA data whose relevance is context strings, ``RetrievalData.contexts``): a passage is relevant to
  a question when it holds one of its contexts after ``ftfy.fix_text`` (:func:`holds_context`), recomputed for each
  chunking. A question none of whose contexts any passage holds (a context cut by a passage boundary) keeps a
  judgment of 0, so it counts as a miss at every chunking instead of leaving the average.

>>> from embedscope.types import Corpus, Queries
>>> data = RetrievalData(Corpus(("d1",), ("One. Two. Three.",)), Queries(("q",), ("two?",)), {"q": {"d1": 1}})
>>> from embedscope.settings.run import ChunkingSettings
>>> chunked = chunk_retrieval_data(data, ChunkingSettings(method="paragraphs").options())
>>> chunked.data.corpus.ids, chunked.parents, chunked.by_document
(('d1#0',), ('d1',), True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from embedscope.data.documents import ChunkOptions, Passage, chunk_documents
from embedscope.data.fastbook_qa import fixed
from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Qrels, RetrievalData

NO_PASSAGE = "(no passage holds a context)"
"""The judged-not-relevant document a question gets when no passage holds any of its contexts (it scores 0)."""


@dataclass(frozen=True)
class ChunkedData:
    """Passages as the corpus of ``data``, each passage's document (``parents``), and how relevance is judged."""

    data: RetrievalData
    parents: tuple[str, ...]
    by_document: bool

    @property
    def most_passages(self) -> int:
        """The most passages any one document has."""
        counts: dict[str, int] = {}
        for parent in self.parents:
            counts[parent] = counts.get(parent, 0) + 1
        return max(counts.values(), default=1)

    def search_depth(self, top_k: int) -> int:
        """Passages to retrieve so that the top ``top_k`` documents by best passage are exact: a document among
        them has its best passage within the top ``(top_k - 1) × most_passages + 1``; per passage when judged so."""
        depth = top_k if not self.by_document else (top_k - 1) * self.most_passages + 1
        return max(1, min(depth, len(self.parents)))


def holds_context(text: str, contexts: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``contexts`` (both after ``ftfy.fix_text``; case-sensitive substring).

    >>> holds_context("cats purr loudly", ["dogs", "cats purr"])
    True
    """
    fixed_text = fixed(text)
    return any(fixed(c) in fixed_text for c in contexts if c)


def context_qrels(contexts: Mapping[str, Sequence[str]], corpus: Corpus) -> dict[str, dict[str, int]]:
    """``{question: {text id: 1}}`` for every text of ``corpus`` holding one of the question's contexts; a question
    no text answers gets ``{NO_PASSAGE: 0}`` (judged, nothing relevant: it scores 0 and stays in the averages)."""
    qrels: dict[str, dict[str, int]] = {}
    for qid, wanted in contexts.items():
        found = {pid: 1 for pid, text in zip(corpus.ids, corpus.texts) if holds_context(text, wanted)}
        qrels[qid] = found or {NO_PASSAGE: 0}
    return qrels


def chunk_retrieval_data(data: RetrievalData, options: ChunkOptions) -> ChunkedData:
    """``data`` with its corpus chunked into passages (see the module docstring)."""
    if data.documents is not None and len(data.documents) != len(data.corpus):
        raise DataFormatError(f"{data.name}: {len(data.documents)} document files for {len(data.corpus)} documents")
    ids, texts, parents = _passages(data.corpus.ids, data.corpus.texts, data.documents, options)
    position = {doc: i for i, doc in enumerate(data.corpus.ids)}
    rows = [position[p] for p in parents]
    metadata = {name: tuple(values[r] for r in rows) for name, values in data.corpus.metadata.items()}
    corpus = Corpus(tuple(ids), tuple(texts), metadata)
    if data.contexts is not None:
        qrels: Qrels = context_qrels(data.contexts, corpus)
        return ChunkedData(replace(data, corpus=corpus, qrels=qrels), tuple(parents), by_document=False)
    return ChunkedData(replace(data, corpus=corpus), tuple(parents), by_document=True)


@lru_cache(maxsize=4)
def _passages(
    doc_ids: tuple[str, ...], doc_texts: tuple[str, ...], documents: tuple[Any, ...] | None, options: ChunkOptions
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Passage ids, texts and documents; kept for the last few corpora and options, so the points of a sweep that
    share a chunking chunk once (keyed by the corpus's content, not the loaded object)."""
    if documents is not None:
        ids, texts, parents = _file_passages(doc_ids, documents, options)
    else:
        ids, texts, parents = _text_passages(doc_ids, doc_texts, options)
    return tuple(ids), tuple(texts), tuple(parents)


def _text_passages(
    doc_ids: tuple[str, ...], doc_texts: tuple[str, ...], options: ChunkOptions
) -> tuple[list[str], list[str], list[str]]:
    ids, texts, parents = [], [], []
    for doc_id, text in zip(doc_ids, doc_texts):
        for n, chunk in enumerate(options.split(text)):
            ids.append(f"{doc_id}#{n}")
            texts.append(chunk)
            parents.append(doc_id)
    _check_unique(ids)
    return ids, texts, parents


def _file_passages(
    doc_ids: tuple[str, ...], documents: tuple[Any, ...], options: ChunkOptions
) -> tuple[list[str], list[str], list[str]]:
    ids, texts, parents = [], [], []
    for path, doc_id in zip(map(Path, documents), doc_ids):
        passages: list[Passage] = chunk_documents([path], options)
        for p in passages:
            ids.append(f"{doc_id}-{p.id.rsplit('-', 1)[1]}")
            texts.append(p.text)
            parents.append(doc_id)
    _check_unique(ids)
    return ids, texts, parents


def _check_unique(ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for pid in ids:
        if pid in seen:
            raise DataFormatError(
                f"passage id {pid!r} occurs twice after chunking: a document id ends like another's passage ids"
            )
        seen.add(pid)
