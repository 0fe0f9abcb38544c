"""The task catalog: every MTEB text task, as declarative data (``catalog.json.gz``).

Each entry names the task type, the Hugging Face dataset (path and pinned revision), splits,
languages, main score, the protocol parameters mteb uses, its size (from mteb's descriptive
statistics) and mteb's ``dataset_transform`` where it is simple data (renames, subsampling,
concatenated splits, flattened clustering sets). ``benchmarks`` are mteb's named benchmarks.
``scripts/build_catalog.py`` regenerates the file from the installed ``mteb``; nothing here needs
``mteb`` at run time.

>>> entry = catalog_entry("SciFact")
>>> entry.type, entry.dataset_path, entry.main_score
('Retrieval', 'mteb/scifact', 'ndcg_at_10')
>>> [e.name for e in find_entries(language="rus", type="STS")][:3]
['RuSTSBenchmarkSTS', 'STS22', 'RUParaPhraserSTS']
>>> "SICKNLPairClassification" in benchmark_tasks("MTEB(nld, v1)")
True
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, SettingError, UnknownNameError

CATALOG_FILE = Path(__file__).with_name("catalog.json.gz")


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog task: where its data lives and how mteb scores it."""

    name: str
    type: str
    protocol: str
    dataset_path: str
    dataset_revision: str
    eval_splits: tuple[str, ...]
    hf_subsets: dict[str, tuple[str, ...]]
    languages: tuple[str, ...]
    main_score: str
    params: dict[str, Any] = field(default_factory=dict)
    dataset_name: str | None = None
    stratified_subsample: dict[str, Any] | None = None
    rename_columns: dict[str, str] = field(default_factory=dict)
    transform: str = ""
    description: str = ""
    reference: str = ""
    suites: tuple[str, ...] = ()
    concat_splits: dict[str, Any] | None = None
    flatten_sets: bool = False
    custom_load: str = ""
    size: dict[str, int] = field(default_factory=dict)
    superseded_by: str | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> CatalogEntry:
        return cls(
            name=raw["name"],
            type=raw["type"],
            protocol=raw["protocol"],
            dataset_path=raw["dataset"]["path"],
            dataset_revision=raw["dataset"]["revision"],
            dataset_name=raw["dataset"].get("name"),
            eval_splits=tuple(raw["eval_splits"]),
            hf_subsets={k: tuple(v) for k, v in raw["hf_subsets"].items()},
            languages=tuple(raw["languages"]),
            main_score=raw["main_score"],
            params=dict(raw.get("params", {})),
            stratified_subsample=raw.get("stratified_subsample"),
            rename_columns=dict(raw.get("rename_columns", {})),
            transform=raw.get("transform", ""),
            description=raw.get("description", ""),
            reference=raw.get("reference", ""),
            suites=tuple(raw.get("suites", ())),
            concat_splits=raw.get("concat_splits"),
            flatten_sets=bool(raw.get("flatten_sets", False)),
            custom_load=raw.get("custom_load", ""),
            size=dict(raw.get("size", {})),
            superseded_by=raw.get("superseded_by"),
        )

    @property
    def full_languages(self) -> tuple[str, ...]:
        """ISO 639-3 + script codes of every subset, e.g. ``('eng-Latn',)``."""
        return tuple(dict.fromkeys(lang for langs in self.hf_subsets.values() for lang in langs))


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    return json.loads(gzip.decompress(CATALOG_FILE.read_bytes()).decode("utf-8"))


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, CatalogEntry], dict[str, str], dict[str, tuple[str, ...]]]:
    raw = _raw()
    entries = {t["name"]: CatalogEntry.from_json(t) for t in raw["tasks"]}
    return entries, dict(raw.get("aliases", {})), {k: tuple(v) for k, v in raw.get("suites", {}).items()}


def benchmarks() -> dict[str, tuple[str, ...]]:
    """mteb's named benchmarks (``MTEB(eng, v2)``, ``MTEB(rus, v1)``, …) → their task names (every modality)."""
    return {k: tuple(v) for k, v in _raw().get("benchmarks", {}).items()}


def benchmark_specs(name: str) -> tuple[list[str], list[str]]:
    """What running benchmark ``name`` evaluates: catalog specs (``Task`` or ``Task:subset`` for each subset the
    benchmark keeps of a multi-subset task), and the benchmark's tasks outside the text catalog."""
    canonical = benchmark_name(name)
    names = benchmark_tasks(canonical)
    subsets = _raw().get("benchmark_subsets", {}).get(canonical, {})
    entries = _load()[0]
    specs: list[str] = []
    missing: list[str] = []
    for task in names:
        entry = entries.get(task)
        if entry is None:
            missing.append(task)
        elif len(entry.hf_subsets) == 1:
            specs.append(task)
        else:
            specs.extend(f"{task}:{s}" for s in subsets.get(task, entry.hf_subsets))
    return specs, missing


def benchmark_name(name: str) -> str:
    """The benchmark's (or suite's) own spelling of ``name`` (case and spaces ignored); unknown names get suggestions."""
    known = {**benchmarks(), **suites()}
    if name in known:
        return name
    folded = {k.lower().replace(" ", ""): k for k in known}
    key = name.lower().replace(" ", "")
    if key not in folded:
        raise UnknownNameError("benchmark", name, known, hint="`embedscope tasks --benchmarks` lists them.")
    return folded[key]


