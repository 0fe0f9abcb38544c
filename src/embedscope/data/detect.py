"""One entry point for retrieval data: find the layout of a path and load a split.

Layouts, in the order they are recognised (:func:`detect_layout` names):

1. ``saved`` — a ``save_to_disk`` dataset (``dataset_dict.json``), or ``corpus/ queries/ qrels/`` saved datasets;
2. ``beir`` — a BEIR / EvalScope / tables folder: ``corpus.*`` and ``queries.*`` tables with
   ``qrels/{split}.*`` (BEIR; ``.tsv`` with header ``query-id corpus-id score``) or one split-less
   ``qrels.*`` (EvalScope's ``qrels.jsonl``; it is the split ``test``). Tables may be JSONL (optionally
   gzipped), CSV, TSV or Parquet, read with an optional column mapping;
3. ``hub`` — a local copy of an MTEB-style hub repository (README ``configs:`` or ``corpus/``,
   ``queries/``, ``default/``/``qrels/`` data subfolders, Parquet/JSONL/CSV/TSV);
4. ``qa`` — QA over documents: ``documents/`` and ``questions.json`` (fastbook format) or ``questions.jsonl``
   whose relevance is context strings (:mod:`embedscope.data.qa`; chunked by the task);
5. ``pairs`` — a single table file of (query, relevant passage) rows;
6. ``hub-id`` — otherwise a Hugging Face hub id such as ``mteb/scifact`` (online only).

The column mapping (``columns=``) is documented in :mod:`embedscope.data.tables`; in short,
``{"id": "doc_id", "text": "body", "title": "headline", "query-id": "qid", "corpus-id": "pid",
"score": "label"}``, with ``corpus.``/``queries.`` prefixes for keys that apply to one file only.

Every layout goes through the same checks (:mod:`embedscope.data.validate`): malformed lines, missing
fields, duplicate ids, qrels naming unknown ids, empty texts, unknown splits and non-integer scores
are :class:`~embedscope.errors.DataFormatError` naming the file, line or field and the fix.
Document text is ``merge_title(title, text)``; ids are strings; relevance scores are integers; zero
judgments are kept, and queries without judgments are kept (the task protocol filters them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from embedscope.data.beir import is_text_folder, load_text_folder
from embedscope.data.hf import is_hub_layout, is_saved_dataset, load_hub_retrieval, load_local_hub, load_saved_retrieval
from embedscope.data.qa import is_qa_folder, load_qa_folder
from embedscope.data.tables import normalize_columns, suffix_of, table_suffixes
from embedscope.data.tabular import load_pairs_file
from embedscope.errors import ConfigError, DataFormatError
from embedscope.hub import looks_like_hub_id
from embedscope.messages import listing
from embedscope.types import RetrievalData

LAYOUTS = ("saved", "beir", "hub", "pairs", "hub-id")


def check_link(path: Path) -> None:
    """ConfigError for a symbolic link that leads nowhere: a loop, or a link to a missing target."""
    if path.is_symlink() and not path.exists():
        try:
            path.resolve(strict=True)
        except RuntimeError:
            raise ConfigError(f"{path}: symbolic link loop (the link points back to itself)") from None
        except OSError as e:
            if "loop" in str(e).lower() or getattr(e, "errno", None) == 40:
                raise ConfigError(f"{path}: symbolic link loop (the link points back to itself)") from None
        raise ConfigError(f"{path}: broken symbolic link (it points to {os.readlink(path)!r}, which does not exist)")


def _check_table_entries(folder: Path) -> None:
    """DataFormatError for a corpus/queries/qrels entry that is a folder where a file belongs, or a dead link."""
    for child in sorted(folder.iterdir()):
        stem = child.name.split(".")[0]
        if stem not in ("corpus", "queries", "qrels") or "." not in child.name:
            continue
        check_link(child)
        if child.is_dir():
            raise DataFormatError(f"{child}: is a folder, but the {stem} must be a file (e.g. {stem}.jsonl)")


def detect_layout(path: str | Path) -> str:
    """``saved`` | ``beir`` | ``hub`` | ``qa`` | ``pairs`` | ``hub-id`` (see the module docstring).

    >>> detect_layout("mteb/scifact-that-is-not-a-local-path")
    'hub-id'
    """
    p = Path(path).expanduser()
    if p.is_dir():
        if is_saved_dataset(p) or all(is_saved_dataset(p / n) for n in ("corpus", "queries", "qrels")):
            return "saved"
        if is_text_folder(p):
            return "beir"
        if is_hub_layout(p):
            return "hub"
        if is_qa_folder(p):
            return "qa"
        _check_table_entries(p)
        found = sorted(c.name + ("/" if c.is_dir() else "") for c in p.iterdir() if not c.name.startswith("."))
        raise DataFormatError(
            f"{p}: not a retrieval dataset folder (it holds {listing(found, 10) or 'nothing'}). Expected "
            "corpus.jsonl + queries.jsonl + qrels/<split>.tsv (BEIR), corpus.jsonl + queries.jsonl + qrels.jsonl "
            "(EvalScope), corpus/queries/qrels tables (.csv/.parquet), a Hugging Face dataset copy, a "
            "save_to_disk dataset, or documents/ + questions.json(l) (QA over documents)"
        )
    if p.is_file():
        if suffix_of(p) not in table_suffixes():
            raise DataFormatError(
                f"{p}: unsupported file type {suffix_of(p)!r}; a pairs file must be one of {', '.join(table_suffixes())}"
                " (for corpus + queries + qrels, pass their folder)"
            )
        return "pairs"
    check_link(p)
    if isinstance(path, str) and looks_like_hub_id(path):
        return "hub-id"
    raise DataFormatError(f"{path}: no such file or folder (a Hugging Face hub id looks like 'owner/name')")


def load_retrieval(
    path: str | Path,
    *,
    split: str = "test",
    columns: Mapping[str, str] | None = None,
    revision: str | None = None,
    subset: str | None = None,
) -> RetrievalData:
    """Load one split of retrieval data from any supported layout (see the module docstring).

    Args:
        path: a folder, a pairs file, or a Hugging Face hub id (``owner/name``).
        split: the split to load; a layout without split information (``qrels.jsonl``, a pairs file)
            only has ``test``.
        columns: column mapping for tables, e.g. ``{"id": "doc_id", "text": "body", "title": "headline",
            "query-id": "qid", "corpus-id": "pid", "score": "label"}`` (all keys: :mod:`embedscope.data.tables`).
        revision: the dataset revision (commit) for hub ids; ignored for local data.
        subset: the subset of a multilingual hub dataset (``<subset>-corpus`` …); None or ``default`` for none.
    """
    if not isinstance(split, str) or not split:
        raise ConfigError(f"split must be a non-empty string such as 'test', got {split!r}")
    columns = normalize_columns(columns)
    layout = detect_layout(path)
    p = Path(path).expanduser()
    if layout == "beir":
        return load_text_folder(p, split=split, columns=columns)
    if layout == "pairs":
        if split != "test":
            raise DataFormatError(f"{p}: no split {split!r}; available: test (a pairs file has one split, 'test')")
        return load_pairs_file(p, columns=columns, split=split)
    if layout == "saved":
        return load_saved_retrieval(p, split=split, columns=columns)
    if layout == "hub":
        return load_local_hub(p, split=split, subset=subset, columns=columns)
    if layout == "qa":
        return load_qa_folder(p, split=split)
    return load_hub_retrieval(str(path), split=split, revision=revision, subset=subset, columns=columns)
