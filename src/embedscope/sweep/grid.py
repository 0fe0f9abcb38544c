"""``embedscope sweep``: a grid of run settings, each point run as a normal ``run`` and stored in its own folder.

A grid is a base (any :class:`~embedscope.settings.RunSettings` keys, a config file's schema) and axes: each axis is
a settings key with a list of values. The key is a top-level setting (``top_k``, ``model``, ``pipeline``,
``limits``, ``filter_field`` …, any key a config file takes) or a path into one (``pipeline.fusion.weights``,
``pipeline.rerankers[0].top_k``: names joined by dots, list positions in brackets). Each grid point (one value per
axis, the product of the axes in the order given) is the base plus that point's values, validated by
:func:`~embedscope.settings.build_settings` as a config file is; errors name the axis and the value.

A sweep file (YAML or JSON)::

    base: {tasks: [BBCNewsRetrieval], output_folder: results}
    axes:
      model: [bm25, fts5]
      top_k: [10, 100]

An axis that applies to some points only goes in a sub-grid: ``grids:`` is a list of ``{axes: …}``, each crossed
with the shared ``axes`` (``axes: {chunking.chunk_size: [100, 500]}``, ``grids: [{axes: {model: [bm25]}}, {axes:
{model: [minilm], truncate_dim: [null, 64]}}]`` is 2 × (1 + 2) points).

>>> grid = SweepGrid([Layer("base", {"top_k": 10}, "file")], [("limits", [2, 3]), ("model", ["bm25", "fts5"])])
>>> [p.label for p in grid.points()]
['limits=2, model=bm25', 'limits=2, model=fts5', 'limits=3, model=bm25', 'limits=3, model=fts5']
>>> grid.points()[1].settings.limits, grid.points()[1].settings.top_k
(2, 10)
"""

from __future__ import annotations

import copy
import difflib
import itertools
import logging
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from embedscope.errors import ConfigError, EmbedscopeError
from embedscope.settings import Layer, RunSettings, build_settings
from embedscope.settings.files import config_layer, read_config_file
from embedscope.settings.options import option_at
from embedscope.settings.run import flag_keys
from embedscope.settings.sources import merge_layers

logger = logging.getLogger(__name__)

SWEEP_FILE_KEYS = ("base", "axes", "grids")
_KEY = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*")
_PART = re.compile(r"([A-Za-z_]\w*)|\[(\d+)\]")


def axis_path(key: str) -> list[str | int]:
    """The parts of an axis key: names and list positions.

    >>> axis_path("pipeline.rerankers[0].top_k")
    ['pipeline', 'rerankers', 0, 'top_k']
    """
    if not _KEY.fullmatch(key):
        raise ConfigError(
            f"axis {key!r}: not a settings key or path (write names joined by dots and list positions in "
            "brackets, e.g. top_k, pipeline.fusion.weights, pipeline.rerankers[0].top_k)"
        )
    parts: list[str | int] = [name or int(index) for name, index in _PART.findall(key)]
    return parts


def check_axis_key(key: str) -> list[str | int]:
    """``key``'s path when its first part is a setting (a key of a config file); else a one-line error."""
    parts = axis_path(key)
    top = str(parts[0])
    if top not in flag_keys():
        close = difflib.get_close_matches(top, flag_keys(), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"axis {key!r}: {top!r} is not a setting.{hint} Axes are settings keys (as in a config file)")
    return parts


def _check_axis_stored(key: str) -> None:
    """An axis over an option that changes no stored result (``show_progress``, ``cache_dir``, ``device`` …: its
    declaration says ``stored=False``) is refused before any point runs: its points would be one result."""
    declared = option_at(key) or option_at(f"engine.{key}")
    if declared is not None and not declared.stored:
        raise ConfigError(
            f"axis {key!r}: {key} changes no stored result, so every point of the axis would be the same result; "
            f"give it in the base (or as a flag) instead of as an axis"
        )


def with_value(tree: Any, parts: Sequence[str | int], value: Any, key: str) -> Any:
    """A copy of ``tree`` with ``value`` at ``parts`` (missing mappings are created; a list position must exist)."""
    if not parts:  # plain data is copied; a model object given to the API stays the same object
        return copy.deepcopy(value) if isinstance(value, (list, dict)) else value
    head, rest = parts[0], parts[1:]
    if isinstance(head, int):
        if not isinstance(tree, list) or not -len(tree) <= head < len(tree):
            size = f"a list of {len(tree)}" if isinstance(tree, list) else f"{type(tree).__name__} {tree!r}"
            raise ConfigError(f"axis {key!r}: position [{head}] does not exist in the base ({size})")
        out = list(tree)
        out[head] = with_value(tree[head], rest, value, key)
        return out
    if tree is None:
        tree = {}
    if isinstance(tree, BaseModel):  # a PipelineConfig given to the API
        tree = tree.model_dump(exclude_defaults=True)
    if not isinstance(tree, Mapping):
        raise ConfigError(
            f"axis {key!r}: the base's value at {head!r}'s parent is {tree!r}, not a mapping; "
            "give it in the base as a mapping (e.g. {type: cross-encoder, model: M} or {method: wsum})"
        )
    return {**tree, head: with_value(tree.get(head), rest, value, key)}


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    return str(getattr(value, "name", value)) if not isinstance(value, (str, int, float, bool)) else str(value)


