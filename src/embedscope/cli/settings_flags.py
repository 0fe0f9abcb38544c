"""Command-line flags built from the settings' own declarations, and the flags given turned back into a settings layer.

Every run option is declared once, on its :class:`~embedscope.settings.run.RunSettings` field
(:mod:`embedscope.settings.options`): its help text, group, flag spelling and argparse hints. A command picks groups
(and single options by path) with :func:`add_settings_flags`; :func:`settings_layer` turns what was given into a
:class:`~embedscope.settings.Layer` whose names are the flags as written, so every error names the flag. Flags that
are not settings (``--config``, ``--print-settings``, ``--json`` …) stay with their command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from embedscope.errors import ConfigError, SettingError
from embedscope.settings.options import DeclaredOption, declared_options
from embedscope.settings.sources import Layer

_ACTIONS: dict[str, Any] = {"boolean": argparse.BooleanOptionalAction}


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
) -> None:
    """The flags of the options in ``groups`` (and those at ``paths``; ``engine`` brings each engine's flags), less
    ``exclude``; a flag not given leaves no attribute (so only the flags given become a settings layer)."""
    from embedscope.engines.base import engine_names

    for option in declared_options():
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
        parser.add_argument(*option.flags, **kwargs)


def _set(tree: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def flag_of(path: str) -> str | None:
    """The flag of the settings key ``path`` (``chunking.overlap`` → ``--chunk-overlap``), or None when it has none."""
    for option in declared_options():
        if not option.config_only and option.path in (path, f"engine.{path}"):
            return option.flags[0]
    return None


def settings_layer(args: argparse.Namespace, label: str = "command line") -> Layer:
    """The settings flags given in ``args`` as a layer (names: the flags as spelled), other attributes ignored.

    The pipeline flags (``--retriever``, ``--fusion`` …) make one ``pipeline``; with ``--reranker`` alone the model
    (``--model``, default minilm) is its first stage.
    """
    from embedscope.tasks.params import parse_task_params

    given = vars(args)
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    for option in declared_options():
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
    _pipeline_from_flags(values, names)
    return Layer(label, values, "flag", names)


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
