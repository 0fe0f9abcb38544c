"""Classification tasks: MTEB v2's few-shot logistic-regression protocol (``AbsTaskClassification``).

Protocol, exactly as mteb 2.26 runs it for one eval split:

1. Optionally (``test_subsample_size``, as many MTEB tasks do in ``dataset_transform``) encode
   every label as a ``ClassLabel`` id (names sorted as strings over the train and eval splits),
   then cut the eval split to ``test_subsample_size`` rows with HF ``datasets``'
   ``train_test_split(test_size=n, seed=seed, stratify_by_column="label")["test"]``.
2. Undersample the train split ``n_experiments`` times: one index list ``range(n)`` is shuffled
   **in place** by a fresh ``np.random.RandomState(seed)`` before each experiment (so experiment
   *i* sees the permutation applied *i + 1* times); walking it, keep an index while its label has
   fewer than ``samples_per_label`` picks.
3. Encode the sorted union of all picked train indices in one call, then the eval split in one call.
4. Per experiment fit ``LogisticRegression(max_iter=100, random_state=seed)`` and score its hard
   predictions: accuracy, macro/weighted F1, precision, recall and, when the eval labels are
   binary, ``ap``/``ap_weighted`` (average precision of the hard predictions).
5. Report the mean over experiments (``nan`` for ``ap`` when not binary) and ``scores_per_experiment``.

The metrics are :mod:`embedscope.metrics.classification`.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from embedscope.data.tables import field_value
from embedscope.data.tabular import split_rows
from embedscope.errors import DataFormatError
from embedscope.metrics.classification import average_experiments, prediction_scores
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.params import positive_int
from embedscope.tasks.proxy import row_labels, rows_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

logger = logging.getLogger(__name__)

Label = Hashable


@dataclass(frozen=True)
class LabelledTexts:
    """Texts with one label each (an int or a string; for clustering also a list of levels)."""

    texts: tuple[str, ...]
    labels: tuple[Any, ...]

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.texts)

    def select(self, keep: Sequence[int]) -> LabelledTexts:
        """The rows at ``keep``, in that order."""
        return LabelledTexts(tuple(self.texts[i] for i in keep), tuple(self.labels[i] for i in keep))

    def head(self, n: int | None) -> LabelledTexts:
        """The first ``n`` rows (all when ``n`` is None), as EvalScope's ``limits`` takes them."""
        return self if n is None or n >= len(self) else self.select(range(n))


# --------------------------------------------------------------------------------------------
# Pure protocol functions
# --------------------------------------------------------------------------------------------


def undersample(
    labels: Sequence[Label], samples_per_label: int = 8, n_experiments: int = 10, seed: int = 42
) -> list[list[int]]:
    """Train indices per experiment, as mteb's ``_undersample_data`` picks them.

    >>> undersample(["a", "b", "a", "b", "a"], samples_per_label=1, n_experiments=2)
    [[1, 4], [4, 3]]
    """
    idxs = list(range(len(labels)))
    picks: list[list[int]] = []
    for _ in range(n_experiments):
        np.random.RandomState(seed).shuffle(idxs)  # in place, cumulative across experiments
        counter: dict[Label, int] = defaultdict(int)
        selected = []
        for i in idxs:
            if counter[labels[i]] < samples_per_label:
                selected.append(i)
                counter[labels[i]] += 1
        picks.append(selected)
    return picks


