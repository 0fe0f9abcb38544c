"""MkDocs hooks: the reference pages are generated from the code at build time, so they cannot drift.

* ``reference/cli.md`` — every command and flag, walked from the parser ``embedscope.cli.main.build_parser()`` builds;
* ``reference/settings.md`` — every :class:`~embedscope.settings.RunSettings` key (and the keys of its nested
  settings: model options, chunking, each engine's options) with type, default, description and its EvalScope
  equivalent, found by running EvalScope's schema (:func:`embedscope.settings.evalscope.evalscope_layer`) on a
  config that sets each EvalScope key;
* ``reference/api.md`` — exactly ``embedscope.__all__``, each name rendered by mkdocstrings from its docstring.

``tests/docs/test_reference.py`` imports this module and compares the pages with the parser, ``RunSettings`` and
``__all__``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

GENERATED = ("reference/cli.md", "reference/settings.md", "reference/api.md")


# -- the command line -------------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def commands() -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """``(command path, its parser, its one-line help)`` for every command and sub-command, in help order."""
    from embedscope.cli.main import build_parser

    def walk(prefix: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
        for name, sub in _subcommands(parser).items():
            path = f"{prefix} {name}"
            yield path, sub, _help_of(parser, name)
            yield from walk(path, sub)

    root = build_parser()
    yield "embedscope", root, root.description or ""
    yield from walk("embedscope", root)


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's options and positionals (help and sub-command actions left out)."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS
    ]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _default(action: argparse.Action) -> str:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._CountAction)):
        return ""
    # a settings flag defaults to nothing (only the flags given become a settings layer): its declared default, or
    # the command's own (add_settings_flags records it on the flag)
    default = getattr(action, "declared_default", None) if action.default is argparse.SUPPRESS else action.default
    if default is None or default == [] or isinstance(default, bool):
        return ""
    return f"`{default}`"


def cli_reference() -> str:
    """The CLI reference page."""
    out = [
        "# Command-line reference",
        "",
        "Generated from the parser at build time (`embedscope.cli.main.build_parser`): every command, sub-command and "
        "flag embedscope has. `embedscope COMMAND --help` prints the same.",
        "",
    ]
    for path, parser, summary in commands():
        depth = min(path.count(" ") + 1, 3)
        out += [f"{'#' * (depth + 1)} `{path}`", ""]
        if summary:
            out += [_cell(summary), ""]
        if parser.description and parser.description != summary:
            out += [_cell(parser.description), ""]
        rows = flags(parser)
        if not rows:
            continue
        out += ["| flag | value | default | what it does |", "|---|---|---|---|"]
        for a in rows:
            names = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}` (positional)"
            value = ""
            if a.choices:
                value = " \\| ".join(f"`{c}`" for c in a.choices)
            elif a.nargs != 0 and a.option_strings:
                value = f"`{a.metavar or a.dest.upper()}`" + (" …" if a.nargs in ("+", "*") else "")
            out.append(f"| {names} | {value} | {_default(a)} | {_cell(a.help or '')} |")
        out.append("")
    return "\n".join(out) + "\n"


# -- the settings -----------------------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    """A short, readable name of a field's type: ``int > 0 | None``, ``list[str]``, ``'fp32' | 'int8'``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        base, *meta = args
        bounds = [b for m in meta for b in _bounds(m)]
        name = _type_name(base)
        return f"{name} {' '.join(bounds)}".strip() if bounds else name
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(meta: Any) -> list[str]:
    out = []
    for op, attr in ((">", "gt"), (">=", "ge"), ("<", "lt"), ("<=", "le")):
        value = getattr(meta, attr, None)
        if value is not None:
            out.append(f"{op} {value}")
    for sub in getattr(meta, "metadata", None) or []:
        out += _bounds(sub)
    return out


