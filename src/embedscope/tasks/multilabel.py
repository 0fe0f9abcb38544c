"""Multilabel classification: MTEB v2's kNN protocol (``AbsTaskMultilabelClassification``).

Protocol, exactly as mteb 2.26 runs it for one eval split:

1. Bootstrap ``n_experiments`` training samples from the train split with one
   ``np.random.default_rng(seed)`` that is **not** reset between experiments (nor between eval
   splits: the task's generator continues, so split *p* of ``eval_splits`` starts after
   ``p * n_experiments`` shuffles). Per experiment, ``list(np.arange(n))`` is shuffled and a row is
   kept when **any** of its labels has fewer than ``samples_per_label`` picks; then every label
   of the row is counted.
2. Encode the unique picked rows (in ``list(set(...))`` order, as mteb does) in one call.
3. If the eval split has more than ``max_eval_samples`` rows (3000), keep that many by iterative
   stratification (scikit-multilearn's algorithm as vendored in mteb, order 2, seed ``seed``).
4. Encode the eval split in one call; fit ``MultiLabelBinarizer`` on its labels.
5. Per experiment fit a fresh ``KNeighborsClassifier(n_neighbors=5)`` on the binarised training
   labels (labels unseen in the eval split are dropped) and score: ``accuracy`` (subset accuracy),
   ``lrap`` (on the hard predictions), macro ``f1`` and ``hamming`` (label-based accuracy).
6. Report the mean over experiments and ``scores_per_experiment``.

The metrics are :mod:`embedscope.metrics.classification`.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from embedscope.data.tables import field_value
from embedscope.data.tabular import split_rows
from embedscope.errors import DataFormatError
from embedscope.metrics.classification import multilabel_prediction_scores
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.classification import _DEFAULT_COLUMNS, _limit
from embedscope.tasks.params import positive_int
from embedscope.tasks.proxy import first_labels_of_rows, rows_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

Label = Hashable


@dataclass(frozen=True)
class MultilabelTexts:
    """Texts with a tuple of labels each (possibly empty)."""

    texts: tuple[str, ...]
    labels: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} label sets")

    def __len__(self) -> int:
        return len(self.texts)

    def select(self, keep: Sequence[int]) -> MultilabelTexts:
        """The rows at ``keep``, in that order."""
        return MultilabelTexts(tuple(self.texts[i] for i in keep), tuple(self.labels[i] for i in keep))

    def head(self, n: int | None) -> MultilabelTexts:
        """The first ``n`` rows (all when ``n`` is None)."""
        return self if n is None or n >= len(self) else self.select(range(n))


# --------------------------------------------------------------------------------------------
# Pure protocol functions
# --------------------------------------------------------------------------------------------


def multilabel_bootstrap(
    labels: Sequence[Sequence[Label]], samples_per_label: int, n_experiments: int, rng: np.random.Generator
) -> list[list[int]]:
    """Training rows per experiment, as mteb's ``_undersample_data_indices`` picks them; advances ``rng``."""
    picks: list[list[int]] = []
    for _ in range(n_experiments):
        idxs = list(np.arange(len(labels)))
        rng.shuffle(idxs)
        counter: dict[Label, int] = defaultdict(int)
        selected = []
        for i in idxs:
            row_labels = labels[int(i)]
            if any(counter[label] < samples_per_label for label in row_labels):
                selected.append(int(i))
                for label in row_labels:
                    counter[label] += 1
        picks.append(selected)
    return picks


def multilabel_scores(
    X_train: np.ndarray, Y_train: np.ndarray, X_test: np.ndarray, Y_test: np.ndarray, n_neighbors: int = 5
) -> dict[str, float]:
    """One experiment: fit ``KNeighborsClassifier(n_neighbors)`` on binarised labels and score its predictions."""
    from sklearn.neighbors import KNeighborsClassifier

    clf = KNeighborsClassifier(n_neighbors=n_neighbors)
    clf.fit(X_train, Y_train)
    return multilabel_prediction_scores(Y_test, clf.predict(X_test))


# --- iterative stratification (Sechidis et al. 2011; scikit-multilearn, as vendored by mteb) ---


def _fold_tie_break(desired: np.ndarray, candidates: np.ndarray, rs: np.random.RandomState) -> int:
    if len(candidates) == 1:
        return int(candidates[0])
    max_val = max(desired[candidates])
    best = np.where(np.array(desired) == max_val)[0]
    best = np.array([x for x in best if x in candidates])
    return int(rs.choice(best, 1)[0])


def _most_desired_combination(samples_with_combination: dict[tuple, list[int]]) -> tuple | None:
    chosen = None
    best_n, best_support = None, None
    for combination, evidence in samples_with_combination.items():
        n_comb, support = len(set(combination)), len(evidence)
        if support == 0:
            continue
        if chosen is None or (
            best_n is not None and best_support is not None and best_n < n_comb and best_support > support
        ):
            chosen, best_n, best_support = combination, n_comb, support
    return chosen


