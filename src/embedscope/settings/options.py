"""Each run option declared once, on its settings field: its help text, its group, its flag, where it acts.

A field of :class:`~embedscope.settings.run.RunSettings` (or of a nested settings model: ``model_options``,
``chunking``, ``pipeline``, ``pipeline.fusion``) is written with :func:`option`, which returns a pydantic ``Field``
whose ``description`` is the option's one help text and whose ``json_schema_extra["option"]`` holds the rest:

- ``group``: the family a command picks (:data:`GROUPS`);
- ``flags``: the command-line spellings, the first the main one (default ``--key-with-dashes``); ``config_only``
  instead, with the reason the option has no flag;
- argparse hints (``nargs``, ``action``, ``const``, ``metavar``, ``choices``);
- ``acts``: where it acts (``{"task_type": [...]}``, ``{"fusion": ["rrf"]}``): one given where it acts nowhere in a
  run is refused (:func:`acts_nowhere`);
- ``stored``: whether it changes what a result stores (a sweep axis over one that does not is refused);
- ``help_from``: ``module:function`` whose one line ends the help (a registry's names, so a new record shows);
- ``renamed_from``: the spellings of earlier releases, flags (``--method``) and config key paths
  (``chunking.split``): the command line and the config-file reader accept them for a release, as the option's
  spelling of today, with a one-line note naming it (:attr:`DeclaredOption.old_flags`,
  :attr:`DeclaredOption.old_keys`).

:func:`declared_options` walks the fields (nested ones by path); the command line (``embedscope.cli.settings_flags``)
builds its flags from it, and a test holds every field to exactly one flag or a reason.

>>> top_k = next(o for o in declared_options() if o.path == "top_k")
>>> top_k.flags, top_k.group, top_k.acts
(('--top-k',), 'search', {'task_type': ['Retrieval', 'InstructionRetrieval']})
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

GROUPS = (
    "models",
    "model options",
    "pipeline",
    "tasks",
    "encoding",
    "search",
    "dense post-processing",
    "chunking",
    "results",
)
FAMILY_GROUPS = ("statistics", "screen")  # the option families beside the run's (settings/statistics.py, screen.py)


def option(
    default: Any = ...,
    *,
    help: str,
    group: str,
    flags: Sequence[str] = (),
    config_only: str | None = None,
    nargs: str | None = None,
    action: str | None = None,
    const: Any = None,
    metavar: str | None = None,
    choices: Sequence[str] | None = None,
    key_values: bool = False,
    acts: Mapping[str, Sequence[str]] | None = None,
    stored: bool = True,
    help_from: str | None = None,
    renamed_from: Sequence[str] = (),
    **field_kwargs: Any,
) -> Any:
    """A settings field with its option metadata (see the module docstring); ``field_kwargs`` go to ``Field``."""
    if group not in GROUPS + FAMILY_GROUPS:
        raise ValueError(f"option group {group!r}: one of {', '.join(GROUPS + FAMILY_GROUPS)}")
    meta: dict[str, Any] = {
        "group": group,
        "flags": list(flags),
        "config_only": config_only,
        "nargs": nargs,
        "action": action,
        "const": const,
        "metavar": metavar,
        "choices": list(choices) if choices is not None else None,
        "key_values": key_values,
        "acts": {k: list(v) for k, v in (acts or {}).items()},
        "stored": stored,
        "help_from": help_from,
        "renamed_from": list(renamed_from),
    }
    if default is ... and "default_factory" in field_kwargs:
        return Field(description=help, json_schema_extra={"option": meta}, **field_kwargs)
    return Field(default, description=help, json_schema_extra={"option": meta}, **field_kwargs)


@dataclass(frozen=True)
class DeclaredOption:
    """One option: its key path (``chunking.chunk_size``), help text and metadata (see :func:`option`)."""

    path: str
    help: str
    group: str
    flags: tuple[str, ...]
    config_only: str | None = None
    nargs: str | None = None
    action: str | None = None
    const: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    key_values: bool = False
    acts: dict[str, list[str]] = field(default_factory=dict)
    stored: bool = True
    default: Any = None  # the field's default (None: none, or one computed at run time)
    renamed_from: tuple[str, ...] = ()  # earlier releases' spellings: flags and config key paths

    @property
    def dest(self) -> str:
        """The argparse destination of its flag (the path, dots as double underscores)."""
        return self.path.replace(".", "__")

    @property
    def old_flags(self) -> tuple[str, ...]:
        """The flags it had in earlier releases (accepted for a release, with a note naming :attr:`flags`)."""
        return tuple(r for r in self.renamed_from if r.startswith("-"))

    @property
    def old_keys(self) -> tuple[str, ...]:
        """The config key paths it had in earlier releases (accepted for a release, with a note naming
        :attr:`path`)."""
        return tuple(r for r in self.renamed_from if not r.startswith("-"))


def _meta(info: FieldInfo) -> dict[str, Any] | None:
    extra = info.json_schema_extra
    return extra.get("option") if isinstance(extra, Mapping) else None  # type: ignore[return-value]


def _nested(info: FieldInfo) -> type[BaseModel] | None:
    """The settings model a field holds, when it holds exactly one (``ChunkingSettings | None`` …)."""
    found: list[type[BaseModel]] = []
    pending = [info.annotation]
    while pending:
        current = pending.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            found.append(current)
        elif typing.get_origin(current) is not list:
            pending.extend(typing.get_args(current))
    return found[0] if len(found) == 1 else None


_ROOT: type[BaseModel] | None = None  # the settings model whose options these are (RunSettings registers itself)


def register_root(root: type[BaseModel]) -> None:
    """Make ``root`` (:class:`~embedscope.settings.run.RunSettings`, at its import) the model whose options
    :func:`declared_options` lists by default; this module never imports it, so the two form no cycle."""
    global _ROOT
    _ROOT = root


_FAMILIES: list[type[BaseModel]] = []  # the other option families (statistics, screen), registered at their import


def register_family(root: type[BaseModel]) -> type[BaseModel]:
    """Make ``root`` (a settings model of another option family: ``StatisticsSettings``, ``ScreenSettings``) one whose
    keys the entry layers can name (:func:`family_options`); returns it, so it can decorate the class."""
    if root not in _FAMILIES:
        _FAMILIES.append(root)
    return root


def family_options() -> Iterator[DeclaredOption]:
    """Every option of every registered family besides the run's (their keys never clash with a run option's)."""
    for root in _FAMILIES:
        yield from declared_options(root)


def declared_options(root: type[BaseModel] | None = None, prefix: str = "") -> Iterator[DeclaredOption]:
    """Every option of ``root`` (default :class:`RunSettings`), nested settings models by path; a field holding a
    settings model whose own fields are options is walked rather than listed (``chunking`` → ``chunking.method`` …).
    An engine's fields come from the engine registry as ``engine.NAME_FIELD``."""
    if root is None:
        if _ROOT is None:
            raise RuntimeError("no settings model is registered: import embedscope.settings first")
        root = _ROOT
    for name, info in root.model_fields.items():
        path = f"{prefix}{name}"
        meta = _meta(info)
        nested = _nested(info)
        if meta is None and nested is not None:
            yield from declared_options(nested, f"{path}.")
            continue
        if meta is None:
            raise TypeError(f"settings field {path} has no option metadata: declare it with option(...)")
        flags = tuple(meta["flags"]) or (() if meta["config_only"] else (f"--{name.replace('_', '-')}",))
        yield DeclaredOption(
            path,
            _help(info.description or "", meta.get("help_from")),
            meta["group"],
            flags,
            meta["config_only"],
            meta["nargs"],
            meta["action"],
            meta["const"],
            meta["metavar"],
            tuple(meta["choices"]) if meta["choices"] is not None else None,
            meta["key_values"],
            meta["acts"],
            meta["stored"],
            _plain_default(info),
            tuple(meta.get("renamed_from", ())),
        )
    if prefix == "" and root.__name__ == "RunSettings":
        yield from engine_options()


