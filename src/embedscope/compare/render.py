"""Comparison tables: ranx's layout (models lettered, superscripts for significant wins) and the details."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from embedscope.results.table import markdown_table
from embedscope.results.usage import USAGE_HEADER, usage_cells

if TYPE_CHECKING:  # annotations only: core's Comparison.table() renders through this module
    from embedscope.compare.core import Comparison

LETTERS = "abcdefghijklmnopqrstuvwxyz"
SUPERSCRIPTS = "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖ۹ʳˢᵗᵘᵛʷˣʸᶻ"  # ranx's characters


def wins(comparison: Comparison, model: str, task: str) -> str:
    """Superscript letters of the models that ``model`` beats significantly on ``task`` (ranx's marker)."""
    out = []
    for j, other in enumerate(comparison.models):
        for r in comparison.rows:
            if r.task == task and r.significant and {r.model_a, r.model_b} == {model, other}:
                better = r.delta > 0 if r.model_b == model else r.delta < 0
                if better:
                    out.append(SUPERSCRIPTS[j % len(SUPERSCRIPTS)])
    return "".join(out)


def _num(value: float, digits: int) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _p(value: float) -> str:
    return "" if math.isnan(value) else (f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}")


def leaderboard_table(comparison: Comparison, digits: int = 4) -> str:
    """Models as lettered rows, tasks as columns; a score carries the letters of the models it beats. When a model
    is served by an API, its requests, tokens, spend and request latency over these tasks follow."""
    usage = comparison.usage or {}
    costs = any(u is not None for u in usage.values())
    header = ["#", "model", *comparison.tasks, *(USAGE_HEADER if costs else [])]
    rows = []
    for i, model in enumerate(comparison.models):
        cells = [f"{_num(comparison.scores[model][t], digits)}{wins(comparison, model, t)}" for t in comparison.tasks]
        rows.append([LETTERS[i % len(LETTERS)], model, *cells, *(usage_cells(usage.get(model)) if costs else [])])
    return markdown_table(header, rows)


def details_table(comparison: Comparison, digits: int = 4) -> str:
    """One row per comparison: scores, difference, CI, p-values, test and items."""
    level = round(comparison.options.confidence * 100)
    header = [
        "task",
        "metric",
        "a",
        "b",
        "score a",
        "score b",
        "Δ (b − a)",
        f"{level}% CI",
        "p",
        f"p ({comparison.options.correction})",
        "",
        "test",
        "n",
    ]
    rows = []
    for r in comparison.rows:
        ci = "" if math.isnan(r.ci_low) else f"[{r.ci_low:+.{digits}f}, {r.ci_high:+.{digits}f}]"
        rows.append(
            [
                r.task,
                r.metric,
                r.model_a,
                r.model_b,
                _num(r.score_a, digits),
                _num(r.score_b, digits),
                f"{r.delta:+.{digits}f}",
                ci,
                _p(r.p_value),
                _p(r.p_adjusted),
                "*" if r.significant else "",
                r.test or "no per-item scores",
                str(r.n),
            ]
        )
    return markdown_table(header, rows)


def fidelity_table(comparison: Comparison, digits: int = 4) -> str:
    """Agreement measures between models per task, one table per set of measures ("" when there are none)."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for r in comparison.rows:
        if r.extra:
            names = tuple(r.extra)
            groups.setdefault(names, []).append(
                [r.task, r.model_a, r.model_b, *[_fmt(r.extra[k], digits) for k in names]]
            )
    return "\n\n".join(markdown_table(["task", "a", "b", *names], rows) for names, rows in groups.items())


def _fmt(value: object, digits: int) -> str:
    if isinstance(value, float):
        return _num(value, digits)
    return "" if value is None else str(value)


def group_tables(comparison: Comparison, digits: int = 4) -> str:
    """Per task and pair of models grouped by one field (``group_by``): each group's scores, difference, CI and
    p-values, adjusted across the task's groups ("" when no comparison has groups)."""
    level = round(comparison.options.confidence * 100)
    correction = comparison.options.correction
    parts = []
    for r in comparison.rows:
        if not r.groups:
            continue
        header = ["group", "n", "score a", "score b", "Δ (b − a)", f"{level}% CI", "p", f"p ({correction})", ""]
        rows = [
            [
                f"{r.group_field}={g.group}",
                str(g.n),
                _num(g.score_a, digits),
                _num(g.score_b, digits),
                f"{g.delta:+.{digits}f}",
                "" if math.isnan(g.ci_low) else f"[{g.ci_low:+.{digits}f}, {g.ci_high:+.{digits}f}]",
                _p(g.p_value) or "fewer than 2 items",
                _p(g.p_adjusted),
                "*" if g.significant else "",
            ]
            for g in r.groups
        ]
        title = f"Query groups: {r.task}, {r.model_b} (b) vs {r.model_a} (a), {correction} across {len(rows)} groups"
        parts.append(title + "\n\n" + markdown_table(header, rows))
    return "\n\n".join(parts)


def notes_text(comparison: Comparison) -> str:
    """One line per note on a comparison (unpaired items, settings that differ, unchecked settings)."""
    lines = [f"- {note}" for note in comparison.notes]
    lines += [f"- {r.task} ({r.model_a} vs {r.model_b}): {note}" for r in comparison.rows for note in r.notes]
    return "Notes:\n" + "\n".join(lines) if lines else ""


def comparison_text(comparison: Comparison, digits: int = 4) -> str:
    """Leaderboard, legend, details and (when measured) agreement, as markdown."""
    o = comparison.options
    legend = (
        f"Superscripts: significantly better than that model (two-sided, {o.correction}-adjusted p < {o.alpha}; "
        f"{o.test} test, {o.rounds:,} rounds, seed {o.seed}; STS and pair classification: bootstrap over pairs)."
    )
    parts = [leaderboard_table(comparison, digits), legend, details_table(comparison, digits)]
    groups = group_tables(comparison, digits)
    if groups:
        parts.append(groups)
    notes = notes_text(comparison)
    if notes:
        parts.append(notes)
    agreement = fidelity_table(comparison, digits)
    if agreement:
        parts.append(agreement)
    return "\n\n".join(parts)
