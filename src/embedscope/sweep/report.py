"""The answer of a sweep: per task, each point's score with its CI, Δ against the best point with a Holm-adjusted
paired p-value, its costs, and whether it is on the Pareto frontier of quality against each cost.

Everything is read back from the stored results (so a resumed sweep answers as a fresh one):

- score: the task's main score; CI: the bootstrap percentile interval over the per-item rows
  (:func:`embedscope.compare.core.score_interval`);
- Δ and p: the paired test of :func:`embedscope.compare.core.paired_test` (items paired by split, subset and id;
  permutation test by default), each point against the best, p-values adjusted over all points (Holm);
- costs, from the result's ``evaluation_phases`` (seconds of the run that computed it):
  ``encode_s`` = encode_corpus + encode_queries (plain encoders; a pipeline times encoding inside its stages); points
  that use one encoder's vectors (post-processing, top-k, limits axes) share the encode time of the point that
  encoded them, not the time the embedding cache took to serve them;
  ``query_s`` = encode_queries + search (plain encoders) or every pipeline stage (a pipeline's stages include
  indexing the corpus); ``qps`` = queries / query_s and ``ms_per_query`` = 1000 query_s / queries (means over the
  whole batch of queries); ``p50_ms`` / ``p95_ms`` = ``numpy.percentile`` of the per-query latencies a run with
  ``latency_sample`` recorded (:mod:`embedscope.retrieval.latency`: each sampled query encoded by the model, not the
  cache, and searched alone; the samples of every split pooled; empty when the result has none, e.g. a result
  stored by a run without ``latency_sample`` and reused); ``peak_mb`` = the largest peak RSS of
  the pipeline's stages (pipelines only); ``bytes_per_vector`` = 4 · dimension for float32 vectors when the model
  records its dimension (``truncate_dim`` and ``precision`` settings are honoured when the settings have them);
  for a model served by an API (the result's ``api_usage``, :mod:`embedscope.results.usage`): ``api_tokens``,
  ``api_cost`` (None without a ``price_per_mtok``), ``api_p50_ms`` / ``api_p95_ms`` (request latency). When a task
  has such a point, a point of a local model gets 0 tokens and 0 spend, so that the cost chart and its Pareto
  frontier put a local model against a paid service; these columns show only when a point has them. A learned-sparse
  model's point (its scores hold :data:`embedscope.retrieval.sparse.COST_KEYS`): ``bytes_per_vector`` = 8 · its
  documents' mean active dimensions (a position and a weight each, in its inverted index), comparable with a dense
  vector's bytes, and ``flops`` = the expected multiplications per query-document pair; that column shows only when a
  point has it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.core import CompareOptions, json_safe, paired_test, score_interval
from embedscope.compare.items import TaskItems, task_items
from embedscope.compare.selection import kfold_choice, pareto_front
from embedscope.compare.stats import adjust
from embedscope.errors import ConfigError
from embedscope.results.compute import compute_differences
from embedscope.results.table import markdown_table
from embedscope.results.usage import recorded_usage
from embedscope.sweep.grid import PointOutcome

# (name, lower is better)
COSTS = (
    ("encode_s", True),
    ("query_s", True),
    ("ms_per_query", True),
    ("qps", False),
    ("p50_ms", True),
    ("p95_ms", True),
    ("peak_mb", True),
    ("bytes_per_vector", True),
    ("api_tokens", True),
    ("api_cost", True),
    ("api_p50_ms", True),
    ("api_p95_ms", True),
    ("flops", True),
)
API_COSTS = ("api_tokens", "api_cost", "api_p50_ms", "api_p95_ms")
SPARSE_COSTS = ("flops",)
_NOT_SEARCH = ("load_data", "metrics", "encode_corpus", "latency_sample")
_PRECISION_BITS = {"fp32": 32, "float32": 32, "fp16": 16, "int8": 8, "uint8": 8, "binary": 1, "ubinary": 1}


@dataclass
class SweepRow:
    """One point on one task."""

    point: int
    label: str
    values: dict[str, Any]
    model: str
    task: str
    metric: str
    score: float
    ci_low: float
    ci_high: float
    n_items: int
    delta: float = 0.0
    p_value: float = math.nan
    p_adjusted: float = math.nan
    n_paired: int = 0
    best: bool = False
    reused: bool = False
    costs: dict[str, float | None] = field(default_factory=dict)
    pareto: list[str] = field(default_factory=list)
    path: str = ""
    note: str = ""  # why a figure is missing (a result without its per-item rows: no CI, no p-value)
    compute: dict[str, Any] | None = None  # the result's threads and CPU (results/compute.py), None when not recorded


@dataclass
class FoldReport:
    """``--tune-folds``: the point chosen on the other folds' items, per fold, and the held-out score."""

    task: str
    folds: int
    n_items: int
    chosen: list[str]
    train_scores: list[float]
    fold_scores: list[float]
    held_out_score: float
    best_in_sample: float


