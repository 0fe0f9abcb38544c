"""The manifest a sweep leaves in its results folder, so ``report`` knows the folder holds a sweep.

``embedscope sweep`` writes ``<output_folder>/sweeps/<grid id>.json`` (the base's output folder; the grid id is the
first 12 hex digits of the SHA-256 of the axes and the base, so another grid gets another file and the same grid,
resumed, the same one). It is written atomically before the first point and again after each finished point, so an
interrupted sweep leaves a valid manifest of the points done so far (``complete`` false)::

    {"format": "embedscope-sweep", "version": 1, "grid": "3f2a…", "complete": false, "points_total": 6,
     "axes": [{"key": "top_k", "values": [10, 100]}, …],
     "points": [{"index": 0, "label": "top_k=10", "values": {"top_k": 10}, "model": "…", "reused": false,
                 "seconds": 1.2, "paths": {"Task": "org__model/rev/exp/Task.json"},
                 "truncate_dim": null, "precision": "fp32"}, …]}

Result paths are relative to the output folder (the manifest travels with it). :func:`read_manifest` gives the
axes and the points back as :class:`~embedscope.sweep.grid.PointOutcome` for
:func:`~embedscope.sweep.report.sweep_report`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.errors import DataFormatError
from embedscope.files import atomic_write_text
from embedscope.settings import RunSettings, build_settings
from embedscope.settings.sources import merge_layers
from embedscope.sweep.grid import PointOutcome, SweepGrid, SweepPoint

FORMAT, VERSION, FOLDER = "embedscope-sweep", 1, "sweeps"


def _plain(value: Any) -> Any:
    """``value`` as JSON data (a model object given to the API by its name)."""
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "name", type(v).__name__)))


@dataclass
class SweepManifest:
    """Where one sweep records its points as they finish."""

    path: Path
    root: Path
    grid_id: str
    axes: list[dict[str, Any]]
    total: int
    points: list[dict[str, Any]]

    @classmethod
    def for_grid(cls, grid: SweepGrid) -> SweepManifest:
        root = Path(build_settings(grid.base).output_folder)
        merged, _ = merge_layers(grid.base)
        axes = [{"key": k, "values": _plain(v)} for k, v in grid.axes]
        digest = hashlib.sha256(json.dumps([axes, _plain(merged)], sort_keys=True).encode()).hexdigest()[:12]
        return cls(root / FOLDER / f"{digest}.json", root, digest, axes, len(grid.points()), [])

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
        data = {
            "format": FORMAT,
            "version": VERSION,
            "grid": self.grid_id,
            "complete": len(self.points) == self.total,
            "points_total": self.total,
            "axes": self.axes,
            "points": self.points,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(data, indent=1, allow_nan=False) + "\n")


@dataclass
class RecordedSweep:
    """A manifest read back: its axes, the points done, and how many the grid has."""

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


def read_manifest(path: str | Path) -> RecordedSweep:
    """A manifest's axes and points (each result file must exist); a malformed one is a one-line error."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} version {VERSION} manifest")
        root = path.parent.parent
        outcomes = [_outcome(p, root) for p in data["points"]]
        axes = [str(a["key"]) for a in data["axes"]]
        total = int(data["points_total"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataFormatError(f"{path}: not a readable sweep manifest ({e})") from None
    for outcome in outcomes:
        for task, result in outcome.paths.items():
            if not result.is_file():
                raise DataFormatError(f"{path}: point {outcome.point.label!r}: its {task} result {result} is missing")
    return RecordedSweep(path, axes, outcomes, total)


def _outcome(point: dict[str, Any], root: Path) -> PointOutcome:
    settings = RunSettings.model_construct(truncate_dim=point["truncate_dim"], precision=point["precision"])
    values = point["values"]
    if not isinstance(values, dict):
        raise ValueError(f"point {point.get('index')}: values must be a mapping")
    return PointOutcome(
        SweepPoint(int(point["index"]), values, settings),
        {str(task): root / rel for task, rel in point["paths"].items()},
        bool(point["reused"]),
        float(point["seconds"]),
        str(point["model"]),
    )
