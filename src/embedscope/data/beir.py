"""BEIR folders, and the table folders that share their shape.

BEIR: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/{split}.tsv`` (header ``query-id corpus-id score``, tab-separated). Corpus, queries and qrels
may also be ``.jsonl.gz``, ``.csv``, ``.tsv`` or ``.parquet`` tables read with a column mapping (see
:mod:`embedscope.data.tables`), and the qrels may be one split-less file ``qrels.<ext>`` (EvalScope's
current layout; the config side is :mod:`embedscope.settings.evalscope`), which is the split ``test``.

Document texts are ``merge_title(title, text)``, exactly what BEIR's ``GenericDataLoader`` + MTEB build.
Unlike BEIR's loader, a header-less qrels file loses no line, and a duplicate id is an error rather than
a silent overwrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from embedscope.data.tables import find_table, normalize_columns, suffix_of, table_suffixes
from embedscope.data.tabular import assemble, read_qrels_rows
from embedscope.data.validate import unknown_split
from embedscope.errors import DataFormatError
from embedscope.types import RetrievalData

DEFAULT_SPLIT = "test"
"""The split a split-less qrels file (``qrels.jsonl``) stands for."""


def is_text_folder(folder: Path) -> bool:
    """True when ``folder`` holds a corpus and queries table (BEIR / EvalScope / tables layout)."""
    return folder.is_dir() and find_table(folder, "corpus") is not None and find_table(folder, "queries") is not None


def qrels_splits(folder: Path) -> dict[str, Path]:
    """Split name → qrels file: ``qrels/<split>.<ext>``, and a split-less ``qrels.<ext>`` as ``test``."""
    out: dict[str, Path] = {}
    sub = folder / "qrels"
    if sub.is_dir():
        for path in sorted(sub.iterdir()):
            if path.is_file() and not path.name.startswith(".") and suffix_of(path) in table_suffixes():
                split = path.name[: -len(suffix_of(path))]
                if split in out:
                    raise DataFormatError(
                        f"{sub}: both {out[split].name} and {path.name} for split {split!r}; keep one"
                    )
                out[split] = path
    single = find_table(folder, "qrels")
    if single is not None:
        if DEFAULT_SPLIT in out:
            raise DataFormatError(
                f"{folder}: both {single.name} and qrels/{out[DEFAULT_SPLIT].name} give the "
                f"{DEFAULT_SPLIT!r} qrels; remove one"
            )
        out[DEFAULT_SPLIT] = single
    return out


def load_text_folder(
    folder: Path, *, split: str = DEFAULT_SPLIT, columns: Mapping[str, str] | None = None, name: str | None = None
) -> RetrievalData:
    """Load one split from a BEIR / EvalScope / tables folder, with strict validation."""
    columns = normalize_columns(columns)
    folder = Path(folder)
    corpus, queries = find_table(folder, "corpus"), find_table(folder, "queries")
    if corpus is None or queries is None:
        missing = " and ".join(n for n, p in (("corpus", corpus), ("queries", queries)) if p is None)
        raise DataFormatError(
            f"{folder}: no {missing} file; expected corpus.jsonl and queries.jsonl "
            "(or .csv/.tsv/.parquet) in the folder"
        )
    splits = qrels_splits(folder)
    if not splits:
        raise DataFormatError(
            f"{folder}: no qrels found; add qrels/{split}.tsv (BEIR: query-id, corpus-id, score) "
            "or qrels.jsonl (EvalScope)"
        )
    if split not in splits:
        raise unknown_split(split, list(splits), folder)
    qrels_path = splits[split]
    qrels, places = read_qrels_rows(qrels_path, columns)
    return assemble(corpus, queries, qrels, places, qrels_path, columns=columns, name=name or folder.name, split=split)
