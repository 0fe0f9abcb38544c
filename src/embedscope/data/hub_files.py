"""Which files of a dataset folder, as ``huggingface-cli download`` leaves it, hold one split (of one subset).

Layouts, tried in order:

1. README ``configs:`` with ``data_files`` globs (the subset is the config name; ``default`` or the only config
   when none is named);
2. one folder per subset, one file (or shards) per split: ``<subset>/<split>.parquet``,
   ``<subset>/<split>-00000-of-00001.parquet``, ``<subset>/data/<split>-*.parquet``;
3. one folder per split, one file per subset: ``<split>/<subset>.parquet`` (mteb/sib200);
4. no subset: ``<split>.parquet``, ``data/<split>-00000-of-00001.parquet``.

Parquet, JSONL (optionally gzipped), JSON, CSV and TSV files are read; ``.gitattributes``, ``README.md``,
``.cache/`` and other hidden entries are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from embedscope.data.tables import suffix_of, table_suffixes
from embedscope.errors import DataFormatError

_SHARD = re.compile(r"(-\d{5}-of-\d{5}|-\d+)$")


def _suffix(path: Path) -> str:
    """The table suffix of ``path`` (``.jsonl.gz``, ``.parquet`` …), or ``""`` for any other file."""
    suffix = suffix_of(path)
    return suffix if suffix in table_suffixes() else ""


def data_files(folder: Path) -> list[Path]:
    """Every data file under ``folder`` (sorted), hidden entries (``.cache/``, ``.gitattributes``) left out."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and _suffix(p) and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _key(folder: Path, path: Path) -> tuple[str, ...]:
    """``sib200/test/eng_Latn.parquet`` → ``("test", "eng_Latn")``; shard suffixes dropped from the file name."""
    parts = list(path.relative_to(folder).parts)
    parts[-1] = _SHARD.sub("", parts[-1][: -len(_suffix(path))])
    return tuple(parts)


def _from_readme(folder: Path, split: str, subset: str | None) -> list[Path] | None:
    from embedscope.data.hf import _readme_configs, local_subsets

    if not _readme_configs(folder):
        return None
    configs = local_subsets(folder)
    name = subset if subset not in (None, "default") else ("default" if "default" in configs else None)
    if name is None and len(configs) == 1:
        name = next(iter(configs))
    if name is None or name not in configs:
        return None
    return configs[name].get(split, [])


def split_files(folder: str | Path, split: str, subset: str | None = None) -> list[Path]:
    """The data files of ``split`` (and ``subset``; None or ``default`` for none) in ``folder``.

    Raises DataFormatError naming the splits (and subsets) the folder has when nothing matches.
    """
    folder = Path(folder)
    from_readme = _from_readme(folder, split, subset)
    if from_readme:
        return from_readme
    files = data_files(folder)
    keys = {p: _key(folder, p) for p in files}
    sub = None if subset in (None, "default") else subset
    patterns = (
        [(sub, split), (sub, "data", split), (split, sub), ("data", sub, split)]
        if sub
        else [(split,), ("data", split), ("default", split), ("default", "data", split)]
    )
    for pattern in patterns:
        found = [p for p, k in keys.items() if k == pattern]
        if found:
            return found
    if sub is None:  # a folder per split holding one subset's file: the only subset there is
        found = [p for p, k in keys.items() if len(k) == 2 and k[0] == split]
        if len({k[1] for p, k in keys.items() if p in found}) == 1:
            return found
    described = sorted({"/".join(k) for k in keys.values()})
    raise DataFormatError(
        f"{folder}: no data file for split {split!r}{f' of subset {sub!r}' if sub else ''} (found "
        f"{', '.join(described[:12]) or 'no data files'}{', …' if len(described) > 12 else ''}). Expected "
        f"{split}.parquet, data/{split}-00000-of-00001.parquet, <subset>/{split}.parquet or {split}/<subset>.parquet "
        "(also .jsonl/.json/.csv/.tsv), or README configs with data_files"
    )


def read_dataset(paths: list[Path]):
    """The rows of ``paths`` (one split's files, in order) as one ``datasets.Dataset``."""
    import datasets

    suffixes = {_suffix(p) for p in paths}
    if suffixes == {".parquet"}:
        import pyarrow as pa
        import pyarrow.parquet as pq

        return datasets.Dataset(pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default"))
    builder = {".jsonl": "json", ".jsonl.gz": "json", ".json": "json", ".csv": "csv", ".tsv": "csv"}
    kinds = {builder.get(s) for s in suffixes}
    if len(suffixes) == 1 and kinds == {None} and "" not in suffixes:  # a registered format datasets cannot build
        from embedscope.data.tables import read_rows

        return datasets.Dataset.from_list([row for p in paths for _, row in read_rows(p)])
    if len(kinds) != 1 or None in kinds:
        raise DataFormatError(f"{paths[0].parent}: mixed or unsupported data files {sorted(suffixes)}")
    kind = kinds.pop()
    kwargs = {"delimiter": "\t"} if suffixes == {".tsv"} else {}
    datasets.disable_progress_bars()
    return datasets.load_dataset(kind, data_files=[str(p) for p in paths], split="train", **kwargs)