def _source_comments(cls: type) -> dict[str, str]:
    """The comment on each field's line of a settings class (what its source says about the field)."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body[0].body:  # type: ignore[attr-defined]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = lines[node.end_lineno - 1] if node.end_lineno else ""
            above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
            if "  # " in line:
                found[node.target.id] = line.split("  # ", 1)[1].strip()
            elif above.startswith("# "):  # a comment heading the group of fields it belongs to
                found[node.target.id] = above[2:].strip()
    return found


def _flag_help() -> dict[str, tuple[str, str]]:
    """``run``'s flags by destination: ``dest → (flag, help)`` (a ``--no-…`` flag names what it does to the key)."""
    from embedscope.cli.main import build_parser

    run = _subcommands(build_parser())["run"]
    out = {}
    for a in flags(run):
        if a.option_strings:
            off = isinstance(a, argparse._StoreFalseAction)  # --no-cache sets cache to false
            out[a.dest] = (
                f"`{a.option_strings[0]}` sets it false" if off else f"flag `{a.option_strings[0]}`",
                a.help or "",
            )
    return out


def _default_text(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return ""
        if hasattr(value, "model_dump"):
            return ""
        return f"`{value!r}`" if value not in ({}, []) else f"`{value}`"
    if field.default is PydanticUndefined:
        return "(required)"
    return "" if field.default is None else f"`{field.default!r}`"


def evalscope_equivalents() -> dict[str, str]:
    """``RunSettings`` key (or ``model_options.KEY``) → the EvalScope ``eval_config`` key that sets it, found by
    running embedscope's reader of EvalScope's schema on configs that set one EvalScope key each."""
    from embedscope.settings.evalscope import EncodeKwargs, EvalScopeEval, EvalScopeModel, ModelKwargs, evalscope_layer

    def layer(model: dict[str, Any], ev: dict[str, Any]) -> dict[str, Any]:
        data = {"eval_config": {"models": [{"model_name_or_path": "m", **model}], "eval": {"task_names": ["T"], **ev}}}
        return evalscope_layer(data, "c.yaml").values

    def flat(values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in values.items():
            if key == "models":
                entry = value[0] if value else None
                if isinstance(entry, dict):
                    for k, v in entry.items():
                        if k != "model":
                            out[f"model_options.{k}" if k not in ("batch_size", "tasks") else k] = v
            else:
                out[key] = value
        return out

    base = flat(layer({}, {}))
    found: dict[str, str] = {"models": "eval_config.models", "tasks": "eval_config.eval.task_names"}

    def kinds(ann: Any) -> set[Any]:
        args = typing.get_args(ann)
        return {ann} if not args else {k for a in args for k in kinds(a)} | {typing.get_origin(ann)}

    def sample(field: Any) -> Any:
        found_kinds = kinds(field.annotation)
        if bool in found_kinds:
            return False if field.default is None else not field.default
        if list in found_kinds:
            return ["x"]
        literals = [a for a in typing.get_args(field.annotation) if typing.get_origin(a) is typing.Literal]
        if literals:
            return typing.get_args(literals[0])[-1]
        for kind, value in ((int, 2), (float, 0.5), (str, "x")):
            if kind in found_kinds:
                return value
        return None

    def probe(prefix: str, fields: dict[str, Any], build: Any) -> None:
        for name, field in fields.items():
            value = sample(field)
            if value is None:
                continue
            try:
                got = flat(build(name, value))
            except Exception:  # noqa: BLE001 - a key that needs other keys set tells nothing on its own
                continue
            for key, v in got.items():
                if base.get(key) != v and key not in found:
                    found[key] = f"{prefix}{name}"

    probe("eval_config.models[].", EvalScopeModel.model_fields, lambda n, v: layer({n: v}, {}))
    probe(
        "eval_config.models[].model_kwargs.", ModelKwargs.model_fields, lambda n, v: layer({"model_kwargs": {n: v}}, {})
    )
    probe("eval_config.eval.", EvalScopeEval.model_fields, lambda n, v: layer({}, {n: v}))
    probe(
        "eval_config.models[].encode_kwargs.",
        EncodeKwargs.model_fields,
        lambda n, v: layer({"encode_kwargs": {n: v}}, {}),
    )
    return found


def settings_keys() -> list[tuple[str, Any, type]]:
    """``(key, pydantic field, owning class)`` for every settings key: ``RunSettings``' fields, then the keys of the
    nested settings written with a dot (``model_options.pooling``, ``chunking.chunk_size``) and each engine's options
    under their flat names (``ray_address``)."""
    from embedscope.engines.base import engine_names, engine_settings
    from embedscope.settings import RunSettings
    from embedscope.settings.run import ChunkingSettings, ModelOptions

    keys = [(name, field, RunSettings) for name, field in RunSettings.model_fields.items()]
    keys += [(f"model_options.{n}", f, ModelOptions) for n, f in ModelOptions.model_fields.items()]
    keys += [(f"chunking.{n}", f, ChunkingSettings) for n, f in ChunkingSettings.model_fields.items()]
    for engine in engine_names():
        cls = engine_settings(engine)
        keys += [(f"{engine}_{n}", f, cls) for n, f in cls.model_fields.items() if n != "name"]
    return keys


def settings_reference() -> str:
    """The settings reference page."""
    equivalents = evalscope_equivalents()
    helps = _flag_help()
    comments: dict[type, dict[str, str]] = {}
    out = [
        "# Settings reference",
        "",
        "Generated from `embedscope.settings.RunSettings` at build time: every key of embedscope's config files, "
        "which are also `embedscope.evaluate(**settings)`'s keywords and the axes of `embedscope sweep`. A flag of "
        "`embedscope run` that sets a key is named in its description; the EvalScope column names the key of "
        "EvalScope's `eval_config` that embedscope reads into it (found by running embedscope's EvalScope reader).",
        "",
        "| key | type | default | description | EvalScope |",
        "|---|---|---|---|---|",
    ]
    for key, field, cls in settings_keys():
        short = key.split(".")[-1]
        if cls not in comments:
            comments[cls] = _source_comments(cls)
        text = field.description or comments[cls].get(short, "")
        dest = key.replace(".", "_") if key.startswith("chunking.") else short
        flag = helps.get(dest) or helps.get(key.replace("model_options.", ""))
        if flag is not None:
            text = text or flag[1]
            text = f"{text} ({flag[0]})" if text else flag[0]
        equivalent = equivalents.get(key, "")
        out.append(
            f"| `{key}` | {_cell(_type_name(field.annotation))} | {_default_text(field)} | {_cell(text)} | "
            f"{f'`{equivalent}`' if equivalent else ''} |"
        )
    return "\n".join(out) + "\n"


# -- the Python API ---------------------------------------------------------------------------------------------


def api_names() -> list[str]:
    """``embedscope.__all__`` less ``__version__``, in its order."""
    import embedscope

    return [n for n in embedscope.__all__ if n != "__version__"]


def api_reference() -> str:
    """The Python API page: exactly ``embedscope.__all__``, each rendered from its docstring where it is defined."""
    import embedscope

    out = [
        "# Python API reference",
        "",
        "Generated at build time from `embedscope.__all__`: every public name, rendered from its docstring. "
        "Every verb returns one object whose `table()` is the text the matching command prints and whose "
        "`to_dict()` is plain data for JSON (see [the Python API](../python.md)).",
        "",
        f"`embedscope.__version__` is `{embedscope.__version__}` in this build.",
        "",
    ]
    for name in api_names():
        obj = getattr(embedscope, name)
        path = f"{obj.__module__}.{obj.__qualname__}"
        out += [
            f"## `embedscope.{name}`",
            "",
            f"::: {path}",
            "    options:",
            "      show_root_heading: false",
            "      show_root_toc_entry: false",
            "      heading_level: 3",
            "",
        ]
    return "\n".join(out) + "\n"


# -- the hook ---------------------------------------------------------------------------------------------------


def pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    return {
        "reference/cli.md": cli_reference(),
        "reference/settings.md": settings_reference(),
        "reference/api.md": api_reference(),
    }


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site (mkdocs >= 1.6: ``File.generated``)."""
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
