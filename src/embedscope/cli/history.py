"""``results``, ``gate`` and ``serve``: the results store's history, the CI gate, and the leaderboard web app."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from embedscope.cli.report import add_statistics_flags, statistics_settings
from embedscope.cli.settings_flags import add_settings_flags
from embedscope.errors import ConfigError

GATE_EPILOG = (
    "Each side is a result folder (one model's, as 'run' writes it) or a run in the store: tag:NAME (a tag given by "
    "'run --tag' or 'results tag') or run:ID (at least 6 hex digits of an id 'results list' shows). Exit status: 0 "
    "no task drops, 1 a task drops by more than --tolerance with significance, 3 the two are not like-for-like "
    "(other data, task revision, splits, limits or protocol parameters: the line names what differs), 2 a usage error."
)


def _open_store(args: argparse.Namespace, required: bool = True, create: bool = False) -> Any:
    """The store of ``--store`` (else ``$EMBEDSCOPE_STORE``); None when neither is given and it is not ``required``.
    Only ``results import`` creates a store that does not exist yet."""
    from embedscope.history.kinds import STORE_ENV, store_url_from

    url = store_url_from(getattr(args, "store", None))
    if url is None:
        if required:
            raise ConfigError(f"{args.command}: name a results store with --store URL (or set ${STORE_ENV})")
        return None
    from embedscope.history.store import Store

    return Store(url, create=create)


def _time(text: str | None, flag: str) -> dt.datetime | None:
    """An ISO date or time (UTC when no zone is given), for ``--since`` / ``--until``."""
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: give an ISO date or time, e.g. 2026-11-30 or 2026-11-30T14:00") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _add_filters(p: argparse.ArgumentParser) -> None:
    """``--model``, ``--task``, ``--tag``, ``--run``, ``--since``, ``--until``, ``--latest``: from :class:`RunFilter`."""
    import dataclasses

    from embedscope.history.store import RunFilter

    for f in dataclasses.fields(RunFilter):
        hints = dict(f.metadata["argparse"])
        flag = hints.pop("flag", f"--{f.name}")
        p.add_argument(flag, dest=f.name, help=f.metadata["help"], default=None, **hints)


def _filter(args: argparse.Namespace) -> Any:
    """The :class:`RunFilter` of :func:`_add_filters`' flags (times parsed; an unknown field refused by the type)."""
    from embedscope.history.store import RunFilter

    return RunFilter(
        model=args.model,
        task=args.task,
        tag=args.tag,
        runs=tuple(args.runs or ()),
        since=_time(args.since, "--since"),
        until=_time(args.until, "--until"),
        latest=bool(args.latest),
    )


def _add_results(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results",
        help="the results store: record result folders, list the history, tag runs, export them, upgrade its schema",
        description="A results store (--store sqlite:///FILE or postgresql://USER@HOST/DB, or $EMBEDSCOPE_STORE) keeps "
        "every run's scores and per-item rows; 'run --store URL' records as it goes.",
    )
    verbs = p.add_subparsers(dest="verb", required=True)
    imp = verbs.add_parser("import", help="record result folders (importing twice records once)")
    imp.add_argument("paths", nargs="+", help="result folders, as 'run' writes them (one model or several)")
    imp.add_argument("--tag", default=None, metavar="NAME", help="name the run (one folder of one model only)")
    exp = verbs.add_parser("export", help="write recorded runs back in the MTEB layout (per-item files included)")
    exp.add_argument("--output-folder", required=True, metavar="DIR", help="where the result folders go")
    _add_filters(exp)
    lst = verbs.add_parser("list", help="the recorded runs, oldest first (filter by model, task, tag, time)")
    _add_filters(lst)
    lst.add_argument("--json", action="store_true", help="print the runs as JSON")
    tag = verbs.add_parser("tag", help="name a run (tag NAME RUN): a gate or the leaderboard refers to it as tag:NAME")
    tag.add_argument("name", help="the tag (baseline, v1.3 …)")
    tag.add_argument("run", help="the run: run:ID, an id prefix, or tag:OTHER")
    tag.add_argument("--move", action="store_true", help="move the tag when it names another run already")
    up = verbs.add_parser("upgrade", help="bring a store written by an older embedscope to this one's schema")
    for q in (imp, exp, lst, tag, up):
        add_settings_flags(q, paths=("store",))
    p.set_defaults(func=_cmd_results)


