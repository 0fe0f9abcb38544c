"""Custom tasks of every type from local files, for the CLI (``TYPE:PATH``), config files and the API.

>>> task_type_of("sts")
'STS'
>>> split_type_prefix("pairclassification:./pairs.csv")
('PairClassification', './pairs.csv')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.tasks.base import Task

TYPE_ALIASES = {
    "retrieval": "Retrieval", "sts": "STS", "pairclassification": "PairClassification",
    "pair-classification": "PairClassification", "classification": "Classification",
    "multilabelclassification": "MultilabelClassification", "multilabel": "MultilabelClassification",
    "clustering": "Clustering", "reranking": "Reranking",
    "bitextmining": "BitextMining", "bitext-mining": "BitextMining", "bitext": "BitextMining",
    "summarization": "Summarization",
    "instructionretrieval": "InstructionRetrieval", "instruction-retrieval": "InstructionRetrieval",
    "instructionreranking": "InstructionReranking", "instruction-reranking": "InstructionReranking",
}


def task_type_of(name: str) -> str:
    """The canonical task type for a user's spelling (case-insensitive)."""
    key = name.strip().lower().replace("_", "")
    if key not in TYPE_ALIASES:
        raise UnknownNameError("task type", name, sorted(set(TYPE_ALIASES.values())))
    return TYPE_ALIASES[key]


def split_type_prefix(spec: str) -> tuple[str, str] | None:
    """``"sts:./pairs.csv"`` → ``("STS", "./pairs.csv")``; None when ``spec`` has no type prefix."""
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix.strip().lower().replace("_", "") not in TYPE_ALIASES:
        return None
    return task_type_of(prefix), rest


def _concat(parts: list[Any]) -> Any:
    """Several shards' loaded data (dataclasses of equal-length tuples) as one."""
    if len(parts) == 1:
        return parts[0]
    import dataclasses

    return dataclasses.replace(parts[0], **{f.name: tuple(x for part in parts for x in getattr(part, f.name))
                                            for f in dataclasses.fields(parts[0])})


def _per_split(path: Path, loader: Callable[[Path], Any]) -> Callable[[str], Any]:
    """A file serves every split asked for; a folder holds one file per split (``test.csv``, …) or is a hub
    download (``data/test-00000-of-00001.parquet``, README configs, …; see :mod:`embedscope.data.hub_files`)."""
    def load(split: str) -> Any:
        if path.is_dir():
            matches = sorted(p for p in path.iterdir() if p.is_file() and p.name.split(".")[0] == split
                             and not p.name.startswith("."))
            if not matches:
                from embedscope.data.hub_files import split_files

                return _concat([loader(p) for p in split_files(path, split)])
            return loader(matches[0])
        return loader(path)
    return load


def custom_task(
    path: str | Path,
    *,
    type: str = "Retrieval",
    name: str | None = None,
    eval_splits: tuple[str, ...] = ("test",),
    columns: Mapping[str, str] | None = None,
    main_score: str | None = None,
    **params: Any,
) -> Task:
    """A task of ``type`` over local files (see each task module's loader for the expected columns)."""
    kind = task_type_of(type)
    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"Task data {str(path)!r} does not exist (no such file or folder)")
    cols = dict(columns) if columns else None
    common: dict[str, Any] = {"name": name or folder.stem or kind, "eval_splits": tuple(eval_splits),
                              "source": str(folder), **params}
    if main_score:
        common["main_score"] = main_score
    if kind == "Retrieval":
        from embedscope.tasks.registry import custom_retrieval_task

        common.pop("source")
        return custom_retrieval_task(folder, columns=cols, **common)
    if kind == "STS":
        from embedscope.tasks.sts import STSTask, load_sts_file

        return STSTask(load_split=_per_split(folder, lambda p: load_sts_file(p, cols)), **common)
    if kind == "PairClassification":
        from embedscope.tasks.pair_classification import PairClassificationTask, load_pair_file

        return PairClassificationTask(load_split=_per_split(folder, lambda p: load_pair_file(p, cols)), **common)
    if kind == "Reranking":
        from embedscope.tasks.reranking import RerankingTask, load_reranking_file

        def load_reranking(split: str) -> Any:
            return _per_split(folder, lambda p: load_reranking_file(p, cols, split=split))(split)

        return RerankingTask(load_split=load_reranking, **common)
    if kind == "BitextMining":
        from embedscope.tasks.bitext_mining import BitextMiningTask, load_bitext_file

        return BitextMiningTask(load_split=_per_split(folder, lambda p: load_bitext_file(p, cols)), **common)
    if kind == "Summarization":
        from embedscope.tasks.summarization import SummarizationTask, load_summarization_file

        return SummarizationTask(load_split=_per_split(folder, lambda p: load_summarization_file(p, cols)), **common)
    if kind in ("InstructionRetrieval", "InstructionReranking"):
        return _instruction_task(folder, kind, common)
    if kind == "Classification":
        from embedscope.tasks.classification import ClassificationTask, labelled_file_splits

        return ClassificationTask(load_split=labelled_file_splits(folder, cols), **common)
    if kind == "MultilabelClassification":
        from embedscope.tasks.multilabel import MultilabelTask, multilabel_file_splits

        return MultilabelTask(load_split=multilabel_file_splits(str(folder), cols), **common)
    from embedscope.tasks.clustering import ClusteringTask, load_clustering_file

    # mteb's v2 default embeds 4% of a large hub corpus; a user's own file is clustered whole unless asked
    common.setdefault("max_fraction_of_documents_to_embed", None)
    set_column = common.pop("group_sets", None)
    if set_column:  # legacy layout: rows grouped into sets by a column
        common["protocol"] = "legacy"
        return ClusteringTask(load_split=_grouped_sets(folder, str(set_column), cols), **common)
    return ClusteringTask(load_split=lambda split: load_clustering_file(str(folder), split, cols), **common)


def _instruction_task(folder: Path, kind: str, common: dict[str, Any]) -> Task:
    """An instruction task over a folder in the hub's layout (corpus, queries, qrels, instruction, and
    top_ranked / qrel_diff as the task needs): reranking scores p-MRR, retrieval ``task_scores`` as given."""
    from embedscope.tasks.instructions import InstructionRerankingTask, InstructionRetrievalTask, load_instruction_split

    reranking = kind == "InstructionReranking"

    def load(split: str) -> Any:
        return load_instruction_split(str(folder), split, reranking=reranking)

    if reranking:
        return InstructionRerankingTask(load_split=load, **common)
    common.setdefault("task_scores", "none")
    common.setdefault("main_score", "ndcg_at_10" if common["task_scores"] == "none" else
                      {"level_scores": "ndcg_at_20", "robustness_at_10": "robustness_at_10", "p-MRR": "p-MRR"}[
                          common["task_scores"]])
    return InstructionRetrievalTask(load_split=load, **common)


def _grouped_sets(folder: Path, set_column: str, cols: dict[str, str] | None) -> Callable[[str], Any]:
    """Legacy clustering sets: the rows of a split grouped by ``set_column`` (mteb's legacy layout)."""
    from embedscope.data.tables import field_value, split_rows
    from embedscope.tasks.clustering import group_sets, load_clustering_file

    def load(split: str) -> Any:
        data = load_clustering_file(str(folder), split, cols)
        rows = split_rows(folder, split, (cols or {}).get("split", "split"))
        return group_sets(data, [field_value(loc, row, set_column, "set id") for loc, row in rows])

    return load
