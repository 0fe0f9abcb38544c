"""Inline SVG charts of the web pages, as :mod:`embedscope.compare.html` draws them: no script, nothing fetched.

Each chart is one ``<svg role="img">`` with an ``aria-label``, a ``<title>`` and a ``<desc>`` saying what it shows,
and its data inline (each mark carries its own ``<title>``: the value it stands for). Every label is escaped here,
so the markup returned is safe to place in a page as it is.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Callable, Sequence

import numpy as np
from markupsafe import Markup

PALETTE = ("#3b6ea8", "#d0743c", "#5a9e5a", "#8e5fa8", "#b5495b", "#4aa3a3", "#8c8c3c", "#666666")
TITLED_POINTS = 400  # a scatter's points each carry a <title> up to this many (beyond, the page grows too big)


def _e(value: object) -> str:
    """Text escaped for an element or a quoted attribute."""
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 4) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _svg(width: int, height: int, label: str, desc: str, body: Sequence[str], kind: str) -> Markup:
    """The ``<svg>`` element around ``body``: its size, label (``aria-label`` and ``<title>``) and description."""
    return Markup(
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart {kind}' viewBox='0 0 {width} {height}' "
        f"width='{width}' height='{height}' role='img' aria-label='{_e(label)}'><title>{_e(label)}</title>"
        f"<desc>{_e(desc)}</desc>{''.join(body)}</svg>"
    )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` (steps of 1, 2 or 5 × 10^k).

    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    """
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return [low]
    raw = span / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _range(values: Sequence[float], unit: bool = True) -> tuple[float, float]:
    """An axis range for ``values``: [0, 1] when they lie there and ``unit``, else their range padded by 5%."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    if unit and low >= 0.0 and high <= 1.0:
        return 0.0, 1.0
    pad = (high - low) * 0.05 or max(abs(high) * 0.05, 0.01)
    return low - pad, high + pad


def _clip_label(text: str, limit: int = 42) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def interval_chart(metric: str, rows: Sequence[tuple[str, float | None, float | None, float | None]]) -> Markup:
    """Each model's score (a dot) and its interval (a whisker) on one axis; ``rows`` are
    ``(label, score, low, high)``, drawn top to bottom."""
    label_w, plot_w, row_h, top = 300, 560, 22, 24
    height = top + row_h * len(rows) + 26
    low, high = _range([v for _, s, lo, hi in rows for v in (s, lo, hi) if v is not None])

    def x(v: float) -> float:
        return label_w + (v - low) / (high - low) * plot_w

    body = _x_axis(nice_ticks(low, high), x, top - 6, height - 20, height - 6, top - 10 if len(rows) > 12 else None)
    for i, (label, score, lo, hi) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        body.append(
            f"<text x='{label_w - 8}' y='{y + 4:.1f}' text-anchor='end' class='label'>"
            f"<title>{_e(label)}</title>{_e(_clip_label(label))}</text>"
        )
        if lo is not None and hi is not None:
            body.append(
                f"<line x1='{x(lo):.1f}' x2='{x(hi):.1f}' y1='{y:.1f}' y2='{y:.1f}' class='ci'>"
                f"<title>{_e(label)}: interval [{_num(lo)}, {_num(hi)}]</title></line>"
            )
        if score is not None:
            body.append(
                f"<circle cx='{x(score):.1f}' cy='{y:.1f}' r='4.5' class='dot'>"
                f"<title>{_e(label)}: {_num(score)}</title></circle>"
            )
            body.append(
                f"<text x='{x(hi if hi is not None else score) + 8:.1f}' y='{y + 4:.1f}' class='value'>"
                f"{_num(score)}</text>"
            )
    label = f"{metric} of each model with its interval"
    desc = "; ".join(f"{name}: {_num(s)} [{_num(lo)}, {_num(hi)}]" for name, s, lo, hi in rows)
    return _svg(label_w + plot_w + 70, height, label, desc, body, "intervals")


def _x_axis(
    ticks: Sequence[float], x: Callable[[float], float], y0: float, y1: float, below: float, above: float | None
) -> list[str]:
    """Vertical grid lines at ``ticks`` from ``y0`` to ``y1`` with their values at ``below`` (and ``above``)."""
    out = []
    for t in ticks:
        out.append(f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='{y0:.1f}' y2='{y1:.1f}' class='grid'/>")
        for y in (below, above) if above is not None else (below,):
            out.append(f"<text x='{x(t):.1f}' y='{y:.1f}' text-anchor='middle' class='tick'>{t:g}</text>")
    return out


def histogram(label: str, metric: str, edges: Sequence[float], counts: Sequence[int]) -> Markup:
    """The distribution of one model's per-item values: one bar per bin of ``edges`` (shared across models)."""
    width, height, bottom = 240, 64, 14
    n = int(sum(counts))
    tallest = max([1, *counts])
    bar_w = width / max(1, len(counts))
    body = [f"<line x1='0' x2='{width}' y1='{height - bottom}' y2='{height - bottom}' class='axis'/>"]
    for i, count in enumerate(counts):
        h = (height - bottom - 4) * count / tallest
        body.append(
            f"<rect x='{i * bar_w + 0.5:.1f}' y='{height - bottom - h:.1f}' width='{bar_w - 1:.1f}' "
            f"height='{h:.1f}' class='bar'><title>{_e(metric)} in [{edges[i]:.3g}, {edges[i + 1]:.3g}"
            f"{']' if i == len(counts) - 1 else ')'}: {count} of {n}</title></rect>"
        )
    body.append(f"<text x='0' y='{height - 2}' class='tick'>{edges[0]:g}</text>")
    body.append(f"<text x='{width}' y='{height - 2}' text-anchor='end' class='tick'>{edges[-1]:g}</text>")
    title = f"{label}: distribution of per-item {metric} ({n} items)"
    desc = "counts per bin: " + ", ".join(str(int(c)) for c in counts)
    return _svg(width, height, title, desc, body, "histogram")


