"""Retrieval data in Hugging Face layouts: the MTEB hub layout (subsets ``corpus``, ``queries``,
``default``/``qrels`` and optionally ``top_ranked``), a local copy of such a repository, a
``save_to_disk`` DatasetDict, or a hub id (online, with a pinned revision).

The loading rules are mteb 2.26's ``RetrievalDatasetLoader``: a subset with a single split is used
whatever split is asked for; ``_id`` columns become ``id``; document text is ``title + " " + text``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData, merge_title


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def is_saved_dataset(folder: Path) -> bool:
    return folder.is_dir() and any((folder / f).is_file() for f in ("dataset_dict.json", "dataset_info.json"))


def is_hub_layout(folder: Path) -> bool:
    """A local copy of an MTEB-style dataset repository (README configs or corpus/queries subfolders)."""
    if not folder.is_dir():
        return False
    readme = folder / "README.md"
    if readme.is_file() and "config_name: corpus" in readme.read_text(encoding="utf-8", errors="replace"):
        return True
    return (folder / "corpus").is_dir() and (folder / "queries").is_dir()


def _subfolder_layout(repo: str) -> bool:
    """A local copy without README configs: one subfolder of data files per subset."""
    folder = Path(repo)
    readme = folder / "README.md"
    return folder.is_dir() and not (readme.is_file() and "config_name:" in readme.read_text(errors="replace"))


def _configs(repo: str, revision: str | None) -> list[str]:
    import datasets

    if _subfolder_layout(repo):
        return sorted(p.name for p in Path(repo).iterdir() if p.is_dir() and not p.name.startswith("."))
    return list(datasets.get_dataset_config_names(repo, revision=revision))


def _split(repo: str, config: str, split: str, revision: str | None) -> str:
    import datasets

    if _subfolder_layout(repo):
        return split
    splits = list(datasets.get_dataset_split_names(repo, config_name=config, revision=revision))
    if split in splits:
        return split
    if len(splits) == 1:
        return splits[0]
    raise DataFormatError(f"{repo} ({config}): no split {split!r}; available: {', '.join(splits)}")


def _load(repo: str, config: str, split: str, revision: str | None):
    import datasets

    if _subfolder_layout(repo):
        folder = Path(repo) / config
        if not folder.is_dir():
            raise DataFormatError(f"{repo}: no subset folder {config!r}; found {', '.join(_configs(repo, None))}")
        loaded = datasets.load_dataset(str(folder))
        if split in loaded:
            return loaded[split]
        if len(loaded) == 1:
            return next(iter(loaded.values()))
        raise DataFormatError(f"{folder}: no split {split!r}; available: {', '.join(loaded)}")
    return datasets.load_dataset(repo, config, split=_split(repo, config, split, revision), revision=revision)


def _ids(ds, where: str) -> list[str]:
    column = "_id" if "_id" in ds.column_names else "id"
    if column not in ds.column_names:
        raise DataFormatError(f"{where}: no 'id' or '_id' column (columns: {ds.column_names})")
    return [str(x) for x in ds[column]]


def load_hub_retrieval(repo: str, *, split: str = "test", revision: str | None = None,
                       subset: str | None = None) -> RetrievalData:
    """Corpus, queries and qrels of ``repo`` (hub id or local repository copy), as mteb loads them."""
    import datasets

    datasets.disable_progress_bars()
    prefix = f"{subset}-" if subset and subset != "default" else ""
    try:
        configs = _configs(repo, revision)
        corpus_ds = _load(repo, f"{prefix}corpus", split, revision)
        q_config = "query" if "query" in configs else f"{prefix}queries"
        queries_ds = _load(repo, q_config, split, revision)
        qrels_config = f"{prefix}qrels" if prefix else ("default" if "default" in configs else "qrels")
        qrels_ds = _load(repo, qrels_config, split, revision)
    except (ConnectionError, OSError) as e:
        hint = " (HF_HUB_OFFLINE is set)" if _offline() else ""
        raise DataFormatError(f"{repo}: cannot load the dataset{hint}: {e}. Download it where the hub is reachable "
                              "and pass the local folder instead.") from e
    titles = corpus_ds["title"] if "title" in corpus_ds.column_names else [""] * len(corpus_ds)
    corpus = Corpus(tuple(_ids(corpus_ds, f"{repo} corpus")),
                    tuple(merge_title(t, x) for t, x in zip(titles, corpus_ds["text"])))
    queries = Queries(tuple(_ids(queries_ds, f"{repo} queries")), tuple(str(x) for x in queries_ds["text"]))
    qrels: dict[str, dict[str, int]] = {}
    for row in qrels_ds.select_columns(["query-id", "corpus-id", "score"]):
        qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    return RetrievalData(corpus, queries, qrels, name=Path(repo).name, split=split, source=repo,
                         revision=revision or "local")


def load_top_ranked(repo: str, *, split: str = "test", revision: str | None = None,
                    subset: str | None = None) -> dict[str, list[str]] | None:
    """The ``top_ranked`` candidates of a reranking dataset, or None when it has none."""
    prefix = f"{subset}-" if subset and subset != "default" else ""
    if f"{prefix}top_ranked" not in _configs(repo, revision):
        return None
    ds = _load(repo, f"{prefix}top_ranked", split, revision)
    return {str(r["query-id"]): [str(d) for d in r["corpus-ids"]] for r in ds}


def load_saved_retrieval(folder: Path, *, split: str = "test") -> RetrievalData:
    """A ``save_to_disk`` DatasetDict with ``corpus``, ``queries`` and ``qrels`` entries, or a folder of
    three saved datasets ``corpus/``, ``queries/``, ``qrels/`` (each with the split, or a single one)."""
    import datasets

    def part(name: str) -> Any:
        loaded = datasets.load_from_disk(str(folder / name)) if (folder / name).is_dir() else None
        if loaded is None:
            whole = datasets.load_from_disk(str(folder))
            if not isinstance(whole, datasets.DatasetDict) or name not in whole:
                raise DataFormatError(f"{folder}: a saved dataset needs '{name}' (found {list(whole) if isinstance(whole, datasets.DatasetDict) else 'one Dataset'})")
            return whole[name]
        if isinstance(loaded, datasets.DatasetDict):
            if split in loaded:
                return loaded[split]
            if len(loaded) == 1:
                return next(iter(loaded.values()))
            raise DataFormatError(f"{folder / name}: no split {split!r}; available: {', '.join(loaded)}")
        return loaded

    corpus_ds, queries_ds, qrels_ds = part("corpus"), part("queries"), part("qrels")
    titles = corpus_ds["title"] if "title" in corpus_ds.column_names else [""] * len(corpus_ds)
    corpus = Corpus(tuple(_ids(corpus_ds, f"{folder} corpus")),
                    tuple(merge_title(t, x) for t, x in zip(titles, corpus_ds["text"])))
    queries = Queries(tuple(_ids(queries_ds, f"{folder} queries")), tuple(str(x) for x in queries_ds["text"]))
    qrels: dict[str, dict[str, int]] = {}
    for row in qrels_ds:
        qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    return RetrievalData(corpus, queries, qrels, name=folder.name, split=split, source=str(folder))
