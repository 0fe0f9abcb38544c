"""``embedscope report DIR... --html report.html``: one self-contained, offline HTML page.

A sortable leaderboard (mean over tasks, mean over task types, Borda rank), one chart per task with each
model's score, its 95% bootstrap interval and a marker where it differs significantly from the baseline
(the comparison of :mod:`embedscope.compare`, Holm-adjusted), and each model's run metadata. Charts are
inline SVG and the only script is inline: the page loads nothing.

Two tables per task follow the charts where the results hold what they need. *Loss split*: per retrieval task whose
per-item rows carry a pipeline's failure columns (its last stage ranked candidates: a reranker, a fusion), per model
and split, nDCG@10, the loss ``1 − nDCG@10`` split into recall, ranking and partial recall by
:func:`~embedscope.metrics.failures.loss_split` on those rows (as points of nDCG@10 and as shares of the loss), and
the queries per failure class; a model whose rows lack the columns shows "—". *Query groups*: per task run with
``group_by``, each group (rows) of each model (columns): the score, bootstrap CI and query count its result stores.

Aggregates follow :mod:`embedscope.results.report`: a model missing a task gets no mean over a set that
includes it. Borda count: on each task a model gets one point per model it beats; ranks follow the totals.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from embedscope.compare.core import CompareOptions, Comparison, compare_models, score_interval
from embedscope.compare.items import ModelResults, TaskItems, load_model_results, result_paths, revision_folders
from embedscope.errors import ConfigError, DataFormatError
from embedscope.metrics.failures import FAILURE_COLUMNS, LossSplit, loss_split
from embedscope.results.compute import compute_differences, compute_line
from embedscope.results.per_item import read_per_item
from embedscope.results.report import query_groups
from embedscope.results.schema import TaskResult
from embedscope.results.usage import USAGE_HEADER, file_usage, total_usage, usage_cells

NOT_RERANKED = "—"
"""What the loss-split table shows for a model whose rows carry no failure columns (not a pipeline that reranks)."""


@dataclass(frozen=True)
class LeaderRow:
    """One model's aggregates."""

    model: str
    tasks: int
    mean_task: float | None
    mean_type: float | None
    borda: int
    borda_rank: int
    usage: dict[str, Any] | None = None  # API use over its tasks (results/usage.py); None for a local model


def load_models(dirs: Sequence[str | Path]) -> list[ModelResults]:
    """Every model (revision folder with results) under ``dirs``, in order."""
    models = []
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise DataFormatError(f"{root}: no such results folder")
        models += [load_model_results(f) for f in revision_folders(root) if result_paths(f)]
    if not models:
        raise DataFormatError(f"No task results found under {', '.join(map(str, dirs))}")
    return models


