"""Bounded pieces of error messages: a message never grows with the size of the data.

>>> listing(["a", "b", "c", "d", "e", "f", "g"])
'a, b, c, d, e and 2 more'
>>> listing(["x", "y"], quote=True)
"'x', 'y'"
>>> clip("x" * 500, 20)
"'xxxxxxxxxxxxxxxxx… (502 characters)"
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SHOW = 5
"""How many offending items a message lists before ``and N more``."""

ITEM_CHARS = 80
"""The longest a single item (an id, a value) is shown."""

MESSAGE_CHARS = 2_000
"""The longest a whole message is printed (a last guard; messages are built bounded)."""


def clip(value: Any, limit: int = ITEM_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length said."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: max(limit - 2, 1)]}… ({len(text):,} characters)"


def clip_text(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` itself, cut to ``limit`` characters with how many were left out."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def listing(items: Iterable[Any], limit: int = SHOW, *, quote: bool = False, sep: str = ", ") -> str:
    """The first ``limit`` items (each clipped), then ``and N more``."""
    items = list(items)
    shown = [clip(i) if quote else clip_text(str(i), ITEM_CHARS) for i in items[:limit]]
    more = len(items) - limit
    return sep.join(shown) + (f" and {more:,} more" if more > 0 else "")
