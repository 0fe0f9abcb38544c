"""mteb itself on local labelled data (classification, multilabel, clustering), for side-by-side checks.

Each helper builds an mteb ``AbsTask`` subclass whose ``load_data`` turns embedscope's data into
the ``DatasetDict`` mteb expects, and :func:`mteb_label_scores` runs ``mteb.evaluate`` on it.
Needs the optional dependency ``mteb``; nothing here is used by embedscope's evaluation path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from support.mteb_reference import _GENERAL, EncoderForMteb


def _metadata(name: str, task_type: str, main_score: str, eval_splits: Sequence[str]):
    from mteb.abstasks.task_metadata import TaskMetadata

    general = {**_GENERAL, "eval_splits": list(eval_splits)}
    return TaskMetadata(
        type=task_type,
        name=name,
        main_score=main_score,
        dataset={"path": "local/" + name, "revision": "custom"},
        **general,
    )


def _split_dict(splits: dict[str, Any], text_column: str, label_column: str):
    from datasets import Dataset, DatasetDict

    return DatasetDict(
        {
            split: Dataset.from_dict({text_column: list(data.texts), label_column: [_plain(x) for x in data.labels]})
            for split, data in splits.items()
        }
    )


def _plain(label: Any) -> Any:
    return list(label) if isinstance(label, tuple) else label


def mteb_classification_task(
    splits: dict[str, Any],
    *,
    name: str = "LocalClassification",
    eval_splits: Sequence[str] = ("test",),
    samples_per_label: int = 8,
    n_experiments: int = 10,
    train_split: str = "train",
    test_subsample_size: int | None = None,
    subsample_splits: Sequence[str] = ("test",),
):
    """An mteb ``AbsTaskClassification`` over ``{split: LabelledTexts}``.

    With ``test_subsample_size`` its ``dataset_transform`` calls ``stratified_subsampling`` as MTEB tasks do.
    """
    from mteb.abstasks.classification import AbsTaskClassification

    class _Task(AbsTaskClassification):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = _split_dict(splits, "text", "label")
            if test_subsample_size is not None:
                self.dataset = self.stratified_subsampling(
                    self.dataset, seed=self.seed, splits=list(subsample_splits), n_samples=test_subsample_size
                )
            self.data_loaded = True

    _Task.metadata = _metadata(name, "Classification", "accuracy", eval_splits)
    _Task.samples_per_label = samples_per_label
    _Task.n_experiments = n_experiments
    _Task.train_split = train_split
    return _Task()


def mteb_multilabel_task(
    splits: dict[str, Any],
    *,
    name: str = "LocalMultilabel",
    eval_splits: Sequence[str] = ("test",),
    main_score: str = "accuracy",
    samples_per_label: int = 8,
    n_experiments: int = 10,
    max_eval_samples: int | None = 3000,
    train_split: str = "train",
):
    """An mteb ``AbsTaskMultilabelClassification`` over ``{split: MultilabelTexts}``."""
    from mteb.abstasks.multilabel_classification import AbsTaskMultilabelClassification

    class _Task(AbsTaskMultilabelClassification):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = _split_dict(splits, "text", "label")
            self.data_loaded = True

    _Task.metadata = _metadata(name, "MultilabelClassification", main_score, eval_splits)
    _Task.samples_per_label = samples_per_label
    _Task.n_experiments = n_experiments
    _Task.max_eval_samples = max_eval_samples
    _Task.train_split = train_split
    return _Task()


def mteb_clustering_task(
    splits: dict[str, Any],
    *,
    name: str = "LocalClustering",
    eval_splits: Sequence[str] = ("test",),
    max_fraction_of_documents_to_embed: float | None = 0.04,
    max_document_to_embed: int | None = None,
    max_documents_per_cluster: int = 16_384,
    n_clusters: int = 10,
    max_depth: int | None = None,
):
    """An mteb ``AbsTaskClustering`` (v2 "fast") over ``{split: LabelledTexts}`` (labels may be level lists)."""
    from mteb.abstasks.clustering import AbsTaskClustering

    class _Task(AbsTaskClustering):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = _split_dict(splits, "sentences", "labels")
            self.data_loaded = True

    _Task.metadata = _metadata(name, "Clustering", "v_measure", eval_splits)
    _Task.max_fraction_of_documents_to_embed = max_fraction_of_documents_to_embed
    _Task.max_document_to_embed = max_document_to_embed
    _Task.max_documents_per_cluster = max_documents_per_cluster
    _Task.n_clusters = n_clusters
    _Task.max_depth = max_depth
    return _Task()


def mteb_legacy_clustering_task(
    splits: dict[str, Sequence[Any]],
    *,
    name: str = "LocalClusteringLegacy",
    eval_splits: Sequence[str] = ("test",),
):
    """An mteb ``AbsTaskClusteringLegacy`` over ``{split: [LabelledTexts, ...]}`` (one row per set)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    class _Task(AbsTaskClusteringLegacy):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict(
                {
                    split: Dataset.from_dict(
                        {
                            "sentences": [list(s.texts) for s in sets],
                            "labels": [[_plain(x) for x in s.labels] for s in sets],
                        }
                    )
                    for split, sets in splits.items()
                }
            )
            self.data_loaded = True

    _Task.metadata = _metadata(name, "Clustering", "v_measure", eval_splits)
    return _Task()


def mteb_label_scores(model, task, *, batch_size: int = 32) -> dict[str, list[dict[str, Any]]]:
    """mteb's ``{split: [score dict]}`` for ``task`` with ``model`` (an mteb wrapper or an embedscope Encoder)."""
    import mteb

    if not hasattr(model, "mteb_model_meta"):
        model = EncoderForMteb(model, batch_size)
    result = mteb.evaluate(
        model, [task], cache=None, encode_kwargs={"batch_size": batch_size, "show_progress_bar": False}
    )
    return {split: [dict(entry) for entry in entries] for split, entries in result.task_results[0].scores.items()}


_META_KEYS = ("hf_subset", "languages", "mteb_version")


def assert_same_scores(ours: dict[str, Any], theirs: dict[str, Any], main_score: str, tol: float = 1e-9) -> None:
    """Every key mteb reports (nested lists/dicts included) equals ours within ``tol``; nan matches nan."""
    mine = {**ours, "main_score": ours[main_score]}
    expected = {k: v for k, v in theirs.items() if k not in _META_KEYS}
    assert set(mine) == set(expected), f"keys differ: ours {sorted(mine)} vs mteb {sorted(expected)}"
    for key, value in expected.items():
        _assert_close(mine[key], value, tol, key)


def _assert_close(a: Any, b: Any, tol: float, where: str) -> None:
    import math

    if isinstance(b, dict):
        assert isinstance(a, dict) and set(a) == set(b), f"{where}: {a!r} vs {b!r}"
        for k in b:
            _assert_close(a[k], b[k], tol, f"{where}.{k}")
    elif isinstance(b, (list, tuple)):
        assert isinstance(a, (list, tuple)) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, tol, f"{where}[{i}]")
    elif b is None:
        assert a is None, f"{where}: {a!r} vs None"
    elif isinstance(b, float) and math.isnan(b):
        assert isinstance(a, float) and math.isnan(a), f"{where}: {a!r} vs nan"
    else:
        assert abs(float(a) - float(b)) <= tol, f"{where}: ours {a!r} vs mteb {b!r}"


__all__ = [
    "assert_same_scores",
    "mteb_classification_task",
    "mteb_clustering_task",
    "mteb_label_scores",
    "mteb_legacy_clustering_task",
    "mteb_multilabel_task",
]