def _time_label(value: dt.datetime, span: float) -> str:
    """A time on an axis spanning ``span`` seconds: the day, else the minute, else the second."""
    return value.strftime("%Y-%m-%d" if span > 2 * 86400 else "%m-%d %H:%M" if span > 600 else "%H:%M:%S")


def history_chart(task: str, metric: str, series: dict[str, list[tuple[dt.datetime, float | None, str]]]) -> Markup:
    """Scores over time: one line per series (an experiment; ``""`` the model's own settings) of
    ``(recorded at, score, run id)`` points, oldest first."""
    width, height, left, right, top, bottom = 560, 190, 52, 12, 12, 34
    points = [(t, s, r) for pts in series.values() for t, s, r in pts if s is not None]
    times = [t.timestamp() for t, _, _ in points] or [0.0]
    t0, t1 = min(times), max(times)
    low, high = _range([s for _, s, _ in points], unit=False)

    def x(t: dt.datetime) -> float:
        return left + (0.5 if t1 == t0 else (t.timestamp() - t0) / (t1 - t0)) * (width - left - right)

    def y(v: float) -> float:
        return top + (high - v) / (high - low) * (height - top - bottom)

    body = []
    for tick in nice_ticks(low, high, 4):
        body.append(f"<line x1='{left}' x2='{width - right}' y1='{y(tick):.1f}' y2='{y(tick):.1f}' class='grid'/>")
        body.append(f"<text x='{left - 5}' y='{y(tick) + 4:.1f}' text-anchor='end' class='tick'>{tick:g}</text>")
    if points:
        first, last = min(points)[0], max(points)[0]
        body.append(
            f"<text x='{x(first):.1f}' y='{height - 18}' text-anchor='start' class='tick'>"
            f"{_time_label(first, t1 - t0)}</text>"
        )
        if last != first:
            body.append(
                f"<text x='{x(last):.1f}' y='{height - 18}' text-anchor='end' class='tick'>"
                f"{_time_label(last, t1 - t0)}</text>"
            )
    for k, (name, pts) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        drawn = [(t, s, r) for t, s, r in pts if s is not None]
        path = " ".join(f"{x(t):.1f},{y(s):.1f}" for t, s, _ in drawn)
        body.append(f"<polyline points='{path}' fill='none' stroke='{color}' stroke-width='1.8'/>")
        for t, s, r in drawn:
            where = f"{name}: " if name else ""
            body.append(
                f"<circle cx='{x(t):.1f}' cy='{y(s):.1f}' r='3.5' fill='{color}'><title>{_e(where)}run "
                f"{_e(r[:12])}, {t:%Y-%m-%d %H:%M} UTC: {_num(s)}</title></circle>"
            )
    if len(series) > 1:
        for k, name in enumerate(series):
            x0 = left + 120 * k
            body.append(
                f"<circle cx='{x0 + 4}' cy='{height - 8}' r='4' fill='{PALETTE[k % len(PALETTE)]}'/>"
                f"<text x='{x0 + 12}' y='{height - 4}' class='tick'>"
                f"{_e(_clip_label(name or 'own settings', 16))}</text>"
            )
    label = f"{task}: {metric} over time"
    desc = "; ".join(f"{t:%Y-%m-%d %H:%M} {_num(s)}" for t, s, _ in sorted(points))
    return _svg(width, height, label, desc, body, "history")


