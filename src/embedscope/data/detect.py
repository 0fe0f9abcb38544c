"""One entry point for retrieval data: find the layout of a path and load a split.

Layouts, in the order they are recognised:

1. a ``save_to_disk`` dataset (``dataset_dict.json``), or ``corpus/ queries/ qrels/`` saved datasets;
2. a local copy of an MTEB-style hub repository (``README.md`` configs or ``corpus/`` + ``queries/`` data);
3. a BEIR / EvalScope / tables folder (``corpus.*``, ``queries.*``, ``qrels/{split}.*`` or ``qrels.*``);
4. a single pairs file (``.jsonl``/``.csv``/``.tsv``/``.parquet`` rows of query + relevant passage);
5. otherwise a Hugging Face hub id such as ``mteb/scifact`` (online only).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from embedscope.data.beir import is_text_folder, load_text_folder
from embedscope.data.hf import is_hub_layout, is_saved_dataset, load_hub_retrieval, load_saved_retrieval
from embedscope.data.tabular import load_pairs_file
from embedscope.data.validate import TABLE_SUFFIXES, suffix_of
from embedscope.errors import DataFormatError
from embedscope.types import RetrievalData


def detect_layout(path: str | Path) -> str:
    """``saved`` | ``hub`` | ``beir`` | ``pairs`` | ``hub-id``.

    >>> detect_layout("mteb/scifact-that-is-not-a-local-path")
    'hub-id'
    """
    p = Path(path)
    if p.is_dir():
        if is_saved_dataset(p) or all(is_saved_dataset(p / n) for n in ("corpus", "queries", "qrels")):
            return "saved"
        if is_text_folder(p):
            return "beir"
        if is_hub_layout(p):
            return "hub"
        raise DataFormatError(
            f"{p}: not a retrieval dataset folder. Expected corpus.jsonl + queries.jsonl + qrels/<split>.tsv (BEIR), "
            "corpus.jsonl + queries.jsonl + qrels.jsonl (EvalScope), a Hugging Face dataset copy, or a saved dataset"
        )
    if p.is_file():
        if suffix_of(p) not in TABLE_SUFFIXES:
            raise DataFormatError(f"{p}: unsupported file type; a pairs file must be one of {', '.join(TABLE_SUFFIXES)}")
        return "pairs"
    if str(path).count("/") == 1 and not str(path).startswith((".", "/", "~")):
        return "hub-id"
    raise DataFormatError(f"{path}: no such file or folder")


def load_retrieval(
    path: str | Path,
    *,
    split: str = "test",
    columns: Mapping[str, str] | None = None,
    revision: str | None = None,
    subset: str | None = None,
) -> RetrievalData:
    """Load one split of retrieval data from any supported layout (see the module docstring)."""
    layout = detect_layout(path)
    p = Path(path)
    if layout == "beir":
        return load_text_folder(p, split=split, columns=columns)
    if layout == "pairs":
        if split != "test":
            raise DataFormatError(f"{p}: a pairs file has one split, 'test'; asked for {split!r}")
        return load_pairs_file(p, columns=columns, split=split)
    if layout == "saved":
        return load_saved_retrieval(p, split=split)
    return load_hub_retrieval(str(path), split=split, revision=revision if layout == "hub-id" else None, subset=subset)
