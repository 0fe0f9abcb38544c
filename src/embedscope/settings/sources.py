"""Where each setting came from: defaults, a config file, command-line flags or ``evaluate()``, merged in that order.

A :class:`Layer` is one source's values in :class:`~embedscope.settings.run.RunSettings`' keys. Later layers win key by
key (an explicit flag overrides the config file). Some keys go together: naming models (``model``, ``models``,
``pipeline``, ``pipelines``) or tasks (``tasks``, ``benchmark``, ``custom_tasks``) replaces all of the earlier
layer's, and a run-wide model option (``model_options.X``, ``device``, ``dtype``) given later also overrides what an
earlier layer set for each model. Errors name the flag, the file and key path, or the keyword argument.

>>> s = build_settings([Layer("c.yaml", {"top_k": 10, "limits": 3}, "file"), Layer("flags", {"limits": 5}, "flag")])
>>> s.top_k, s.limits, s.source("limits"), s.source("top_k"), s.source("batch_size")
(10, 5, 'flags', 'c.yaml', 'default')
"""

from __future__ import annotations

import difflib
import functools
import logging
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ValidationError

from embedscope.engines.base import EngineSettings, engine_names, engine_settings
from embedscope.errors import ConfigError, SettingError, UnknownNameError
from embedscope.settings.run import ENTRY_TAGS, ModelEntry, RunSettings, flag_keys

MODEL_KEYS = ("model", "models", "pipeline", "pipelines")
TASK_KEYS = ("tasks", "benchmark", "custom_tasks")
_GROUPS = (MODEL_KEYS, TASK_KEYS)
logger = logging.getLogger(__name__)


@dataclass
class Layer:
    """One source's settings. ``kind`` is ``file``, ``flag`` or ``api``; ``names`` maps a key path (``top_k``,
    ``pipeline.fusion.weights``) to what the user wrote (``--top-k``); ``label`` names the source."""

    label: str
    values: dict[str, Any]
    kind: str = "api"
    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, path: str) -> str:
        """What the user wrote for ``path``: the flag, or the file's key path."""
        for prefix in sorted(self.names, key=len, reverse=True):
            if path == prefix or path.startswith((prefix + ".", prefix + "[")):
                return self.names[prefix]
        return f"{self.label}: {path}" if self.kind == "file" else path


class SettingsWithSources(RunSettings):
    """:class:`RunSettings` that remembers which layer set each key (see :meth:`source`)."""

    def source(self, key: str) -> str:
        """The label of the layer that set ``key`` (``default`` when none did)."""
        return self._private("sources").get(key, "default")

    def display_name(self, key: str) -> str:
        """How the user wrote ``key`` (a path such as ``chunking.overlap`` too): the flag (``--top-k``), the file and
        key (``c.yaml: top_k``), or the keyword; the key itself when no layer set it."""
        names = self._private("names")
        if key in names:
            return names[key]
        layers = (self.__pydantic_private__ or {}).get("layers", [])
        return setting_name(layers, key)

    def _private(self, name: str) -> dict[str, Any]:
        return (self.__pydantic_private__ or {}).get(name, {})


def _drop_model_option(entry: Any, keys: set[str]) -> Any:
    """A ``models`` entry without the options a later layer sets run-wide."""
    if isinstance(entry, Mapping) and "model" in entry:
        return {k: v for k, v in entry.items() if k not in keys}
    if isinstance(entry, ModelEntry):
        return entry.model_copy(update=dict.fromkeys(keys & set(type(entry).model_fields)))
    return entry


def merge_layers(layers: Sequence[Layer]) -> tuple[dict[str, Any], dict[str, Layer]]:
    """The merged values and, per top-level key, the layer that set it."""
    merged: dict[str, Any] = {}
    owner: dict[str, Layer] = {}
    for layer in layers:
        values = dict(layer.values)
        for group in _GROUPS:
            if any(k in values for k in group):
                for k in group:
                    merged.pop(k, None)
                    owner.pop(k, None)
        options = values.get("model_options")
        run_wide = set(options if isinstance(options, Mapping) else ()) | {
            k for k in ("device", "dtype") if k in values
        }
        if run_wide and isinstance(merged.get("models"), list):  # malformed values are left for validation to name
            merged["models"] = [_drop_model_option(e, run_wide) for e in merged["models"]]
        if isinstance(options, Mapping) and isinstance(merged.get("model_options"), Mapping):
            values["model_options"] = {**merged["model_options"], **options}
        chunking = values.get("chunking")
        if layer.kind == "flag" and isinstance(chunking, Mapping) and isinstance(merged.get("chunking"), Mapping):
            values["chunking"] = {**merged["chunking"], **chunking}  # --chunk-size over a config file's chunking
        for key, value in values.items():
            merged[key] = value
            owner[key] = layer
    return merged, owner


