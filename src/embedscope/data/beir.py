"""BEIR folders and EvalScope custom folders.

BEIR: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/{split}.tsv`` (header ``query-id corpus-id score``, tab-separated). EvalScope's current custom
layout has the same corpus and queries files and ``qrels.jsonl`` (one ``{"query-id", "corpus-id",
"score"}`` object per line) or ``qrels/{split}.jsonl``; EvalScope's older layout is BEIR's.
Corpus and queries may also be CSV/TSV/Parquet (``corpus.csv`` …) read with a column mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from embedscope.data.tabular import assemble, read_qrels_rows
from embedscope.data.validate import TABLE_SUFFIXES, suffix_of, unknown_split
from embedscope.errors import DataFormatError


def find_table(folder: Path, stem: str) -> Path | None:
    """``folder/stem.<jsonl|jsonl.gz|csv|tsv|parquet>``, the first that exists."""
    for suffix in TABLE_SUFFIXES:
        path = folder / f"{stem}{suffix}"
        if path.is_file():
            return path
    return None


def is_text_folder(folder: Path) -> bool:
    """True when ``folder`` holds a corpus and queries table (BEIR / EvalScope / tables layout)."""
    return find_table(folder, "corpus") is not None and find_table(folder, "queries") is not None


def qrels_splits(folder: Path) -> dict[str, Path]:
    """Split name → qrels file: ``qrels/<split>.<tsv|jsonl|csv|parquet>``, or a split-less ``qrels.*`` as ``test``."""
    out: dict[str, Path] = {}
    sub = folder / "qrels"
    if sub.is_dir():
        for path in sorted(sub.iterdir()):
            if path.is_file() and suffix_of(path) in TABLE_SUFFIXES:
                out[path.name[: -len(suffix_of(path))]] = path
    single = find_table(folder, "qrels")
    if single is not None:
        out.setdefault("test", single)
    return out


def load_text_folder(folder: Path, *, split: str = "test", columns: Mapping[str, str] | None = None,
                     name: str | None = None):
    """Load one split from a BEIR / EvalScope / tables folder, with strict validation."""
    corpus, queries = find_table(folder, "corpus"), find_table(folder, "queries")
    if corpus is None or queries is None:
        raise DataFormatError(f"{folder}: expected corpus.jsonl and queries.jsonl (or .csv/.tsv/.parquet) in the folder")
    splits = qrels_splits(folder)
    if not splits:
        raise DataFormatError(f"{folder}: no qrels found; add qrels/{split}.tsv (BEIR: query-id, corpus-id, score) "
                              "or qrels.jsonl (EvalScope)")
    if split not in splits:
        raise unknown_split(split, list(splits), folder)
    qrels_path = splits[split]
    qrels, places = read_qrels_rows(qrels_path, columns)
    return assemble(corpus, queries, qrels, places, qrels_path, columns=columns, name=name or folder.name, split=split)
