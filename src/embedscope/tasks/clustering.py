"""Clustering tasks: MTEB v2 "fast" clustering (``AbsTaskClustering``) and legacy clustering.

**v2 protocol** (mteb 2.26), one ``random.Random(seed)`` per task, continuing across eval splits:

1. Downsample: ``k = int(max_fraction_of_documents_to_embed * N)`` (or ``max_document_to_embed``;
   both None embeds all), ``k = min(N, k)``, rows ``rng.sample(range(N), k)`` in that order.
   Note the default fraction 0.04: a 300-row custom set embeds only 12 documents, as mteb does.
2. Encode those texts in one call. Labels that are not lists become one-level lists.
3. For each hierarchy level (up to ``max_depth``): rows lacking the level get label ``-1`` and are
   dropped with numpy's elementwise ``!= -1`` (which, as in mteb, drops nothing for string labels);
   ``n_clusters`` bootstrap experiments each draw ``rng.choices(range(n), k=max_documents_per_cluster)``
   (with replacement) and fit ``MiniBatchKMeans(n_clusters=#unique labels, batch_size=512,
   init="k-means++", n_init=1, random_state=seed)``; score ``v_measure`` and ``ami``.
4. Report ``v_measures``/``ami_scores`` per level, and the mean and population std over all levels
   × experiments (``v_measure``, ``v_measure_std``, ``ami``, ``ami_std``).

**Legacy protocol** (``AbsTaskClusteringLegacy``): the split is a list of sets; each set with more
than one label is encoded on its own and clustered with ``MiniBatchKMeans(n_clusters=#labels,
batch_size=500, n_init="auto", random_state=seed)``; a set with one label scores 1.0 unencoded.
Report ``v_measure`` (mean over sets), ``v_measure_std`` and ``v_measures``.

The metrics and their summaries are :mod:`embedscope.metrics.clustering`.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import numpy as np

from embedscope.data.tables import field_value
from embedscope.data.tabular import split_rows
from embedscope.errors import ConfigError, DataFormatError
from embedscope.metrics.clustering import CLUSTERING_METRICS, bootstrap_summary, clustering_metrics, legacy_summary
from embedscope.models.base import Encoder
from embedscope.tasks.base import SearchOptions, SplitOutcome, TaskInfo
from embedscope.tasks.classification import _DEFAULT_COLUMNS, LabelledTexts, _limit, bbc_news_texts
from embedscope.tasks.params import boolean, column_name, fraction_or_none, optional_positive_int, positive_int
from embedscope.tasks.proxy import row_labels, rows_proxy, sets_proxy
from embedscope.tasks.types import TaskType, register_task_type

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry

Protocol = Literal["v2", "legacy"]
ClusteringData = LabelledTexts | Sequence[LabelledTexts]


# --------------------------------------------------------------------------------------------
# v2 ("fast") pure functions
# --------------------------------------------------------------------------------------------


def documents_to_embed(
    n_documents: int, rng: random.Random, max_fraction: float | None = 0.04, max_documents: int | None = None
) -> list[int]:
    """Rows v2 clustering embeds, drawn with ``rng.sample`` (all rows, drawing nothing, when both limits are None)."""
    if max_fraction is not None and max_documents is not None:
        raise ConfigError("Set only one of max_fraction_of_documents_to_embed and max_document_to_embed")
    if max_fraction is None and max_documents is None:
        return list(range(n_documents))
    k = int(max_fraction * n_documents) if max_fraction is not None else int(max_documents)  # type: ignore[arg-type]
    return rng.sample(range(n_documents), k=min(n_documents, k))


def as_levels(labels: Sequence[Any]) -> list[list[Any]]:
    """Every label as a list of hierarchy levels (a plain label is one level)."""
    return [list(x) if isinstance(x, (list, tuple)) else [x] for x in labels]


def clustering_v2_scores(
    embeddings: np.ndarray,
    labels: Sequence[Sequence[Any]],
    rng: random.Random,
    *,
    n_clusters: int = 10,
    cluster_size: int = 16_384,
    kmeans_batch_size: int = 512,
    max_depth: int | None = None,
    seed: int = 42,
) -> dict[str, Any]:
    """Bootstrapped MiniBatchKMeans per hierarchy level, as mteb's ``_evaluate_clustering_bootstrapped``."""
    from sklearn.cluster import MiniBatchKMeans

    scores: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in CLUSTERING_METRICS}
    depth = max(map(len, labels))
    depth = depth if max_depth is None else min(max_depth, depth)
    for level in range(depth):
        level_labels = np.array([label[level] if len(label) > level else -1 for label in labels])
        valid = np.array([x != -1 for x in level_labels])
        level_labels = level_labels[valid]
        level_embeddings = embeddings[valid]
        model = MiniBatchKMeans(
            n_clusters=np.unique(level_labels).size,
            batch_size=kmeans_batch_size,
            init="k-means++",
            n_init=1,
            random_state=seed,
        )
        for _ in range(n_clusters):
            picked = rng.choices(range(len(level_embeddings)), k=cluster_size)
            assignment = model.fit_predict(level_embeddings[picked])
            for metric, value in clustering_metrics(level_labels[picked], assignment).items():
                scores[metric][f"Level {level}"].append(value)
    return bootstrap_summary(scores)