@dataclass
class SweepReport:
    """Every row (point × task), and the k-fold choices when asked: ``table()`` is what ``embedscope sweep`` prints,
    ``to_dict()`` its ``--json``.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.sweep({"model": ["fts5", "fts5:match=all"]}, tasks=[tiny_retrieval_task()],
        ...                           output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> report.axes, [row.label for row in report.rows]
        (['model'], ['model=fts5', 'model=fts5:match=all'])
    """

    rows: list[SweepRow]
    axes: list[str]
    options: CompareOptions
    folds: list[FoldReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "axes": self.axes,
                "options": asdict(self.options),
                "rows": [asdict(r) for r in self.rows],
                "tuning": [asdict(f) for f in self.folds],
            }
        )

    def table(self) -> str:
        """What ``embedscope sweep`` prints (the verbs' return convention: ``table()`` and ``to_dict()``)."""
        return self.markdown()

    def markdown(self) -> str:
        """One table per task (best point first marked), then the k-fold choices."""
        parts = []
        for task in dict.fromkeys(r.task for r in self.rows):
            rows = [r for r in self.rows if r.task == task]
            parts.append(f"### {task} ({rows[0].metric}; Δ and p against the best point, Holm over {len(rows) - 1})")
            parts.append(markdown_table(self.header(), [self.cells(r) for r in rows]))
            notes = [f"- point {r.point} ({r.label}): {r.note}" for r in rows if r.note]
            differs = compute_differences({f"point {r.point}": r.compute for r in rows})
            notes += [f"- {differs}"] if differs else []
            if notes:
                parts.append("\n".join(notes))
        for f in self.folds:
            parts.append(
                f"### {f.task}: choice by {f.folds}-fold over {f.n_items} items\n"
                + markdown_table(
                    ["fold", "chosen on the other folds", "their mean", "held-out mean"],
                    [
                        [str(i), c, _num(t), _num(s)]
                        for i, (c, t, s) in enumerate(zip(f.chosen, f.train_scores, f.fold_scores))
                    ],
                )
                + f"\n\nheld-out score of the choice: {_num(f.held_out_score)} "
                f"(the best point in-sample: {_num(f.best_in_sample)})"
            )
        return "\n\n".join(parts)

    @property
    def api(self) -> bool:
        """Whether a point calls an API (its columns show)."""
        return any(r.costs.get("api_tokens") is not None for r in self.rows)

    @property
    def sparse(self) -> bool:
        """Whether a point is a learned-sparse model's (its FLOPS column shows)."""
        return any(r.costs.get("flops") is not None for r in self.rows)

    def header(self) -> list[str]:
        return [
            "#",
            *self.axes,
            "score",
            "95% CI",
            "Δ vs best",
            "p (Holm)",
            "encode s",
            "query s",
            "ms/query",
            "QPS",
            "p50 ms",
            "p95 ms",
            "peak MB",
            "bytes/vector",
            *(["API tokens", "API cost", "API p50 ms", "API p95 ms"] if self.api else []),
            *(["FLOPS"] if self.sparse else []),
            "Pareto",
        ]

    def cells(self, r: SweepRow) -> list[str]:
        c = r.costs
        return [
            str(r.point),
            *[_text(r.values.get(a)) for a in self.axes],
            _num(r.score) + (" (best)" if r.best else ""),
            "n/a: no per-item rows" if _items_missing(r) else f"[{_num(r.ci_low)}, {_num(r.ci_high)}]",
            "" if r.best else f"{r.delta:+.5f}",
            "" if r.best else self._p_cell(r),
            _num(c.get("encode_s"), 2),
            _num(c.get("query_s"), 3),
            _num(c.get("ms_per_query"), 3),
            _num(c.get("qps"), 1),
            _num(c.get("p50_ms"), 2),
            _num(c.get("p95_ms"), 2),
            _num(c.get("peak_mb"), 0),
            _num(c.get("bytes_per_vector"), 0),
            *(
                [_num(c.get("api_tokens"), 0), _num(c.get("api_cost"), 4), _num(c.get("api_p50_ms"), 1)]
                + [_num(c.get("api_p95_ms"), 1)]
                if self.api
                else []
            ),
            *([_num(c.get("flops"), 2)] if self.sparse else []),
            ", ".join(r.pareto),
        ]

    def _p_cell(self, r: SweepRow) -> str:
        """The p-value, or why there is none: this point's per-item rows are missing, or the best point's are (every
        point is tested against it)."""
        if _items_missing(r):
            return "n/a: no per-item rows"
        best = next((b for b in self.rows if b.task == r.task and b.best), None)
        if best is not None and _items_missing(best) and not math.isfinite(r.p_adjusted):
            return "n/a: the best point has no per-item rows"
        return _p(r.p_adjusted)

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        names = [n for n, _ in COSTS if (self.api or n not in API_COSTS) and (self.sparse or n not in SPARSE_COSTS)]
        writer.writerow(
            [
                "point",
                "task",
                "model",
                *self.axes,
                "metric",
                "score",
                "ci_low",
                "ci_high",
                "delta",
                "p_value",
                "p_adjusted",
                "n_paired",
                "best",
                "reused",
                *names,
                "pareto",
                "path",
                "note",
            ]
        )
        for r in self.rows:
            writer.writerow(
                [
                    r.point,
                    r.task,
                    r.model,
                    *[_text(r.values.get(a)) for a in self.axes],
                    r.metric,
                    r.score,
                    _csv(r.ci_low),
                    _csv(r.ci_high),
                    r.delta,
                    _csv(r.p_value),
                    _csv(r.p_adjusted),
                    r.n_paired,
                    r.best,
                    r.reused,
                    *[_csv(r.costs.get(n)) for n in names],
                    ";".join(r.pareto),
                    r.path,
                    r.note,
                ]
            )
        return out.getvalue()


