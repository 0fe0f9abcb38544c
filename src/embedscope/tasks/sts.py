"""Semantic textual similarity with MTEB v2's protocol (``AbsTaskSTS`` + ``AnySTSEvaluator``).

Encode the first sentences, then the second sentences (two calls, in dataset order, no prompt type:
embedscope role ``"document"``; duplicate texts are encoded as often as they occur, as in mteb); predictions are
``1 − paired cosine distance``, ``−paired manhattan``, ``−paired euclidean`` (scikit-learn) and the
model's own pairwise similarity; gold scores are normalised ``(x − min) / (max − min)``; Pearson and
Spearman (scipy) of each against the gold. Main score ``cosine_spearman``.

The metrics are :mod:`embedscope.metrics.sts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from embedscope.errors import DataFormatError
from embedscope.metrics.sts import correlation_scores, normalized_gold, sts_predictions
from embedscope.models.base import Similarity
from embedscope.tasks.base import PairedTextTask, PairScores, TaskInfo
from embedscope.tasks.proxy import pair_score_quintiles, rows_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry


@dataclass(frozen=True)
class STSData:
    """Sentence pairs with a gold similarity score."""

    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    scores: tuple[float, ...]

    def __post_init__(self) -> None:
        if not len(self.sentence1) == len(self.sentence2) == len(self.scores):
            raise ValueError("sentence1, sentence2 and scores must have the same length")

    def __len__(self) -> int:
        return len(self.scores)

    def head(self, n: int | None) -> STSData:
        """The first ``n`` pairs (all when ``n`` is None)."""
        if n is None or n >= len(self):
            return self
        return STSData(self.sentence1[:n], self.sentence2[:n], self.scores[:n])


@dataclass(frozen=True)
class STSTask(PairedTextTask, TaskInfo):
    """An STS task as data."""

    load_split: Callable[[str], STSData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "cosine_spearman"
    min_score: float = 0
    max_score: float = 5
    type: ClassVar[str] = "STS"

    def score_pairs(self, data: STSData, first: Any, second: Any, similarity: Similarity) -> PairScores:
        """mteb's STS protocol: each similarity function's predictions, correlated with the normalised gold."""
        predictions = sts_predictions(first, second, similarity)
        gold = normalized_gold(data.scores, self.min_score, self.max_score)
        return PairScores(correlation_scores(predictions, gold), {**predictions, "gold": gold})


STS_COLUMNS = {
    "sentence1": ["sentence1", "text1", "s1"],
    "sentence2": ["sentence2", "text2", "s2"],
    "score": ["score", "similarity", "label"],
}


def load_sts_file(path: str | Path, columns: Mapping[str, str] | None = None) -> STSData:
    """Pairs from a JSONL / CSV / TSV / Parquet file; ``columns`` maps sentence1 / sentence2 / score to names."""
    from embedscope.data.tables import read_rows
    from embedscope.data.validate import pick

    path = Path(path)
    names = {k: [columns[k]] if columns and k in columns else v for k, v in STS_COLUMNS.items()}
    s1, s2, gold = [], [], []
    for where, row in read_rows(path):
        s1.append(str(pick(row, names["sentence1"], where, "sentence1")))
        s2.append(str(pick(row, names["sentence2"], where, "sentence2")))
        value: Any = pick(row, names["score"], where, "score")
        try:
            gold.append(float(value))
        except (TypeError, ValueError):
            raise DataFormatError(f"{where}: score {value!r} is not a number") from None
        if not math.isfinite(gold[-1]):
            raise DataFormatError(f"{where}: score {value!r} is not a finite number; every gold score must be one")
    if len(gold) < 2:
        raise DataFormatError(f"{path}: an STS file needs at least two pairs")
    if len(set(gold)) == 1:
        raise DataFormatError(
            f"{path}: every gold score is {gold[0]:g}; Spearman's correlation is undefined when "
            "the gold scores do not vary"
        )
    return STSData(tuple(s1), tuple(s2), tuple(gold))


def lee_sts_split(split: str) -> STSData:
    """The built-in Lee document-similarity set (gensim test data), the only split being ``test``."""
    from embedscope.data.builtin import lee_similarity
    from embedscope.errors import ConfigError

    if split != "test":
        raise ConfigError(f"LeeDocumentSimilarity has only the split 'test', not {split!r}")
    pairs = lee_similarity()
    return STSData(pairs.sentence1, pairs.sentence2, pairs.scores)


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> STSTask:
    from embedscope.tasks.custom import per_split

    return STSTask(load_split=per_split(folder, lambda p: load_sts_file(p, columns)), **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> STSTask:
    from embedscope.data.hf import load_hf_table
    from embedscope.tasks.from_catalog import (
        catalog_fields,
        table_columns,
    )

    def load(split: str) -> STSData:
        ds = load_hf_table(location, entry, subset, split)
        s1, s2, gold = table_columns(ds, "sentence1", "sentence2", "score", where=f"{entry.name} {split}")
        return STSData(tuple(map(str, s1)), tuple(map(str, s2)), tuple(float(x) for x in gold))

    params = entry.params
    return STSTask(
        load_split=load,
        min_score=params.get("min_score", 0),
        max_score=params.get("max_score", 5),
        **catalog_fields(entry, subset),
    )


register_task_type(
    TaskType(
        "STS",
        STSTask,
        pairwise_score=True,
        signature_score="cosine_spearman",
        signature_rank=0,
        main_score="cosine_spearman",
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskSTS", "sts"),),
        proxy=rows_proxy(pair_score_quintiles),
    )
)
