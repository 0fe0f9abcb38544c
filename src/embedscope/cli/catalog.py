"""``models``, ``tasks`` and ``download``: what can be evaluated, and fetching catalog datasets."""

from __future__ import annotations

import argparse
import json
import os
from typing import cast

from embedscope.cli.options import benchmark_tasks
from embedscope.errors import ConfigError


def _add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the built-in model aliases (they ship on PyPI and work offline)")
    p.set_defaults(func=_cmd_models)


def _cmd_models(args: argparse.Namespace) -> int:
    from embedscope.models.specs import list_aliases

    for name, description in list_aliases().items():
        print(f"{name:24s} {description}")
    return 0


def _add_tasks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tasks",
        help="list tasks: built-in (offline) and every MTEB text task (the catalog)",
        description="List tasks. Built-in tasks run offline; catalog tasks need their Hugging Face "
        "dataset (online, or a local copy passed with --data-dir; 'embedscope download' fetches it).",
    )
    from embedscope.tasks.types import TypeNames

    # %(task_types)s: the registered types, listed when help is printed (the task modules load only then)
    p.add_argument("--type", default=None, help="%(task_types)s").task_types = TypeNames()
    p.add_argument("--language", "-l", default=None, help="ISO 639-3 code such as rus, cmn, eng")
    p.add_argument("--name", default=None, help="substring of the task name")
    p.add_argument("--suite", default=None, help="C-MTEB | ruMTEB | MTEB(eng)")
    p.add_argument(
        "--benchmark",
        "-b",
        default=None,
        metavar="NAME",
        help='tasks of one of mteb\'s benchmarks, e.g. "MTEB(eng, v2)"',
    )
    p.add_argument("--benchmarks", action="store_true", help="list mteb's benchmarks instead of tasks")
    p.add_argument("--data-dir", default=None, help="also say which tasks have a local copy in this folder")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_tasks)


def _size(size: object) -> str:
    if not isinstance(size, dict) or not size:
        return ""
    if "documents" in size:
        return f"{size.get('queries', 0):,} q / {size['documents']:,} docs"
    return f"{size.get('samples', 0):,}"


def _cmd_tasks(args: argparse.Namespace) -> int:
    from embedscope.results.table import markdown_table

    if args.benchmarks:
        from embedscope.tasks.catalog import benchmark_specs, benchmarks

        listing = [[name, str(len(names)), str(len(benchmark_specs(name)[1]))] for name, names in benchmarks().items()]
        print(markdown_table(["benchmark", "tasks", "not text (left out)"], listing))
        return 0
    from embedscope.tasks.registry import task_listing
    from embedscope.tasks.types import get_task_type

    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        raise ConfigError(f"--data-dir {args.data_dir}: no such folder")
    rows = task_listing(
        type=None if args.type is None else get_task_type(args.type).name,  # an unknown type lists the known ones
        language=args.language,
        name=args.name,
        suite=args.suite,
        benchmark=args.benchmark,
        data_dir=args.data_dir,
    )
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    headers = ["task", "type", "languages", "main score", "size", "data"] + (["local copy"] if args.data_dir else [])
    table = [
        [
            str(r["name"]),
            str(r["type"]),
            _languages(cast("list[str]", r["languages"])),
            str(r["main_score"]),
            _size(r.get("size")),
            str(r["data"]),
        ]
        + ([str(r.get("local") or "-")] if args.data_dir else [])
        for r in rows
    ]
    print(markdown_table(headers, table))
    held = f", {sum(1 for r in rows if r.get('local'))} with a local copy in {args.data_dir}" if args.data_dir else ""
    print(f"{len(rows)} tasks{held}")
    if args.benchmark:
        from embedscope.tasks.catalog import benchmark_specs

        missing = benchmark_specs(args.benchmark)[1]
        if missing:
            print(f"not text tasks embedscope runs ({len(missing)}): {', '.join(missing)}")
    return 0


def _languages(languages: list[str]) -> str:
    return ",".join(languages) if len(languages) <= 6 else f"{','.join(languages[:5])},… ({len(languages)})"


def _add_download(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "download",
        help="fetch catalog tasks' datasets (pinned revision) for offline runs",
        description="Download each task's Hugging Face dataset at the revision mteb pins, into "
        "DIR/<Task> as the hub lays it out; then run offline with --data-dir DIR.",
    )
    p.add_argument("tasks", nargs="*", help="catalog task names")
    p.add_argument("--benchmark", "-b", default=None, metavar="NAME", help="also every text task of this benchmark")
    p.add_argument("--to", required=True, metavar="DIR", help="folder to download into")
    p.set_defaults(func=_cmd_download)


def _cmd_download(args: argparse.Namespace) -> int:
    from embedscope.tasks.catalog import catalog_entry, download_task_data

    names = list(dict.fromkeys(s.partition(":")[0] for s in [*args.tasks, *benchmark_tasks(args.benchmark)]))
    if not names:
        raise ConfigError("name the tasks to download (or --benchmark NAME)")
    for name in names:
        catalog_entry(name)  # every name checked before anything is fetched
    for folder in download_task_data(names, args.to):
        print(f"downloaded {folder}")
    print(f"run offline with --data-dir {args.to}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the models, tasks and download commands."""
    for add in (_add_models, _add_tasks, _add_download):
        add(sub)
