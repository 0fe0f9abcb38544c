"""``screen``: rank many models on a fast path, confirm the best on the exact one (one library call)."""

from __future__ import annotations

import argparse
import json

_DESCRIPTION = (
    "Run every model on a fast path (--fast: bf16, onnx-int8, openvino-bf16, openvino-int8 …; default the fastest "
    "one that runs here), rank them by mean main score over the tasks with a bootstrap CI, run the top --confirm "
    "models (and every model whose CI overlaps theirs) exact (fp32, the model's own backend), and print both "
    "rankings side by side: each confirmed model's shift fast → exact, Kendall's tau between the rankings, whether "
    "the exact winner is significantly better than the runner-up (compare's paired test, Holm-adjusted) and the "
    "fidelity of each fast model (score shift with CI, per-text cosine, top-10 agreement). Stored results and the "
    "embedding cache are reused as by run, so an interrupted screen resumes; fast results go to their own "
    "experiments folder."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the screen command."""
    from embedscope.cli.settings_flags import add_settings_flags

    p = sub.add_parser(
        "screen",
        help="rank many models on a fast path, confirm the best exact",
        description=_DESCRIPTION,
        argument_default=argparse.SUPPRESS,  # only the flags given become a settings layer
    )
    add_settings_flags(
        p,
        ("tasks", "results"),
        paths=("models", "device", "batch_size", "engine", "limits", "top_k"),
        exclude=("save_predictions",),
    )
    p.add_argument("--fast", metavar="PATH", help="the fast path (default: the fastest one that runs here)")
    p.add_argument(
        "--confirm", metavar="N", help="models to confirm exact, besides those whose CI overlaps (default 2)"
    )
    p.add_argument(
        "--proxy",
        nargs="+",
        metavar="SIZE",
        help="successive halving on proxy tasks instead of a fast pass: the size of each round's proxies (a count "
        "of queries or rows, or a fraction in (0, 1)), growing; the survivors run exact",
    )
    p.add_argument(
        "--tie-margin",
        metavar="POINTS",
        help="with --proxy: models equivalent within this many main-score points (TOST) are tied, and only the "
        "cheapest of each tie goes on (default 0.005)",
    )
    p.add_argument(
        "--audit",
        action="store_true",
        help="with --proxy: also run every candidate exact and say whether the screen's claim held",
    )
    p.add_argument(
        "--audit-seeds",
        metavar="N",
        help="with --audit: replay the screen at N more seeds (their own proxies, the same exact runs) and say how "
        "often its claim held beside the probability it stated, and how tau spreads (default 0)",
    )
    p.add_argument("--config", "-c", help="YAML/JSON config of run's schema (the base settings); flags override it")
    p.add_argument("--rounds", help="bootstrap / randomisation rounds of the intervals and tests (default 10,000)")
    p.add_argument("--seed", help="random seed of the intervals and tests (default 42)")
    p.add_argument(
        "--confidence",
        help="confidence level of the intervals; with --proxy also the stated probability at which confirming the "
        "survivors stops (default 0.95)",
    )
    p.add_argument(
        "--no-fidelity",
        action="store_true",
        help="leave out the per-text cosines (they encode the confirmed models' texts again unless the cache has them)",
    )
    p.add_argument("--digits", help="decimals shown (default 4)")
    p.add_argument("--json", dest="json_file", metavar="FILE", help="also write the whole report as JSON to FILE")
    p.add_argument("--csv", dest="csv_file", metavar="FILE", help="also write the rankings as CSV to FILE")
    p.set_defaults(func=_cmd_screen, parser=p)


def _integer(args: argparse.Namespace, name: str, default: int, flag: str) -> int:
    from embedscope.errors import ConfigError

    value = getattr(args, name, None)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{flag} {value}: give an integer") from None


def _size(value: str) -> int | float:
    """A proxy size as given: an integer count, else a fraction."""
    from embedscope.errors import ConfigError

    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"--proxy {value}: give a count (an integer ≥ 1) or a fraction in (0, 1)") from None


def _number(args: argparse.Namespace, name: str, default: float, flag: str) -> float:
    from embedscope.errors import ConfigError

    value = getattr(args, name, None)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{flag} {value}: give a number") from None
    if not number >= 0 or number == float("inf"):
        raise ConfigError(f"{flag} {value}: give a finite number ≥ 0")
    return number


def _cmd_screen(args: argparse.Namespace) -> int:
    from embedscope.cli.report import checked_digits
    from embedscope.cli.settings_flags import settings_layer
    from embedscope.compare.core import CompareOptions
    from embedscope.errors import ConfigError
    from embedscope.files import atomic_write_text
    from embedscope.screen.report import screen_csv
    from embedscope.screen.rounds import DEFAULT_MARGIN
    from embedscope.screen.run import DEFAULT_CONFIRM, screen_settings
    from embedscope.settings import build_settings
    from embedscope.settings.files import config_layer

    confirm = _integer(args, "confirm", DEFAULT_CONFIRM, "--confirm") if getattr(args, "confirm", None) else None
    if confirm is not None and confirm < 1:
        raise ConfigError(f"--confirm {confirm}: give a positive integer (the number of models to confirm)")
    proxy = [_size(v) for v in args.proxy] if getattr(args, "proxy", None) else None
    margin = _number(args, "tie_margin", DEFAULT_MARGIN, "--tie-margin")
    if getattr(args, "tie_margin", None) is not None and proxy is None:
        raise ConfigError("--tie-margin applies to a screen with --proxy: give --proxy too")
    options = CompareOptions(
        rounds=_integer(args, "rounds", CompareOptions.rounds, "--rounds"),
        seed=_integer(args, "seed", CompareOptions.seed, "--seed"),
        confidence=_number(args, "confidence", CompareOptions.confidence, "--confidence"),
    )
    digits = checked_digits(_integer(args, "digits", 4, "--digits"))
    layers = [config_layer(args.config)] if getattr(args, "config", None) else []
    layers.append(settings_layer(args))
    settings = build_settings(layers)
    outputs = {"--json": getattr(args, "json_file", None), "--csv": getattr(args, "csv_file", None)}
    fidelity = False if getattr(args, "no_fidelity", False) else None
    if proxy is not None and fidelity is False:
        raise ConfigError("--no-fidelity: a screen with --proxy measures no fidelity; drop it")
    report = screen_settings(
        settings,
        getattr(args, "fast", None),
        confirm,
        options,
        fidelity,
        outputs,
        proxy,
        margin,
        getattr(args, "audit", False),
        _integer(args, "audit_seeds", 0, "--audit-seeds"),
    )
    print(report.text(digits))
    if getattr(args, "json_file", None):
        atomic_write_text(args.json_file, json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n")
    if getattr(args, "csv_file", None):
        atomic_write_text(args.csv_file, screen_csv(report))
    return 0
