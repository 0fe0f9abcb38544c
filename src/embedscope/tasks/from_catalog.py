"""Catalog entries → runnable tasks, with data from a local copy in the hub's layout or the hub.

``catalog_task("SciFact", data_dir="data")`` finds ``data/SciFact`` (or ``data/mteb/scifact``,
``data/scifact``), a copy of the dataset repository as ``huggingface-cli download`` leaves it, and
builds the task type's object with mteb's protocol parameters from the catalog. Online, without a
local copy, the dataset comes from the hub at the pinned revision. Tasks with several subsets
(languages) are named ``Task:subset``, e.g. ``STS22:ru``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, DataFormatError
from embedscope.tasks.base import Task
from embedscope.tasks.catalog import CatalogEntry, catalog_entry, locate_data


def split_name_and_subset(spec: str) -> tuple[str, str | None]:
    """``"STS22:ru"`` → ``("STS22", "ru")``.

    >>> split_name_and_subset("SciFact")
    ('SciFact', None)
    """
    name, sep, subset = spec.partition(":")
    return name, (subset or None) if sep else None


def choose_subset(entry: CatalogEntry, subset: str | None) -> str:
    """The hf subset to evaluate: the only one, or the one asked for (checked)."""
    subsets = list(entry.hf_subsets)
    if subset is None:
        if len(subsets) == 1:
            return subsets[0]
        raise ConfigError(f"{entry.name} has {len(subsets)} subsets; name one as {entry.name}:SUBSET "
                          f"(subsets: {', '.join(subsets)})")
    if subset not in entry.hf_subsets:
        raise ConfigError(f"{entry.name} has no subset {subset!r}; subsets: {', '.join(subsets)}")
    return subset


def load_hf_table(location: str, entry: CatalogEntry, subset: str, split: str):
    """One split of a tabular dataset (STS, classification, …) as a ``datasets.Dataset``.

    ``location`` is a local folder (a downloaded dataset repository or a ``save_to_disk`` folder)
    or the hub id. mteb's ``dataset_transform`` renames and split concatenations (SIB-200's
    train + validation + test) are applied.
    """
    concat = entry.concat_splits
    if concat and split == concat.get("into", "test"):
        import datasets

        parts = []
        for part in concat["splits"]:
            ds = _load_split_table(location, entry, subset, part)
            renames = {old: new for old, new in concat.get("columns", {}).items() if old in ds.column_names}
            ds = ds.select_columns(list(renames)).rename_columns(renames) if renames else ds
            parts.append(ds)
        return datasets.concatenate_datasets(parts)
    return _load_split_table(location, entry, subset, split)


def _load_split_table(location: str, entry: CatalogEntry, subset: str, split: str):
    import datasets

    from embedscope.data.hf import is_saved_dataset

    folder = Path(location)
    config = subset if subset != "default" else entry.dataset_name
    try:
        if is_saved_dataset(folder):
            loaded = datasets.load_from_disk(str(folder))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise DataFormatError(f"{folder}: no split {split!r}; splits: {', '.join(loaded)}")
                loaded = loaded[split]
            ds = loaded
        elif folder.is_dir():
            ds = _load_local_repo(folder, config, split)
        else:
            ds = datasets.load_dataset(location, config, split=split, revision=entry.dataset_revision)
    except (ConnectionError, OSError) as e:
        raise DataFormatError(f"{entry.name}: cannot load {location} ({e}). Offline, download the dataset "
                              "and pass its folder with --data-dir.") from e
    for old, new in entry.rename_columns.items():
        if old in ds.column_names and new not in ds.column_names:
            ds = ds.rename_column(old, new)
    return ds


def _load_local_repo(folder: Path, config: str | None, split: str):
    """A downloaded dataset repository, read as downloaded (:mod:`embedscope.data.hub_files`), else through
    ``datasets`` (which honours its README configs)."""
    import datasets

    from embedscope.data.hub_files import read_dataset, split_files

    try:
        return read_dataset(split_files(folder, split, config))
    except DataFormatError:
        pass
    try:
        if config and (folder / config).is_dir() and not (folder / "README.md").is_file():
            return datasets.load_dataset(str(folder / config), split=split)
        return datasets.load_dataset(str(folder), config, split=split)
    except ValueError as e:
        if "split" in str(e).lower() or "Unknown split" in str(e):
            raise DataFormatError(f"{folder}: no split {split!r} ({e})") from e
        raise


def _columns(ds, *names: str, where: str) -> list[list[Any]]:
    missing = [n for n in names if n not in ds.column_names]
    if missing:
        raise DataFormatError(f"{where}: column(s) {missing} not found; columns are {ds.column_names}")
    return [ds[n] for n in names]


def catalog_task(spec: str, *, data_dir: str | Path | None = None, path: str | Path | None = None) -> Task:
    """The runnable task for a catalog name (``Name`` or ``Name:subset``)."""
    name, subset = split_name_and_subset(spec)
    entry = catalog_entry(name)
    subset = choose_subset(entry, subset)
    builder = _BUILDERS.get(entry.type)
    if builder is None:
        raise ConfigError(f"{entry.name}: task type {entry.type} is not supported yet")
    location = locate_data(entry, data_dir=data_dir, path=path)
    return builder(entry, subset, location)


def _common(entry: CatalogEntry, subset: str) -> dict[str, Any]:
    return {
        "name": entry.name, "eval_splits": entry.eval_splits, "main_score": entry.main_score,
        "languages": entry.hf_subsets[subset], "dataset_revision": entry.dataset_revision, "hf_subset": subset,
        "description": entry.description, "source": entry.dataset_path,
    }


def _retrieval(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.data.detect import load_retrieval
    from embedscope.tasks.retrieval import RetrievalTask

    def load(split: str):
        kwargs: dict[str, Any] = {"split": split}
        if not Path(location).exists():
            kwargs["revision"] = entry.dataset_revision
        if subset != "default":
            kwargs["subset"] = subset
        return load_retrieval(location, **kwargs)

    params = entry.params
    return RetrievalTask(
        load_split=load, ignore_identical_ids=bool(params.get("ignore_identical_ids", False)),
        k_values=tuple(params.get("k_values", (1, 3, 5, 10, 20, 100, 1000))),
        type=entry.type, **_common(entry, subset),
    )


def _text_label_columns(entry: CatalogEntry, text: str, label: str) -> tuple[str, str]:
    return str(entry.params.get("input_column_name", text)), str(entry.params.get("label_column_name", label))


def _classification(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.classification import ClassificationTask, LabelledTexts

    text_col, label_col = _text_label_columns(entry, "text", "label")

    def load(split: str) -> LabelledTexts:
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = _columns(ds, text_col, label_col, where=f"{entry.name} {split}")
        return LabelledTexts(tuple(map(str, texts)), tuple(labels))

    params, sub = entry.params, entry.stratified_subsample or {}
    return ClassificationTask(
        load_split=load, train_split=str(params.get("train_split", "train")),
        samples_per_label=int(params.get("samples_per_label", 8)), n_experiments=int(params.get("n_experiments", 10)),
        test_subsample_size=sub.get("n_samples"), subsample_splits=tuple(sub.get("splits", ("test",))),
        type=entry.type, **_common(entry, subset),
    )


def _multilabel(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.multilabel import MultilabelTask, MultilabelTexts

    text_col, label_col = _text_label_columns(entry, "text", "label")

    def load(split: str) -> MultilabelTexts:
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = _columns(ds, text_col, label_col, where=f"{entry.name} {split}")
        return MultilabelTexts(tuple(map(str, texts)), tuple(tuple(x) for x in labels))

    params = entry.params
    return MultilabelTask(
        load_split=load, train_split=str(params.get("train_split", "train")),
        samples_per_label=int(params.get("samples_per_label", 8)), n_experiments=int(params.get("n_experiments", 10)),
        max_eval_samples=params.get("max_eval_samples", 3000), type=entry.type, **_common(entry, subset),
    )


def _clustering(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.classification import LabelledTexts
    from embedscope.tasks.clustering import ClusteringTask

    text_col, label_col = _text_label_columns(entry, "sentences", "labels")
    legacy = entry.protocol == "clustering-legacy"

    def load(split: str):
        ds = load_hf_table(location, entry, subset, split)
        texts, labels = _columns(ds, text_col, label_col, where=f"{entry.name} {split}")
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
    return ClusteringTask(load_split=load, protocol="legacy" if legacy else "v2", type=entry.type,
                          **extra, **_common(entry, subset))


def _sts(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.sts import STSData, STSTask

    def load(split: str) -> STSData:
        ds = load_hf_table(location, entry, subset, split)
        s1, s2, gold = _columns(ds, "sentence1", "sentence2", "score", where=f"{entry.name} {split}")
        return STSData(tuple(map(str, s1)), tuple(map(str, s2)), tuple(float(x) for x in gold))

    params = entry.params
    return STSTask(load_split=load, min_score=params.get("min_score", 0), max_score=params.get("max_score", 5),
                   type=entry.type, **_common(entry, subset))


def _unwrap_single_row(values: list[Any]) -> list[Any]:
    """mteb's older pair-classification datasets store a whole split as one row of lists."""
    return list(values[0]) if len(values) == 1 and isinstance(values[0], (list, tuple)) else list(values)