def _items_missing(r: SweepRow) -> bool:
    """Whether the row's result has no per-item rows (its note says why; no interval, no paired test)."""
    return bool(r.note) and r.n_items == 0


def _text(value: Any) -> str:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return "" if value is None else str(value)
    try:
        return json.dumps(value, default=lambda v: getattr(v, "name", str(v)))
    except (TypeError, ValueError):
        return str(value)


def _num(value: float | None, digits: int = 5) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _p(value: float) -> str:
    return "" if not math.isfinite(value) else (f"{value:.2e}" if value < 1e-3 else f"{value:.4f}")


def _csv(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else repr(float(value))


# ---------------------------------------------------------------------------------------------
# Costs


def result_costs(path: Path, n_items: int, settings: Any) -> dict[str, float | None]:
    """The cost columns of one stored result (see the module docstring)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    phases: dict[str, float] = {}
    for p in data.get("evaluation_phases") or []:
        phases[p["name"]] = phases.get(p["name"], 0.0) + float(p["end"]) - float(p["start"])
    encodes = [phases[k] for k in ("encode_corpus", "encode_queries") if k in phases]
    query_s = sum(v for k, v in phases.items() if k not in _NOT_SEARCH) if phases else None
    stages = [s for entries in (data.get("pipeline_stages") or {}).values() for s in entries]
    peaks = [float(s["peak_rss_mb"]) for s in stages if isinstance(s.get("peak_rss_mb"), (int, float))]
    costs: dict[str, float | None] = {
        "encode_s": sum(encodes) if encodes else None,
        "query_s": query_s,
        "ms_per_query": 1000 * query_s / n_items if query_s is not None and n_items else None,
        "qps": n_items / query_s if query_s and n_items else None,
        "peak_mb": max(peaks) if peaks else None,
        "bytes_per_vector": _bytes_per_vector(Path(path).parent / "model_meta.json", settings),
        **latency_percentiles(data.get("query_latency")),
        **api_costs(recorded_usage(data)),
        "flops": None,
    }
    sparse = _sparse_scores(data)
    if sparse is not None:
        costs["bytes_per_vector"] = 8 * float(sparse["sparse_active_dims_document_mean"])
        costs["flops"] = float(sparse["sparse_flops"])
    return costs


def _sparse_scores(data: dict[str, Any]) -> dict[str, Any] | None:
    """The first score entry holding a sparse model's costs, or None."""
    for entries in (data.get("scores") or {}).values():
        for entry in entries:
            if isinstance(entry, dict) and "sparse_flops" in entry and "sparse_active_dims_document_mean" in entry:
                return entry
    return None


def api_costs(usage: dict[str, Any] | None) -> dict[str, float | None]:
    """The API cost columns of a result's ``api_usage`` (all None for a model that calls no API)."""
    if usage is None:
        return dict.fromkeys(API_COSTS)
    value = lambda key: None if usage.get(key) is None else float(usage[key])  # noqa: E731
    return {
        "api_tokens": value("tokens"),
        "api_cost": value("cost"),
        "api_p50_ms": value("latency_p50_ms"),
        "api_p95_ms": value("latency_p95_ms"),
    }


def _local_points_cost_nothing(rows: list[SweepRow]) -> None:
    """Beside a point served by an API, a local model's point spends no tokens and no money (0, not unknown)."""
    if not any(r.costs.get("api_tokens") is not None for r in rows):
        return
    for r in rows:
        if r.costs.get("api_tokens") is None:
            r.costs["api_tokens"], r.costs["api_cost"] = 0.0, 0.0


def latency_percentiles(recorded: Any) -> dict[str, float | None]:
    """p50 and p95 (``numpy.percentile``) of the per-query milliseconds a result's ``query_latency`` holds, the
    splits' samples pooled; None for both when it holds none."""
    samples = [
        float(x)
        for entry in (recorded.values() if isinstance(recorded, dict) else [])
        if isinstance(entry, dict)
        for x in entry.get("total_ms") or []
    ]
    if not samples:
        return {"p50_ms": None, "p95_ms": None}
    return {"p50_ms": float(np.percentile(samples, 50)), "p95_ms": float(np.percentile(samples, 95))}


def _bytes_per_vector(meta_path: Path, settings: Any) -> float | None:
    """Bytes of one stored vector: dimension (``truncate_dim`` when set) × bits of the ``precision`` setting (fp32
    when the settings have none) / 8; None when the model does not record its dimension."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dim = meta.get("embed_dim")
    if not isinstance(dim, int) or "fingerprint" not in meta:  # a pipeline records its stages, not one vector
        return None
    dim = getattr(settings, "truncate_dim", None) or dim
    bits = _PRECISION_BITS.get(str(getattr(settings, "precision", None) or "fp32"))
    return None if bits is None else math.ceil(dim * bits / 8)


# ---------------------------------------------------------------------------------------------
# The report


def sweep_report(
    outcomes: Sequence[PointOutcome],
    axes: Sequence[str],
    options: CompareOptions = CompareOptions(),
    tune_folds: int | None = None,
) -> SweepReport:
    """Rows per task and point, Δ and Holm-adjusted p against each task's best point, Pareto marks and, with
    ``tune_folds``, the k-fold choice among the points."""
    tasks = list(dict.fromkeys(t for o in outcomes for t in o.paths))
    report = SweepReport([], list(axes), options)
    for task in tasks:
        present = [o for o in outcomes if task in o.paths]
        items = [task_items(o.paths[task]) for o in present]
        rows = [_row(o, task, it) for o, it in zip(present, items)]
        _shared_encoding_cost(rows)
        _local_points_cost_nothing(rows)
        _against_best(rows, items, options)
        _mark_pareto(rows)
        report.rows += rows
        if tune_folds is not None:
            report.folds.append(_tune(task, rows, items, tune_folds, options.seed))
    return report


def _row(outcome: PointOutcome, task: str, items: TaskItems) -> SweepRow:
    low, high = score_interval(items)
    point = outcome.point
    return SweepRow(
        point=point.index,
        label=point.label,
        values=dict(point.values),
        model=outcome.model_name,
        task=task,
        metric=items.metric,
        score=items.score,
        ci_low=low,
        ci_high=high,
        n_items=len(items.keys),
        reused=outcome.reused,
        costs=result_costs(outcome.paths[task], len(items.keys), point.settings),
        path=str(outcome.paths[task]),
        note=_missing_items_note(outcome.paths[task], items),
        compute=_compute_of(outcome.paths[task]),
    )


def _compute_of(path: Path) -> dict[str, Any] | None:
    """The threads and CPU a result records (None for a result stored before they were recorded)."""
    try:
        recorded = json.loads(Path(path).read_text(encoding="utf-8")).get("compute")
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


_NO_FIGURES = "no 95% CI and no p-value for this point"


def _missing_items_note(path: Path, items: TaskItems) -> str:
    """Marks a result whose per-item rows are gone (a reused point whose per-item file was deleted): its interval
    and paired p-value cannot be computed, and the report says so instead of leaving the cells blank."""
    from embedscope.results.per_item import per_item_path

    item_file = per_item_path(Path(path))
    if items.kind == "none" and not item_file.exists():
        return (
            f"no per-item rows beside {path} (file missing: {item_file.name}): {_NO_FIGURES}; rerun it with "
            "overwrite: always to compute them"
        )
    return ""


def _encoder_of(path: str) -> str | None:
    """The fingerprint of the encoder whose vectors a result used (None for a pipeline or an unrecorded one)."""
    try:
        model = json.loads(Path(path).read_text(encoding="utf-8")).get("run_settings", {}).get("model", {})
    except (OSError, ValueError):
        return None
    return model.get("fingerprint") if isinstance(model, dict) else None


def _shared_encoding_cost(rows: list[SweepRow]) -> None:
    """Points that use one encoder's vectors share its encoding: each gets the encode time of the point that
    encoded them (the largest recorded), not the time the embedding cache took to serve them."""
    groups: dict[str, list[SweepRow]] = {}
    for row in rows:
        encoder = _encoder_of(row.path)
        if encoder is not None and row.costs.get("encode_s") is not None:
            groups.setdefault(encoder, []).append(row)
    for members in groups.values():
        cold = max(float(r.costs["encode_s"] or 0.0) for r in members)
        for row in members:
            row.costs["encode_s"] = cold


def _against_best(rows: list[SweepRow], items: list[TaskItems], options: CompareOptions) -> None:
    """Δ = score − best score and the paired p-value of each point against the best (the first of equal bests),
    adjusted over the other points."""
    best = max(range(len(rows)), key=lambda i: (rows[i].score, -i))
    rows[best].best = True
    others = [i for i in range(len(rows)) if i != best]
    if others and _items_missing(rows[best]):
        rows[best].note = rows[best].note.replace(
            _NO_FIGURES, _NO_FIGURES + ", nor a p-value for the other points (each is tested against it)"
        )
    for i in others:
        rows[i].delta = rows[i].score - rows[best].score
        outcome = paired_test(items[best], items[i], options)
        if outcome is not None:
            rows[i].p_value, rows[i].n_paired = outcome.p_value, outcome.n
    for i, p in zip(others, adjust([rows[i].p_value for i in others], options.correction)):
        rows[i].p_adjusted = p


def _mark_pareto(rows: list[SweepRow]) -> None:
    quality = [r.score for r in rows]
    for name, lower in COSTS:
        cost = [r.costs.get(name) for r in rows]
        if sum(c is not None for c in cost) < 2:
            continue
        for r, on in zip(rows, pareto_front(quality, cost, lower)):
            if on:
                r.pareto.append(name)


def _tune(task: str, rows: list[SweepRow], items: list[TaskItems], folds: int, seed: int) -> FoldReport:
    """k-fold choice among the points on the items every point scored (per-item means only)."""
    if any(it.kind != "mean" for it in items):
        raise ConfigError(f"--tune-folds: {task}'s score is not a mean over items (per-item rows needed)")
    shared = set(items[0].keys).intersection(*(set(it.keys) for it in items[1:]))
    keys = [k for k in items[0].keys if k in shared]
    if len(keys) < folds:
        raise ConfigError(f"--tune-folds {folds}: {task} has {len(keys)} items every point scored; give fewer folds")
    lookup = [dict(zip(it.keys, it.values)) for it in items]
    matrix = np.array([[values[k] for k in keys] for values in lookup], dtype=np.float64)
    choice = kfold_choice(matrix, folds, seed)
    return FoldReport(
        task=task,
        folds=folds,
        n_items=len(keys),
        chosen=[rows[c].label for c in choice.chosen],
        train_scores=choice.train_scores,
        fold_scores=choice.fold_scores,
        held_out_score=choice.held_out_score,
        best_in_sample=float(matrix.mean(axis=1).max()),
    )
