"""EvalScope custom retrieval data and configs.

EvalScope (RAGEval backend, ``CustomRetrieval``) reads a folder with

* ``corpus.jsonl`` — ``{"_id", "text", "title"?}``; the title is merged as ``f"{title} {text}".strip()``;
* ``queries.jsonl`` — ``{"_id", "text"}``;
* ``qrels.jsonl`` — one ``{"query-id", "corpus-id", "score"}`` per line (current versions, ≥ 1.9), or
  ``qrels/test.tsv`` (older versions, BEIR's layout).

``query_id`` / ``corpus_id`` / ``doc_id`` spellings are accepted too. ``qrels.jsonl`` carries no split:
it is the split ``test``, and asking for any other split is an error naming the available one.

>>> [t.name for t in evalscope_custom_tasks({"custom_tasks": [{"name": "MyTask", "data_path": "d"}]})]
['MyTask']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.data.beir import DEFAULT_SPLIT, find_table, is_text_folder, load_text_folder
from embedscope.errors import ConfigError
from embedscope.types import RetrievalData


def is_evalscope_folder(folder: str | Path) -> bool:
    """A corpus + queries folder whose qrels are one split-less ``qrels.jsonl`` (or other table)."""
    folder = Path(folder)
    return is_text_folder(folder) and find_table(folder, "qrels") is not None


def load_evalscope(folder: str | Path, *, split: str = DEFAULT_SPLIT, columns: Mapping[str, str] | None = None
                   ) -> RetrievalData:
    """One split of an EvalScope custom retrieval folder (current ``qrels.jsonl`` or legacy ``qrels/test.tsv``)."""
    return load_text_folder(Path(folder), split=split, columns=columns)


@dataclass(frozen=True)
class EvalScopeTask:
    """A custom retrieval task from an EvalScope config: name, data folder and splits."""

    name: str
    data_path: str
    eval_splits: tuple[str, ...] = (DEFAULT_SPLIT,)


def evalscope_custom_tasks(eval_config: Mapping[str, Any]) -> list[EvalScopeTask]:
    """The custom retrieval tasks of an EvalScope ``eval_config["eval"]`` section.

    Current versions: ``custom_tasks: [{name, data_path, eval_splits=["test"]}]``. Legacy versions
    (≤ 1.8): ``tasks: ["CustomRetrieval", ...]`` with one ``dataset_path``.
    """
    out: list[EvalScopeTask] = []
    for i, item in enumerate(eval_config.get("custom_tasks") or []):
        if not isinstance(item, Mapping) or "data_path" not in item:
            raise ConfigError(f"eval.custom_tasks[{i}]: needs at least 'data_path' (and 'name'), got {item!r}")
        splits = item.get("eval_splits") or [DEFAULT_SPLIT]
        if isinstance(splits, str):
            splits = [splits]
        name = str(item.get("name") or Path(str(item["data_path"])).name or "CustomRetrieval")
        out.append(EvalScopeTask(name, str(item["data_path"]), tuple(str(s) for s in splits)))
    tasks = eval_config.get("tasks") or eval_config.get("task_names") or []
    if "CustomRetrieval" in tasks:
        path = eval_config.get("dataset_path")
        if not path:
            raise ConfigError("eval.tasks lists 'CustomRetrieval' but eval.dataset_path is not set; set it to the "
                              "folder holding corpus.jsonl, queries.jsonl and qrels")
        out.append(EvalScopeTask("CustomRetrieval", str(path)))
    return out
