"""``sweep``: run a grid of settings (each point a normal run, stored apart) and answer which setup is best."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from embedscope.cli.report import add_statistics_flags, statistics_options
from embedscope.cli.settings_flags import add_settings_flags, settings_layer
from embedscope.errors import ConfigError

_DESCRIPTION = (
    "Run a grid of run settings and report which setup is best, by how much and at what cost. The grid is a sweep "
    "file (--grid: 'base:' any config-file keys, 'axes:' key -> list of values) and/or --axis flags over a base from "
    "--config and --set. An axis key is a setting (top_k, model, pipeline, limits …) or a path into one "
    "(pipeline.fusion.weights, pipeline.rerankers[0].top_k). Each point is a normal run stored in its own folder: "
    "an interrupted sweep resumes, and points that do not change the encoder reuse the embedding cache."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the sweep command."""
    p = sub.add_parser("sweep", help="run a grid of settings and compare the points", description=_DESCRIPTION)
    p.add_argument("--grid", "-g", metavar="FILE", help="sweep file (YAML/JSON) with base: and axes:")
    p.add_argument("--config", "-c", metavar="FILE", help="a config file as the base (before --grid's base)")
    p.add_argument(
        "--axis",
        "-a",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="an axis, repeatable; each value read as YAML; values holding commas as one YAML list: "
        "KEY=[[1, 2], [2, 1]]",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a base setting (YAML value), repeatable, over --config and the grid's base: --set limits=50",
    )
    add_settings_flags(p, ("tasks", "results"))  # the base's, over --config, the grid's base and --set
    p.add_argument(
        "--tune-folds",
        type=int,
        metavar="K",
        help="also choose the point by K-fold over queries: per fold, the point best on the other folds, scored on "
        "the held-out fold (an unbiased score for the choice, e.g. of fusion weights)",
    )
    add_statistics_flags(p, paths=("test", "rounds", "seed", "correction"))  # against the best point, and the folds
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV to FILE")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML page to FILE: the table, score against each cost with the Pareto "
        "frontier drawn, and score along each numeric axis with its CI band",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of Markdown")
    p.add_argument("--quiet", "-q", action="store_true", help="no line per finished point on stderr")
    p.set_defaults(func=_cmd_sweep)


def _base_layers(
    args: argparse.Namespace,
) -> tuple[list[Any], list[tuple[str, list[Any]]], list[list[tuple[str, list[Any]]]]]:
    from embedscope.settings import Layer
    from embedscope.settings.files import config_layer
    from embedscope.sweep.grid import parse_axis_flag, parse_set_flag, read_sweep_file

    layers = [config_layer(args.config)] if args.config else []
    axes: list[tuple[str, list[Any]]] = []
    grids: list[list[tuple[str, list[Any]]]] = []
    if args.grid:
        base, axes, grids = read_sweep_file(args.grid)
        layers.append(base)
    flags: dict[str, Any] = {}
    names: dict[str, str] = {}
    for text in args.set:
        key, value = parse_set_flag(text)
        if key in flags:  # the last would win silently
            raise ConfigError(f"--set {key}: given twice: give it once")
        flags[key], names[key] = value, f"--set {key}"
    if flags:
        layers.append(Layer("command line", flags, "flag", names))
    flag_layer = settings_layer(args)
    if flag_layer.values:
        layers.append(flag_layer)
    given = {k for k, _ in axes} | {k for sub in grids for k, _ in sub}
    for text in args.axis:
        key, values = parse_axis_flag(text)
        if key in given:
            raise ConfigError(f"--axis {key}: the axis is given twice (in the sweep file or another --axis)")
        given.add(key)
        axes.append((key, values))
    if not axes and not grids:
        raise ConfigError("sweep needs at least one axis: --axis KEY=V1,V2 or a --grid file with axes:")
    return layers, axes, grids


def _cmd_sweep(args: argparse.Namespace) -> int:
    from embedscope.sweep.grid import SweepGrid, run_sweep
    from embedscope.sweep.manifest import manifests_for_grid
    from embedscope.sweep.preflight import check_sweep
    from embedscope.sweep.report import sweep_report

    options = statistics_options(args)
    if args.tune_folds is not None and args.tune_folds < 2:
        raise ConfigError(f"--tune-folds {args.tune_folds}: give 2 or more folds")
    layers, axes, grids = _base_layers(args)
    grid = SweepGrid(layers, axes, grids)
    check_sweep(grid, {"--csv": args.csv, "--html": args.html}, options.seed)  # every problem at once, before any runs
    manifests = manifests_for_grid(grid)  # in each output folder; report --html finds the sweep by them
    for manifest in manifests:
        manifest.write()

    def record(outcome: Any) -> None:
        next(m for m in manifests if m.owns(outcome.point)).add(outcome)

    outcomes = run_sweep(grid, None if args.quiet else sys.stderr, on_point=record)
    if not args.quiet:
        for manifest in manifests:
            print(f"sweep manifest: {manifest.path}", file=sys.stderr)
    report = sweep_report(outcomes, grid.axis_keys, options, args.tune_folds)
    if args.csv:
        from embedscope.files import atomic_write_text

        atomic_write_text(args.csv, report.csv())
    if args.html:
        from embedscope.files import atomic_write_text
        from embedscope.sweep.html import sweep_html

        atomic_write_text(args.html, sweep_html(report))
        print(f"wrote {args.html}", file=sys.stderr)
    print(json.dumps(report.to_dict(), indent=2, default=str) if args.json else report.markdown())
    return 0
