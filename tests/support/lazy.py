"""A heavy library imported on first use, so that collecting the tests imports none (the fast tier's minute).

``torch = lazy_module("torch")`` at the top of a test module stands for ``pytest.importorskip("torch")``: the first
attribute a test reads imports it (or skips that test when it is not installed), and collection pays nothing.

>>> json = lazy_module("json")
>>> json.dumps([1])
'[1]'
"""

from __future__ import annotations

from typing import Any

import pytest


class LazyModule:
    """The module ``name``, imported by :func:`pytest.importorskip` when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):  # what collection probes every module attribute for (a fixture's marker …)
            raise AttributeError(item)
        return getattr(pytest.importorskip(self._name), item)


def lazy_module(name: str) -> Any:
    """``name`` imported on first use (typed ``Any``: it stands for the module)."""
    return LazyModule(name)
