"""Tiny in-memory tasks with known answers, for tests and doctests."""

from __future__ import annotations

import json
from pathlib import Path

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


def write_tiny_beir(folder: str | Path) -> Path:
    """The tiny task as a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``); an existing one is
    left as it is."""
    folder = Path(folder)
    if (folder / "corpus.jsonl").exists():
        return folder
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    lines = lambda rows: "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in rows.items())  # noqa: E731
    (folder / "corpus.jsonl").write_text(lines(TINY_CORPUS))
    (folder / "queries.jsonl").write_text(lines(TINY_QUERIES))
    judged = "".join(f"{q}\t{d}\t{s}\n" for q, docs in TINY_QRELS.items() for d, s in docs.items())
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + judged)
    return folder


TINY_WORDS = ("cat", "dog", "fish", "sun")


def _sentence(rng, k: int) -> str:
    return " ".join(rng.choice(TINY_WORDS, k))


def tiny_tasks_of_every_type(n: int = 24, seed: int = 0) -> list:
    """One small in-memory task of each type (retrieval, reranking v2 and v1, STS, pair
    classification, classification, multilabel, clustering v2 and legacy), words from :data:`TINY_WORDS`.

    ``KeywordEncoder(TINY_WORDS)`` or ``HashEncoder`` evaluate all of them in well under a second.
    """
    import numpy as np

    from embedscope.tasks.classification import ClassificationTask, LabelledTexts
    from embedscope.tasks.clustering import ClusteringTask
    from embedscope.tasks.multilabel import MultilabelTask, MultilabelTexts
    from embedscope.tasks.pair_classification import PairClassificationTask, PairData
    from embedscope.tasks.reranking import RerankingTask, reranking_data_from_rows
    from embedscope.tasks.sts import STSData, STSTask

    rng = np.random.default_rng(seed)
    s1 = tuple(_sentence(rng, 3) for _ in range(n))
    s2 = tuple(_sentence(rng, 3) for _ in range(n))
    overlap = [len(set(a.split()) & set(b.split())) for a, b in zip(s1, s2)]
    gold = tuple(float(o + rng.random()) for o in overlap)
    pair_labels = tuple(int(o >= 2) for o in overlap)
    texts = tuple(_sentence(rng, 4) for _ in range(2 * n))
    labels = tuple(max(TINY_WORDS, key=t.split().count) for t in texts)
    multi = tuple(tuple(sorted(set(t.split()))) for t in texts)

    def halves(items: tuple, kind):
        return {"train": kind(texts[:n], items[:n]), "test": kind(texts[n:], items[n:])}.__getitem__

    rows = [
        {
            "query": _sentence(rng, 2),
            "positive": [_sentence(rng, 3) for _ in range(2)],
            "negative": [_sentence(rng, 3) for _ in range(3)],
        }
        for _ in range(n // 2)
    ]
    rerank = reranking_data_from_rows(rows)
    sets = [LabelledTexts(texts[i : i + 12], labels[i : i + 12]) for i in range(0, 2 * n, 12)]
    return [
        tiny_retrieval_task("TinyRetrieval"),
        RerankingTask("TinyReranking", lambda split: rerank),
        RerankingTask("TinyRerankingV1", lambda split: rerank, protocol="v1"),
        STSTask("TinySTS", lambda split: STSData(s1, s2, gold), min_score=0, max_score=4),
        PairClassificationTask("TinyPairClassification", lambda split: PairData(s1, s2, pair_labels)),
        ClassificationTask("TinyClassification", halves(labels, LabelledTexts), samples_per_label=4, n_experiments=3),
        MultilabelTask(
            "TinyMultilabel", halves(multi, MultilabelTexts), samples_per_label=4, n_experiments=3, n_neighbors=3
        ),
        ClusteringTask(
            "TinyClustering",
            lambda split: LabelledTexts(texts, labels),
            max_fraction_of_documents_to_embed=None,
            n_clusters=3,
            max_documents_per_cluster=20,
        ),
        ClusteringTask("TinyClusteringLegacy", lambda split: sets, protocol="legacy"),
    ]
