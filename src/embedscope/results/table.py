"""Human-readable summaries of results (markdown tables)."""

from __future__ import annotations


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table.

    >>> print(markdown_table(["a", "b"], [["1", "2"]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(value: object) -> str:
    """A score with five decimals; anything else as text ("" for None)."""
    return f"{value:.5f}" if isinstance(value, float) else ("" if value is None else str(value))
