"""``screen``: rank many models on a fast path, confirm the best on the exact one (one library call)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedscope.cli.report import add_statistics_flags, statistics_settings
from embedscope.settings.screen import DEFAULT_CONFIRM, DEFAULT_MARGIN, ScreenSettings

_DESCRIPTION = (
    "Find the best of many models for less than running them all. By default the screen plans first: it times each "
    "model on a few of its texts, estimates what running every model exactly would cost, and takes proxy rounds "
    "(successive halving on 5%% proxies of the tasks, the survivors confirmed exactly) when they can only save, "
    "else runs each model exactly once; the plan is printed first (--dry-run prints only the plan). --proxy SIZE … "
    "names the rounds; --fast PATH (bf16, onnx-int8, openvino-bf16, openvino-int8 …, or auto), --confirm or "
    "--no-fidelity name a fast pass: every model on the fast path, the top --confirm models (and every model whose "
    "CI overlaps theirs) exact, both rankings side by side with each model's fidelity. The exact winner is tested "
    "against the runner-up (compare's paired test, Holm-adjusted). Stored results and the embedding cache are "
    "reused as by run, so an interrupted screen resumes."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the screen command."""
    from embedscope.cli.settings_flags import add_dry_run_flag, add_settings_flags

    p = sub.add_parser(
        "screen",
        help="find the best of many models for less than running them all (planned: proxy rounds or exact runs)",
        description=_DESCRIPTION,
        argument_default=argparse.SUPPRESS,  # only the flags given become a settings layer
    )
    add_settings_flags(
        p,
        ("tasks", "results"),
        paths=("models", "device", "batch_size", "engine", "limits", "top_k"),
        exclude=("save_predictions",),
    )
    # the defaults the screen applies (ScreenSettings' fields are None until then), shown in the reference
    shown = {"confirm": DEFAULT_CONFIRM, "tie_margin": DEFAULT_MARGIN}
    add_settings_flags(p, ("screen",), root=ScreenSettings, defaults=shown)
    p.add_argument(
        "--config",
        "-c",
        help="YAML/JSON config of run's schema (the base settings), with the screen's and the statistics' options in "
        "'screen:' and 'statistics:' sections; flags override it",
    )
    add_statistics_flags(p)
    add_dry_run_flag(
        p,
        "print the screen's plan (each model's exact cost, timed on a few of its texts; the way to screen and its "
        "estimate against running every model exactly) and stop: nothing is screened or written",
    )
    p.add_argument("--json", dest="json_file", metavar="FILE", help="also write the whole report as JSON to FILE")
    p.add_argument("--csv", dest="csv_file", metavar="FILE", help="also write the rankings as CSV to FILE")
    p.set_defaults(func=_cmd_screen, parser=p)


def _print_plan(plan: Any) -> None:
    """The plan, printed before the screen encodes anything."""
    print("\n".join(plan.lines()), flush=True)


def _cmd_screen(args: argparse.Namespace) -> int:
    from embedscope.cli.settings_flags import family_settings, settings_layer
    from embedscope.files import atomic_write_text
    from embedscope.screen.report import screen_csv
    from embedscope.screen.run import screen_settings
    from embedscope.settings import build_settings
    from embedscope.settings.files import config_layer, family_layers

    layers: list[Any] = []
    sections: dict[str, Any] = {}
    if getattr(args, "config", None):  # run's schema, with screen: and statistics: sections of their own
        base, sections = family_layers(config_layer(args.config), "screen", "statistics")
        layers.append(base)
    screen = family_settings(args, ScreenSettings, over=sections.get("screen"))
    statistics = statistics_settings(args, over=sections.get("statistics"))
    layers.append(settings_layer(args))
    settings = build_settings(layers)
    outputs = {"--json": getattr(args, "json_file", None), "--csv": getattr(args, "csv_file", None)}
    dry_run = bool(getattr(args, "dry_run", False))
    report = screen_settings(
        settings, screen, statistics.compare_options(), outputs, on_plan=_print_plan, dry_run=dry_run
    )
    if dry_run:  # the plan is printed: nothing was screened, nothing is written
        print("dry run: nothing was screened or written")
        return 0
    print(report.text(statistics.digits, plan=False))
    if getattr(args, "json_file", None):
        atomic_write_text(args.json_file, json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n")
    if getattr(args, "csv_file", None):
        atomic_write_text(args.csv_file, screen_csv(report))
    return 0
