"""``embedscope`` command line: each command is one library call; heavy imports happen lazily.

The commands live in one module per group (``run``, ``sweep``, ``screen``, ``catalog``, ``report``, ``inspect``,
``fastbook``, ``cache``); this module builds the parser and turns user errors into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import logging
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

from embedscope.cli import cache, catalog, fastbook, history, inspect, report, run, screen, sweep
from embedscope.errors import EmbedscopeError, SettingError
from embedscope.version import __version__


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors in one line, naming the command and pointing at its help (exit code 2).

    An unknown flag is reported by the (sub-)command that met it, with the nearest spelling it has; a renamed flag's
    old spelling is taken as today's, with a note (:func:`~embedscope.cli.settings_flags.new_spellings`).
    """

    def error(self, message: str) -> NoReturn:
        from embedscope.messages import clip_text

        self.exit(2, f"{self.prog}: error: {clip_text(message)} (see '{self.prog} --help')\n")

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        from embedscope.cli.settings_flags import new_spellings

        given = new_spellings(self, sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(given, namespace)
        if extras and _UNRECOGNIZED_BY.get() is None:  # the innermost command that met them (it returns first)
            _UNRECOGNIZED_BY.set(self)
        return parsed, extras

    def parse_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> Any:
        token = _UNRECOGNIZED_BY.set(None)
        try:
            parsed, extras = self.parse_known_args(args, namespace)
            if extras:
                by = _UNRECOGNIZED_BY.get() or self
                by.error(f"unrecognized arguments: {' '.join(extras)}{_did_you_mean(by, extras)}")
        finally:
            _UNRECOGNIZED_BY.reset(token)
        return parsed


_UNRECOGNIZED_BY: ContextVar[OneLineParser | None] = ContextVar("unrecognized_by", default=None)


def _did_you_mean(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """``; did you mean --top-k?``: the nearest flag of ``parser`` to each unknown flag in ``extras`` (an old
    spelling counts as the flag of today it stands for), or nothing when none is near.

    >>> from embedscope.cli.settings_flags import add_settings_flags
    >>> p = OneLineParser(prog="x")
    >>> add_settings_flags(p, paths=("top_k",))
    >>> _did_you_mean(p, ["--top_k", "5"]), _did_you_mean(p, ["--frobnicate"])
    ('; did you mean --top-k?', '')
    """
    from embedscope.cli.settings_flags import renamed_flags

    spellings = {s: s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
    spellings |= renamed_flags(parser)
    found: dict[str, str] = {}
    for arg in extras:
        flag = arg.partition("=")[0]
        if not flag.startswith("-") or _is_number(flag):
            continue
        close = difflib.get_close_matches(flag, list(spellings), n=1, cutoff=0.75)
        if close:
            found.setdefault(flag, spellings[close[0]])
    if len(found) == 1:
        return f"; did you mean {next(iter(found.values()))}?"
    return "; did you mean " + ", ".join(f"{new} for {old}" for old, new in found.items()) + "?" if found else ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="embedscope", description="Evaluate embedding models and retrieval setups.")
    parser.add_argument("--version", action="version", version=f"embedscope {__version__}")
    parser.add_argument(
        "--verbose",
        "-v",
        action="count",
        default=0,
        help="more log output (-vv: debug); give it before the command: embedscope -v run …",
    )
    sub = parser.add_subparsers(dest="command")
    # the order of 'embedscope --help'
    for group in (run, sweep, screen, catalog, report, inspect, history, fastbook, cache):
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    try:
        return int(args.func(args) or 0)
    except (EmbedscopeError, OSError, UnicodeDecodeError, sqlite3.Error, MemoryError) as e:
        if args.verbose:
            import traceback

            traceback.print_exc()
        from embedscope.messages import clip_text

        print(f"embedscope: error: {clip_text(_one_line(e))}", file=sys.stderr)
        return 2


def _flag(key: str) -> str:
    """The flag of settings key ``key`` (declared once, by the settings: ``chunking.overlap`` → ``--chunk-overlap``)."""
    from embedscope.cli.settings_flags import flag_of

    return flag_of(key) or key


def _one_line(error: BaseException) -> str:
    """What went wrong, in one line: embedscope's own message, or the file an OS error names and why."""
    if isinstance(error, SettingError):  # raised outside a run (which names settings itself): as flags
        return error.named(_flag)
    if isinstance(error, EmbedscopeError):
        return str(error)
    if isinstance(error, MemoryError):
        return (
            f"out of memory ({error or 'an allocation failed'}); ask for less (fewer rounds, a smaller batch or top-k)"
        )
    if isinstance(error, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({error}); save it as UTF-8 (run with --verbose to see which)"
    if isinstance(error, sqlite3.Error):
        return _sqlite_line(error)
    if isinstance(error, OSError) and error.errno == errno.ENOSPC and error.filename is None:
        return f"no space left on device while writing ({error}); free some disk space and run again"
    if isinstance(error, OSError) and error.filename is not None:
        target = f" -> {error.filename2}" if error.filename2 else ""
        return f"{error.filename}{target}: {error.strerror or error}"
    return str(error)


def _sqlite_line(error: sqlite3.Error) -> str:
    """An SQLite error the code did not turn into its own message (the embedding cache's store is the SQLite file
    a run writes): disk advice only when SQLite says the disk is full or failed."""
    text = str(error)
    if any(word in text.lower() for word in ("full", "disk i/o")):
        return f"embedding cache: {text}; free some disk space, or run with --no-cache"
    return f"SQLite: {text} (run with --verbose to see where)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