def iterative_stratified_sample(labels: Sequence[Sequence[Label]], n_samples: int, seed: int = 42) -> list[int]:
    """Rows mteb's ``_multilabel_subsampling`` keeps (sorted): fold 0 of a 2-fold, order-2 iterative stratification."""
    from scipy import sparse
    from sklearn.preprocessing import MultiLabelBinarizer

    y = MultiLabelBinarizer().fit_transform([list(x) for x in labels])
    n = y.shape[0]
    test_size = n_samples / n
    fractions = [test_size, 1.0 - test_size]
    rs = np.random.RandomState(seed)
    desired_per_fold = np.array([fractions[i] * n for i in range(2)])
    rows = sparse.lil_matrix(y).rows
    rows_used = dict.fromkeys(range(n), False)
    per_row: list[list[tuple]] = [[] for _ in range(n)]
    with_combination: dict[tuple, list[int]] = {}
    folds: list[list[int]] = [[], []]
    for sample, assignment in enumerate(rows):
        for combination in itertools.combinations_with_replacement(assignment, 2):
            with_combination.setdefault(combination, []).append(sample)
            per_row[sample].append(combination)
    desired_per_comb = {c: np.array([len(ev) * fractions[j] for j in range(2)]) for c, ev in with_combination.items()}

    comb = _most_desired_combination(with_combination)
    while comb is not None:
        while len(with_combination[comb]) > 0:
            row = with_combination[comb].pop()
            if rows_used[row]:
                continue
            max_val = max(desired_per_comb[comb])
            m = np.where(np.array(desired_per_comb[comb]) == max_val)[0]
            fold = _fold_tie_break(desired_per_comb[comb], m, rs)
            folds[fold].append(row)
            rows_used[row] = True
            for c in per_row[row]:
                if row in with_combination[c]:
                    with_combination[c].remove(row)
                desired_per_comb[c][fold] -= 1
            desired_per_fold[fold] -= 1
        comb = _most_desired_combination(with_combination)

    available = [i for i, used in rows_used.items() if not used]
    while available:
        row = available.pop()
        fold = rs.choice(np.where(desired_per_fold > 0)[0], 1)[0]
        desired_per_fold[fold] -= 1
        folds[fold].append(row)
    return sorted(int(i) for i in folds[0])


def run_multilabel(
    train: MultilabelTexts,
    test: MultilabelTexts,
    encoder: Encoder,
    options: SearchOptions,
    rng: np.random.Generator,
    *,
    samples_per_label: int = 8,
    n_experiments: int = 10,
    n_neighbors: int = 5,
    max_eval_samples: int | None = 3000,
    seed: int = 42,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Steps 1–6 of the module protocol on loaded splits; ``rng`` is the task's continuing generator."""
    from sklearn.preprocessing import MultiLabelBinarizer

    timings = {} if timings is None else timings
    picks = multilabel_bootstrap(train.labels, samples_per_label, n_experiments, rng)
    unique = list(set(itertools.chain.from_iterable(picks)))
    t0 = time.perf_counter()
    vectors = _encode(encoder, [train.texts[i] for i in unique], options)
    timings["encode_train"] = time.perf_counter() - t0
    by_row = dict(zip(unique, vectors, strict=True))
    if max_eval_samples is not None and len(test) > max_eval_samples:
        test = test.select(iterative_stratified_sample(test.labels, max_eval_samples, seed))
    t1 = time.perf_counter()
    X_test = _encode(encoder, list(test.texts), options)
    timings["encode_test"] = time.perf_counter() - t1
    binarizer = MultiLabelBinarizer()
    Y_test = binarizer.fit_transform([list(x) for x in test.labels])
    t2 = time.perf_counter()
    per_experiment = []
    for selected in picks:
        X_train = np.stack([by_row[i] for i in selected])
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="unknown class", category=UserWarning)
            Y_train = binarizer.transform([list(train.labels[i]) for i in selected])
        per_experiment.append(multilabel_scores(X_train, Y_train, X_test, Y_test, n_neighbors))
    timings["scoring"] = time.perf_counter() - t2
    averaged: dict[str, Any] = {"scores_per_experiment": per_experiment}
    for key in per_experiment[0]:
        averaged[key] = float(np.mean([s[key] for s in per_experiment]))
    return averaged