def _cmd_results(args: argparse.Namespace) -> int:
    from embedscope.history.store import Store

    if args.verb == "upgrade":
        from embedscope.history.kinds import store_url_from

        url = store_url_from(getattr(args, "store", None))
        if url is None:
            raise ConfigError("results upgrade: name a results store with --store URL (or set $EMBEDSCOPE_STORE)")
        store = Store(url, check=False)
        before, after = store.upgrade()
        print(f"{store.url}: schema {before or '(none)'} → {after}" if before != after else f"{store.url}: at {after}")
        return 0
    store = _open_store(args, create=args.verb == "import")
    if args.verb == "import":
        if args.tag is not None and len(args.paths) > 1:
            raise ConfigError("--tag names one run: import one folder with it")
        recorded = store.import_folders(args.paths, tags=[args.tag] if args.tag else [])
        if args.tag is not None and len(recorded) > 1:
            raise ConfigError(
                f"--tag names one run, and {args.paths[0]} holds {len(recorded)}: give one model's folder"
            )
        for run_id, new in recorded:
            print(f"{'recorded' if new else 'already recorded'}: run {run_id}")
        return 0
    if args.verb == "tag":
        before = store.tag(args.name, args.run, move=args.move)
        run_id = store.resolve_run(f"tag:{args.name}")
        moved = f" (moved from run {before[:12]})" if before and before != run_id else ""
        print(f"tag {args.name}: run {run_id}{moved}")
        return 0
    where = _filter(args)
    if args.verb == "export":
        for folder in store.export(args.output_folder, where):
            print(f"wrote {folder}")
        return 0
    runs = store.runs(where)
    if args.json:
        print(json.dumps([r.to_dict() for r in runs], indent=2, allow_nan=False, default=str))
        return 0
    print(runs_table(runs))
    return 0


def runs_table(runs: list[Any]) -> str:
    """``results list``: one line per run."""
    from embedscope.results.table import markdown_table

    rows = []
    for r in runs:
        scores = ", ".join(f"{t} {s:.4f}" if s is not None else f"{t} –" for t, s in list(r.scores.items())[:4])
        more = f" (+{len(r.scores) - 4})" if len(r.scores) > 4 else ""
        rows.append(
            [r.id[:12], r.recorded_at.strftime("%Y-%m-%d %H:%M"), r.model, r.experiment or "", r.source,
             ", ".join(r.tags), scores + more]
        )  # fmt: skip
    if not rows:
        return "no runs recorded (that match)"
    return markdown_table(["run", "recorded (UTC)", "model", "experiment", "source", "tags", "main scores"], rows)


def _add_gate(sub: argparse._SubParsersAction) -> None:
    from embedscope.history.gate import DEFAULT_TOLERANCE, GATE_OPTIONS

    p = sub.add_parser(
        "gate",
        help="fail CI when a candidate drops below a baseline: per task, a paired test, Holm across tasks",
        description="Per task both sides have: the candidate's main-score difference from the baseline, its CI and "
        "paired p-value (as 'compare'), adjusted across tasks. A task fails when it drops by more than --tolerance "
        "and the drop is significant; a drop that is not both is a warning.",
        epilog=GATE_EPILOG,
    )
    p.add_argument("baseline", help="result folder, tag:NAME or run:ID")
    p.add_argument("candidate", help="result folder, tag:NAME or run:ID")
    p.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"the largest drop of a task's main score that passes, in its units (default {DEFAULT_TOLERANCE})",
    )
    add_statistics_flags(p, GATE_OPTIONS)
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write a summary for a pull-request comment")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report for CI")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    add_settings_flags(p, paths=("store",))
    p.set_defaults(func=_cmd_gate)


def _cmd_gate(args: argparse.Namespace) -> int:
    from embedscope.files import atomic_write_text
    from embedscope.history.gate import gate
    from embedscope.history.sides import side_kind

    statistics = statistics_settings(args)
    needs_store = any(side_kind(s) == "store" for s in (args.baseline, args.candidate))
    if not needs_store and getattr(args, "store", None) is not None:
        raise ConfigError(
            "--store: both sides are result folders, so no store is read; drop it, or name a side tag:NAME"
        )
    store = _open_store(args, required=False) if needs_store else None
    result = gate(
        args.baseline, args.candidate, store=store, tolerance=args.tolerance, options=statistics.compare_options()
    )
    if args.markdown:
        atomic_write_text(args.markdown, result.markdown(statistics.digits))
    if args.junit:
        atomic_write_text(args.junit, result.junit())
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        print(result.table(statistics.digits), end="")
    return result.exit_status


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="a read-only leaderboard of the store in the browser (models × tasks, history, side by side) and its JSON API",
    )
    add_settings_flags(p, paths=("store",))
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.set_defaults(func=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from embedscope.history.web.app import serve

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: a port from 1 to 65535")
    serve(_open_store(args), args.host, args.port)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the results, gate and serve commands."""
    for add in (_add_results, _add_gate, _add_serve):
        add(sub)