def _replay_v2_rng(labels: Sequence[Any], rng: random.Random, task: ClusteringTask) -> None:
    """Advance ``rng`` exactly as scoring a split with these labels would (no encoding, no k-means)."""
    keep = documents_to_embed(len(labels), rng, task.max_fraction_of_documents_to_embed, task.max_document_to_embed)
    levels = as_levels([labels[i] for i in keep])
    depth = max(map(len, levels))
    depth = depth if task.max_depth is None else min(task.max_depth, depth)
    for level in range(depth):
        level_labels = np.array([label[level] if len(label) > level else -1 for label in levels])
        n_valid = int(np.array([x != -1 for x in level_labels]).sum())
        for _ in range(task.n_clusters):
            rng.choices(range(n_valid), k=task.max_documents_per_cluster)


# --------------------------------------------------------------------------------------------
# legacy pure functions
# --------------------------------------------------------------------------------------------


def legacy_set_v_measure(embeddings: np.ndarray, labels: Sequence[Any], seed: int = 42, batch_size: int = 500) -> float:
    """One legacy set: ``MiniBatchKMeans(n_clusters=#labels, batch_size=500, n_init="auto")`` then V-measure."""
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.metrics.cluster import v_measure_score

    model = MiniBatchKMeans(
        n_clusters=len(set(labels)), batch_size=batch_size, n_init="auto", compute_labels=True, random_state=seed
    )
    model.fit(embeddings)
    return float(v_measure_score(list(labels), model.labels_.tolist()))


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusteringTask(TaskInfo):
    """A clustering task as data. ``protocol="v2"`` loads :class:`LabelledTexts` per split (labels
    may be tuples of hierarchy levels); ``protocol="legacy"`` loads a sequence of them (the sets).

    ``n_clusters`` is mteb's name for the number of bootstrap experiments.
    """

    load_split: Callable[[str], ClusteringData] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "v_measure"
    protocol: Protocol = "v2"
    max_fraction_of_documents_to_embed: float | None = 0.04
    max_document_to_embed: int | None = None
    max_documents_per_cluster: int = 16_384
    n_clusters: int = 10
    kmeans_batch_size: int = 512
    max_depth: int | None = None
    legacy_batch_size: int = 500
    seed: int = 42
    type: ClassVar[str] = "Clustering"

    def __post_init__(self) -> None:
        if self.protocol not in ("v2", "legacy"):
            raise ConfigError(f"Clustering protocol must be 'v2' or 'legacy', not {self.protocol!r}")
        if self.max_fraction_of_documents_to_embed is not None and self.max_document_to_embed is not None:
            raise ConfigError(
                "Set only one of max_fraction_of_documents_to_embed and max_document_to_embed (set the other to None)"
            )

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        """Load ``split`` and score it with the v2 or the legacy protocol."""
        t0 = time.perf_counter()
        data = self.load_split(split)
        timings = {"load_data": time.perf_counter() - t0}
        if self.protocol == "legacy":
            sets = _as_sets(data, split)
            if options.limits is not None:
                sets = sets[: options.limits]
            return self._legacy(sets, encoder, options, timings)
        if not isinstance(data, LabelledTexts):
            raise DataFormatError(f"{self.name}/{split}: the v2 protocol needs one LabelledTexts, not a list of sets")
        return self._v2(_limit(data, options.limits), split, encoder, options, timings)

    def _v2(
        self, data: LabelledTexts, split: str, encoder: Encoder, options: SearchOptions, timings: dict[str, float]
    ) -> SplitOutcome:
        rng = random.Random(self.seed)
        if split in self.eval_splits:  # mteb's Random continues across the task's eval splits
            for earlier in self.eval_splits[: self.eval_splits.index(split)]:
                earlier_data = cast(LabelledTexts, self.load_split(earlier))  # v2 loaders give one LabelledTexts
                _replay_v2_rng(earlier_data.head(options.limits).labels, rng, self)
        keep = documents_to_embed(len(data), rng, self.max_fraction_of_documents_to_embed, self.max_document_to_embed)
        t0 = time.perf_counter()
        embeddings = encoder.encode(
            [data.texts[i] for i in keep],
            role="document",
            batch_size=options.batch_size,
            show_progress=options.show_progress,
        )
        timings["encode"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores = clustering_v2_scores(
            embeddings,
            as_levels([data.labels[i] for i in keep]),
            rng,
            n_clusters=self.n_clusters,
            cluster_size=self.max_documents_per_cluster,
            kmeans_batch_size=self.kmeans_batch_size,
            max_depth=self.max_depth,
            seed=self.seed,
        )
        timings["scoring"] = time.perf_counter() - t1
        return SplitOutcome(scores=scores, timings=timings, n_documents=len(keep))

    def _legacy(
        self, sets: Sequence[LabelledTexts], encoder: Encoder, options: SearchOptions, timings: dict[str, float]
    ) -> SplitOutcome:
        v_measures: list[float] = []
        timings["encode"] = timings["scoring"] = 0.0
        for one in sets:
            if len(set(one.labels)) <= 1:
                v_measures.append(1.0)
                continue
            t0 = time.perf_counter()
            embeddings = encoder.encode(
                list(one.texts), role="document", batch_size=options.batch_size, show_progress=options.show_progress
            )
            t1 = time.perf_counter()
            v_measures.append(legacy_set_v_measure(embeddings, one.labels, self.seed, self.legacy_batch_size))
            timings["encode"] += t1 - t0
            timings["scoring"] += time.perf_counter() - t1
        return SplitOutcome(scores=legacy_summary(v_measures), timings=timings, n_documents=sum(len(s) for s in sets))


def _as_sets(data: ClusteringData, split: str) -> list[LabelledTexts]:
    if isinstance(data, LabelledTexts):
        return [data]
    sets = list(data)
    if not sets or not all(isinstance(s, LabelledTexts) for s in sets):
        raise DataFormatError(f"split {split!r}: the legacy protocol needs a non-empty list of LabelledTexts sets")
    return sets


# --------------------------------------------------------------------------------------------
# Custom data and built-in data
# --------------------------------------------------------------------------------------------


def load_clustering_file(
    path: str, split: str | None = None, columns: dict[str, str] | None = None, level_delimiter: str | None = None
) -> LabelledTexts:
    """Texts and cluster labels from CSV/TSV/JSONL/Parquet (or a folder with one file per split).

    A label may be a list of hierarchy levels (JSONL, Parquet) or, with ``level_delimiter``
    (e.g. ``"/"``), a string of levels. Use :func:`group_sets` to build legacy sets from a ``set`` column.
    """
    cols = {**_DEFAULT_COLUMNS, **(columns or {})}
    texts: list[str] = []
    labels: list[Any] = []
    for loc, row in split_rows(path, split, cols["split"]):
        texts.append(str(field_value(loc, row, cols["text"], "text")))
        label = field_value(loc, row, cols["label"], "label")
        if isinstance(label, str) and level_delimiter:
            label = tuple(part for part in label.split(level_delimiter) if part)
        elif isinstance(label, (list, tuple)):
            label = tuple(label)
        elif isinstance(label, bool) or not isinstance(label, (int, str)):
            raise DataFormatError(f"{loc}: label {label!r} must be an integer, a string or a list of levels")
        labels.append(label)
    if not texts:
        raise DataFormatError(f"{path}: no rows for split {split!r}")
    return LabelledTexts(tuple(texts), tuple(labels))


def group_sets(data: LabelledTexts, set_ids: Sequence[Any]) -> list[LabelledTexts]:
    """Legacy sets from a per-row set id (sets in order of first appearance)."""
    groups: dict[Any, list[int]] = {}
    for i, set_id in enumerate(set_ids):
        groups.setdefault(set_id, []).append(i)
    return [data.select(rows) for rows in groups.values()]


def bbc_news_clustering_split(split: str) -> LabelledTexts:
    """All 2,225 BBC News articles (``title + " " + body``) labelled by topic; the only split is ``test``."""
    if split != "test":
        raise ConfigError(f"BBC News clustering has only the split 'test', not {split!r}")
    return bbc_news_texts()


__all__ = [
    "ClusteringTask",
    "as_levels",
    "bbc_news_clustering_split",
    "clustering_v2_scores",
    "documents_to_embed",
    "group_sets",
    "legacy_set_v_measure",
    "load_clustering_file",
]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> ClusteringTask:
    """A user's clustering file or folder; with ``group_sets``, mteb's legacy sets grouped by that column."""
    # mteb's v2 default embeds 4% of a large hub corpus; a user's own file is clustered whole unless asked
    fields = {"max_fraction_of_documents_to_embed": None, **fields}
    set_column = fields.pop("group_sets", None)
    if set_column:  # legacy layout: rows grouped into sets by a column
        fields["protocol"] = "legacy"
        return ClusteringTask(load_split=_grouped_sets(folder, str(set_column), columns), **fields)
    return ClusteringTask(load_split=lambda split: load_clustering_file(str(folder), split, columns), **fields)


def _grouped_sets(folder: Path, set_column: str, cols: dict[str, str] | None) -> Callable[[str], Any]:
    """Legacy clustering sets: the rows of a split grouped by ``set_column`` (mteb's legacy layout)."""
    from embedscope.tasks.classification import field_value, split_rows

    def load(split: str) -> Any:
        data = load_clustering_file(str(folder), split, cols)
        rows = split_rows(folder, split, (cols or {}).get("split", "split"))
        return group_sets(data, [field_value(loc, row, set_column, "set id") for loc, row in rows])

    return load


def _from_catalog(entry: CatalogEntry, subset: str, location: str) -> ClusteringTask:
    from embedscope.data.hf import load_hf_table
    from embedscope.tasks.from_catalog import catalog_fields, table_columns, text_label_columns

    text_col, label_col = text_label_columns(entry, "sentences", "labels")
    legacy = entry.protocol == "clustering-legacy"

    def load(split: str) -> ClusteringData:
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = table_columns(ds, text_col, label_col, where=f"{entry.name} {split}")
        if entry.flatten_sets:  # mteb's transform: the sets' rows chained into one list (v2 protocol)
            texts = [t for row in texts for t in row]
            labels = [lab for row in labels for lab in row]
        if legacy:  # one row per set: a list of sentences and a list of labels
            return [LabelledTexts(tuple(map(str, t)), tuple(lab)) for t, lab in zip(texts, labels)]
        return LabelledTexts(tuple(map(str, texts)), tuple(labels))

    params = entry.params
    extra: dict[str, Any] = {}
    if not legacy:
        extra = {
            "max_fraction_of_documents_to_embed": params.get("max_fraction_of_documents_to_embed"),
            "max_document_to_embed": params.get("max_document_to_embed"),
            "max_documents_per_cluster": int(params.get("max_documents_per_cluster", 16_384)),
            "n_clusters": int(params.get("n_clusters", 10)),
            "max_depth": params.get("max_depth"),
        }
    return ClusteringTask(
        load_split=load, protocol="legacy" if legacy else "v2", **extra, **catalog_fields(entry, subset)
    )


register_task_type(
    TaskType(
        "Clustering",
        ClusteringTask,
        signature_score="v_measure",
        signature_rank=1,
        main_score="v_measure",
        read_files=_read_files,
        from_catalog=_from_catalog,
        mteb_protocols=(("AbsTaskClusteringLegacy", "clustering-legacy"), ("AbsTaskClustering", "clustering-v2")),
        params={
            "max_document_to_embed": ("max_document_to_embed", optional_positive_int),
            "max_fraction_of_documents_to_embed": ("max_fraction_of_documents_to_embed", fraction_or_none),
            "n_experiments": ("n_clusters", positive_int),
            "legacy": ("protocol", lambda v: "legacy" if boolean(v) else "v2"),
            "group_sets": ("group_sets", column_name),
        },
        proxy=sets_proxy(rows_proxy(row_labels)),
    )
)
