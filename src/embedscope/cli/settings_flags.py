"""Command-line flags built from the settings' own declarations, and the flags given turned back into a settings layer.

Every run option is declared once, on its :class:`~embedscope.settings.run.RunSettings` field
(:mod:`embedscope.settings.options`): its help text, group, flag spelling and argparse hints. A command picks groups
(and single options by path) with :func:`add_settings_flags`; :func:`settings_layer` turns what was given into a
:class:`~embedscope.settings.Layer` whose names are the flags as written, so every error names the flag. Flags that
are not settings (``--config``, ``--print-settings``, ``--json`` …) stay with their command.

A flag renamed in a release (``option(..., renamed_from=("--method",))``) keeps its old spelling for a release:
:func:`add_settings_flags` records it on the parser, out of ``--help`` and the reference, and :func:`new_spellings`
(which the command line's parser calls on the arguments it parses) writes it as today's flag, with one note naming it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from embedscope.errors import ConfigError, SettingError
from embedscope.settings.options import DeclaredOption, declared_options, family_options
from embedscope.settings.sources import Layer

_ACTIONS: dict[str, Any] = {"boolean": argparse.BooleanOptionalAction}
M = TypeVar("M", bound=BaseModel)
_RENAMED = "_embedscope_renamed_flags"  # a parser's attribute: {old spelling: today's}


def _picked(option: DeclaredOption, groups: Sequence[str], paths: Sequence[str], exclude: Sequence[str]) -> bool:
    if option.config_only or option.path in exclude:
        return False
    in_paths = option.path in paths or (option.path.startswith("engine.") and "engine" in paths)
    return option.group in groups or in_paths


def add_settings_flags(
    parser: argparse.ArgumentParser,
    groups: Sequence[str] = (),
    paths: Sequence[str] = (),
    exclude: Sequence[str] = (),
    root: type[BaseModel] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """The flags of the options in ``groups`` (and those at ``paths``; ``engine`` brings each engine's flags), less
    ``exclude``; a flag not given leaves no attribute (so only the flags given become a settings layer). Their old
    spellings (``renamed_from``) are recorded for :func:`new_spellings`. ``root``: another option family
    (:class:`~embedscope.settings.statistics.StatisticsSettings` …) than the run's; ``defaults``: this command's own
    defaults where they differ from the declared ones (``gate``'s test), shown in the reference."""
    from embedscope.engines.base import engine_names

    renamed: dict[str, str] = vars(parser).setdefault(_RENAMED, {})

    for option in declared_options(root):
        if not _picked(option, groups, paths, exclude):
            continue
        kwargs: dict[str, Any] = {"dest": option.dest, "default": argparse.SUPPRESS, "help": option.help}
        if option.action is not None:
            kwargs["action"] = _ACTIONS.get(option.action, option.action)
        if option.action not in ("store_true", "store_false", "boolean"):
            for key in ("nargs", "const"):
                if getattr(option, key) is not None:
                    kwargs[key] = getattr(option, key)
            kwargs["metavar"] = option.metavar or option.path.rsplit(".", 1)[-1].upper()
        if option.path == "engine":
            kwargs["choices"], kwargs["metavar"] = engine_names(), None
        elif option.choices is not None:
            kwargs["choices"] = option.choices
        action = parser.add_argument(*option.flags, **kwargs)
        action.declared_default = (defaults or {}).get(option.path, option.default)  # type: ignore[attr-defined]
        renamed.update(old_spellings(option))


def add_dry_run_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--dry-run``: the commands that encode (run, screen) say what they would do and stop; ``help`` says what
    each prints."""
    parser.add_argument("--dry-run", action="store_true", help=help)


def old_spellings(option: DeclaredOption) -> dict[str, str]:
    """Each old flag of ``option`` (its ``renamed_from``) and the flag of today it stands for; a boolean's
    ``--no-`` form too.

    >>> from embedscope.settings.options import option_at
    >>> old_spellings(option_at("chunking.method"))
    {'--method': '--chunking'}
    """
    pairs = {old: option.flags[0] for old in option.old_flags}
    if option.action == "boolean":
        pairs |= {old.replace("--", "--no-", 1): option.flags[0].replace("--", "--no-", 1) for old in option.old_flags}
    return pairs


def renamed_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The old spellings ``parser`` takes, each with the flag of today it stands for: those its settings flags
    declare, less any it has as a flag of today (``chunk --tokenizer`` is the chunking tokenizer's old spelling;
    ``run --tokenizer`` is the model's own flag)."""
    return {old: new for old, new in vars(parser).get(_RENAMED, {}).items() if old not in parser._option_string_actions}


def new_spellings(parser: argparse.ArgumentParser, args: Iterable[str]) -> list[str]:
    """``args`` with each old spelling of a renamed flag (``--method``, ``--method=paragraphs``) written as today's,
    and one note on stderr for each old spelling given (``embedscope: note: --method is now --chunking``); ``--`` ends
    the flags."""
    given, renamed = list(args), renamed_flags(parser)
    if not renamed:
        return given
    out: list[str] = []
    noted: set[str] = set()
    for n, arg in enumerate(given):
        if arg == "--":
            return out + given[n:]
        flag, equals, value = arg.partition("=")
        new = renamed.get(flag)
        if new is None:
            out.append(arg)
            continue
        if flag not in noted:
            noted.add(flag)
            print(f"embedscope: note: {flag} is now {new}", file=sys.stderr)
        out.append(f"{new}{equals}{value}")
    return out


def _set(tree: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def flag_of(path: str) -> str | None:
    """The flag of the settings key ``path`` (``chunking.overlap`` → ``--chunk-overlap``), or None when it has none."""
    for option in itertools.chain(declared_options(), family_options()):
        if not option.config_only and option.path in (path, f"engine.{path}"):
            return option.flags[0]
    return None


def settings_layer(args: argparse.Namespace, label: str = "command line", root: type[BaseModel] | None = None) -> Layer:
    """The settings flags given in ``args`` as a layer (names: the flags as spelled), other attributes ignored;
    ``root``: another option family than the run's (see :func:`add_settings_flags`).

    The pipeline flags (``--retriever``, ``--fusion`` …) make one ``pipeline``; with ``--reranker`` alone the model
    (``--model``, default minilm) is its first stage.
    """
    from embedscope.tasks.params import parse_task_params

    given = vars(args)
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    for option in declared_options(root):
        if option.config_only or option.dest not in given:
            continue
        value = given[option.dest]
        if option.key_values:
            try:
                value = parse_task_params(value)
            except SettingError as e:  # it names the setting by key: name the flag
                raise ConfigError(e.named(flag_of)) from None
        path = option.path
        if path.startswith("engine."):  # an engine's flat NAME_FIELD key
            path = path.removeprefix("engine.")
        _set(values, path.split("."), value)
        names[path] = option.flags[0]
        top = path.split(".", 1)[0]
        if top != path:
            names[top] = "/".join(filter(None, (names.get(top), option.flags[0])))
    if root is None:
        _pipeline_from_flags(values, names)
    return Layer(label, values, "flag", names)


def family_settings(
    args: argparse.Namespace, root: type[M], defaults: Mapping[str, Any] | None = None, over: Layer | None = None
) -> M:
    """The option family ``root``'s settings from its flags given in ``args``, over a config file's section
    ``over`` and this command's ``defaults`` (those of :func:`add_settings_flags`); an error names the flag or the
    file and key."""
    from embedscope.settings.sources import build_declared

    layers = [
        Layer("defaults", dict(defaults or {}), "api"),
        *([over] if over else []),
        settings_layer(args, root=root),
    ]
    return build_declared(root, layers)


def _pipeline_from_flags(values: dict[str, Any], names: dict[str, str]) -> None:
    """The pipeline flags made whole: a first stage is needed; ``--model`` is it when only rerankers are given."""
    pipeline = values.get("pipeline")
    if pipeline is None:
        return
    if not (pipeline.get("retrievers") or pipeline.get("rerankers")):
        raise ConfigError(f"{names['pipeline']}: need --retriever (two or more to fuse) or --reranker")
    if pipeline.get("retrievers") and "model" in values:
        raise ConfigError("give the first stage with --model or with --retriever, not both")
    if not pipeline.get("retrievers"):
        pipeline["retrievers"] = [values.pop("model", "minilm")]
        names.pop("model", None)
