"""Bitext mining with MTEB v2's protocol (``AbsTaskBitextMining`` + ``BitextMiningEvaluator``).

Protocol, exactly as mteb 2.26 runs it for one split of one subset:

1. Encode each text column of the pair once, in dataset order, no prompt type (embedscope role
   ``"document"``; duplicates encoded as often as they occur): ``sentence1`` then ``sentence2``, or for a
   *parallel* dataset (one column per language, subsets named ``lang1-lang2``) the two language columns in
   the dataset's column order.
2. For each text of the first column, its nearest neighbour in the second by the model's similarity
   (float32 torch, queries in chunks of 100, ``torch.topk(…, 1)``; among corpus chunks of 500,000 the first
   best wins).
3. The gold neighbour of row ``i`` is row ``i`` (or ``gold[i][1]`` when the data has a ``gold`` column, as
   BUCC does); scikit-learn's weighted precision, recall and F1 (``zero_division=0``) of the predicted
   against the gold indices, and accuracy. Keys ``precision``, ``recall``, ``f1``, ``accuracy``; main
   score ``f1``.

The metrics are :mod:`embedscope.metrics.bitext`.

>>> import numpy as np
>>> from embedscope.metrics.bitext import bitext_scores
>>> e = np.eye(3, dtype=np.float32)
>>> bitext_scores(nearest_neighbours(e, e[[1, 0, 2]], "cosine"), [(i, i) for i in range(3)])["accuracy"]
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from embedscope.errors import DataFormatError
from embedscope.metrics.bitext import bitext_scores
from embedscope.models.base import Similarity
from embedscope.tasks.base import PairedTextTask, PairScores, TaskInfo
from embedscope.tasks.proxy import bitext_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

QUERY_CHUNK = 100
CORPUS_CHUNK = 500_000


@dataclass(frozen=True)
class BitextData:
    """Two columns of texts; row ``i`` of ``sentence1`` translates row ``gold[i][1]`` of ``sentence2``
    (row ``i`` when ``gold`` is None). The columns may differ in length only with ``gold``."""

    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    gold: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        if self.gold is None and len(self.sentence1) != len(self.sentence2):
            raise ValueError(
                f"{len(self.sentence1)} first and {len(self.sentence2)} second sentences; without "
                "gold pairs both columns must have the same length"
            )
        if self.gold is not None and len(self.gold) < len(self.sentence1):
            raise ValueError(f"{len(self.gold)} gold pairs for {len(self.sentence1)} first sentences")

    def __len__(self) -> int:
        return len(self.sentence1)

    def gold_pairs(self) -> list[tuple[int, int]]:
        return list(self.gold) if self.gold is not None else [(i, i) for i in range(len(self.sentence1))]

    def head(self, n: int | None) -> BitextData:
        """The first ``n`` rows (all when ``n`` is None)."""
        if n is None or n >= len(self):
            return self
        if self.gold is not None:
            return BitextData(self.sentence1[:n], self.sentence2, self.gold[:n])
        return BitextData(self.sentence1[:n], self.sentence2[:n])


def nearest_neighbours(queries: np.ndarray, corpus: np.ndarray, similarity: Similarity) -> list[tuple[int, float]]:
    """``(corpus index, score)`` of each query's best match, searched as mteb's evaluator searches."""
    import torch

    from embedscope.retrieval.dense import similarity_matrix

    q_all = np.asarray(queries, dtype=np.float32)
    c_all = np.asarray(corpus, dtype=np.float32)
    out: list[tuple[int, float]] = []
    for q_start in range(0, len(q_all), QUERY_CHUNK):
        q = torch.from_numpy(np.ascontiguousarray(q_all[q_start : q_start + QUERY_CHUNK]))
        found: list[list[tuple[int, float]]] = [[] for _ in range(len(q))]
        for c_start in range(0, len(c_all), CORPUS_CHUNK):
            c = torch.from_numpy(np.ascontiguousarray(c_all[c_start : c_start + CORPUS_CHUNK]))
            values, idx = torch.topk(similarity_matrix(q, c, similarity), 1, dim=1, largest=True, sorted=False)
            for row, (j, v) in enumerate(zip(idx[:, 0].tolist(), values[:, 0].tolist())):
                found[row].append((c_start + j, v))
        out.extend(max(hits, key=lambda h: h[1]) for hits in found)  # first best chunk, as a stable sort
    return out


@dataclass(frozen=True)
class BitextMiningTask(PairedTextTask, TaskInfo):
    """A bitext-mining task as data (one subset: one language pair)."""

    load_split: Callable[[str], BitextData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "f1"
    type: ClassVar[str] = "BitextMining"

    def score_pairs(self, data: BitextData, first: Any, second: Any, similarity: Similarity) -> PairScores:
        """mteb's bitext-mining protocol: each sentence's nearest neighbour among the other column's."""
        neighbours = nearest_neighbours(first, second, similarity)
        gold = data.gold_pairs()
        columns: dict[str, Sequence[Any]] = {
            "predicted": [j for j, _ in neighbours],
            "score": [s for _, s in neighbours],
            "gold": [g[1] for g in gold[: len(data)]],
        }
        return PairScores(bitext_scores(neighbours, gold), columns, n_documents=len(data.sentence2))