def scatter(task: str, metric: str, label_a: str, label_b: str, xs: np.ndarray, ys: np.ndarray) -> Markup:
    """Each item's value in run a (x) against run b (y), and the diagonal where they are equal: above it b scores
    higher. Points carry their values as ``<title>`` up to :data:`TITLED_POINTS` points."""
    size, left, top = 220, 46, 10
    low, high = _range([*map(float, xs), *map(float, ys)])

    def px(v: float) -> float:
        return left + (v - low) / (high - low) * size

    def py(v: float) -> float:
        return top + (high - v) / (high - low) * size

    body = [
        f"<rect x='{left}' y='{top}' width='{size}' height='{size}' class='frame'/>",
        f"<line x1='{px(low):.1f}' y1='{py(low):.1f}' x2='{px(high):.1f}' y2='{py(high):.1f}' class='diagonal'/>",
    ]
    for tick in nice_ticks(low, high, 4):
        body.append(
            f"<text x='{px(tick):.1f}' y='{top + size + 14}' text-anchor='middle' class='tick'>{tick:g}</text>"
            f"<text x='{left - 5}' y='{py(tick) + 4:.1f}' text-anchor='end' class='tick'>{tick:g}</text>"
        )
    above = below = 0
    titled = len(xs) <= TITLED_POINTS
    for a, b in zip(map(float, xs), map(float, ys)):
        kind = "up" if b > a else "down" if b < a else "same"
        above, below = above + (b > a), below + (b < a)
        title = f"<title>{_num(a)} → {_num(b)}</title>" if titled else ""
        body.append(f"<circle cx='{px(a):.1f}' cy='{py(b):.1f}' r='2.6' class='pt {kind}'>{title}</circle>")
    body.append(
        f"<text x='{left + size / 2}' y='{top + size + 30}' text-anchor='middle' class='axis-label'>"
        f"a: {_e(_clip_label(label_a, 36))}</text>"
    )
    body.append(
        f"<text transform='translate(11 {top + size / 2}) rotate(-90)' text-anchor='middle' "
        f"class='axis-label'>b: {_e(_clip_label(label_b, 36))}</text>"
    )
    label = f"{task}: per-item {metric}, run a (x) against run b (y)"
    desc = f"{len(xs)} items; b higher on {above}, a higher on {below}, equal on {len(xs) - above - below}"
    return _svg(left + size + 12, top + size + 38, label, desc, body, "scatter")
