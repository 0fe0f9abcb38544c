"""The manifest a sweep leaves in its results folder, so ``report`` knows the folder holds a sweep.

A manifest records the whole expanded grid: the base settings, the shared axes, the sub-grids (``grids:``), every
point (its axis values, its settings, its output folder) and, once it has run, its result paths. The grid id is the
first 12 hex digits of the SHA-256 of the base, the shared axes and the sub-grids, so two sweeps that differ in any of
them (their ``grids:`` alone included) get two manifests, and the same grid, resumed, the same one.

Manifests are written inside the output folder the user named: ``<output_folder>/sweeps/<grid id>.json``. When the
points write to several output folders (an ``output_folder`` axis), each folder gets its own manifest of the points
whose results it holds (``points_total`` counts those), so a manifest never leads out of its folder. It is written
atomically before the first point and again after each finished point, so an interrupted sweep leaves a valid
manifest of the points done so far (``complete`` false)::

    {"format": "embedscope-sweep", "version": 2, "grid": "3f2a…", "complete": false, "points_total": 6,
     "base": {…}, "axes": [{"key": "top_k", "values": [10, 100]}], "grids": [[{"key": "model", "values": […]}]],
     "axis_keys": ["top_k", "model"],
     "points": [{"index": 0, "label": "top_k=10, model=bm25", "values": {…}, "settings": {…}, "done": true,
                 "model": "…", "reused": false, "seconds": 1.2, "paths": {"Task": "org__model/rev/exp/Task.json"},
                 "truncate_dim": null, "precision": "fp32"}, …]}

Result paths are relative to the manifest's results folder. :func:`read_manifest` follows only paths that stay inside
the folder it is given (after resolving links); any other is a one-line error naming the manifest and the point.
Version 1 manifests (shared axes only) are still read: the axes of a sweep with sub-grids come back from its
points' values. A manifest of another version is a one-line error naming it, the version found and those read.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, DataFormatError
from embedscope.files import atomic_write_text
from embedscope.settings import RunSettings
from embedscope.settings.sources import merge_layers
from embedscope.sweep.grid import PointOutcome, SweepGrid, SweepPoint

FORMAT, VERSION, FOLDER = "embedscope-sweep", 2, "sweeps"
READABLE_VERSIONS = (1, 2)


def _plain(value: Any) -> Any:
    """``value`` as JSON data (a model object given to the API by its name)."""
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "name", type(v).__name__)))


def grid_record(grid: SweepGrid) -> dict[str, Any]:
    """The whole grid as JSON data: the merged base, the shared axes, the sub-grids and every axis key."""
    merged, _ = merge_layers(grid.base)
    return {
        "base": _plain(merged),
        "axes": [{"key": k, "values": _plain(v)} for k, v in grid.axes],
        "grids": [[{"key": k, "values": _plain(v)} for k, v in sub] for sub in grid.grids],
        "axis_keys": grid.axis_keys,
    }


def grid_id(record: dict[str, Any]) -> str:
    """The first 12 hex digits of the SHA-256 of the grid's base, axes and sub-grids."""
    covered = {k: record[k] for k in ("base", "axes", "grids")}
    return hashlib.sha256(json.dumps(covered, sort_keys=True).encode()).hexdigest()[:12]


def _point_settings(settings: RunSettings) -> dict[str, Any]:
    return dict(_plain(settings.model_dump(exclude_defaults=True)))


