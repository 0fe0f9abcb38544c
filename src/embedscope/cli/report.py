"""``report`` and ``compare``: tables over result folders, and significance of score differences."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from embedscope.cli.settings_flags import add_settings_flags, settings_layer
from embedscope.errors import ConfigError

MAX_DIGITS = 10


def checked_digits(digits: int) -> int:
    """``--digits`` as given, if it is a number of decimals a table can show (0 to ``MAX_DIGITS``)."""
    if not 0 <= digits <= MAX_DIGITS:
        raise ConfigError(f"--digits must be a whole number from 0 to {MAX_DIGITS}, not {digits}")
    return digits


def add_statistics_flags(p: argparse.ArgumentParser, defaults: Any = None) -> None:
    """The paired tests' flags (``compare``, ``gate``), their defaults those of ``defaults`` (a
    :class:`CompareOptions`; by default its own)."""
    from embedscope.compare.core import CompareOptions

    d = defaults or CompareOptions()
    p.add_argument(
        "--test",
        default=d.test,
        help=f"permutation (Fisher's randomisation) | t-test | bootstrap (default {d.test}); STS and pair "
        "classification always use a bootstrap over pairs",
    )
    p.add_argument(
        "--rounds", type=int, default=d.rounds, help=f"randomisation / bootstrap rounds (default {d.rounds:,})"
    )
    p.add_argument(
        "--seed", type=int, default=d.seed, help=f"random seed of the tests and intervals (default {d.seed})"
    )
    p.add_argument(
        "--correction",
        default=d.correction,
        help=f"multiple-comparison correction: holm | bonferroni | none (default {d.correction})",
    )
    p.add_argument("--alpha", type=float, default=d.alpha, help=f"significance level (default {d.alpha})")
    p.add_argument(
        "--confidence",
        type=float,
        default=d.confidence,
        help=f"confidence level of the intervals (default {d.confidence})",
    )


def statistics_options(args: argparse.Namespace, **more: Any) -> Any:
    """The :class:`CompareOptions` of :func:`add_statistics_flags`' flags."""
    from embedscope.compare.core import CompareOptions

    return CompareOptions(
        test=args.test, rounds=args.rounds, seed=args.seed, correction=args.correction, alpha=args.alpha,
        confidence=args.confidence, **more,
    )  # fmt: skip


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
    p.add_argument("--digits", type=int, default=3, help="decimals shown (default 3)")
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
    p.add_argument(
        "--test", default=_REPORT_PARSER_DEFAULTS["test"], help="significance test for --html (as in 'compare')"
    )
    p.add_argument("--rounds", type=int, default=10_000, help="resamples for --html intervals and tests")
    p.add_argument("--seed", type=int, default=42, help="random seed of --html's resampling (default 42)")
    p.add_argument("--correction", default="holm", help="holm (default) | bonferroni | none")
    p.set_defaults(func=_cmd_report)


_REPORT_PARSER_DEFAULTS = {"test": "permutation", "rounds": 10_000, "seed": 42, "correction": "holm"}


def _cmd_report(args: argparse.Namespace) -> int:
    from embedscope.results.report import build_report, restrict_to_benchmark

    digits = checked_digits(args.digits)
    html_only = {"--test": "test", "--rounds": "rounds", "--seed": "seed", "--correction": "correction"}
    given = [flag for flag, dest in html_only.items() if getattr(args, dest) != _REPORT_PARSER_DEFAULTS[dest]]
    if args.baseline is not None:
        given.append("--baseline")
    if given and not args.html:
        raise ConfigError(f"{', '.join(given)}: for the HTML report only; add --html FILE, or drop them")
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
        from embedscope.compare.core import CompareOptions

        options = CompareOptions(test=args.test, rounds=args.rounds, seed=args.seed, correction=args.correction)
        write_report_html(args.folders, Path(args.html), args.baseline, options)
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
    p.add_argument("--digits", type=int, default=4, help="decimals shown (default 4)")
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

    digits = checked_digits(args.digits)
    options = statistics_options(args, allow_mismatch=args.allow_mismatch)
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
