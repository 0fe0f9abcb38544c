"""Config files (YAML or JSON) as a settings layer: embedscope's own schema (:class:`~embedscope.settings.run.RunSettings`)
or EvalScope's ``eval_config`` (:mod:`embedscope.settings.evalscope`), told apart by their keys.

>>> layer = config_layer({"models": ["minilm"], "top_k": 100})
>>> layer.values["top_k"], layer.kind
(100, 'file')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.settings.sources import Layer, renamed_keys

EVALSCOPE_KEYS = ("eval_config", "eval", "tool", "eval_backend")


def _yaml_problem(error: Exception) -> str:
    """A YAML error in one line: what is wrong and where (line and column, 1-based)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or getattr(error, "context", None) or str(error).splitlines()[0]
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


class _DuplicateKey(Exception):
    """A mapping gives one key twice (the first value would be dropped silently)."""

    def __init__(self, key: Any, where: str) -> None:
        super().__init__(f"key {key!r} is given twice{where}: keep one")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is an error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key, " in one object")
        out[key] = value
    return out


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load``, except that a mapping giving one key twice is an error naming the key and its lines."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merge keys (<<) and complex keys: yaml's own rules
            key = loader.construct_object(key_node, deep=True)
            first = seen.setdefault(key, key_node.start_mark.line)
            if first != key_node.start_mark.line:
                raise _DuplicateKey(key, f" (lines {first + 1} and {key_node.start_mark.line + 1})")
        return loader.construct_mapping(node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a dict (errors name the file and position, in one line)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"Config file {p} does not exist" if not p.exists() else f"Config file {p} is not a file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not valid UTF-8 ({e.reason} at byte {e.start}); save the file as UTF-8") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs) if p.suffix.lower() == ".json" else _yaml_load(text)
    except _DuplicateKey as e:
        raise ConfigError(f"{p}: {e}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except Exception as e:  # yaml.YAMLError (a !!python tag is one: safe_load refuses it)
        raise ConfigError(f"{p}: invalid YAML: {_yaml_problem(e)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys to values")
    return data


def is_evalscope(data: dict[str, Any]) -> bool:
    """Whether a config is EvalScope's ``eval_config`` (wrapped or bare) rather than embedscope's own."""
    return any(k in data for k in EVALSCOPE_KEYS)


def config_layer(source: str | Path | dict[str, Any]) -> Layer:
    """A config file (or an already parsed mapping) as a settings layer, in :class:`RunSettings`' keys."""
    data = read_config_file(source) if isinstance(source, (str, Path)) else dict(source)
    label = str(source) if isinstance(source, (str, Path)) else "config"
    if is_evalscope(data):
        from embedscope.settings.evalscope import evalscope_layer

        return evalscope_layer(data, label)
    return Layer(label, renamed_keys(data, label), "file")  # a key renamed in a release: today's, with a note


def family_layers(layer: Layer, *families: str) -> tuple[Layer, dict[str, Layer]]:
    """A config file's layer without the sections of other option families (``screen:``, ``statistics:``), and
    each section given as a layer of its own, in that family's keys (an error names the file and ``screen.proxy``).

    >>> run, found = family_layers(Layer("c.yaml", {"top_k": 5, "screen": {"proxy": [0.1]}}, "file"), "screen")
    >>> run.values, found["screen"].values, found["screen"].name("proxy")
    ({'top_k': 5}, {'proxy': [0.1]}, 'c.yaml: screen.proxy')
    """
    from embedscope.errors import ConfigError

    values, found = dict(layer.values), {}
    for family in families:
        if family not in values:
            continue
        section = values.pop(family)
        if not isinstance(section, dict):
            raise ConfigError(f"{layer.label}: {family}: give a mapping of its options")
        names = {key: f"{layer.label}: {family}.{key}" for key in section}
        found[family] = Layer(layer.label, section, "file", names)
    return Layer(layer.label, values, layer.kind, layer.names), found


def load_settings(source: str | Path | dict[str, Any]) -> Any:
    """The validated settings of a config file (or mapping) on its own, over the defaults.

    >>> load_settings({"models": ["minilm", "static-64"], "top_k": 100}).top_k
    100
    """
    from embedscope.settings.sources import build_settings

    return build_settings([config_layer(source)])