@dataclass
class SweepPoint:
    """One grid point: its axis values and its validated settings."""

    index: int
    values: dict[str, Any]
    settings: RunSettings

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_shown(v)}" for k, v in self.values.items()) or "base"


@dataclass
class SweepGrid:
    """The base layers (config files, flags) and the axes, each ``(key, values)`` in the order given; with
    ``grids``, several sub-grids, each its own axes crossed with the shared ones (axes that apply to some points
    only: ``truncate_dim`` for the dense retriever, not for BM25)."""

    base: list[Layer]
    axes: list[tuple[str, list[Any]]]
    grids: list[list[tuple[str, list[Any]]]] = field(default_factory=list)
    _points: list[SweepPoint] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for sub in self.grids or [[]]:
            seen: set[str] = set()
            for key, values in [*self.axes, *sub]:
                check_axis_key(key)
                _check_axis_stored(key)
                if key in seen:
                    raise ConfigError(f"axis {key!r} is given twice: give its values once")
                seen.add(key)
                if not isinstance(values, list) or not values:
                    raise ConfigError(f"axis {key!r}: give a non-empty list of values (e.g. {key}: [10, 100])")
        build_settings(self.base)  # the base alone is valid: its errors name its file and key

    @property
    def axis_keys(self) -> list[str]:
        """Every axis key, shared ones first, in the order given."""
        return list(dict.fromkeys([k for k, _ in self.axes] + [k for sub in self.grids for k, _ in sub]))

    def points(self) -> list[SweepPoint]:
        """Every grid point, validated (the first invalid one is a one-line error naming its axis values)."""
        if self._points is None:
            self._points = [self._point(i, combo) for i, combo in enumerate(self._combinations())]
        return self._points

    def checked_points(self) -> tuple[list[SweepPoint], list[tuple[str, str]]]:
        """The valid points and, for each invalid one, its label and its one-line error (every point is built)."""
        if self._points is not None:
            return self._points, []
        points, problems = [], []
        for i, combo in enumerate(self._combinations()):
            try:
                points.append(self._point(i, combo))
            except EmbedscopeError as e:
                label = ", ".join(f"{k}={_shown(v)}" for k, v in combo.items()) or "base"
                problems.append((f"point {label}", " ".join(str(getattr(e, "message", None) or e).split())))
        if not problems:
            self._points = points
        return points, problems

    def _combinations(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for sub in self.grids or [[]]:
            axes = [*self.axes, *sub]
            keys = [k for k, _ in axes]
            out += [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]
        return out

    def _point(self, index: int, values: dict[str, Any]) -> SweepPoint:
        merged, _ = merge_layers(self.base)
        point: dict[str, Any] = {}
        names: dict[str, str] = {}
        for key, value in values.items():
            parts = check_axis_key(key)
            top = str(parts[0])
            current = point[top] if top in point else merged.get(top)
            point[top] = with_value(current, parts[1:], value, key)
            names[top] = f"axis {key}={_shown(value)}"
        settings = build_settings([*self.base, Layer("sweep axes", point, "file", names)])
        runs = settings.model_runs()
        if len(runs) != 1:
            raise ConfigError(
                f"sweep point {SweepPoint(index, values, settings).label}: it runs {len(runs)} models; a point runs "
                "one model or pipeline (put the models in an axis: model: [a, b])"
            )
        return SweepPoint(index, values, settings)


def parse_axis_flag(text: str) -> tuple[str, list[Any]]:
    """``--axis KEY=V1,V2``: each value read as YAML (``10`` a number, ``[1, 2]`` a list); a value holding commas is
    given as one YAML list: ``KEY=[[1, 2], [2, 1]]``.

    >>> parse_axis_flag("top_k=10,100")
    ('top_k', [10, 100])
    >>> parse_axis_flag("pipeline.fusion.weights=[[1, 2], [2, 1]]")
    ('pipeline.fusion.weights', [[1, 2], [2, 1]])
    """
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--axis {text!r}: write KEY=VALUE1,VALUE2 (e.g. --axis top_k=10,100)")
    raw = raw.strip()
    if not raw:
        raise ConfigError(f"--axis {key}: no values (e.g. --axis {key}=A,B)")
    try:
        if raw.startswith("["):
            values = yaml.safe_load(raw)
        else:
            parts = raw.split(",")
            if any(not v.strip() for v in parts):
                raise ConfigError(f"--axis {key}={raw}: a value is empty (write null for a setting's default)")
            values = [yaml.safe_load(v) for v in parts]
    except yaml.YAMLError as e:
        raise ConfigError(f"--axis {key}: its values are not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(values, list) or not values:
        raise ConfigError(f"--axis {key}={raw}: give a non-empty list of values")
    return key, values


def parse_set_flag(text: str) -> tuple[str, Any]:
    """``--set KEY=VALUE`` (YAML value) for the base, e.g. ``--set tasks=[BBCNewsRetrieval]``."""
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: write KEY=VALUE (e.g. --set limits=50)")
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: not valid YAML ({str(e).splitlines()[0]})") from None


def read_sweep_file(path: str | Path) -> tuple[Layer, list[tuple[str, list[Any]]], list[list[tuple[str, list[Any]]]]]:
    """A sweep file's base (as a config layer), shared axes and sub-grids (``grids:``, a list of ``{axes: …}``)."""
    data = read_config_file(path)
    unknown = [k for k in data if k not in SWEEP_FILE_KEYS]
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}. Valid keys: {', '.join(SWEEP_FILE_KEYS)}")
    base = data.get("base") or {}
    if not isinstance(base, dict):
        raise ConfigError(f"{path}: base must be a mapping of settings (a config file's keys)")
    grids = data.get("grids")
    if grids is not None and (not isinstance(grids, list) or not grids):
        raise ConfigError(f"{path}: grids must be a non-empty list of {{axes: {{KEY: [V1, V2]}}}}")
    axes = _read_axes(data.get("axes"), f"{path}: axes", required=grids is None)
    subs = []
    for i, grid in enumerate(grids or []):
        if not isinstance(grid, dict) or set(grid) != {"axes"}:
            raise ConfigError(f"{path}: grids[{i}] must be a mapping with one key, axes")
        subs.append(_read_axes(grid["axes"], f"{path}: grids[{i}].axes", required=True))
    layer = config_layer(base)
    layer.label, layer.names = f"{path}: base", {k: f"{path}: base.{k}" for k in base}
    if layer.kind != "file":
        raise ConfigError(f"{path}: base is in EvalScope's schema; give embedscope's keys in a sweep file")
    return layer, axes, subs


def _read_axes(axes: Any, where: str, required: bool) -> list[tuple[str, list[Any]]]:
    if axes is None and not required:
        return []
    if not isinstance(axes, dict) or not axes:
        raise ConfigError(f"{where} must be a non-empty mapping of settings keys to lists of values")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.{key}: give a non-empty list of values (e.g. {key}: [10, 100])")
    return [(str(k), v) for k, v in axes.items()]


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class PointOutcome:
    """What running one grid point gave: per task, the result file and whether it was reused."""

    point: SweepPoint
    paths: dict[str, Path]
    reused: bool
    seconds: float
    model_name: str


def run_point(point: SweepPoint) -> PointOutcome:
    """Run one point through :func:`~embedscope.evaluation.runner.run` (a stored result of the same settings is
    reused: an interrupted sweep resumes)."""
    from embedscope.evaluation.runner import run

    started = time.perf_counter()
    (report,) = run(point.settings)
    if report.recorded is not None and report.recorded.error:
        logger.warning("%s", report.recorded.error)
    paths = {o.task.name: o.path for o in report.outcomes}
    reused = all(o.reused for o in report.outcomes)
    return PointOutcome(point, paths, reused, time.perf_counter() - started, report.model_name)


def run_sweep(
    grid: SweepGrid,
    log: TextIO | None = sys.stderr,
    on_point: Callable[[PointOutcome], None] | None = None,
) -> list[PointOutcome]:
    """Run every point in order; one line per finished point to ``log`` (with the grid's progress), and one progress
    bar over the grid when ``log`` is the terminal's stderr."""
    points = grid.points()
    outcomes: list[PointOutcome] = []
    written: dict[Path, tuple[SweepPoint, Any]] = {}
    started = time.perf_counter()
    bar = _grid_bar(len(points), log)
    for n, point in enumerate(points, start=1):
        outcome = run_point(point)
        _check_apart(outcome, written)
        outcomes.append(outcome)
        if log is not None:
            how = "reused" if outcome.reused else f"ran in {outcome.seconds:.1f}s"
            line = f"sweep [{n}/{len(points)}, {time.perf_counter() - started:.0f}s] {point.label}: {how}"
            if bar is not None:
                bar.write(line, file=log)
                bar.update(1)
            else:
                print(line, file=log, flush=True)
        if on_point is not None:
            on_point(outcome)
    if bar is not None:
        bar.close()
    return outcomes


def _grid_bar(total: int, log: TextIO | None) -> Any:
    """A tqdm bar over the grid's points, on a terminal's stderr only (never into piped output or logs)."""
    from embedscope.progress import on_terminal

    if log is not sys.stderr or not on_terminal():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="sweep", unit="point", file=log, position=0, leave=True)


def _check_apart(outcome: PointOutcome, written: dict[Path, tuple[SweepPoint, Any]]) -> None:
    """Refuse two points whose results differ in their recorded settings but land in the same file (the later
    would replace the earlier, and a resumed sweep would run both again, forever)."""
    import json

    for path in outcome.paths.values():
        recorded = json.loads(path.read_text(encoding="utf-8")).get("run_settings")
        key = path.resolve()
        if key in written and written[key][1] != recorded:
            raise ConfigError(
                f"sweep points {written[key][0].label!r} and {outcome.point.label!r} write the same result file "
                f"{path} with other settings: an axis embedscope does not store apart; give the points other "
                "output folders (axis output_folder) or drop the axis"
            )
        written[key] = (outcome.point, recorded)