def renamed_keys(values: Mapping[str, Any], label: str) -> dict[str, Any]:
    """``values`` (a config file's mapping) with each settings key renamed in a release (declared once, on its option:
    ``option(..., renamed_from=("chunking.split",))``) moved to its key of today, and one note naming it; a mapping
    giving both spellings is refused. The caller's nested mappings are left as they were.

    >>> renamed_keys({"top_k": 5, "chunking": {"method": "paragraphs"}}, "c.yaml")
    {'top_k': 5, 'chunking': {'method': 'paragraphs'}}
    """
    from embedscope.settings.options import declared_options

    out = dict(values)
    for option in declared_options():
        for old in option.old_keys:
            found, value = _take(out, old.split("."))
            if not found:
                continue
            if _holds(out, option.path):
                raise ConfigError(f"{label}: {old} is the old spelling of {option.path}, and both are given: keep one")
            logger.warning("%s: key %s is now %s", label, old, option.path)
            _put(out, option.path.split("."), value)
    return out


def _take(tree: dict[str, Any], parts: Sequence[str]) -> tuple[bool, Any]:
    """Whether ``tree`` holds a value at ``parts``, and that value, removed (the mappings on the way copied)."""
    head, rest = parts[0], parts[1:]
    if head not in tree or (rest and not isinstance(tree[head], Mapping)):
        return False, None
    if not rest:
        return True, tree.pop(head)
    inner = dict(tree[head])
    found, value = _take(inner, rest)
    if found:
        tree[head] = inner
    return found, value


