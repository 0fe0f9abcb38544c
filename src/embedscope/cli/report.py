"""``report`` and ``compare``: tables over result folders, and significance of score differences."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from embedscope.cli.settings_flags import add_settings_flags, settings_layer
from embedscope.errors import ConfigError

_ON_COMPARE = ("test", "rounds", "seed", "correction", "alpha", "confidence", "digits")


def add_statistics_flags(
    p: argparse.ArgumentParser, defaults: Any = None, paths: Sequence[str] = _ON_COMPARE, **more: Any
) -> None:
    """The statistics options' flags at ``paths`` (declared once: :class:`StatisticsSettings`), their defaults those
    of ``defaults`` (a :class:`CompareOptions`, default its own) and ``more`` (``digits=3``)."""
    from embedscope.compare.core import CompareOptions
    from embedscope.settings.statistics import StatisticsSettings, statistics_defaults

    base = statistics_defaults(defaults or CompareOptions(), **more)
    add_settings_flags(p, paths=paths, root=StatisticsSettings, defaults=base)
    p.set_defaults(statistics_base=base)


def statistics_settings(args: argparse.Namespace, over: Any = None) -> Any:
    """The :class:`StatisticsSettings` of :func:`add_statistics_flags`' flags given in ``args``, over a config file's
    ``statistics:`` section (``over``, a layer) and the command's defaults; an error names the flag or file and key."""
    from embedscope.cli.settings_flags import family_settings
    from embedscope.settings.statistics import StatisticsSettings

    return family_settings(args, StatisticsSettings, args.statistics_base, over)


def statistics_options(args: argparse.Namespace, **more: Any) -> Any:
    """The :class:`CompareOptions` of :func:`add_statistics_flags`' flags."""
    return statistics_settings(args).compare_options(**more)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="aggregate result folders: per task, per task type and overall, models side by side"
    )
    p.add_argument(
        "folders", nargs="+", help="results folders (as written by 'embedscope run' or mteb), or runs in a results "
        "store: tag:NAME, run:ID (with --store)"
    )  # fmt: skip
    add_settings_flags(p, paths=("store",))
    p.add_argument("--format", choices=("markdown", "csv"), default="markdown", help="table format printed")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the tables as CSV to FILE")
    p.add_argument(
        "--benchmark",
        "-b",
        default=None,
        metavar="NAME",
        help='only the tasks of one of mteb\'s benchmarks, e.g. "MTEB(eng, v2)"',
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="also write a self-contained HTML report (sortable "
        "leaderboard, per-task charts with intervals and significance, run metadata) to FILE",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="model (name or folder) the HTML report tests others against (default: the first)",
    )
    add_statistics_flags(p, digits=3)  # the tests and intervals act in --html's report only
    p.set_defaults(func=_cmd_report)


_HTML_ONLY = ("test", "rounds", "seed", "correction", "alpha", "confidence")


def _cmd_report(args: argparse.Namespace) -> int:
    from embedscope.results.report import build_report, restrict_to_benchmark

    statistics = statistics_settings(args)
    given = [settings_layer(args, root=type(statistics)).names[k] for k in _HTML_ONLY if k in vars(args)]
    if args.baseline is not None:
        given.append("--baseline")
    if given and not args.html:
        raise ConfigError(f"{', '.join(given)}: for the HTML report only; add --html FILE, or drop them")
    digits = statistics.digits
    from embedscope.history.sides import report_rows, side_kind

    if args.html and any(side_kind(f) == "store" for f in args.folders):
        raise ConfigError("--html reads result folders; write the runs out with 'embedscope results export' first")
    rows = report_rows(args.folders, getattr(args, "store", None))
    if args.benchmark:
        rows = restrict_to_benchmark(rows, args.benchmark)
    tables = build_report(rows, digits=digits, borda=bool(args.benchmark))
    print(tables.csv() if args.format == "csv" else tables.markdown())
    if args.csv:
        from embedscope.files import atomic_write_text

        atomic_write_text(args.csv, tables.csv())
    if args.html:
        from pathlib import Path

        from embedscope.api import write_report_html

        write_report_html(args.folders, Path(args.html), args.baseline, statistics.compare_options())
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="significance of score differences between result folders (one model each)",
        description="For each task the folders share: main-score difference, confidence interval and "
        "p-value of every pair of models, from the per-item scores saved beside the results.",
    )
    p.add_argument(
        "folders", nargs="*", help="results folders, one model each (the first is the reference), or runs in a "
        "results store: tag:NAME, run:ID (with --store)"
    )  # fmt: skip
    # --models: instead of folders, evaluate the models on --tasks (stored results and the embedding cache are
    # reused) and add per-text embedding agreement to the fidelity measures; --tasks alone picks shared tasks
    add_settings_flags(p, paths=("models", "tasks", "output_folder", "cache", "cache_dir", "limits", "store"))
    add_statistics_flags(p)
    p.add_argument(
        "--fidelity",
        action="store_true",
        help="also measure agreement with the first folder: top-10 "
        "Jaccard and RBO (rankings), similarity Spearman and discordant pairs (STS, pair classification)",
    )
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare results computed with other run or task settings or "
        "data (e.g. --limits) anyway; the difference is shown in the notes and the JSON",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    from embedscope.compare.render import comparison_text

    statistics = statistics_settings(args)
    digits, options = statistics.digits, statistics.compare_options(allow_mismatch=args.allow_mismatch)
    layer = settings_layer(args)
    if "models" in layer.values:
        from embedscope.evaluation.agreement import compare_model_runs
        from embedscope.settings import build_settings

        if args.folders:
            raise ConfigError("give result folders or --models, not both")
        if "store" in layer.values:
            raise ConfigError("--store: reads runs given as tag:NAME or run:ID, not --models; drop one of them")
        s = build_settings([layer])
        cache = False if not s.cache else (s.cache_dir or True)
        comparison = compare_model_runs(
            [str(m) for m in s.models or []], list(s.tasks), s.output_folder, options, cache=cache, limits=s.limits
        )
    else:
        given = sorted(set(layer.names) - {"tasks", "store"})
        if given:
            raise ConfigError(
                f"{', '.join(layer.names[k] for k in given)}: for --models only; add --models, or drop them"
            )
        from embedscope.api import compare

        comparison = compare(
            args.folders, tasks=getattr(args, "tasks", None), options=options, fidelity=args.fidelity,
            store=getattr(args, "store", None),
        )  # fmt: skip
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2, allow_nan=False))
    else:
        print(comparison_text(comparison, digits))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the report and compare commands."""
    for add in (_add_report, _add_compare):
        add(sub)
