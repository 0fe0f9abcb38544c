"""Typed errors. Every message says what is wrong, where, and how to fix it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable


class EmbedscopeError(Exception):
    """Base class for every error embedscope raises on purpose."""


class DataFormatError(EmbedscopeError, ValueError):
    """Input data is malformed: the message names the file, line or field and the fix."""


class ConfigError(EmbedscopeError, ValueError):
    """A configuration (file, CLI flags or API arguments) is invalid."""


class SettingError(ConfigError):
    """A setting's value cannot work, raised below the entry layer, which speaks in setting keys only.

    ``message`` names settings by key in braces (``{chunking.overlap}``); the entry layer that knows how the user gave
    each setting renames them (:meth:`named`: the flag, the config file and key path, or the ``evaluate()`` keyword).
    ``key`` is the setting at fault (named first when the message does not name it).

    >>> e = SettingError("chunking.overlap", "{chunking.overlap} 80 must be smaller than {chunking.chunk_size} 50")
    >>> str(e)
    'chunking.overlap 80 must be smaller than chunking.chunk_size 50'
    >>> e.named({"chunking.overlap": "--chunk-overlap", "chunking.chunk_size": "--chunk-size"}.get)
    '--chunk-overlap 80 must be smaller than --chunk-size 50'
    >>> SettingError("top_k", "must be positive").named(lambda key: f"c.yaml: {key}")
    'c.yaml: top_k: must be positive'
    """

    _NAME = re.compile(r"\{([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\}")

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message if f"{{{key}}}" in message else f"{{{key}}}: {message}"
        super().__init__(self.named(lambda name: name))

    def keys(self) -> list[str]:
        """The settings the message names, in order."""
        return self._NAME.findall(self.message)

    def named(self, name: Callable[[str], str | None]) -> str:
        """The message with each setting as ``name(key)`` calls it (the key itself where that is None)."""
        return self._NAME.sub(lambda m: name(m.group(1)) or m.group(1), self.message)


KNOWN_SHOWN = 20
"""How many known names an unknown-name message lists."""


class UnknownNameError(EmbedscopeError, KeyError):
    """A name (task, model alias, option) is not known; the message suggests close matches."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "", *, list_known: bool = True) -> None:
        from embedscope.messages import clip, listing

        known = sorted(known)
        by_lower = {k.lower(): k for k in known}
        close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)]
        msg = f"Unknown {kind} {clip(name)}."
        if close:
            msg += f" Did you mean {' or '.join(repr(c) for c in close)}?"
        if list_known:  # at most KNOWN_SHOWN names: a long list goes to its own listing command (the hint)
            msg += f" Known: {listing(known, KNOWN_SHOWN) if known else '(none)'}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)
        self.message = msg

    def __str__(self) -> str:  # KeyError would otherwise print the repr
        return self.message


class MissingDependencyError(EmbedscopeError, ImportError):
    """An optional dependency is needed for this feature."""

    def __init__(self, package: str, feature: str) -> None:
        super().__init__(f"{feature} needs the package {package!r}: pip install {package}")


class ResultExistsError(EmbedscopeError, FileExistsError):
    """A result file exists and overwriting was not asked for."""


class NonFiniteError(EmbedscopeError, ValueError):
    """A model, the embedding cache or the data gave NaN or infinity where a number is needed."""
