"""Pair classification with MTEB v2's protocol (``AbsTaskPairClassification`` + ``PairClassificationEvaluator``).

Protocol, exactly as mteb 2.26 runs it for one split:

1. Encode the first sentences, then the second sentences: two calls, dataset order, no prompt
   type (embedscope role ``"document"``). Duplicate texts are encoded as often as they occur
   (mteb 2.26 defines ``_encode_unique_texts`` but this evaluator does not call it).
2. Per pair: ``cosine = 1 − paired_cosine_distances``, ``dot = np.dot`` row by row and the model's
   pairwise ``similarity`` (higher = more similar); ``manhattan`` and ``euclidean`` are the paired
   *distances* (lower = more similar).
3. Per function: the best accuracy and the best F1 (with its precision and recall) over
   thresholds placed between consecutive distinct sorted scores (a threshold never splits
   tied scores), and ``average_precision_score`` of the (sign-adjusted) scores.
4. Keys ``{similarity,cosine,manhattan,euclidean,dot}_{accuracy,f1,precision,recall,ap}`` plus
   ``max_{metric}`` over the functions. Main score ``max_ap``.

The scoring (steps 2–4) is :mod:`embedscope.metrics.pairs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from embedscope.errors import DataFormatError
from embedscope.metrics.pairs import pair_scores, pair_scores_summary
from embedscope.models.base import Similarity
from embedscope.tasks.base import PairedTextTask, PairScores, TaskInfo
from embedscope.tasks.proxy import row_labels, rows_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry


@dataclass(frozen=True)
class PairData:
    """Sentence pairs with a binary label (1 = paraphrase / duplicate / entailment)."""

    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    labels: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.sentence1) == len(self.sentence2) == len(self.labels):
            raise ValueError("sentence1, sentence2 and labels must have the same length")
        bad = sorted({x for x in self.labels if x not in (0, 1)})
        if bad:
            raise ValueError(f"labels must be 0 or 1, found {bad[:5]}")

    def __len__(self) -> int:
        return len(self.labels)

    def head(self, n: int | None) -> PairData:
        """The first ``n`` pairs (all when ``n`` is None)."""
        if n is None or n >= len(self):
            return self
        return PairData(self.sentence1[:n], self.sentence2[:n], self.labels[:n])


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairClassificationTask(PairedTextTask, TaskInfo):
    """A pair-classification task as data."""

    load_split: Callable[[str], PairData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "max_ap"
    type: ClassVar[str] = "PairClassification"

    def score_pairs(self, data: PairData, first: Any, second: Any, similarity: Similarity) -> PairScores:
        """mteb's pair-classification protocol: each similarity function's scores, then AP, F1 … against the labels."""
        per_function = pair_scores(first, second, similarity)
        return PairScores(pair_scores_summary(per_function, data.labels), {**per_function, "gold": list(data.labels)})


# --------------------------------------------------------------------------------------------
# Loading local files
# --------------------------------------------------------------------------------------------

PAIR_COLUMNS = {
    "sentence1": ["sentence1", "text1", "s1"],
    "sentence2": ["sentence2", "text2", "s2"],
    "label": ["label", "labels"],
}


def as_binary_label(value: Any, where: str) -> int:
    """0 or 1 from ``0``/``1``/``"1"``/``1.0``/``True``; anything else is explained."""
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return int(text == "true")
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if number in (0.0, 1.0):
        return int(number)
    raise DataFormatError(
        f"{where}: label {value!r} is not 0 or 1; pair classification needs binary labels "
        "(1 = same meaning / duplicate, 0 = different)"
    )


def load_pair_file(path: str | Path, columns: Mapping[str, str] | None = None) -> PairData:
    """Pairs from a JSONL / CSV / TSV / Parquet file.

    ``columns`` maps ``sentence1`` / ``sentence2`` / ``label`` to the file's names, e.g.
    ``{"label": "is_duplicate"}``.
    """
    from embedscope.data.tables import read_rows
    from embedscope.data.validate import pick

    path = Path(path)
    names = {k: [columns[k]] if columns and k in columns else v for k, v in PAIR_COLUMNS.items()}
    s1, s2, labels = [], [], []
    for where, row in read_rows(path):
        s1.append(str(pick(row, names["sentence1"], where, "sentence1")))
        s2.append(str(pick(row, names["sentence2"], where, "sentence2")))
        labels.append(as_binary_label(pick(row, names["label"], where, "label"), where))
    if len(labels) < 2:
        raise DataFormatError(f"{path}: a pair-classification file needs at least two pairs, found {len(labels)}")
    if len(set(labels)) < 2:
        raise DataFormatError(f"{path}: every label is {labels[0]}; average precision needs both 0 and 1 labels")
    return PairData(tuple(s1), tuple(s2), tuple(labels))


__all__ = ["PairClassificationTask", "PairData", "as_binary_label", "load_pair_file"]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> PairClassificationTask:
    from embedscope.tasks.custom import per_split

    return PairClassificationTask(load_split=per_split(folder, lambda p: load_pair_file(p, columns)), **fields)


def _unwrap_single_row(values: list[Any]) -> list[Any]:
    """mteb's older pair-classification datasets store a whole split as one row of lists."""
    return list(values[0]) if len(values) == 1 and isinstance(values[0], (list, tuple)) else list(values)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> PairClassificationTask:
    from embedscope.data.hf import load_hf_table
    from embedscope.tasks.from_catalog import catalog_fields, table_columns

    label_col = str(entry.params.get("label_column_name", "labels"))

    def load(split: str) -> PairData:
        ds = load_hf_table(location, entry, subset, split)
        s1, s2, labels = table_columns(ds, "sentence1", "sentence2", label_col, where=f"{entry.name} {split}")
        s1, s2, labels = _unwrap_single_row(s1), _unwrap_single_row(s2), _unwrap_single_row(labels)
        return PairData(tuple(map(str, s1)), tuple(map(str, s2)), tuple(int(x) for x in labels))

    return PairClassificationTask(load_split=load, **catalog_fields(entry, subset))


register_task_type(
    TaskType(
        "PairClassification",
        PairClassificationTask,
        pairwise_score=True,
        signature_score="max_ap",
        signature_rank=2,
        main_score="max_ap",
        aliases=("pair-classification",),
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskPairClassification", "pair-classification"),),
        proxy=rows_proxy(row_labels),
    )
)
