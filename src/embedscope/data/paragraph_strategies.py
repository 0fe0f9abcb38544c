"""The fastbook study's six paragraph chunking strategies (the author's blog post of 2024-11-29, as the
method note ``fastbook-method.md`` states them): no halving, no token windows.

Every markdown cell is split on blank lines into paragraphs, each tagged with the most recent Markdown
header line above it (:func:`~embedscope.data.markdown.header_lines`; a header line is a tag, not a
paragraph). A code cell is one paragraph, ``"```python\\n<source>\\n```"``, followed by
``"\\n\\nOutput:\\n<text outputs>"`` when it has text outputs. Paragraphs under a ``Questionnaire`` or
``Further Research`` header are dropped. Paragraphs are grouped ``n`` at a time within a run of the same
header (a run ends at every header line), joined by blank lines, the header line first:

====  ==========  ========  ==================  ===================
name  paragraphs  header    HTML tags removed   punctuation removed
====  ==========  ========  ==================  ===================
a     1           yes       no                  no
b     3           yes       no                  no
c     1           no        no                  no
d     3           no        no                  no
e     3           yes       yes                 no
f     3           yes       yes                 yes
====  ==========  ========  ==================  ===================

>>> strategy_chunks([Cell("markdown", "# T\\n\\nOne.\\n\\nTwo <b>bold</b>.")], "a")
['# T\\n\\nOne.', '# T\\n\\nTwo <b>bold</b>.']
>>> strategy_chunks([Cell("markdown", "# T\\n\\nOne.\\n\\nTwo <b>bold</b>.")], "f")
['T\\n\\nOne\\n\\nTwo bold']
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from embedscope.data.markdown import Cell, header_lines

DROPPED_SECTIONS = ("Questionnaire", "Further Research")
_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.DOTALL)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class Strategy:
    """One of the six: paragraphs per chunk, header line first, HTML tags removed, punctuation removed."""

    paragraphs: int
    headers: bool
    strip_tags: bool = False
    strip_punctuation: bool = False


STRATEGIES = {
    "a": Strategy(1, True),
    "b": Strategy(3, True),
    "c": Strategy(1, False),
    "d": Strategy(3, False),
    "e": Strategy(3, True, strip_tags=True),
    "f": Strategy(3, True, strip_tags=True, strip_punctuation=True),
}


@dataclass(frozen=True)
class Paragraph:
    """A paragraph, the header line it sits under (None before the first one) and its run's number."""

    text: str
    header: str | None
    run: int


def code_paragraph(cell: Cell) -> str:
    """A code cell as one paragraph: fenced Python source, then its text outputs if any."""
    body = f"```python\n{cell.source}\n```"
    return body + f"\n\nOutput:\n{cell.outputs}" if cell.outputs else body


def tagged_paragraphs(cells: Sequence[Cell]) -> list[Paragraph]:
    """Every non-blank paragraph of the cells, tagged with its header; none under a dropped section."""
    out: list[Paragraph] = []
    header: str | None = None
    run = 0

    def add(text: str) -> None:
        if text.strip() and _title(header) not in DROPPED_SECTIONS:
            out.append(Paragraph(text.strip(), header, run))

    for cell in cells:
        if cell.kind == "code":
            if cell.source.strip():
                add(code_paragraph(cell))
            continue
        lines: list[str] = []
        for line, is_header in zip(cell.source.split("\n"), header_lines(cell.source)):
            if is_header or not line.strip():
                add("\n".join(lines))
                lines = []
                if is_header:
                    header, run = line.strip(), run + 1
            else:
                lines.append(line)
        add("\n".join(lines))
    return out


def _title(header: str | None) -> str:
    return header.lstrip("#").strip() if header else ""


def strategy_chunks(cells: Sequence[Cell], name: str) -> list[str]:
    """The chunks of strategy ``name`` (``a`` … ``f``, see the module's table), in document order."""
    strategy = STRATEGIES[name]
    chunks: list[str] = []
    paragraphs = tagged_paragraphs(cells)
    start = 0
    while start < len(paragraphs):
        end = start
        while end < len(paragraphs) and paragraphs[end].run == paragraphs[start].run:
            end += 1
        run = paragraphs[start:end]
        for i in range(0, len(run), strategy.paragraphs):
            head = [run[0].header] if strategy.headers and run[0].header else []
            chunks.append(_clean("\n\n".join(head + [p.text for p in run[i : i + strategy.paragraphs]]), strategy))
        start = end
    return [c for c in chunks if c.strip()]


def _clean(text: str, strategy: Strategy) -> str:
    if strategy.strip_tags:
        text = _TAG.sub("", text)
    if strategy.strip_punctuation:
        text = text.translate(_PUNCTUATION)
    return text.strip()
