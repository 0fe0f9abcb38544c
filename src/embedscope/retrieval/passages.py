"""Ranked passages → ranked documents: each document scored by its best passage (MaxP).

A chunked corpus is searched passage by passage; when relevance names documents, a document's score is the
highest score of its passages, and documents are ranked by it (ties keep the passages' order). With the top
``(k - 1) × most passages per document + 1`` passages searched, the top ``k`` documents are exact
(:meth:`embedscope.data.chunked.ChunkedData.search_depth`).

>>> import numpy as np
>>> run = RankedRun(("q",), ("a#0", "a#1", "b#0"), np.array([[1, 0, 2]]), np.array([[0.9, 0.5, 0.7]]))
>>> best_passage_per_document(run, {"a#0": "a", "a#1": "a", "b#0": "b"}, top_k=10).to_dict()
{'q': {'a': 0.9, 'b': 0.7}}
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from embedscope.types import RankedRun


def best_passage_per_document(run: RankedRun, parent_of: Mapping[str, str], top_k: int) -> RankedRun:
    """Each query's top ``top_k`` documents, a document's score being its best passage's."""
    parents = tuple(dict.fromkeys(parent_of[p] for p in run.doc_ids))
    column = {doc: j for j, doc in enumerate(parents)}
    passage_doc = np.array([column[parent_of[p]] for p in run.doc_ids], dtype=np.int64)
    depth = min(top_k, len(parents))
    index = np.full((len(run.query_ids), depth), -1, dtype=np.int64)
    scores = np.full((len(run.query_ids), depth), -np.inf, dtype=np.float64)
    for i in range(len(run.query_ids)):
        slots = np.flatnonzero(run.doc_index[i] >= 0)
        order = slots[np.argsort(-run.scores[i, slots], kind="stable")]
        docs = passage_doc[run.doc_index[i, order]]
        _, first = np.unique(docs, return_index=True)  # each document's best (first in score order) passage
        keep = np.sort(first)[:depth]
        index[i, : len(keep)] = docs[keep]
        scores[i, : len(keep)] = run.scores[i, order[keep]]
    return RankedRun(run.query_ids, parents, index, scores)
