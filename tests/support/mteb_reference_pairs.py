"""mteb itself on local pair data (STS, pair classification, reranking), for side-by-side checks.

Each helper builds an mteb ``AbsTask`` subclass whose ``load_data`` turns embedscope's data into
what mteb 2.26 expects; :func:`mteb_split_scores` runs ``mteb.evaluate`` and returns the score dict
of the ``test`` split. Needs the optional dependency ``mteb``; nothing here is used by
embedscope's evaluation path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from support.mteb_reference import _GENERAL
from support.mteb_reference_labels import mteb_label_scores


def _metadata(name: str, task_type: str, main_score: str):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        type=task_type,
        name=name,
        main_score=main_score,
        dataset={"path": "local/" + name, "revision": "custom"},
        **_GENERAL,
    )


def mteb_sts_task(data: Any, *, min_score: float = 0, max_score: float = 5, name: str = "LocalSTS"):
    """An mteb ``AbsTaskSTS`` whose test split is ``data`` (an :class:`~embedscope.tasks.sts.STSData`)."""
    from datasets import Dataset
    from mteb.abstasks.sts import AbsTaskSTS

    class _Task(AbsTaskSTS):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {
                "test": Dataset.from_dict(
                    {"sentence1": list(data.sentence1), "sentence2": list(data.sentence2), "score": list(data.scores)}
                )
            }
            self.data_loaded = True

    _Task.metadata = _metadata(name, "STS", "cosine_spearman")
    _Task.min_score, _Task.max_score = min_score, max_score
    return _Task()


def mteb_pair_classification_task(data: Any, *, name: str = "LocalPairClassification", main_score: str = "max_ap"):
    """An mteb ``AbsTaskPairClassification`` over a :class:`~embedscope.tasks.pair_classification.PairData`."""
    from datasets import Dataset
    from mteb.abstasks.pair_classification import AbsTaskPairClassification

    class _Task(AbsTaskPairClassification):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {
                "test": Dataset.from_dict(
                    {"sentence1": list(data.sentence1), "sentence2": list(data.sentence2), "labels": list(data.labels)}
                )
            }
            self.data_loaded = True

    _Task.metadata = _metadata(name, "PairClassification", main_score)
    return _Task()


def mteb_reranking_task(
    data: Any, *, name: str = "LocalReranking", k_values: Iterable[int] | None = None, main_score: str = "map_at_1000"
):
    """An mteb ``AbsTaskRetrieval`` with ``top_ranked`` (v2 reranking) over a ``RerankingData``.

    Corpus texts go in as ``text`` with an empty ``title``, as mteb's old-format conversion stores them.
    """
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    class _Task(AbsTaskRetrieval):
        def load_data(self, **kwargs: Any) -> None:
            corpus = Dataset.from_dict(
                {"id": list(data.corpus.ids), "text": list(data.corpus.texts), "title": [""] * len(data.corpus)}
            )
            queries = Dataset.from_dict({"id": list(data.queries.ids), "text": list(data.queries.texts)})
            self.dataset = {
                "default": {
                    "test": RetrievalSplitData(
                        queries=queries,
                        corpus=corpus,
                        relevant_docs={q: dict(d) for q, d in data.qrels.items()},
                        top_ranked={q: list(c) for q, c in data.candidates.items()},
                    )
                }
            }
            self.data_loaded = True

    _Task.metadata = _metadata(name, "Reranking", main_score)
    task = _Task()
    if k_values is not None:
        task.k_values = tuple(k_values)
        task._top_k = max(task.k_values)
    return task


def mteb_reranking_task_from_rows(rows: Iterable[Mapping[str, Any]], *, name: str = "LocalRerankingRows"):
    """mteb's own old-format reranking path: ``AbsTaskReranking.transform_old_dataset_format`` on the rows."""
    import warnings

    from datasets import Dataset, DatasetDict
    from mteb.abstasks.text import reranking as mteb_reranking

    rows = list(rows)
    if name not in mteb_reranking.OLD_FORMAT_RERANKING_TASKS:
        mteb_reranking.OLD_FORMAT_RERANKING_TASKS.append(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)

        class _Task(mteb_reranking.AbsTaskReranking):
            def load_data(self, **kwargs: Any) -> None:
                given = DatasetDict(
                    {
                        "test": Dataset.from_dict(
                            {
                                "query": [r["query"] for r in rows],
                                "positive": [list(r["positive"]) for r in rows],
                                "negative": [list(r["negative"]) for r in rows],
                            }
                        )
                    }
                )
                self.transform_old_dataset_format(given)

    _Task.metadata = _metadata(name, "Reranking", "map_at_1000")
    return _Task()


def mteb_split_scores(model: Any, task: Any, *, batch_size: int = 32) -> dict[str, Any]:
    """mteb's score dict of the ``test`` split (model: an mteb wrapper or an embedscope Encoder)."""
    return mteb_label_scores(model, task, batch_size=batch_size)["test"][0]


__all__ = [
    "mteb_pair_classification_task",
    "mteb_reranking_task",
    "mteb_reranking_task_from_rows",
    "mteb_split_scores",
    "mteb_sts_task",
]
