"""A small name → object registry that fails helpfully ("did you mean …")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from embedscope.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to entries; duplicate names are an error, unknown names suggest close matches.

    >>> r: Registry[int] = Registry("colour")
    >>> r.add("red", 1)
    >>> r.get("red")
    1
    """

    def __init__(self, kind: str, hint: str = "") -> None:
        self.kind = kind
        self.hint = hint
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> None:
        key = name.lower()
        if key in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[key] = entry

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(entry: T) -> T:
            self.add(name, entry)
            return entry

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._entries[name.lower()]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries, self.hint) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