@dataclass
class SweepManifest:
    """Where one sweep records its points (those whose results go to ``root``) as they finish."""

    path: Path
    root: Path
    grid_id: str
    record: dict[str, Any]
    planned: list[dict[str, Any]]
    points: list[dict[str, Any]] = field(default_factory=list)  # the points done, in the order they finished

    @property
    def total(self) -> int:
        return len(self.planned)

    @classmethod
    def for_grid(cls, grid: SweepGrid) -> SweepManifest:
        """The grid's one manifest (its points share one output folder; else see :func:`manifests_for_grid`)."""
        manifests = manifests_for_grid(grid)
        if len(manifests) != 1:
            folders = ", ".join(str(m.root) for m in manifests)
            raise ConfigError(
                f"the sweep's points write to {len(manifests)} output folders ({folders}): one manifest each"
            )
        return manifests[0]

    def owns(self, point: SweepPoint) -> bool:
        return _folder(point) == self.root

    def add(self, outcome: PointOutcome) -> None:
        """Record a finished point and write the manifest."""
        settings = outcome.point.settings
        self.points.append(
            {
                "index": outcome.point.index,
                "label": outcome.point.label,
                "values": _plain(outcome.point.values),
                "model": outcome.model_name,
                "reused": outcome.reused,
                "seconds": outcome.seconds,
                "paths": {task: os.path.relpath(path, self.root) for task, path in outcome.paths.items()},
                "truncate_dim": settings.truncate_dim,
                "precision": settings.precision,
            }
        )
        self.write()

    def write(self) -> None:
        done = {p["index"]: p for p in self.points}
        points = [{**plan, **done.get(plan["index"], {}), "done": plan["index"] in done} for plan in self.planned]
        data = {
            "format": FORMAT,
            "version": VERSION,
            "grid": self.grid_id,
            "complete": len(done) == self.total,
            "points_total": self.total,
            **self.record,
            "points": points,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def _folder(point: SweepPoint) -> Path:
    return Path(point.settings.output_folder).absolute()


def manifests_for_grid(grid: SweepGrid) -> list[SweepManifest]:
    """One manifest per output folder the grid's points write to, each inside that folder, listing its points."""
    record = grid_record(grid)
    digest = grid_id(record)
    folders: dict[Path, list[dict[str, Any]]] = {}
    for point in grid.points():
        folders.setdefault(_folder(point), []).append(
            {
                "index": point.index,
                "label": point.label,
                "values": _plain(point.values),
                "settings": _point_settings(point.settings),
                "output_folder": str(point.settings.output_folder),
            }
        )
    return [
        SweepManifest(root / FOLDER / f"{digest}.json", root, digest, record, planned)
        for root, planned in folders.items()
    ]


@dataclass
class RecordedSweep:
    """A manifest read back: its axes, the points done, and how many points it lists."""

    path: Path
    axes: list[str]
    outcomes: list[PointOutcome]
    total: int

    @property
    def complete(self) -> bool:
        return len(self.outcomes) == self.total


def find_manifests(folder: str | Path) -> list[Path]:
    """The sweep manifests in a results folder (``sweeps/*.json``), in name order."""
    return sorted((Path(folder) / FOLDER).glob("*.json"))


def read_manifest(path: str | Path, root: str | Path | None = None) -> RecordedSweep:
    """A manifest's axes and points done; every result path must stay inside ``root`` (the results folder ``report``
    was given; default: the manifest's own, the folder above ``sweeps/``) and exist. A malformed manifest or a path
    leading elsewhere is a one-line error."""
    path = Path(path)
    folder = Path(root) if root is not None else path.parent.parent
    if not path.resolve().is_relative_to(folder.resolve()):
        raise DataFormatError(f"{path}: the manifest leads outside {folder} (a link); report reads only that folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} version {VERSION} manifest")
        _check_version(data, path)
        points = [p for p in data["points"] if p.get("done", True)]
        outcomes = [_outcome(p, folder, path) for p in points]
        axes = _axes(data)
        total = int(data["points_total"])
    except DataFormatError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataFormatError(f"{path}: not a readable sweep manifest ({e})") from None
    for outcome in outcomes:
        for task, result in outcome.paths.items():
            if not result.is_file():
                raise DataFormatError(f"{path}: point {outcome.point.label!r}: its {task} result {result} is missing")
    return RecordedSweep(path, axes, outcomes, total)


def _check_version(data: dict[str, Any], path: Path) -> None:
    """A manifest of a version this embedscope does not read (a newer embedscope's, or a damaged one) is refused in
    one line naming it: read as one of ours, its points and axes could mean something else."""
    version = data.get("version")
    if type(version) is int and version in READABLE_VERSIONS:  # not True or 2.0, which equal 1 and 2 in Python
        return
    found = "no version" if "version" not in data else f"version {json.dumps(version)[:40]}"
    readable = " and ".join(str(v) for v in READABLE_VERSIONS)
    raise DataFormatError(
        f"{path}: a sweep manifest of {found}; this embedscope reads versions {readable} (written by a newer "
        f"embedscope, or damaged: upgrade embedscope, or move the file out of {path.parent})"
    )


def _axes(data: dict[str, Any]) -> list[str]:
    """Every axis a point varies: the recorded axis keys (version 2: shared axes and each sub-grid's), else the
    shared axes (version 1 recorded no others), then any other key a point's values hold (a version 1 manifest of a
    sweep with sub-grids), in the order first seen."""
    recorded = data.get("axis_keys") if data["version"] >= 2 else None
    keys = list(recorded or [a["key"] for a in data["axes"]])
    keys += [k for p in data["points"] if isinstance(p.get("values"), dict) for k in p["values"]]
    return [str(k) for k in dict.fromkeys(keys)]


def _inside(folder: Path, rel: Any, manifest: Path, label: str) -> Path:
    """``folder / rel`` when it stays inside ``folder`` once links are resolved; else a one-line error."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel):
        raise DataFormatError(
            f"{manifest}: point {label!r}: result path {rel!r} is not a path relative to the results folder {folder}"
        )
    target = folder / rel
    base = folder.resolve()
    if not target.resolve().is_relative_to(base):
        raise DataFormatError(
            f"{manifest}: point {label!r}: result path {rel!r} leads outside {folder}; report reads only the results "
            "inside the folder it is given"
        )
    return target


def _outcome(point: dict[str, Any], folder: Path, manifest: Path) -> PointOutcome:
    settings = RunSettings.model_construct(truncate_dim=point["truncate_dim"], precision=point["precision"])
    values = point["values"]
    if not isinstance(values, dict):
        raise ValueError(f"point {point.get('index')}: values must be a mapping")
    label = str(point.get("label", point.get("index")))
    return PointOutcome(
        SweepPoint(int(point["index"]), values, settings),
        {str(task): _inside(folder, rel, manifest, label) for task, rel in point["paths"].items()},
        bool(point["reused"]),
        float(point["seconds"]),
        str(point["model"]),
    )
