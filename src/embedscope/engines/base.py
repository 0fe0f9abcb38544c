"""What an engine is: a settings model that knows how to build an encoder, and the registry of engines.

An engine is one module: a subclass of :class:`EngineSettings` whose fields are the engine's own options
(with a ``Field(description=...)`` each), registered with :func:`register_engine`. The settings type
(:mod:`embedscope.settings`), the config schemas, ``evaluate()`` and the command line read the registry: the
command line offers ``--engine NAME`` and a flag ``--NAME-FIELD`` for each field; a config file or
``evaluate()`` takes ``engine: NAME`` and ``NAME_FIELD`` keys (or ``engine: {name: NAME, FIELD: …}``).

>>> sorted(engine_names())
['local', 'ray']
>>> engine_settings("ray").model_validate({"name": "ray", "workers": 2}).workers
2
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from embedscope.errors import UnknownNameError

# the modules of the built-in engines, imported (and so registered) on the registry's first use
BUILTIN_MODULES = ("local", "ray_cluster")


class EngineSettings(BaseModel):
    """One engine's options. Subclasses set ``name`` (a ``Literal``) and their own fields.

    Examples:
        >>> from embedscope.engines.base import engine_settings
        >>> engine_settings("ray").model_validate({"workers": 2}).workers
        2
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    extra: ClassVar[str | None] = None  # the pip extra the engine needs, named in its errors

    def devices(self, spec: str | None) -> list[str]:
        """The concrete devices a model of this run encodes on, resolved once (and checked here)."""
        raise NotImplementedError

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        """An encoder for a model name or path (``options`` are :func:`~embedscope.models.specs.load_encoder`'s,
        device excluded); ``cache_dir`` is the embedding cache's folder (None: no cache)."""
        raise NotImplementedError


_ENGINES: dict[str, type[EngineSettings]] = {}
_loaded = False


def register_engine(cls: type[EngineSettings]) -> type[EngineSettings]:
    """Registers an engine (called once, at the bottom of the engine's module). Its fields become the flags
    ``--NAME-FIELD``, the config keys ``NAME_FIELD`` and ``evaluate()``'s keywords.

    Examples:
        >>> from typing import Literal
        >>> from embedscope import EngineSettings, RunSettings, register_engine
        >>> from embedscope.engines.base import unregister_engine
        >>> class EchoEngine(EngineSettings):
        ...     name: Literal["echo"] = "echo"
        ...     copies: int = 1
        >>> _ = EchoEngine.model_rebuild()  # resolves the annotations here (the class is defined in a doctest)
        >>> _ = register_engine(EchoEngine)
        >>> RunSettings(engine="echo", echo_copies=3).engine.copies
        3
        >>> unregister_engine("echo")
    """
    name = cls.model_fields["name"].default
    if not isinstance(name, str) or name in _ENGINES:
        raise ValueError(f"engine {name!r}: give the class a unique default name")
    _ENGINES[name] = cls
    return cls


def unregister_engine(name: str) -> None:
    """Removes an engine (tests registering a toy engine clean up with this)."""
    _ENGINES.pop(name)


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(f"embedscope.engines.{module}")


def engine_names() -> list[str]:
    """The registered engines' names, built-ins first."""
    _load_builtin()
    return list(_ENGINES)


def engine_settings(name: str) -> type[EngineSettings]:
    """The settings model of the engine ``name``; an unknown name is an error listing the engines."""
    _load_builtin()
    if name not in _ENGINES:
        raise UnknownNameError("engine", name, _ENGINES)
    return _ENGINES[name]
