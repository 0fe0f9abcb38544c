"""What documents are made of, shared by the chunkers: a notebook's cells and which Markdown lines are headers
(:mod:`embedscope.data.documents` reads and chunks documents; :mod:`embedscope.data.paragraph_strategies` is the
fastbook study's six paragraph strategies)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """A notebook cell: ``kind`` markdown or code, its source, and (code cells) its text outputs."""

    kind: str
    source: str
    outputs: str = ""


_HEADER = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def header_lines(text: str) -> list[bool]:
    """For each line of ``text`` (``str.split("\\n")``), whether it is a Markdown ATX header: up to three
    spaces, one to six ``#``, then a space, a tab or the end of the line. Lines inside a fenced code block
    (between lines opening with three backticks or tildes) are never headers. (A ``# comment`` line of a
    notebook's code cell, which is not fenced, reads as a header.)

    >>> header_lines("# T\\nbody\\n```\\n# code\\n```\\n#tag")
    [True, False, False, False, False, False]
    """
    flags, fence = [], None
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.lstrip(" ").startswith(fence):
            fence = None
        elif fence is None:
            flags.append(bool(_HEADER.match(line)))
            continue
        flags.append(False)
    return flags
