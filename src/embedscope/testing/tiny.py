"""Tiny in-memory tasks with known answers, for tests and doctests."""

from __future__ import annotations

from embedscope.tasks.retrieval import RetrievalTask
from embedscope.types import Corpus, Queries, RetrievalData

TINY_CORPUS = {
    "d1": "The cat sat on the mat.",
    "d2": "A dog barked at the postman.",
    "d3": "Fish swim in the sea; a fish market sells fish.",
    "d4": "Weather report: rain tomorrow.",
}
TINY_QUERIES = {"q1": "cat", "q2": "dog", "q3": "fish"}
TINY_QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 2}}


def tiny_retrieval_data(split: str = "test") -> RetrievalData:
    corpus = Corpus(tuple(TINY_CORPUS), tuple(TINY_CORPUS.values()))
    queries = Queries(tuple(TINY_QUERIES), tuple(TINY_QUERIES.values()))
    return RetrievalData(corpus, queries, TINY_QRELS, name="TinyRetrieval", split=split)


def tiny_retrieval_task(name: str = "TinyRetrieval") -> RetrievalTask:
    """Three queries, four documents; a keyword encoder on cat/dog/fish gets every query right."""
    return RetrievalTask(name=name, load_split=tiny_retrieval_data, description="three keyword queries")