def classification_scores(
    X_train: np.ndarray,
    y_train: Sequence[Label],
    X_test: np.ndarray,
    y_test: Sequence[Label],
    seed: int = 42,
    max_iter: int = 100,
) -> dict[str, float | None]:
    """One experiment: fit ``LogisticRegression(max_iter, random_state=seed)``, score on the eval split."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=max_iter, random_state=seed)
    model.fit(X_train, list(y_train))
    return prediction_scores(list(y_test), model.predict(X_test))


def class_label_ids(label_sets: Sequence[Sequence[Label]]) -> tuple[list[int], ...]:
    """Labels as ``ClassLabel`` ids, names sorted as strings over all sets (mteb's cast before subsampling).

    >>> class_label_ids([[10, 2], [2, 9]])
    ([0, 1], [1, 2])
    """
    names = sorted({str(x) for labels in label_sets for x in labels if x is not None})
    position = {name: i for i, name in enumerate(names)}
    return tuple([position[str(x)] for x in labels] for labels in label_sets)


def stratified_subsample_indices(labels: Sequence[int], n_samples: int, seed: int = 42) -> list[int]:
    """Rows kept by ``Dataset.train_test_split(test_size=n, seed, stratify_by_column)["test"]``, in its order.

    ``labels`` must already be ``ClassLabel`` ids (see :func:`class_label_ids`). Returns all rows
    unchanged when ``n_samples >= len(labels)``, as mteb does.
    """
    if n_samples >= len(labels):
        return list(range(len(labels)))
    import datasets
    from datasets import ClassLabel, Dataset

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds = Dataset.from_dict({"label": list(labels), "row": list(range(len(labels)))})
        ds = ds.cast_column("label", ClassLabel(num_classes=max(labels) + 1))
        kept = ds.train_test_split(test_size=n_samples, seed=seed, stratify_by_column="label")["test"]["row"]
    finally:
        if bars:
            datasets.enable_progress_bars()
    return list(kept)


def check_classes(labels: Sequence[Label], what: str) -> None:
    """DataFormatError when ``labels`` hold fewer than two classes: no classifier can be trained on them."""
    classes = set(labels)
    if len(classes) < 2:
        held = f"only the class {next(iter(classes))!r}" if classes else "no rows"
        raise DataFormatError(f"{what} has {held}; a classifier needs at least two classes to learn from")


def run_classification(
    train: LabelledTexts,
    test: LabelledTexts,
    encoder: Encoder,
    options: SearchOptions,
    *,
    samples_per_label: int = 8,
    n_experiments: int = 10,
    seed: int = 42,
    max_iter: int = 100,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Steps 2–5 of the module protocol on already loaded (and subsampled) splits."""
    timings = {} if timings is None else timings
    check_classes(train.labels, "the training split")
    picks = undersample(train.labels, samples_per_label, n_experiments, seed)
    union = sorted(set().union(*picks))
    t0 = time.perf_counter()
    train_vectors = _encode(encoder, [train.texts[i] for i in union], options)
    timings["encode_train"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    test_vectors = _encode(encoder, list(test.texts), options)
    timings["encode_test"] = time.perf_counter() - t1
    position = {orig: pos for pos, orig in enumerate(union)}
    t2 = time.perf_counter()
    per_experiment = []
    for selected in picks:
        X_train = train_vectors[[position[j] for j in selected]]
        y_train = [train.labels[j] for j in selected]
        per_experiment.append(classification_scores(X_train, y_train, test_vectors, test.labels, seed, max_iter))
    timings["scoring"] = time.perf_counter() - t2
    return average_experiments(per_experiment)


def _encode(encoder: Encoder, texts: list[str], options: SearchOptions) -> np.ndarray:
    return encoder.encode(texts, role="document", batch_size=options.batch_size, show_progress=options.show_progress)


_RowsT = TypeVar("_RowsT", bound="_Rows")


class _Rows(Protocol):
    """Rows that can be cut to their first ``n`` (:class:`LabelledTexts`, ``MultilabelTexts``)."""

    def __len__(self) -> int: ...

    def head(self: _RowsT, n: int | None) -> _RowsT: ...


def _limit(data: _RowsT, limits: int | None) -> _RowsT:
    if limits is not None and limits < len(data):
        logger.warning(
            f"limits={limits}: only the first {limits} rows of each split are used (EvalScope's behaviour); "
            "scores are not comparable with full-split results."
        )
    return data.head(limits)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassificationTask(TaskInfo):
    """A classification task as data, scored with MTEB's few-shot logistic-regression protocol.

    ``test_subsample_size`` (e.g. 2048) reproduces tasks that call ``stratified_subsampling`` on
    the splits in ``subsample_splits``; None (the default) scores the whole eval split.
    """

    load_split: Callable[[str], LabelledTexts] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "accuracy"
    train_split: str = "train"
    samples_per_label: int = 8
    n_experiments: int = 10
    seed: int = 42
    max_iter: int = 100
    test_subsample_size: int | None = None
    subsample_splits: tuple[str, ...] = ("test",)
    type: ClassVar[str] = "Classification"

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load the train split and ``split``, then run the protocol."""
        t0 = time.perf_counter()
        train = _limit(self.load_split(self.train_split), options.limits)
        test = _limit(self.load_split(split), options.limits)
        timings = {"load_data": time.perf_counter() - t0}
        check_classes(train.labels, f"{self.name}: the training split {self.train_split!r} ({self.source})")
        if self.test_subsample_size is not None:
            train_ids, test_ids = class_label_ids([train.labels, test.labels])
            train = LabelledTexts(train.texts, tuple(train_ids))
            test = LabelledTexts(test.texts, tuple(test_ids))
            if split in self.subsample_splits:
                test = test.select(stratified_subsample_indices(test_ids, self.test_subsample_size, self.seed))
        scores = run_classification(
            train,
            test,
            encoder,
            options,
            samples_per_label=self.samples_per_label,
            n_experiments=self.n_experiments,
            seed=self.seed,
            max_iter=self.max_iter,
            timings=timings,
        )
        return SplitOutcome(scores=scores, timings=timings, n_queries=len(test), n_documents=len(train))


# --------------------------------------------------------------------------------------------
# Custom data
# --------------------------------------------------------------------------------------------

_DEFAULT_COLUMNS = {"text": "text", "label": "label", "split": "split", "title": "title"}


def load_labelled_file(
    path: str | Path, split: str | None = None, columns: dict[str, str] | None = None
) -> LabelledTexts:
    """Texts and single labels from a CSV/TSV/JSONL/Parquet file (or a folder with one file per split).

    ``columns`` maps roles to column names: ``text``, ``label``, optional ``title`` (merged the
    MTEB way, ``title + " " + text``) and ``split``. Labels keep their type (int or string).
    """
    from embedscope.types import merge_title

    cols = {**_DEFAULT_COLUMNS, **(columns or {})}
    texts: list[str] = []
    labels: list[Any] = []
    for loc, row in split_rows(path, split, cols["split"]):
        text = str(field_value(loc, row, cols["text"], "text"))
        if cols["title"] in row and row[cols["title"]]:
            text = merge_title(str(row[cols["title"]]), text)
        label = field_value(loc, row, cols["label"], "label")
        if isinstance(label, bool) or not isinstance(label, (int, str)):
            raise DataFormatError(f"{loc}: label {label!r} must be one integer or string; use one label per row")
        if labels and type(label) is not type(labels[0]):
            raise DataFormatError(
                f"{loc}: label {label!r} is a {type(label).__name__} but earlier labels are "
                f"{type(labels[0]).__name__}; use one type for all labels"
            )
        texts.append(text)
        labels.append(label)
    if not texts:
        raise DataFormatError(f"{path}: no rows for split {split!r}")
    return LabelledTexts(tuple(texts), tuple(labels))


def labelled_file_splits(path: str | Path, columns: dict[str, str] | None = None) -> Callable[[str], LabelledTexts]:
    """A ``load_split`` for :class:`ClassificationTask` reading ``path`` (see :func:`load_labelled_file`)."""

    def load(split: str) -> LabelledTexts:
        return load_labelled_file(path, split, columns)

    return load


# --------------------------------------------------------------------------------------------
# Built-in data: BBC News
# --------------------------------------------------------------------------------------------

BBC_TEST_FRACTION = 0.5
BBC_SPLIT_SEED = 42


def bbc_news_texts() -> LabelledTexts:
    """All 2,225 BBC News articles (``title + " " + body``) with their topic label."""
    from embedscope.data.builtin import bbc_news_articles
    from embedscope.types import merge_title

    articles = bbc_news_articles()
    return LabelledTexts(tuple(merge_title(a.title, a.body) for a in articles), tuple(a.label for a in articles))


def bbc_news_split_indices(split: str) -> list[int]:
    """Deterministic stratified split of the 2,127 distinct BBC articles (98 exact duplicates of the
    2,225 are dropped, keeping the first, so no text is in both splits): per topic in sorted order, a
    ``np.random.default_rng(42)`` permutation of its articles; the first half (rounded down) is
    ``test``, the rest ``train``. Indices refer to :func:`bbc_news_texts` and are sorted.
    """
    if split not in ("train", "test"):
        from embedscope.errors import ConfigError

        raise ConfigError(f"BBC News classification has the splits 'train' and 'test', not {split!r}")
    data = bbc_news_texts()
    rng = np.random.default_rng(BBC_SPLIT_SEED)
    by_label: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for i, (text, label) in enumerate(zip(data.texts, data.labels)):
        if text not in seen:
            seen.add(text)
            by_label[label].append(i)
    kept: list[int] = []
    for label in sorted(by_label):
        members = by_label[label]
        order = [members[j] for j in rng.permutation(len(members))]
        n_test = int(len(members) * BBC_TEST_FRACTION)
        kept.extend(order[:n_test] if split == "test" else order[n_test:])
    return sorted(kept)


def bbc_news_classification_split(split: str) -> LabelledTexts:
    """BBC News topic classification (5 labels): ``train`` and ``test`` halves, see :func:`bbc_news_split_indices`."""
    return bbc_news_texts().select(bbc_news_split_indices(split))


__all__ = [
    "ClassificationTask",
    "LabelledTexts",
    "bbc_news_classification_split",
    "class_label_ids",
    "classification_scores",
    "labelled_file_splits",
    "load_labelled_file",
    "run_classification",
    "stratified_subsample_indices",
    "undersample",
]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> ClassificationTask:
    return ClassificationTask(load_split=labelled_file_splits(folder, columns), **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> ClassificationTask:
    from embedscope.data.hf import load_hf_table
    from embedscope.tasks.from_catalog import catalog_fields, table_columns, text_label_columns

    text_col, label_col = text_label_columns(entry, "text", "label")

    def load(split: str) -> LabelledTexts:
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = table_columns(ds, text_col, label_col, where=f"{entry.name} {split}")
        return LabelledTexts(tuple(map(str, texts)), tuple(labels))

    params, sub = entry.params, entry.stratified_subsample or {}
    return ClassificationTask(
        load_split=load,
        train_split=str(params.get("train_split", "train")),
        samples_per_label=int(params.get("samples_per_label", 8)),
        n_experiments=int(params.get("n_experiments", 10)),
        test_subsample_size=sub.get("n_samples"),
        subsample_splits=tuple(sub.get("splits", ("test",))),
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "Classification",
        ClassificationTask,
        signature_score="accuracy",
        signature_rank=4,
        main_score="accuracy",
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskClassification", "classification"),),
        params={
            "samples_per_label": ("samples_per_label", positive_int),
            "n_experiments": ("n_experiments", positive_int),
        },
        proxy=rows_proxy(row_labels),
    )
)