def _put(tree: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    """``value`` at ``parts`` in ``tree`` (the mappings on the way copied, missing ones made)."""
    for part in parts[:-1]:
        inner = tree.get(part)
        tree[part] = dict(inner) if isinstance(inner, Mapping) else {}
        tree = tree[part]
    tree[parts[-1]] = value


def _unknown_key_hint(key: str, valid: str) -> str:
    """Close matches of ``key`` among the valid keys (comma-separated) where it was found."""
    close = difflib.get_close_matches(key, [k.strip() for k in valid.split(",")], n=3, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _model_at(loc: Sequence[Any], root: type[BaseModel] = RunSettings) -> type[BaseModel] | None:
    """The pydantic model that owns the field at ``loc`` (list indices skipped; a ``models`` entry by its tag)."""
    model: type[BaseModel] | None = root
    for part in [p for p in loc if not isinstance(p, int)]:
        if part in ENTRY_TAGS:
            model = ENTRY_TAGS[part]
            continue
        info = model.model_fields.get(str(part)) if model is not None else None
        if info is None:
            return None
        found: list[type[BaseModel]] = []
        pending = [info.annotation]
        while pending:
            current = pending.pop()
            if isinstance(current, type) and issubclass(current, BaseModel):
                found.append(current)
            pending.extend(typing.get_args(current))
        model = found[0] if len(found) == 1 else None
    return model


def _owner_fields(root: type[BaseModel], loc: Sequence[Any]) -> str:
    """The valid keys of the mapping at ``loc`` under ``root``."""
    model = _model_at(loc, root)
    keys = flag_keys() if model is RunSettings else list(model.model_fields) if model else []
    return ", ".join(keys) or "see the documentation"


def _problem(
    error: Mapping[str, Any],
    name: Callable[[str], str],
    valid: Callable[[Sequence[Any]], str],
    setting: Callable[[str], str] | None = None,
) -> str:
    """One validation error as ``WHERE: what is wrong``."""
    raw = list(error["loc"])
    loc = [p for p in raw if p not in ENTRY_TAGS]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    raised = (error.get("ctx") or {}).get("error")
    if isinstance(raised, SettingError) and setting is not None:  # a lower layer's check: it names settings by key
        return raised.named(setting)
    if error["type"] == "extra_forbidden":
        keys = valid(raw)
        return f"{name(path)}: unknown key.{_unknown_key_hint(str(loc[-1]), keys)} Valid keys: {keys}"
    if error["type"] == "missing":
        return f"{name(path)}: missing"
    return f"{name(path) if path else ''}{': ' if path else ''}{message}"


def _holds(values: Any, path: str) -> bool:
    """Whether the nested mapping ``values`` has a value at the dotted ``path``."""
    for part in path.split("."):
        if not isinstance(values, Mapping) or part not in values:
            return False
        values = values[part]
    return True


def setting_name(layers: Sequence[Layer], path: str) -> str:
    """How the user wrote the setting at ``path``: the latest layer that gave it names it (its flag, file and key
    path, or keyword); the path itself when none did."""
    for layer in reversed(layers):
        if path in layer.names:
            return layer.names[path]
        if _holds(layer.values, path):
            return layer.name(path)
    if any(layer.kind == "flag" for layer in layers):  # left at its default on a command line: its flag
        from embedscope.settings.options import option_at

        declared = option_at(path)
        if declared is not None and declared.flags:
            return declared.flags[0]
    return path


def _one_line(problems: Sequence[str]) -> ConfigError:
    problems = list(dict.fromkeys(problems))
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return ConfigError("; ".join(problems[:3]) + more)


def _naming(owner: Mapping[str, Layer]) -> Callable[[str], str]:
    def name(path: str) -> str:
        layer = owner.get(path.split(".", 1)[0].split("[", 1)[0])
        return layer.name(path) if layer is not None else path

    return name


def _fold_engine(merged: dict[str, Any], owner: dict[str, Layer]) -> None:
    """``engine`` becomes the chosen engine's settings object, with its flat ``NAME_FIELD`` keys; a flat key of
    another engine is an error (it would have no effect)."""
    engine = merged.get("engine", "local")
    if isinstance(engine, EngineSettings):
        return
    chosen = dict(engine) if isinstance(engine, Mapping) else {"name": engine}
    chosen.setdefault("name", "local")
    name = _naming(owner)
    try:
        kind = engine_settings(str(chosen["name"]))
    except UnknownNameError as e:
        raise ConfigError(f"{name('engine')}: {e}") from None
    for key in list(merged):
        prefix = next((e for e in engine_names() if key.startswith(f"{e}_")), None)
        if prefix is None:
            continue
        if prefix != chosen["name"]:
            choose = f"--engine {prefix}" if owner[key].kind == "flag" else f"engine: {prefix}"
            raise ConfigError(
                f"{name(key)} applies to the {prefix} engine only, and this run's engine is {chosen['name']!r}: "
                f"add {choose}, or drop the option"
            )
        chosen[key.removeprefix(f"{prefix}_")] = merged.pop(key)
        owner.setdefault("engine", owner[key])
    try:
        merged["engine"] = kind.model_validate(chosen)
    except ValidationError as e:

        def flat(path: str) -> str:
            field_name = path.split(".", 1)[0]
            key = f"{chosen['name']}_{field_name}"
            return name(key) if key in owner else name(f"engine.{path}")

        raise _one_line([_problem(err, flat, lambda loc: ", ".join(kind.model_fields)) for err in e.errors()]) from None


M = typing.TypeVar("M", bound=BaseModel)


def build_declared(root: type[M], layers: Sequence[Layer]) -> M:
    """One option family's settings (``root``: :class:`~embedscope.settings.statistics.StatisticsSettings`,
    :class:`~embedscope.settings.screen.ScreenSettings`) from ``layers``, later winning key by key, validated once;
    an error is one line naming the flag, the file and key, or the keyword that gave the value."""
    merged, owner = {}, {}
    for layer in layers:
        for key, value in layer.values.items():
            merged[key], owner[key] = value, layer
    try:
        return root.model_validate(merged)
    except ValidationError as e:
        setting = functools.partial(_family_name, root, layers)
        valid = ", ".join(root.model_fields)
        problems = [_problem(err, _naming(owner), lambda loc: valid, setting) for err in e.errors()]
        raise _one_line(problems) from None


def _family_name(root: type[BaseModel], layers: Sequence[Layer], path: str) -> str:
    """How the user wrote ``path`` of an option family, or, left at its default on a command line, its flag."""
    name = setting_name(layers, path)
    if name == path and any(layer.kind == "flag" for layer in layers):
        from embedscope.settings.options import declared_options

        return next((o.flags[0] for o in declared_options(root) if o.path == path and o.flags), path)
    return name


def build_settings(layers: Sequence[Layer]) -> SettingsWithSources:
    """The settings of ``layers`` (later wins), validated once; an error is one line naming where the value came from."""
    merged, owner = merge_layers(layers)
    _fold_engine(merged, owner)
    try:
        settings = SettingsWithSources.model_validate(merged)
    except ValidationError as e:
        setting = functools.partial(setting_name, layers)
        problems = [
            _problem(err, _naming(owner), lambda loc: _owner_fields(RunSettings, loc[:-1]), setting)
            for err in e.errors()
        ]
        raise _one_line(problems) from None
    written = {k: k for k in owner}
    if isinstance(merged.get("cache"), (str, PurePath)) and "cache" in owner:  # `cache: FOLDER` sets cache_dir
        owner["cache_dir"], written["cache_dir"] = owner["cache"], "cache"
    private = {
        "sources": {k: layer.label for k, layer in owner.items()},
        "names": {k: layer.name(written[k]) for k, layer in owner.items()},
        "layers": list(layers),
    }
    object.__setattr__(settings, "__pydantic_private__", private)
    return settings