def _mean(values: Sequence[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return float(sum(values) / len(values))  # type: ignore[arg-type]


def borda_points(scores: dict[str, dict[str, float]], tasks: Sequence[str]) -> dict[str, int]:
    """Borda count: per task, one point for every model with a lower score (models lacking the task get none).

    >>> borda_points({"a": {"t": 0.5, "u": 0.1}, "b": {"t": 0.4, "u": 0.3}}, ["t", "u"])
    {'a': 1, 'b': 1}
    """
    points = {m: 0 for m in scores}
    for t in tasks:
        have = {m: s[t] for m, s in scores.items() if t in s}
        for m, v in have.items():
            points[m] += sum(1 for w in have.values() if w < v)
    return points


def leaderboard(models: Sequence[ModelResults], names: Sequence[str]) -> list[LeaderRow]:
    """Aggregates per model over the union of tasks (mean over tasks, mean of task-type means, Borda)."""
    tasks = list(dict.fromkeys(t for m in models for t in m.tasks))
    types = {t: next(m.tasks[t].task_type for m in models if t in m.tasks) for t in tasks}
    scores = {n: {t: it.score for t, it in m.tasks.items()} for n, m in zip(names, models)}
    points = borda_points(scores, tasks)
    rows = []
    for n, m in zip(names, models):
        per_type = [_mean([scores[n].get(t) for t in tasks if types[t] == k]) for k in dict.fromkeys(types.values())]
        rank = 1 + sum(1 for p in points.values() if p > points[n])
        usage = total_usage([file_usage(it.path) for it in m.tasks.values()])
        rows.append(
            LeaderRow(
                n, len(scores[n]), _mean([scores[n].get(t) for t in tasks]), _mean(per_type), points[n], rank, usage
            )
        )
    return rows


def _fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _attr(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else repr(float(value))


def leaderboard_html(rows: Sequence[LeaderRow]) -> str:
    """The sortable table; each number cell carries its exact value in ``data-value``. When a model is served by
    an API, the API columns (requests, tokens, spend, request latency) follow."""
    costs = any(r.usage is not None for r in rows)
    head = (
        "<tr><th data-kind='text'>model</th><th>tasks</th><th>Mean (Task)</th><th>Mean (TaskType)</th>"
        "<th>Borda points</th><th>Borda rank</th>"
        + ("".join(f"<th>{html.escape(h)}</th>" for h in USAGE_HEADER) if costs else "")
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = [
            f"<td data-value='{html.escape(r.model, quote=True)}'>{html.escape(r.model)}</td>",
            f"<td data-value='{r.tasks}'>{r.tasks}</td>",
            f"<td class='mean-task' data-value='{_attr(r.mean_task)}'>{_fmt(r.mean_task)}</td>",
            f"<td class='mean-type' data-value='{_attr(r.mean_type)}'>{_fmt(r.mean_type)}</td>",
            f"<td data-value='{r.borda}'>{r.borda}</td>",
            f"<td data-value='{r.borda_rank}'>{r.borda_rank}</td>",
            *(
                [f"<td class='api' data-value='{html.escape(c)}'>{html.escape(c)}</td>" for c in usage_cells(r.usage)]
                if costs
                else []
            ),
        ]
        body.append(f"<tr class='model-row'>{''.join(cells)}</tr>")
    return f"<table id='leaderboard' class='sortable'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _marker(comparison: Comparison | None, baseline: str, model: str, task: str) -> str:
    """``▲``/``▼`` when ``model`` is significantly better/worse than the baseline on ``task``, else ""."""
    if comparison is None or model == baseline:
        return ""
    for r in comparison.rows:
        if r.task == task and r.significant and r.model_a == baseline and r.model_b == model:
            return "▲" if r.delta > 0 else "▼"
    return ""


def task_chart(task: str, metric: str, bars: Sequence[tuple[str, float, float, float, str]]) -> str:
    """An inline SVG bar chart: one bar per model (score), its interval as a whisker, and a marker."""
    label_w = 12 + 7 * max([10, *[len(m) for m, *_ in bars]])  # about 7 px per character at 12 px
    bar_h, gap, plot_w = 18, 8, 340
    width = label_w + plot_w + 70
    top = max([1.0, *[v for _, s, lo, hi, _ in bars for v in (s, lo, hi) if not math.isnan(v)]])
    bottom = min([0.0, *[v for _, s, lo, hi, _ in bars for v in (s, lo, hi) if not math.isnan(v)]])
    span = top - bottom or 1.0

    def x(v: float) -> float:
        return label_w + (v - bottom) / span * plot_w

    parts = []
    for i, (model, score, low, high, marker) in enumerate(bars):
        y = 10 + i * (bar_h + gap)
        parts.append(f"<text x='{label_w - 6}' y='{y + 13}' text-anchor='end'>{html.escape(model)}</text>")
        parts.append(
            f"<rect x='{x(min(0.0, score)):.1f}' y='{y}' width='{abs(x(score) - x(0.0)):.1f}' "
            f"height='{bar_h}' class='bar'><title>{html.escape(model)}: {score:.4f}</title></rect>"
        )
        if not math.isnan(low):
            cy = y + bar_h / 2
            parts.append(
                f"<line x1='{x(low):.1f}' x2='{x(high):.1f}' y1='{cy}' y2='{cy}' class='ci'/>"
                f"<line x1='{x(low):.1f}' x2='{x(low):.1f}' y1='{y + 3}' y2='{y + bar_h - 3}' class='ci'/>"
                f"<line x1='{x(high):.1f}' x2='{x(high):.1f}' y1='{y + 3}' y2='{y + bar_h - 3}' class='ci'/>"
            )
        label = f"{score:.4f} {marker}".strip()
        parts.append(
            f"<text x='{x(max(score, high if not math.isnan(high) else score)) + 4:.1f}' y='{y + 13}' "
            f"class='value'>{html.escape(label)}</text>"
        )
    height = 20 + len(bars) * (bar_h + gap)
    return (
        f"<figure class='task' data-task='{html.escape(task, quote=True)}'><figcaption>{html.escape(task)} "
        f"<small>({html.escape(metric)})</small></figcaption><svg xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' role='img'>{''.join(parts)}</svg></figure>"
    )


def metadata_html(models: Sequence[ModelResults], names: Sequence[str]) -> str:
    """Each model's ``model_meta.json`` (scalars) and the dates, versions, seconds and compute (threads, CPU) of its
    results; above them, a note when the models' threads or CPUs differ (their seconds then compare unlike)."""
    rows, computes = [], {}
    for n, m in zip(names, models):
        meta_path = m.folder / "model_meta.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        details = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) and k != "name"}
        dates, seconds, versions, compute = [], 0.0, set(), None
        for items in m.tasks.values():
            data = json.loads(items.path.read_text(encoding="utf-8"))
            dates.append(str(data.get("date") or ""))
            seconds += float(data.get("evaluation_time") or 0.0)
            versions.add(str(data.get("embedscope_version") or data.get("mteb_version") or ""))
            compute = compute or data.get("compute")
        computes[n] = compute
        details.update(
            results=len(m.tasks),
            evaluated=f"{min(dates)} … {max(dates)}" if dates else "",
            seconds=round(seconds, 1),
            compute=compute_line(compute),
            versions=", ".join(sorted(v for v in versions if v)),
        )
        text = "; ".join(f"{html.escape(str(k))}: {html.escape(str(v))}" for k, v in details.items())
        rows.append(f"<tr><td>{html.escape(n)}</td><td>{html.escape(str(m.folder))}</td><td>{text}</td></tr>")
    differs = compute_differences(computes)
    note = f"<p class='note' id='compute-differs'>{html.escape(differs)}</p>" if differs else ""
    return (
        f"{note}<table id='metadata'><thead><tr><th>model</th><th>folder</th><th>run</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _where(split: str, subset: str) -> str:
    """A split's label, with its subset unless ``default`` (as the report's group table names it)."""
    return split if subset == "default" else f"{split}/{subset}"


def failure_splits(items: TaskItems, result: TaskResult) -> dict[str, LossSplit | None] | None:
    """Per split (with its subset unless ``default``), the :func:`~embedscope.metrics.failures.loss_split` of the
    per-item rows of a pipeline whose last stage ranked candidates (None for a split whose rows hold no
    ``ndcg_at_10``: the task's cutoffs lack 10); None when the rows carry no failure columns.

    Only a pipeline's result (one that records ``pipeline_stages``) has them: no other result's rows are read."""
    if not result.extra.get("pipeline_stages") or items.item_file is None or not items.item_file.is_file():
        return None
    rows = read_per_item(items.item_file)
    if not rows or not all(c in rows[0] for c in FAILURE_COLUMNS):
        return None
    by_split: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_split.setdefault(_where(str(r["split"]), str(r["hf_subset"])), []).append(r)
    return {
        where: (
            loss_split(
                [r["ndcg_at_10"] for r in mine], [r["ceiling_ndcg_at_10"] for r in mine], [r["failure"] for r in mine]
            )
            if "ndcg_at_10" in mine[0]
            else None
        )
        for where, mine in by_split.items()
    }


def _number_cell(value: float, css: str, digits: int = 4) -> str:
    return f"<td class='{css}' data-value='{_attr(value)}'>{_fmt(value, digits)}</td>"


def _part_cell(part: float, loss: float, css: str) -> str:
    """A part of the loss: its points of nDCG@10 and its share of the loss."""
    share = part / loss if loss > 0 else math.nan
    text = _fmt(part) + ("" if math.isnan(share) else f" ({share:.0%})")
    return f"<td class='{css}' data-value='{_attr(part)}' data-share='{_attr(share)}'>{text}</td>"


LOSS_HEADER = (
    "model",
    "split",
    "queries",
    "nDCG@10",
    "loss",
    "recall",
    "ranking",
    "partial",
    "candidate miss",
    "ranking failure",
    "no failure",
)


def loss_split_html(task: str, splits: Sequence[tuple[str, dict[str, LossSplit | None] | None]]) -> str:
    """One task's loss-split table: a row per model and split (``splits``: each model's :func:`failure_splits`)."""
    body = []
    width = len(LOSS_HEADER) - 1
    for model, found in splits:
        name = f"<td data-value='{html.escape(model, quote=True)}'>{html.escape(model)}</td>"
        if found is None:
            body.append(
                f"<tr class='not-reranked'>{name}<td colspan='{width}'>{NOT_RERANKED} (not a pipeline that reranks: "
                "its rows have no failure columns)</td></tr>"
            )
            continue
        for where, split in found.items():
            cells = [name, f"<td class='split'>{html.escape(where)}</td>"]
            if split is None:
                cells.append(f"<td colspan='{width - 1}'>{NOT_RERANKED} (its rows hold no ndcg_at_10)</td>")
            else:
                cells += [
                    f"<td class='queries' data-value='{split.queries}'>{split.queries}</td>",
                    _number_cell(1.0 - split.loss if split.queries else math.nan, "ndcg"),
                    _number_cell(split.loss, "loss"),
                    _part_cell(split.recall, split.loss, "loss-recall"),
                    _part_cell(split.ranking, split.loss, "loss-ranking"),
                    _part_cell(split.partial, split.loss, "loss-partial"),
                    f"<td class='candidate-miss' data-value='{split.candidate_miss}'>{split.candidate_miss}</td>",
                    f"<td class='ranking-failures' data-value='{split.ranking_failures}'>{split.ranking_failures}</td>",
                    f"<td class='no-failure' data-value='{split.no_failure}'>{split.no_failure}</td>",
                ]
            body.append(f"<tr class='model-split' data-model='{html.escape(model, quote=True)}'>{''.join(cells)}</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in LOSS_HEADER)
    return (
        f"<h3>{html.escape(task)}</h3><table class='loss-split' data-task='{html.escape(task, quote=True)}'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def groups_html(task: str, models: Sequence[tuple[str, dict[tuple[str, str], dict[str, Any]]]]) -> str:
    """One task's query groups side by side: a row per split and group, a column per model (``models``: each one's
    :func:`~embedscope.results.report.query_groups`) with the group's score, CI and count as its result stores them."""
    keys = list(dict.fromkeys(k for _, groups in models for k in groups))
    body = []
    for where, group in keys:
        cells = [f"<td class='group'>{html.escape(group)}</td>", f"<td class='split'>{html.escape(where)}</td>"]
        for model, groups in models:
            g = groups.get((where, group))
            if g is None:
                cells.append("<td class='score' data-value=''>–</td>")
                continue
            low, high, n = g.get("ci_low"), g.get("ci_high"), int(g.get("n", 0))
            ci = f" [{low:.4f}, {high:.4f}]" if low is not None and high is not None else " (no CI: n &lt; 2)"
            cells.append(
                f"<td class='score' data-model='{html.escape(model, quote=True)}' "
                f"data-value='{_attr(g['main_score'])}' data-ci-low='{_attr(low)}' data-ci-high='{_attr(high)}' "
                f"data-n='{n}'>{_fmt(g['main_score'])}{ci} <small>n={n}</small></td>"
            )
        body.append(f"<tr>{''.join(cells)}</tr>")
    head = "<th>group</th><th>split</th>" + "".join(f"<th>{html.escape(m)}</th>" for m, _ in models)
    return (
        f"<h3>{html.escape(task)}</h3><table class='query-groups' data-task='{html.escape(task, quote=True)}'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def breakdowns_html(models: Sequence[ModelResults], names: Sequence[str], tasks: Sequence[str]) -> str:
    """The loss-split and query-group sections ("" when no result has either)."""
    losses, groups = [], []
    for t in tasks:
        have = [(n, m.tasks[t]) for n, m in zip(names, models) if t in m.tasks]
        results = [(n, TaskResult.from_dict(json.loads(it.path.read_text(encoding="utf-8")))) for n, it in have]
        splits = [(n, failure_splits(it, r)) for (n, it), (_, r) in zip(have, results)]
        if any(found is not None for _, found in splits):
            losses.append(loss_split_html(t, splits))
        grouped = [(n, query_groups(r)) for n, r in results]
        if any(g for _, g in grouped):
            groups.append(groups_html(t, grouped))
    parts = []
    if losses:
        parts.append(
            "<h2>Loss split</h2><p>Why a pipeline loses: its loss, 1 − nDCG@10 of its last stage (a reranker or a "
            "fusion), split into <b>recall</b> (queries with no relevant document among the candidates), "
            "<b>ranking</b> (what the best order of the candidates would win back) and <b>partial</b> recall (what "
            "the candidates' ceilings leave), in points of nDCG@10 and as a share of the loss, from the per-item "
            f"rows; and the queries per failure class. {NOT_RERANKED}: not a pipeline that reranks.</p>"
            + "".join(losses)
        )
    if groups:
        parts.append(
            "<h2>Query groups</h2><p>Each query group's score, its 95% bootstrap interval and its query count, as each "
            "result stores them (run option <code>group_by</code>).</p>" + "".join(groups)
        )
    return "".join(parts)


STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
#leaderboard th{cursor:pointer;background:#f3f3f3}#leaderboard th.sorted-desc::after{content:' ▼'}
#leaderboard th.sorted-asc::after{content:' ▲'}#metadata td{text-align:left;font-size:90%}
.bar{fill:#4a7fb5}.ci{stroke:#222;stroke-width:1.5}svg text{font-size:12px}.value{fill:#333}
figure{margin:1em 0}figcaption{font-weight:600}.loss-split td,.query-groups td{white-space:nowrap}
tr.not-reranked td{color:#777;text-align:left}td small{color:#666}
"""

SCRIPT = """
(function () {
  var table = document.getElementById('leaderboard');
  var heads = table.querySelectorAll('th');
  heads.forEach(function (th, col) {
    th.addEventListener('click', function () {
      var desc = !th.classList.contains('sorted-desc');
      var text = th.getAttribute('data-kind') === 'text';
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-value'), y = b.cells[col].getAttribute('data-value');
        if (text) { return desc ? y.localeCompare(x) : x.localeCompare(y); }
        var u = x === '' ? -Infinity : parseFloat(x), v = y === '' ? -Infinity : parseFloat(y);
        return desc ? v - u : u - v;
      });
      rows.forEach(function (r) { body.appendChild(r); });
      heads.forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');
    });
  });
})();
"""


def pick_baseline(models: Sequence[ModelResults], names: Sequence[str], baseline: str | None) -> str:
    """The baseline's display name: a model name, a folder, or (default) the first model."""
    if baseline is None:
        return names[0]
    for n, m in zip(names, models):
        if baseline in (n, m.name) or Path(baseline).resolve() in (
            m.folder.resolve(),
            m.folder.parent.parent.resolve(),
        ):
            return n
    raise ConfigError(f"--baseline {baseline!r} is none of the models: {', '.join(names)}")


def build_html(
    dirs: Sequence[str | Path], baseline: str | None = None, options: CompareOptions = CompareOptions()
) -> str:
    """The report page for every model under ``dirs`` (see the module docstring)."""
    from embedscope.compare.core import unique_names

    models = load_models(dirs)
    names = unique_names([m.name for m in models])
    base = pick_baseline(models, names, baseline)
    base_model = models[names.index(base)]
    comparisons = {}
    others = [(n, m) for n, m in zip(names, models) if n != base]
    rows_all = []
    for n, m in others:
        shared = [t for t in base_model.tasks if t in m.tasks]
        if shared:
            c = compare_models([base_model, m], replace(options, correction="none", allow_mismatch=True), shared)
            for r in c.rows:
                r.model_a, r.model_b = base, n
            comparisons[n] = c
            rows_all += c.rows
    from embedscope.compare.stats import adjust

    for r, p in zip(rows_all, adjust([r.p_value for r in rows_all], options.correction)):
        r.p_adjusted, r.significant = p, bool(p < options.alpha)
    tasks = list(dict.fromkeys(t for m in models for t in m.tasks))
    charts = []
    for t in tasks:
        bars = []
        metric = next(m.tasks[t].metric for m in models if t in m.tasks)
        for n, m in zip(names, models):
            if t in m.tasks:
                low, high = score_interval(m.tasks[t], options)
                bars.append((n, m.tasks[t].score, low, high, _marker(comparisons.get(n), base, n, t)))
        charts.append(task_chart(t, metric, bars))
    level = round(options.confidence * 100)
    legend = (
        f"Bars: main score; whiskers: {level}% bootstrap interval ({options.rounds:,} resamples of the items); "
        f"▲/▼: significantly better/worse than the baseline <b>{html.escape(base)}</b> ({options.test} test; "
        f"STS and pair classification: bootstrap over pairs; {options.correction}-adjusted p &lt; {options.alpha})."
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>embedscope report</title>"
        f"<style>{STYLE}</style></head><body><h1>embedscope report</h1>"
        f"<h2>Leaderboard</h2><p>Click a column to sort.</p>{leaderboard_html(leaderboard(models, names))}"
        f"<h2>Tasks</h2><p>{legend}</p>{''.join(charts)}"
        f"{breakdowns_html(models, names, tasks)}"
        f"<h2>Runs</h2>{metadata_html(models, names)}<script>{SCRIPT}</script></body></html>\n"
    )
