"""``inspect``: the worst queries of one ranking result, with their texts, relevant documents and what was retrieved."""

from __future__ import annotations

import argparse
import json
import sys

from embedscope.cli.settings_flags import add_settings_flags, flag_of
from embedscope.errors import ConfigError, SettingError

FLAGS = {"task": "--task", "worst": "--worst", "group": "--group", "parquet": "--parquet"}


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="the worst queries of a ranking result: query text, relevant documents, what was retrieved instead",
        description="Reads one model's result folder (as 'embedscope run' writes it): each query's per-item rows, the "
        "saved predictions (--save-predictions) for scores, and the task's data for texts and relevance judgments.",
    )
    p.add_argument("folder", help="one model's results folder (as written by 'embedscope run'), or a result file in it")
    p.add_argument(
        "--task", default=None, help="the task to inspect (default: the only result there with per-item rows)"
    )
    p.add_argument(
        "--worst", type=int, default=10, metavar="N", help="the N worst queries by the task's main metric (default 10; "
        "0: every query)"
    )  # fmt: skip
    p.add_argument(
        "--group", default=None, metavar="G", help="only the queries of group G (VALUE or FIELD=VALUE of --group-by)"
    )
    p.add_argument(
        "--parquet", default=None, metavar="FILE", help="also write one row per (query, document) to FILE (Parquet)"
    )
    p.add_argument("--json", action="store_true", help="print the queries as JSON")
    add_settings_flags(p, paths=("data_dir",))
    p.set_defaults(func=_cmd_inspect)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from embedscope.api import inspect

    try:
        found = inspect(
            args.folder, task=args.task, worst=args.worst, group=args.group, parquet=args.parquet,
            data_dir=getattr(args, "data_dir", None),
        )  # fmt: skip
    except SettingError as e:  # the library names its arguments; here they are flags
        raise ConfigError(e.named(lambda key: FLAGS.get(key) or flag_of(key))) from None
    print(json.dumps(found.to_dict(), indent=2, ensure_ascii=False) if args.json else found.table())
    if args.parquet:
        print(f"wrote {args.parquet}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the inspect command."""
    _add_inspect(sub)
