"""``embedscope sweep --html FILE``: the sweep's answer as one self-contained, offline HTML page.

Per task: the table of :class:`~embedscope.sweep.report.SweepReport`; one quality-vs-cost scatter per
cost column that at least two points have, with the Pareto frontier (the points ``sweep_report`` marks on it,
joined in cost order) drawn; and one line chart per numeric axis (an axis whose values are numbers, ``null`` for
the setting's default): the score against the axis value with its CI as a band, one line per combination of the
other axes' values. Charts are inline SVG; every drawn point carries its numbers in ``data-*`` attributes; the page
loads nothing.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from embedscope.compare.html import STYLE
from embedscope.sweep.report import COSTS, SweepReport, SweepRow, _text

PALETTE = ("#4a7fb5", "#d9822b", "#3d9970", "#b03a48", "#7f5fa8", "#8c6d31", "#e377c2", "#555555")
W, H, LEFT, RIGHT, TOP, BOTTOM = 460, 280, 62, 16, 14, 44
_LABELS = {
    "encode_s": "encode s",
    "query_s": "query s",
    "ms_per_query": "ms / query",
    "qps": "queries per second",
    "p50_ms": "p50 latency ms",
    "p95_ms": "p95 latency ms",
    "peak_mb": "peak MB",
    "bytes_per_vector": "bytes / vector",
    "api_tokens": "API tokens",
    "api_cost": "API cost",
    "api_p50_ms": "API request p50 ms",
    "api_p95_ms": "API request p95 ms",
    "flops": "FLOPS per query-document pair (sparse)",
}
SWEEP_STYLE = """
.pt{fill:#4a7fb5;stroke:#fff;stroke-width:1}.pt.on{fill:#d9822b}.frontier{fill:none;stroke:#d9822b;stroke-width:2}
.axis{stroke:#888}.grid{stroke:#eee}.band{opacity:.18}.line{fill:none;stroke-width:2}
.charts{display:flex;flex-wrap:wrap;gap:1em}.legend{font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _a(value: float) -> str:
    return repr(float(value))


def _scale(values: Sequence[float], lo_px: float, hi_px: float, log: bool = False) -> Callable[[float], float]:
    """A linear (or log10) map of ``[min, max]`` of ``values`` onto ``[lo_px, hi_px]``, with 5% margins."""
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    lo, hi = min(f(v) for v in values), max(f(v) for v in values)
    pad = (hi - lo) * 0.05 or (abs(hi) * 0.05 or 0.5)
    lo, hi = lo - pad, hi + pad
    return lambda v: lo_px + (f(v) - lo) / (hi - lo) * (hi_px - lo_px)


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _frame(x_label: str, y_label: str, x_ticks: list[tuple[float, str]], y_ticks: list[tuple[float, str]]) -> str:
    parts = [
        f"<line class='axis' x1='{LEFT}' x2='{W - RIGHT}' y1='{H - BOTTOM}' y2='{H - BOTTOM}'/>",
        f"<line class='axis' x1='{LEFT}' x2='{LEFT}' y1='{TOP}' y2='{H - BOTTOM}'/>",
    ]
    for px, text in x_ticks:
        parts.append(
            f"<line class='grid' x1='{px:.1f}' x2='{px:.1f}' y1='{TOP}' y2='{H - BOTTOM}'/>"
            f"<text x='{px:.1f}' y='{H - BOTTOM + 14}' text-anchor='middle'>{html.escape(text)}</text>"
        )
    for py, text in y_ticks:
        parts.append(
            f"<line class='grid' x1='{LEFT}' x2='{W - RIGHT}' y1='{py:.1f}' y2='{py:.1f}'/>"
            f"<text x='{LEFT - 4}' y='{py + 4:.1f}' text-anchor='end'>{html.escape(text)}</text>"
        )
    parts.append(f"<text x='{(LEFT + W - RIGHT) / 2}' y='{H - 8}' text-anchor='middle'>{html.escape(x_label)}</text>")
    parts.append(
        f"<text transform='translate(14,{(TOP + H - BOTTOM) / 2}) rotate(-90)' text-anchor='middle'>"
        f"{html.escape(y_label)}</text>"
    )
    return "".join(parts)


def _ticks(lo: float, hi: float, to_px: Callable[[float], float], log: bool = False) -> list[tuple[float, str]]:
    if log:
        values = [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
        values = [v for v in values if lo <= v <= hi] or [lo, hi]
    else:
        values = [lo + (hi - lo) * k / 4 for k in range(5)] if hi > lo else [lo]
    return [(to_px(v), _fmt(v)) for v in values]


def scatter(rows: Sequence[SweepRow], cost: str, lower_is_better: bool) -> str:
    """Score against one cost: a circle per point with a cost (``data-point``, ``data-score``, ``data-cost``,
    ``data-pareto``), and the frontier as a polyline through the points marked on it, in cost order."""
    have = [r for r in rows if r.costs.get(cost) is not None and math.isfinite(float(r.costs[cost] or 0))]
    costs = [float(r.costs[cost]) for r in have]  # type: ignore[arg-type]
    scores = [r.score for r in have]
    log = min(costs) > 0 and max(costs) / min(costs) >= 20
    x = _scale(costs, LEFT, W - RIGHT, log)
    y = _scale(scores, H - BOTTOM, TOP)
    front = sorted((r for r in have if cost in r.pareto), key=lambda r: float(r.costs[cost]))  # type: ignore[arg-type]
    line = " ".join(f"{x(float(r.costs[cost])):.1f},{y(r.score):.1f}" for r in front)  # type: ignore[arg-type]
    parts = [
        _frame(
            _LABELS.get(cost, cost) + (" (log)" if log else "") + (" — lower is better" if lower_is_better else ""),
            rows[0].metric,
            _ticks(min(costs), max(costs), x, log),
            _ticks(min(scores), max(scores), y),
        ),
        f"<polyline class='frontier' data-points='{' '.join(str(r.point) for r in front)}' points='{line}'/>",
    ]
    for r, c in zip(have, costs):
        on = cost in r.pareto
        parts.append(
            f"<circle class='pt{' on' if on else ''}' r='5' cx='{x(c):.1f}' cy='{y(r.score):.1f}' "
            f"data-point='{r.point}' data-score='{_a(r.score)}' data-cost='{_a(c)}' data-pareto='{int(on)}'>"
            f"<title>#{r.point} {_e(r.label)}: {r.score:.5f}, {_e(_LABELS.get(cost, cost))} {_fmt(c)}</title></circle>"
        )
    return (
        f"<figure class='scatter' data-task='{_e(rows[0].task)}' data-cost='{_e(cost)}'>"
        f"<figcaption>{html.escape(rows[0].metric)} against {html.escape(_LABELS.get(cost, cost))}</figcaption>"
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' role='img'>{''.join(parts)}</svg></figure>"
    )


def numeric_axes(rows: Sequence[SweepRow], axes: Sequence[str]) -> list[str]:
    """The axes whose values are numbers (``None``, the setting's default, allowed) with two or more values."""
    out = []
    for axis in axes:
        values = [r.values.get(axis) for r in rows]
        numbers = [v for v in values if v is not None]
        if (
            numbers
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers)
            and all(math.isfinite(v) for v in numbers)
            and len(set(map(repr, values))) >= 2
        ):
            out.append(axis)
    return out


def axis_chart(rows: Sequence[SweepRow], axis: str, axes: Sequence[str]) -> str:
    """Score against the values of ``axis`` (``null`` at a "default" position right of the largest), one line and
    CI band per combination of the other axes' values; each point a circle with ``data-value``, ``data-score``,
    ``data-ci-low``, ``data-ci-high``."""
    numbers = sorted({float(r.values[axis]) for r in rows if r.values.get(axis) is not None})
    has_default = any(r.values.get(axis) is None for r in rows)
    span = (numbers[-1] - numbers[0]) or 1.0
    default_at = numbers[-1] + 0.25 * span
    x = _scale([*numbers, *([default_at] if has_default else [])], LEFT, W - RIGHT)
    lows = [r.ci_low if math.isfinite(r.ci_low) else r.score for r in rows]
    highs = [r.ci_high if math.isfinite(r.ci_high) else r.score for r in rows]
    y = _scale([*lows, *highs], H - BOTTOM, TOP)
    others = [a for a in axes if a != axis]
    series: dict[str, list[SweepRow]] = {}
    for r in rows:
        key = ", ".join(f"{a}={_text(r.values.get(a)) or 'default'}" for a in others) or axis
        series.setdefault(key, []).append(r)
    x_ticks = [(x(v), _fmt(v)) for v in numbers] + ([(x(default_at), "default")] if has_default else [])
    parts = [_frame(axis, rows[0].metric, x_ticks, _ticks(min(lows), max(highs), y))]
    legend = []
    for n, (name, members) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]

        def px(r: SweepRow) -> float:
            v = r.values.get(axis)
            return x(default_at if v is None else float(v))

        members = sorted(members, key=px)
        band = [(px(r), y(r.ci_high)) for r in members if math.isfinite(r.ci_high)]
        band += [(px(r), y(r.ci_low)) for r in reversed(members) if math.isfinite(r.ci_low)]
        group = [f"<g class='series' data-series='{_e(name)}'>"]
        if band:
            points = " ".join(f"{a:.1f},{b:.1f}" for a, b in band)
            group.append(f"<polygon class='band' fill='{color}' points='{points}'/>")
        line = " ".join(f"{px(r):.1f},{y(r.score):.1f}" for r in members)
        group.append(f"<polyline class='line' stroke='{color}' points='{line}'/>")
        for r in members:
            v = r.values.get(axis)
            group.append(
                f"<circle class='axis-pt' r='4' fill='{color}' cx='{px(r):.1f}' cy='{y(r.score):.1f}' "
                f"data-point='{r.point}' data-value='{'' if v is None else _a(v)}' data-score='{_a(r.score)}' "
                f"data-ci-low='{_a(r.ci_low)}' data-ci-high='{_a(r.ci_high)}'>"
                f"<title>#{r.point} {_e(r.label)}: {r.score:.5f} [{r.ci_low:.5f}, {r.ci_high:.5f}]</title></circle>"
            )
        group.append("</g>")
        parts += group
        legend.append(f"<span style='color:{color}'>■</span> {html.escape(name)}")
    return (
        f"<figure class='axis-chart' data-task='{_e(rows[0].task)}' data-axis='{_e(axis)}'>"
        f"<figcaption>{html.escape(rows[0].metric)} against {html.escape(axis)} (band: 95% CI)</figcaption>"
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' role='img'>{''.join(parts)}</svg>"
        f"<div class='legend'>{' &nbsp; '.join(legend)}</div></figure>"
    )


def _table(report: SweepReport, rows: Sequence[SweepRow]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in report.header())
    body = "".join(
        f"<tr data-point='{r.point}'>" + "".join(f"<td>{html.escape(c)}</td>" for c in report.cells(r)) + "</tr>"
        for r in rows
    )
    return f"<table class='sweep'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _notes(rows: Sequence[SweepRow]) -> str:
    """Why a figure is missing, one line per point that has a note (a per-item file gone: no CI, no p-value)."""
    notes = "".join(
        f"<li data-point='{r.point}'>point {r.point} ({html.escape(r.label)}): {html.escape(r.note)}</li>"
        for r in rows
        if r.note
    )
    return f"<ul class='notes'>{notes}</ul>" if notes else ""


def sweep_sections(report: SweepReport) -> str:
    """Per task: the table and its notes, the scatters (one per cost at least two points have) and the axis charts."""
    sections = []
    for task in dict.fromkeys(r.task for r in report.rows):
        rows = [r for r in report.rows if r.task == task]
        scatters = [
            scatter(rows, name, lower) for name, lower in COSTS if sum(r.costs.get(name) is not None for r in rows) >= 2
        ]
        lines = [axis_chart(rows, a, report.axes) for a in numeric_axes(rows, report.axes)]
        sections.append(
            f"<section class='task' data-task='{_e(task)}'><h2>{html.escape(task)} "
            f"<small>({html.escape(rows[0].metric)})</small></h2>{_table(report, rows)}{_notes(rows)}"
            f"<h3>Quality against cost</h3><p>Orange: the Pareto frontier (no other point scores at least as well "
            f"at no greater cost, better on one).</p><div class='charts'>{''.join(scatters) or '<p>No cost that two points have.</p>'}</div>"
            f"<h3>Along each numeric axis</h3><div class='charts'>"
            f"{''.join(lines) or '<p>No numeric axis.</p>'}</div></section>"
        )
    return "".join(sections)


def _summary(report: SweepReport) -> str:
    return (
        f"{len({r.point for r in report.rows})} points; axes: {html.escape(', '.join(report.axes))}. "
        f"Δ and p against each task's best point ({html.escape(report.options.test)} test, "
        f"{html.escape(report.options.correction)}-adjusted)."
    )


def sweep_html(report: SweepReport) -> str:
    """The whole page: :func:`sweep_sections` under a title."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>embedscope sweep</title>"
        f"<style>{STYLE}{SWEEP_STYLE}</style></head><body><h1>embedscope sweep</h1>"
        f"<p>{_summary(report)}</p>{sweep_sections(report)}</body></html>\n"
    )


@dataclass
class SweepView:
    """One recorded sweep for ``report --html``: where its manifest is, its report, and the points done of all."""

    manifest: str
    report: SweepReport
    done: int
    total: int


_RUNS = "<h2>Runs</h2>"


def with_sweeps(page: str, sweeps: Sequence[SweepView]) -> str:
    """The report page (:func:`embedscope.compare.html.build_html`) with a "Sweeps" part before its "Runs": per
    sweep, its summary and :func:`sweep_sections` (an interrupted sweep says how many points it has done)."""
    if not sweeps:
        return page
    if _RUNS not in page or "</style>" not in page:
        raise ValueError("the report page has no Runs heading or style to place the sweeps by")
    parts = ["<h2>Sweeps</h2>"]
    for n, view in enumerate(sweeps):
        state = "" if view.done == view.total else f" Interrupted or running: {view.done} of {view.total} points done."
        parts.append(
            f"<div class='sweep' data-manifest='{_e(view.manifest)}' data-done='{view.done}' "
            f"data-total='{view.total}'><h3>Sweep {n + 1}: {html.escape(view.manifest)}</h3>"
            f"<p>{_summary(view.report)}{html.escape(state)}</p>{sweep_sections(view.report)}</div>"
        )
    page = page.replace("</style>", SWEEP_STYLE + "</style>", 1)
    i = page.rindex(_RUNS)
    return page[:i] + "".join(parts) + page[i:]