def _plain_default(info: FieldInfo) -> Any:
    """A field's default as plain data (None when it has none, or its default is made at run time)."""
    from pydantic_core import PydanticUndefined

    if info.default_factory is not None or info.default is PydanticUndefined:
        return None
    value = info.default
    return value if isinstance(value, (str, int, float, bool, type(None))) else None


def _help(text: str, help_from: str | None) -> str:
    """The help text, ended by what ``help_from`` (``module:function``, a registry's one-line list) says now."""
    if help_from is None:
        return text
    module, _, function = help_from.partition(":")
    return f"{text}: {getattr(importlib.import_module(module), function)()}"


def engine_options() -> Iterator[DeclaredOption]:
    """Each registered engine's fields as options ``engine.NAME_FIELD`` (flag ``--NAME-FIELD``), acting with that
    engine only."""
    from embedscope.engines.base import engine_names, engine_settings

    for name in engine_names():
        for field_name, info in engine_settings(name).model_fields.items():
            if field_name == "name":
                continue
            yield DeclaredOption(
                f"engine.{name}_{field_name}",
                f"{info.description or field_name} (with --engine {name})",
                "encoding",
                (f"--{name}-{field_name.replace('_', '-')}",),
                metavar=field_name.split("_")[0].upper(),
                acts={"engine": [name]},
                default=_plain_default(info),
            )


def option_at(path: str) -> DeclaredOption | None:
    """The option declared at ``path`` (list positions dropped: ``pipeline.rerankers[0]`` is ``pipeline.rerankers``)."""
    import re

    plain = re.sub(r"\[\d+\]", "", path)
    return next((o for o in declared_options() if o.path == plain), None)


def acts_nowhere(option_path: str, context: Mapping[str, Sequence[str]]) -> tuple[str, list[str]] | None:
    """Where the option at ``option_path`` would act and this run is not: ``(dimension, where it acts)`` for the
    first dimension of its ``acts`` whose values this run's ``context`` (``{"task_type": [...], …}``) misses entirely;
    None when it acts (or declares nothing, or the run's context on that dimension is unknown).

    >>> acts_nowhere("top_k", {"task_type": ["STS"]})
    ('task_type', ['Retrieval', 'InstructionRetrieval'])
    >>> acts_nowhere("top_k", {"task_type": ["STS", "Retrieval"]}) is None
    True
    """
    declared = option_at(option_path)
    if declared is None:
        return None
    for dimension, where in declared.acts.items():
        here = context.get(dimension)
        if here is not None and not set(where) & set(here):
            return dimension, where
    return None


def refuse_if_idle(option_path: str, context: Mapping[str, Sequence[str]]) -> None:
    """A ValueError (inside a settings validator, so the error names where the value came from) when the option at
    ``option_path`` acts nowhere in ``context`` (:func:`acts_nowhere`)."""
    idle = acts_nowhere(option_path, context)
    if idle is not None:
        dimension, where = idle
        here = ", ".join(context[dimension])
        raise ValueError(
            f"acts with {dimension.replace('_', ' ')} {' or '.join(where)} only, and this one's is {here}: drop it"
        )