def benchmark_tasks(name: str) -> tuple[str, ...]:
    """The task names of benchmark (or embedscope suite) ``name``; unknown names get suggestions."""
    return {**benchmarks(), **suites()}[benchmark_name(name)]


def catalog_names() -> list[str]:
    return list(_load()[0])


def suites() -> dict[str, tuple[str, ...]]:
    """Named task lists: ``C-MTEB``, ``ruMTEB`` (17 + 6 tasks), ``MTEB(eng)``."""
    return dict(_load()[2])


def in_catalog(name: str) -> bool:
    entries, aliases, _ = _load()
    return name in entries or name in aliases


def catalog_entry(name: str) -> CatalogEntry:
    """The entry for ``name`` (or one of its aliases); unknown names get suggestions."""
    entries, aliases, _ = _load()
    name = aliases.get(name, name)
    if name not in entries:
        raise UnknownNameError(
            "catalog task", name, list(entries) + list(aliases), hint="`embedscope tasks` lists every task."
        )
    return entries[name]


def find_entries(
    *,
    type: str | None = None,
    language: str | None = None,
    name: str | None = None,
    suite: str | None = None,
    benchmark: str | None = None,
) -> list[CatalogEntry]:
    """Catalog entries filtered by type (case-insensitive), language (``rus``, ``eng-Latn``), name substring,
    suite, benchmark (mteb's, e.g. ``MTEB(eng, v2)``; in the benchmark's order)."""
    entries, _, suite_map = _load()
    out = list(entries.values())
    if benchmark is not None:
        out = [entries[n] for n in benchmark_tasks(benchmark) if n in entries]
    if suite is not None:
        if suite not in suite_map:
            raise UnknownNameError("suite", suite, suite_map)
        keep = set(suite_map[suite])
        out = [e for e in out if e.name in keep]
    if type is not None:
        out = [e for e in out if e.type.lower() == type.lower()]
    if language is not None:
        lang = language.split("-")[0].lower()
        out = [e for e in out if lang in e.languages]
    if name is not None:
        out = [e for e in out if name.lower() in e.name.lower()]
    return out


def local_data_candidates(entry: CatalogEntry, data_dir: str | Path) -> list[Path]:
    """Where a local copy of ``entry``'s dataset may sit under ``data_dir`` (first existing wins)."""
    root = Path(data_dir)
    repo = entry.dataset_path
    return [root / entry.name, root / repo, root / repo.split("/")[-1], root / repo.replace("/", "__")]


def locate_data(entry: CatalogEntry, data_dir: str | Path | None = None, path: str | Path | None = None) -> str:
    """A local folder holding the task's data in the hub's own layout, or the hub id when online.

    Raises ConfigError, saying how to get the data, when neither is available.
    """
    if path is not None:
        if not Path(path).exists():
            raise ConfigError(f"{entry.name}: data path {str(path)!r} does not exist")
        return str(path)
    tried: list[Path] = []
    for folder in [data_dir] if data_dir is not None else [os.environ.get("EMBEDSCOPE_DATA_DIR")]:
        if folder is None:
            continue
        for candidate in local_data_candidates(entry, folder):
            tried.append(candidate)
            if candidate.exists():
                return str(candidate)
    from embedscope.hub import hub_offline, offline_reason

    if not hub_offline():
        return entry.dataset_path
    from embedscope.messages import listing

    where = f"; no copy in {listing(tried, 4)}" if tried else ""
    raise SettingError(
        "data_dir",
        f"{entry.name} needs its dataset {entry.dataset_path} (revision {entry.dataset_revision[:12]}) and the hub "
        f"is offline ({offline_reason()}){where}. Give {{data_dir}} DIR (or set EMBEDSCOPE_DATA_DIR) where "
        f"DIR/{entry.name} is a copy of the dataset repository in the hub's layout, made where the hub is reachable "
        f"with: huggingface-cli download {entry.dataset_path} --repo-type dataset --revision "
        f"{entry.dataset_revision} --local-dir DIR/{entry.name}",
    )


def download_task_data(names: list[str], to: str | Path) -> list[Path]:
    """Fetch each catalog task's dataset at its pinned revision into ``<to>/<Task>`` (the layout the hub has),
    where the ``data_dir`` setting finds it. Needs the network and ``huggingface_hub``."""
    from embedscope.hub import hub_offline, offline_reason

    entries = [catalog_entry(spec.partition(":")[0]) for spec in names]
    if hub_offline():  # at once, in one line: not after huggingface_hub's retries and their warnings
        raise SettingError(
            "data_dir",
            f"cannot download {entries[0].name if len(entries) == 1 else f'{len(entries)} tasks'}: the Hugging Face "
            f"hub is offline ({offline_reason()}). Run 'embedscope download' where the hub is reachable and copy "
            f"{to} here; then give {{data_dir}} {to}",
        )
    from huggingface_hub import snapshot_download

    folders: list[Path] = []
    for entry in entries:
        target = Path(to) / entry.name
        try:
            snapshot_download(
                repo_id=entry.dataset_path, repo_type="dataset", revision=entry.dataset_revision, local_dir=str(target)
            )
        except Exception as e:  # network, missing repository or revision, …: one line naming the dataset
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ConfigError(
                f"{entry.name}: cannot download {entry.dataset_path} (revision {entry.dataset_revision[:12]}) "
                f"into {target} ({type(e).__name__}{': ' + first if first else ''})"
            ) from e
        folders.append(target)
    return folders