def _pair_classification(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.pair_classification import PairClassificationTask, PairData

    label_col = str(entry.params.get("label_column_name", "labels"))

    def load(split: str) -> PairData:
        ds = load_hf_table(location, entry, subset, split)
        s1, s2, labels = _columns(ds, "sentence1", "sentence2", label_col, where=f"{entry.name} {split}")
        s1, s2, labels = _unwrap_single_row(s1), _unwrap_single_row(s2), _unwrap_single_row(labels)
        return PairData(tuple(map(str, s1)), tuple(map(str, s2)), tuple(int(x) for x in labels))

    return PairClassificationTask(load_split=load, type=entry.type, **_common(entry, subset))


def _reranking(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.data.hf import load_hub_retrieval, load_top_ranked
    from embedscope.tasks.reranking import RerankingData, RerankingTask

    def load(split: str) -> RerankingData:
        revision = None if Path(location).exists() else entry.dataset_revision
        sub = None if subset == "default" else subset
        data = load_hub_retrieval(location, split=split, revision=revision, subset=sub)
        top = load_top_ranked(location, split=split, revision=revision, subset=sub)
        if top is None:
            raise DataFormatError(f"{entry.name}: {location} has no 'top_ranked' subset, which reranking needs")
        return RerankingData(data.queries, data.corpus, data.qrels, {q: tuple(d) for q, d in top.items()})

    return RerankingTask(load_split=load, protocol="v2",
                         k_values=tuple(entry.params.get("k_values", (1, 3, 5, 10, 20, 100, 1000))),
                         type=entry.type, **_common(entry, subset))


def _subset_table(entry: CatalogEntry, subset: str, location: str, split: str):
    """The subset's table: its own config, else (mteb's ``fast_loading`` and parallel datasets) the default
    config, filtered to rows whose ``lang`` is the subset when it has that column (``lang`` dropped)."""
    shared = bool(entry.params.get("fast_loading") or entry.params.get("parallel_subsets"))
    if subset == "default" or not shared:
        try:
            return load_hf_table(location, entry, subset, split)
        except (DataFormatError, ValueError, FileNotFoundError):
            if subset == "default":
                raise
    ds = load_hf_table(location, entry, "default", split)
    if "lang" in ds.column_names:
        ds = ds.filter(lambda row: row["lang"] == subset).remove_columns("lang")
    return ds


def _bitext_mining(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.bitext_mining import BitextMiningTask, bitext_data_from_columns

    def load(split: str):
        ds = _subset_table(entry, subset, location, split)
        pair = subset.split("-")
        if len(pair) == 2 and all(c in ds.column_names for c in pair):  # parallel: one column per language
            return bitext_data_from_columns(ds, pair[0], pair[1], where=f"{entry.name} {split}")
        return bitext_data_from_columns(ds, where=f"{entry.name} {split}")

    return BitextMiningTask(load_split=load, type=entry.type, **_common(entry, subset))


def _summarization(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.summarization import SummarizationData, SummarizationTask

    def load(split: str) -> SummarizationData:
        ds = _subset_table(entry, subset, location, split)
        text, human, machine, relevance = _columns(ds, "text", "human_summaries", "machine_summaries", "relevance",
                                                   where=f"{entry.name} {split}")
        return SummarizationData(tuple(map(str, text)), tuple(tuple(map(str, h)) for h in human),
                                 tuple(tuple(map(str, m)) for m in machine),
                                 tuple(tuple(float(x) for x in r) for r in relevance))

    params = entry.params
    # mteb 2.26: SummEval and SummEvalFr keep the deprecated evaluator (mteb #1156); their .v2 use the fixed one
    protocol = params.get("summarization_protocol", "v2" if entry.name.endswith(".v2") else "v1")
    return SummarizationTask(load_split=load, min_score=params.get("min_score", 0),
                             max_score=params.get("max_score", 5), protocol=protocol, type=entry.type,
                             **_common(entry, subset))


def _instruction_task_scores(entry: CatalogEntry) -> str:
    """Which ``task_specific_scores`` mteb's task adds: p-MRR (FollowIR), robustness@10 (InstructIR), IFIR levels."""
    if "task_scores" in entry.params:
        return str(entry.params["task_scores"])
    if entry.main_score in ("p-MRR", "robustness_at_10"):
        return entry.main_score
    return "level_scores" if entry.name.startswith("IFIR") else "none"


def _instruction(entry: CatalogEntry, subset: str, location: str) -> Task:
    from embedscope.tasks.instructions import InstructionRerankingTask, InstructionRetrievalTask, load_instruction_split

    reranking = entry.type == "InstructionReranking"

    def load(split: str):
        revision = None if Path(location).exists() else entry.dataset_revision
        # mFollowIR's own load_data reads configs named corpus-LANG, queries-LANG, … (mteb 2.26)
        suffixed = bool(entry.params.get("suffixed_configs", entry.name.startswith("mFollowIR")))
        return load_instruction_split(location, split, subset=subset, revision=revision, reranking=reranking,
                                      suffixed=suffixed)

    kind = InstructionRerankingTask if reranking else InstructionRetrievalTask
    return kind(load_split=load, task_scores=_instruction_task_scores(entry),  # type: ignore[arg-type]
                k_values=tuple(entry.params.get("k_values", (1, 3, 5, 10, 20, 100, 1000))), type=entry.type,
                **_common(entry, subset))


# Task type → builder (entry, subset, data location) → Task. A new type is one entry here; catalog tasks of
# a type without one fail with "task type X is not supported yet".
_BUILDERS: dict[str, Any] = {
    "PairClassification": _pair_classification,
    "STS": _sts,
    "Retrieval": _retrieval,
    "Classification": _classification,
    "MultilabelClassification": _multilabel,
    "Clustering": _clustering,
    "Reranking": _reranking,
    "BitextMining": _bitext_mining,
    "Summarization": _summarization,
    "InstructionRetrieval": _instruction,
    "InstructionReranking": _instruction,
}
