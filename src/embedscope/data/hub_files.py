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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def _readme_configs(folder: Path) -> list[dict[str, Any]] | None:
    """The ``configs:`` list of the README's YAML header, or None."""
    readme = folder / "README.md"
    if not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8", errors="replace")
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", text, flags=re.S)
    if not match or "configs:" not in match.group(1):
        return None
    import yaml

    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as e:
        raise DataFormatError(f"{readme}: the YAML header does not parse ({e}); fix it or remove the README") from None
    configs = meta.get("configs") if isinstance(meta, dict) else None
    return configs if isinstance(configs, list) else None


def _split_of(path: Path, config_dir: Path) -> str:
    stem = path.name[: -len(suffix_of(path))]
    stem = _SHARD.sub("", stem)
    if path.parent != config_dir and (not stem or stem.isdigit() or stem in ("data", "part")):
        return path.parent.name
    return stem or "train"


def _data_files(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and suffix_of(p) in table_suffixes()
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


def local_subsets(folder: Path) -> dict[str, dict[str, list[Path]]]:
    """Subset name → split → data files of a local hub repository copy (README configs or subfolders)."""
    folder = Path(folder)
    configs = _readme_configs(folder)
    out: dict[str, dict[str, list[Path]]] = {}
    if configs is not None:
        for cfg in configs:
            if not isinstance(cfg, Mapping) or "config_name" not in cfg:
                continue
            files = cfg.get("data_files")
            entries: list[tuple[str, Any]]
            if files is None:
                entries = [("train", f"{cfg['config_name']}/**")]
            elif isinstance(files, (str, list)) and (isinstance(files, str) or all(isinstance(f, str) for f in files)):
                entries = [("train", files)]
            elif isinstance(files, Mapping):
                entries = list(files.items())
            else:
                entries = [(str(f.get("split", "train")), f.get("path")) for f in files if isinstance(f, Mapping)]
            splits: dict[str, list[Path]] = {}
            for split, patterns in entries:
                for pattern in [patterns] if isinstance(patterns, str) else list(patterns or []):
                    matches = sorted(
                        p for p in folder.glob(pattern) if p.is_file() and suffix_of(p) in table_suffixes()
                    )
                    splits.setdefault(str(split), []).extend(matches)
            out[str(cfg["config_name"])] = splits
        return out
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        splits = {}
        for path in _data_files(sub):
            splits.setdefault(_split_of(path, sub), []).append(path)
        if splits:
            out[sub.name] = splits
    return out


def _from_readme(folder: Path, split: str, subset: str | None) -> list[Path] | None:
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