def _encode(encoder: Encoder, texts: list[str], options: SearchOptions) -> np.ndarray:
    return encoder.encode(texts, role="document", batch_size=options.batch_size, show_progress=options.show_progress)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultilabelTask(TaskInfo):
    """A multilabel classification task as data, scored with MTEB's kNN protocol."""

    load_split: Callable[[str], MultilabelTexts] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "accuracy"
    train_split: str = "train"
    samples_per_label: int = 8
    n_experiments: int = 10
    n_neighbors: int = 5
    max_eval_samples: int | None = 3000
    seed: int = 42
    type: ClassVar[str] = "MultilabelClassification"

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load the train split and ``split``, then run the protocol with the generator state mteb would have."""
        t0 = time.perf_counter()
        train = _limit(self.load_split(self.train_split), options.limits)
        test = _limit(self.load_split(split), options.limits)
        timings = {"load_data": time.perf_counter() - t0}
        rng = np.random.default_rng(self.seed)
        earlier = self.eval_splits.index(split) if split in self.eval_splits else 0
        for _ in range(earlier * self.n_experiments):  # mteb's generator continues across eval splits
            rng.shuffle(list(np.arange(len(train))))
        scores = run_multilabel(
            train,
            test,
            encoder,
            options,
            rng,
            samples_per_label=self.samples_per_label,
            n_experiments=self.n_experiments,
            n_neighbors=self.n_neighbors,
            max_eval_samples=self.max_eval_samples,
            seed=self.seed,
            timings=timings,
        )
        return SplitOutcome(scores=scores, timings=timings, n_queries=len(test), n_documents=len(train))


# --------------------------------------------------------------------------------------------
# Custom data
# --------------------------------------------------------------------------------------------


def _label_tuple(loc: str, value: Any, column: str, delimiter: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(delimiter) if part.strip())
    if isinstance(value, (list, tuple, np.ndarray)):
        items = tuple(value.tolist() if isinstance(value, np.ndarray) else value)
        if all(isinstance(x, (int, str)) and not isinstance(x, bool) for x in items):
            return items
    raise DataFormatError(
        f"{loc}: field {column!r} must be a list of labels or a {delimiter!r}-separated string, got {value!r}"
    )


def load_multilabel_file(
    path: str, split: str | None = None, columns: dict[str, str] | None = None, label_delimiter: str = ","
) -> MultilabelTexts:
    """Texts and label sets from CSV/TSV/JSONL/Parquet (or a folder with one file per split).

    The label field is a list (JSONL, Parquet) or a ``label_delimiter``-separated string (any format);
    ``columns`` maps ``text``, ``label``, ``title`` and ``split`` to column names.
    """
    from embedscope.types import merge_title

    cols = {**_DEFAULT_COLUMNS, **(columns or {})}
    texts: list[str] = []
    labels: list[tuple[Any, ...]] = []
    for loc, row in split_rows(path, split, cols["split"]):
        text = str(field_value(loc, row, cols["text"], "text"))
        if cols["title"] in row and row[cols["title"]]:
            text = merge_title(str(row[cols["title"]]), text)
        if cols["label"] not in row:
            field_value(loc, row, cols["label"], "label")  # raises the uniform error
        value = row[cols["label"]]
        texts.append(text)
        labels.append(() if value is None else _label_tuple(loc, value, cols["label"], label_delimiter))
    if not texts:
        raise DataFormatError(f"{path}: no rows for split {split!r}")
    return MultilabelTexts(tuple(texts), tuple(labels))


def multilabel_file_splits(
    path: str, columns: dict[str, str] | None = None, label_delimiter: str = ","
) -> Callable[[str], MultilabelTexts]:
    """A ``load_split`` for :class:`MultilabelTask` reading ``path`` (see :func:`load_multilabel_file`)."""

    def load(split: str) -> MultilabelTexts:
        return load_multilabel_file(path, split, columns, label_delimiter)

    return load


__all__ = [
    "MultilabelTask",
    "MultilabelTexts",
    "iterative_stratified_sample",
    "load_multilabel_file",
    "multilabel_bootstrap",
    "multilabel_file_splits",
    "multilabel_scores",
    "run_multilabel",
]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> MultilabelTask:
    return MultilabelTask(load_split=multilabel_file_splits(str(folder), columns), **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> MultilabelTask:
    from embedscope.data.hf import load_hf_table
    from embedscope.tasks.from_catalog import catalog_fields, table_columns, text_label_columns

    text_col, label_col = text_label_columns(entry, "text", "label")

    def load(split: str) -> MultilabelTexts:
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = table_columns(ds, text_col, label_col, where=f"{entry.name} {split}")
        return MultilabelTexts(tuple(map(str, texts)), tuple(tuple(x) for x in labels))

    params = entry.params
    return MultilabelTask(
        load_split=load,
        train_split=str(params.get("train_split", "train")),
        samples_per_label=int(params.get("samples_per_label", 8)),
        n_experiments=int(params.get("n_experiments", 10)),
        max_eval_samples=params.get("max_eval_samples", 3000),
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "MultilabelClassification",
        MultilabelTask,
        signature_score="lrap",
        signature_rank=3,
        main_score="accuracy",
        aliases=("multilabel",),
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskMultilabelClassification", "multilabel"),),
        params={
            "samples_per_label": ("samples_per_label", positive_int),
            "n_experiments": ("n_experiments", positive_int),
            "k": ("n_neighbors", positive_int),
        },
        proxy=rows_proxy(first_labels_of_rows),
    )
)
