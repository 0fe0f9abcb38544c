"""Retrieval data in Hugging Face layouts.

* **Local copy of an MTEB-style hub repository** — subsets ``corpus``, ``queries`` (or ``query``) and
  ``default`` (or ``qrels``), either declared by ``configs:`` in the README's YAML header or stored as
  one subfolder per subset (``corpus/test-00000-of-00001.parquet``, ``default/test.jsonl``, …). Files
  are read directly (Parquet, JSONL, CSV, TSV), with the same strict checks as every other layout.
  Subsets of multilingual datasets are ``<subset>-corpus`` / ``<subset>-queries`` / ``<subset>-qrels``.
* **``save_to_disk`` data** — a ``DatasetDict`` with ``corpus``, ``queries`` and ``qrels`` (or the split
  name) entries, or three saved datasets in ``corpus/``, ``queries/``, ``qrels/``.
* **A hub id** such as ``mteb/scifact`` — loaded with ``datasets.load_dataset(id, subset, revision=…)``.
  Offline (``HF_HUB_OFFLINE=1``) or without network, this fails with a :class:`DataFormatError`
  saying to download the data and pass its local folder.

The rules are mteb 2.26's ``RetrievalDatasetLoader``: a corpus or queries subset with a single split
is used whatever split is asked for (the qrels must have the split); ``_id`` columns count as ``id``;
document text is ``title + " " + text`` stripped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedscope.data.hub_files import local_subsets
from embedscope.data.tables import normalize_columns, read_rows, suffix_of, table_suffixes
from embedscope.data.tabular import Rows, _qrels_tsv_rows, build_split, qrels_from_rows, texts_from_rows
from embedscope.data.validate import unknown_split
from embedscope.errors import DataFormatError, EmbedscopeError, MissingDependencyError, SettingError
from embedscope.types import RetrievalData

if TYPE_CHECKING:
    from embedscope.tasks.catalog import CatalogEntry


def hub_offline() -> bool:
    """True when an offline flag is set or the hub does not answer (:func:`embedscope.hub.hub_offline`)."""
    from embedscope.hub import hub_offline as offline

    return offline()


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a dependency
        raise MissingDependencyError("datasets", "Loading Hugging Face datasets") from e
    datasets.disable_progress_bars()
    return datasets


# ----------------------------------------------------------------------------------------------- save_to_disk


def is_saved_dataset(folder: Path) -> bool:
    """A folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    folder = Path(folder)
    return folder.is_dir() and ((folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file())


def _dataset_rows(ds: Any, label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(location, row)`` for a ``datasets.Dataset``, in batches (fast for large corpora)."""
    n = 0
    for batch in ds.with_format("arrow").iter(batch_size=65536):
        for row in batch.to_pylist():
            n += 1
            yield f"{label}, row {n}", row


def _pick_split(splits: Mapping[str, Any], split: str, where: str, *, strict: bool) -> Any:
    if split in splits:
        return splits[split]
    if not strict and len(splits) == 1:
        return next(iter(splits.values()))
    raise unknown_split(split, list(splits), where)


def load_saved_retrieval(
    folder: Path, *, split: str = "test", columns: Mapping[str, str] | None = None
) -> RetrievalData:
    """A ``save_to_disk`` DatasetDict with ``corpus``, ``queries`` and ``qrels`` (or ``<split>``) entries, or a
    folder of three saved datasets ``corpus/``, ``queries/``, ``qrels/`` (each one Dataset or a DatasetDict by
    split; corpus and queries with a single split are used whatever split is asked for)."""
    datasets = _datasets()
    columns = normalize_columns(columns)
    folder = Path(folder)
    whole = datasets.load_from_disk(str(folder)) if is_saved_dataset(folder) else None

    def part(name: str) -> tuple[Any, str]:
        sub = folder / name
        if is_saved_dataset(sub):
            loaded = datasets.load_from_disk(str(sub))
            if isinstance(loaded, datasets.DatasetDict):
                return _pick_split(loaded, split, str(sub), strict=name == "qrels"), f"{sub} [{split}]"
            return loaded, str(sub)
        if isinstance(whole, datasets.DatasetDict):
            if name in whole:
                return whole[name], f"{folder} [{name}]"
            if name == "qrels" and split in whole:
                return whole[split], f"{folder} [{split}]"
            if name == "qrels":
                candidates = [k for k in whole if k not in ("corpus", "queries")]
                if candidates:
                    raise unknown_split(split, candidates, folder)
            raise DataFormatError(
                f"{folder}: a saved DatasetDict needs a {name!r} entry (found "
                f"{', '.join(whole)}); save corpus, queries and qrels under those names"
            )
        raise DataFormatError(
            f"{folder}: no saved {name!r} dataset; save a DatasetDict with corpus, queries and "
            "qrels, or save them to corpus/, queries/ and qrels/"
        )

    corpus_ds, corpus_where = part("corpus")
    queries_ds, queries_where = part("queries")
    qrels_ds, qrels_where = part("qrels")
    corpus_meta: dict[str, tuple[Any, ...]] = {}
    queries_meta: dict[str, tuple[Any, ...]] = {}
    corpus = texts_from_rows(
        _dataset_rows(corpus_ds, corpus_where), corpus_where, "corpus", columns, metadata=corpus_meta
    )
    queries = texts_from_rows(
        _dataset_rows(queries_ds, queries_where), queries_where, "queries", columns, metadata=queries_meta
    )
    qrels, places = qrels_from_rows(_dataset_rows(qrels_ds, qrels_where), columns)
    return build_split(
        corpus,
        queries,
        qrels,
        places,
        qrels_where,
        name=folder.name,
        split=split,
        source=str(folder),
        revision="local",
        corpus_metadata=corpus_meta,
        queries_metadata=queries_meta,
    )


# ------------------------------------------------------------------------------------ local hub repository copy


def is_hub_layout(folder: Path) -> bool:
    """A local copy of an MTEB-style dataset repository (README configs or corpus/ + queries/ data folders)."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    subsets = local_subsets(folder)
    return any(name == "corpus" or name.endswith("-corpus") for name in subsets) and any(
        name in ("queries", "query") or name.endswith("-queries") for name in subsets
    )


def _file_rows(paths: list[Path], *, qrels: bool = False) -> Rows:
    for path in paths:
        if qrels and path.name.lower().endswith(".tsv"):
            yield from _qrels_tsv_rows(path)
        else:
            yield from read_rows(path)


def load_local_hub(
    folder: Path, *, split: str = "test", subset: str | None = None, columns: Mapping[str, str] | None = None
) -> RetrievalData:
    """One split of a local copy of an MTEB-style hub repository."""
    columns = normalize_columns(columns)
    folder = Path(folder)
    subsets = local_subsets(folder)
    prefix = f"{subset}-" if subset and subset != "default" else ""

    def files(candidates: list[str], *, strict: bool) -> tuple[list[Path], str]:
        for config in candidates:
            if config in subsets:
                if not subsets[config]:
                    raise DataFormatError(f"{folder}: subset {config!r} has no data files")
                paths = _pick_split(subsets[config], split, f"{folder} (subset {config!r})", strict=strict)
                return paths, config
        raise DataFormatError(
            f"{folder}: no subset {' or '.join(repr(c) for c in candidates)}; found {', '.join(subsets) or 'none'}"
        )

    corpus_files, _ = files([f"{prefix}corpus"], strict=False)
    queries_files, _ = files(["query", f"{prefix}queries"] if not prefix else [f"{prefix}queries"], strict=False)
    qrels_files, _ = files([f"{prefix}qrels"] if prefix else ["default", "qrels"], strict=True)
    where = lambda paths: str(paths[0]) if len(paths) == 1 else f"{paths[0].parent} ({len(paths)} files)"  # noqa: E731
    corpus_meta: dict[str, tuple[Any, ...]] = {}
    queries_meta: dict[str, tuple[Any, ...]] = {}
    corpus = texts_from_rows(
        _file_rows(corpus_files), where(corpus_files), "corpus", columns, allow_empty=True, metadata=corpus_meta
    )
    queries = texts_from_rows(
        _file_rows(queries_files), where(queries_files), "queries", columns, allow_empty=True, metadata=queries_meta
    )
    qrels, places = qrels_from_rows(_file_rows(qrels_files, qrels=True), columns)
    return build_split(
        corpus,
        queries,
        qrels,
        places,
        where(qrels_files),
        name=folder.name,
        split=split,
        source=str(folder),
        revision="local",
        corpus_metadata=corpus_meta,
        queries_metadata=queries_meta,
    )


# ------------------------------------------------------------------------------------------------ hub ids


def looks_like_missing_path(text: str) -> bool:
    """Whether ``text`` names a local file or folder that does not exist, rather than a hub id: it does not exist
    and has a path's shape (a leading ``.``, ``~`` or ``/``, more than one separator, a backslash) or a file
    suffix (any suffix without a slash; a table suffix such as ``.csv`` with one).

    >>> [looks_like_missing_path(t) for t in ("nonexist.csv", "data/x/y", "./x", "mteb/stsb", "org/p.csv", "glue")]
    [True, True, True, False, True, False]
    """
    from embedscope.hub import looks_like_hub_id

    path = Path(text).expanduser()
    if path.exists():
        return False
    if looks_like_hub_id(text):
        return suffix_of(path) in table_suffixes()
    return bool(path.suffix) or "/" in text or "\\" in text or text.startswith(("~", "."))


def hub_dataset_id(text: str) -> str:
    """``text`` when it can be loaded from the hub now: a missing local path is "no such file or folder" and an
    offline hub one line saying so, each at once (never huggingface_hub's retries)."""
    if looks_like_missing_path(text):
        raise DataFormatError(f"{text}: no such file or folder")
    if hub_offline():
        from embedscope.hub import offline_reason

        raise DataFormatError(
            f"{text}: no such file or folder here, and the Hugging Face hub is offline ({offline_reason()}); pass a "
            "local file or folder"
        )
    return text


def _hub_failure(repo: str, error: BaseException) -> DataFormatError:
    from embedscope.hub import offline_reason

    why = offline_reason() if hub_offline() else f"{type(error).__name__}: {error}"
    return DataFormatError(
        f"{repo}: cannot load the dataset from the Hugging Face hub ({why}). Download it where the hub is "
        f"reachable (e.g. `huggingface-cli download --repo-type dataset {repo} --local-dir <folder>`) and pass "
        "the local folder instead."
    )


def load_hub_retrieval(
    repo: str,
    *,
    split: str = "test",
    revision: str | None = None,
    subset: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> RetrievalData:
    """Corpus, queries and qrels of the hub dataset ``repo``, as mteb loads them (any local layout, a hub id too:
    :func:`embedscope.data.detect.load_retrieval`).

    Published datasets may hold empty texts; they are kept with a warning (MTEB encodes them as they are).
    """
    if Path(repo).is_dir():
        raise DataFormatError(f"{repo} is a local folder: load it with embedscope.data.detect.load_retrieval")
    columns = normalize_columns(columns)
    if looks_like_missing_path(repo):
        raise DataFormatError(f"{repo}: no such file or folder")
    if hub_offline():  # at once, not after huggingface_hub's retries
        raise _hub_failure(repo, ConnectionError("offline"))
    datasets = _datasets()
    prefix = f"{subset}-" if subset and subset != "default" else ""
    try:
        configs = list(datasets.get_dataset_config_names(repo, revision=revision))

        def load(config: str, *, strict: bool) -> Any:
            splits = list(datasets.get_dataset_split_names(repo, config_name=config, revision=revision))
            chosen = _pick_split({s: s for s in splits}, split, f"{repo} (subset {config!r})", strict=strict)
            return datasets.load_dataset(repo, config, split=chosen, revision=revision)

        corpus_ds = load(f"{prefix}corpus", strict=False)
        queries_ds = load("query" if "query" in configs and not prefix else f"{prefix}queries", strict=False)
        qrels_config = f"{prefix}qrels" if prefix else ("default" if "default" in configs else "qrels")
        qrels_ds = load(qrels_config, strict=True)
    except EmbedscopeError:
        raise
    except Exception as e:  # network, offline mode, missing repository, …
        raise _hub_failure(repo, e) from e
    corpus = texts_from_rows(
        _dataset_rows(corpus_ds, f"{repo} corpus"), f"{repo} corpus", "corpus", columns, allow_empty=True
    )
    queries = texts_from_rows(
        _dataset_rows(queries_ds, f"{repo} queries"), f"{repo} queries", "queries", columns, allow_empty=True
    )
    qrels, places = qrels_from_rows(_dataset_rows(qrels_ds, f"{repo} qrels"), columns)
    return build_split(
        corpus,
        queries,
        qrels,
        places,
        f"{repo} qrels",
        name=repo.rsplit("/", 1)[-1],
        split=split,
        source=repo,
        revision=revision or "main",
    )


def config_rows(
    repo: str, config: str, split: str, revision: str | None = None
) -> list[tuple[str, Mapping[str, Any]]] | None:
    """Rows ``(where, row)`` of one subset (config) of a dataset repository, local copy or hub id; None when it has
    none. The split is ``split`` or, when the subset has one split only (``qrel_diff``, ``instruction``), that one."""
    where = f"{repo} (subset {config!r})"
    if Path(repo).is_dir():
        subsets = local_subsets(Path(repo))
        if config not in subsets:
            return None
        return list(_file_rows(_pick_split(subsets[config], split, where, strict=False)))
    datasets = _datasets()
    try:
        if config not in datasets.get_dataset_config_names(repo, revision=revision):
            return None
        splits = list(datasets.get_dataset_split_names(repo, config_name=config, revision=revision))
        chosen = _pick_split({s: s for s in splits}, split, where, strict=False)
        return list(_dataset_rows(datasets.load_dataset(repo, config, split=chosen, revision=revision), repo))
    except EmbedscopeError:
        raise
    except Exception as e:  # network, offline mode, missing repository, …
        raise _hub_failure(repo, e) from e


def load_top_ranked(
    repo: str, *, split: str = "test", revision: str | None = None, subset: str | None = None
) -> dict[str, list[str]] | None:
    """The ``top_ranked`` candidates of a reranking dataset (local copy or hub id), or None when it has none."""
    prefix = f"{subset}-" if subset and subset != "default" else ""
    rows = config_rows(repo, f"{prefix}top_ranked", split, revision)
    if rows is None:
        return None
    out: dict[str, list[str]] = {}
    for where, row in rows:
        ids = row.get("corpus-ids")
        if not isinstance(ids, (list, tuple)):
            raise DataFormatError(f"{where}: top_ranked rows need 'query-id' and a list 'corpus-ids'")
        out[str(row.get("query-id"))] = [str(d) for d in ids]
    return out


# -- one split of a catalog task's table (STS, classification, clustering, …) ---------------------------


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
        raise SettingError(
            "data_dir",
            f"{entry.name}: cannot load {location} ({e}). Offline, download the dataset and pass its folder as "
            "{data_dir}.",
        ) from e
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