BITEXT_COLUMNS = {
    "sentence1": ["sentence1", "source", "src", "text1"],
    "sentence2": ["sentence2", "target", "tgt", "translation", "text2"],
}


def load_bitext_file(path: str | Path, columns: dict[str, str] | None = None) -> BitextData:
    """Aligned pairs (row ``i`` of one column translates row ``i`` of the other) from JSONL / CSV / TSV /
    Parquet; ``columns`` maps ``sentence1`` / ``sentence2`` to the file's names, e.g. ``{"sentence1": "en"}``."""
    from embedscope.data.tables import read_rows
    from embedscope.data.validate import pick

    path = Path(path)
    names = {k: [columns[k]] if columns and k in columns else v for k, v in BITEXT_COLUMNS.items()}
    s1, s2 = [], []
    for where, row in read_rows(path):
        s1.append(str(pick(row, names["sentence1"], where, "sentence1")))
        s2.append(str(pick(row, names["sentence2"], where, "sentence2")))
    if len(s1) < 2:
        raise DataFormatError(f"{path}: a bitext-mining file needs at least two pairs, found {len(s1)}")
    return BitextData(tuple(s1), tuple(s2))


def bitext_data_from_columns(
    table: Any, first: str = "sentence1", second: str = "sentence2", where: str = ""
) -> BitextData:
    """Aligned pairs from a hub table (a ``datasets.Dataset``): columns ``first`` and ``second``."""
    missing = [c for c in (first, second) if c not in table.column_names]
    if missing:
        raise DataFormatError(f"{where}: column(s) {missing} not found; columns are {table.column_names}")
    return BitextData(tuple(map(str, table[first])), tuple(map(str, table[second])))


__all__ = ["BitextData", "BitextMiningTask", "bitext_data_from_columns", "load_bitext_file", "nearest_neighbours"]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> BitextMiningTask:
    from embedscope.tasks.custom import per_split

    return BitextMiningTask(load_split=per_split(folder, lambda p: load_bitext_file(p, columns)), **fields)


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> BitextMiningTask:
    from embedscope.tasks.from_catalog import catalog_fields, subset_table

    def load(split: str) -> BitextData:
        ds = subset_table(entry, subset, location, split)
        pair = subset.split("-")
        if len(pair) == 2 and all(c in ds.column_names for c in pair):  # parallel: one column per language
            return bitext_data_from_columns(ds, pair[0], pair[1], where=f"{entry.name} {split}")
        return bitext_data_from_columns(ds, where=f"{entry.name} {split}")

    return BitextMiningTask(load_split=load, **catalog_fields(entry, subset))


register_task_type(
    TaskType(
        "BitextMining",
        BitextMiningTask,
        main_score="f1",
        aliases=("bitext-mining", "bitext"),
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskBitextMining", "bitext-mining"),),
        proxy=bitext_proxy,
    )
)
