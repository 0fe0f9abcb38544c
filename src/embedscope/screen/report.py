"""What ``embedscope screen`` prints and writes: both rankings side by side, the winner's significance line, each
confirmed model's fidelity (fast against exact) and the measured times; a CSV of the rankings."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from embedscope.results.table import markdown_table
from embedscope.results.usage import USAGE_HEADER, USAGE_KEYS, folder_usage, usage_cells

if TYPE_CHECKING:
    from embedscope.screen.rounds import HalvingResult, ProxyRound
    from embedscope.screen.run import MeanScore, ScreenReport


def _num(value: float | None, digits: int) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _with_ci(score: MeanScore | None, digits: int) -> str:
    if score is None:
        return "—"
    return f"{score.mean:.{digits}f} [{_num(score.ci_low, digits)}, {_num(score.ci_high, digits)}]"


def significance_line(report: ScreenReport) -> str:
    """Whether the exact winner is significantly better than the runner-up: per task, compare's paired test with
    its correction (Holm by default) at its alpha."""
    comparison = report.winner_vs_runner_up
    if comparison is None:
        return "one model confirmed: no runner-up to test the winner against"
    winner, runner_up = comparison.models[0], comparison.models[1]
    better = [r.task for r in comparison.rows if r.significant and r.delta < 0]  # delta = runner-up − winner
    worse = [r.task for r in comparison.rows if r.significant and r.delta > 0]
    untested = [r.task for r in comparison.rows if math.isnan(r.p_adjusted)]
    n = len(comparison.rows)
    rule = f"{comparison.options.correction}-adjusted p < {comparison.options.alpha:g}"
    if better and not worse:
        verdict = "significantly better than"
    elif worse and not better:
        verdict = "significantly worse on some tasks than"
    elif better:
        verdict = "mixed against"
    else:
        verdict = "not significantly better than"
    parts = [f"better on {len(better)} of {n} tasks" + (f" ({', '.join(better)})" if better else "")]
    parts.append(f"worse on {len(worse)}" + (f" ({', '.join(worse)})" if worse else ""))
    if untested:
        parts.append(f"not testable on {len(untested)} ({', '.join(untested)}: no per-item scores)")
    return f"exact winner {winner} is {verdict} runner-up {runner_up}: {'; '.join(parts)} ({rule})"


def model_usage(report: ScreenReport) -> dict[str, dict[str, Any] | None]:
    """Each model's API use over its fast and exact results (None for a local model)."""
    return {m.model: folder_usage([m.fast_folder, m.exact_folder]) for m in report.models}


def rankings_table(report: ScreenReport, digits: int = 4) -> str:
    """Fast rank and score, exact rank and score, the shift, and each pass's seconds, one row per model; with a
    model served by an API, each model's requests, tokens, spend and request latency over its results."""
    level = round(report.options.confidence * 100)
    exact_rank = {name: i + 1 for i, name in enumerate(report.confirmed)}
    usage = model_usage(report)
    costs = any(u is not None for u in usage.values())
    rows = []
    ranks = _rank_cells(report)
    for i, m in enumerate(report.models):
        other_path = m.fast_path is not None and m.fast_path != report.fast_path
        fast_cell = (
            _with_ci(m.fast, digits)
            + ("" if m.fast_applied else " (exact)")
            + (f" (on {m.fast_path})" if other_path else "")
        )
        rows.append(
            [
                ranks[i],
                m.model,
                fast_cell,
                str(exact_rank.get(m.model, "")),
                _with_ci(m.exact, digits) if m.exact else "not confirmed",
                _num(m.shift, digits),
                f"{m.fast_seconds:.1f}",
                f"{m.exact_seconds:.1f}" if m.exact else "",
                *(usage_cells(usage[m.model]) if costs else []),
            ]
        )
    header = [
        "fast rank" if report.halving is None else "screen rank",
        "model",
        f"fast mean [{level}% CI]",
        "exact rank",
        f"exact mean [{level}% CI]",
        "shift (exact − fast)",
        "fast s",
        "exact s",
        *(USAGE_HEADER if costs else []),
    ]
    return markdown_table(header, rows)


def _ranks(report: ScreenReport) -> list[int]:
    """Each model's rank in the report's order (1 first); a halving screen's stated place, shared by models it does
    not order (:attr:`~embedscope.screen.rounds.HalvingResult.places`)."""
    places = report.halving.places if report.halving is not None else []
    if len(places) != len(report.models):
        return list(range(1, len(report.models) + 1))
    return [p + 1 for p in places]


def _rank_cells(report: ScreenReport) -> list[str]:
    """:func:`_ranks` as cells, with ``=`` where models share a place."""
    ranks = _ranks(report)
    return [f"{r}{'=' if ranks.count(r) > 1 else ''}" for r in ranks]


_FIDELITY_COLUMNS = (
    ("embedding_cosine_mean", "cos mean"),
    ("embedding_cosine_p05", "cos p5"),
    ("embedding_cosine_min", "cos min"),
    ("top10_jaccard", "top-10 Jaccard"),
    ("top10_rbo", "top-10 RBO"),
    ("similarity_spearman", "similarity ρ"),
)


def fidelity_table(report: ScreenReport, digits: int = 4) -> str:
    """Each confirmed model's fast-vs-exact measures per task ("" when none was measured)."""
    level = round(report.options.confidence * 100)
    rows = []
    for m in report.models:
        for f in m.fidelity:
            rows.append(
                [
                    m.model,
                    f["task"],
                    _num(f["fast"], digits),
                    _num(f["exact"], digits),
                    _num(f["shift"], digits) + ("*" if f.get("significant") else ""),
                    f"[{_num(f['ci_low'], digits)}, {_num(f['ci_high'], digits)}]",
                    *[_num(f.get(key), digits) if key in f else "" for key, _ in _FIDELITY_COLUMNS],
                ]
            )
    if not rows:
        return ""
    header = ["model", "task", "fast", "exact", "shift (exact − fast)", f"{level}% CI"]
    return markdown_table(header + [label for _, label in _FIDELITY_COLUMNS], rows)


def halving_lines(halving: HalvingResult, digits: int = 4, confidence: float = 0.95) -> list[str]:
    """Each proxy round's decisions, the stated odds and, with ``--audit``, whether the claim held."""
    lines = []
    for i, r in enumerate(halving.rounds, 1):
        leader = next(iter(r.scores))
        parts = [f"round {i} on proxies of size {r.size}: {len(r.scores)} candidates, leader {leader}"]
        parts.append(f"dropped {', '.join(r.dropped)}" if r.dropped else "none dropped")
        kept_cheap = [k for k in r.cheap if k not in r.spared]
        if kept_cheap:
            parts.append(
                "kept and confirmed whatever their proxy scores, their exact runs next to free: "
                + ", ".join(kept_cheap)
            )
        if r.spared:
            parts.append(
                f"below the leader, ranked with the dropped but confirmed, their exact runs next to free: "
                f"{', '.join(r.spared)}"
            )
        parts += [
            f"{k} goes on for its tie with {', '.join(v)} (the cheapest exact: {_estimate(r, k)})"
            for k, v in r.tied.items()
        ]
        if r.undecided:
            parts.append(
                f"neither below {leader} nor tied with it within the margin: "
                + ", ".join(f"{k} (equivalent only within {m:.{digits}f})" for k, m in r.undecided.items())
            )
        parts.append(f"P(the best is still in) = {r.p_best_kept:.3f}")
        lines.append("; ".join(parts))
        lines += [
            f"  {name} ({split}): {composition['plainly']}"
            for name, recipe in r.proxies.items()
            for split, composition in recipe.get("compositions", {}).items()
            if composition.get("plainly")
        ]
    if halving.unconfirmed:
        last = halving.rounds[-1]
        left = ", ".join(f"{k} ({_estimate(last, k)})" for k in halving.unconfirmed)
        lines.append(f"left unconfirmed, the confirmed already reaching the stated probability: {left}")
    lines.append(
        f"probability that the exact winner is among the confirmed (bootstrap over the proxies' items, multiplied over "
        f"the rounds): {halving.p_winner_kept:.3f}; tie margin {halving.margin:g}"
    )
    level = round(confidence * 100)
    lines.append(
        f"the screen's final ranking: {ranking_line(halving)} (≈ tied within the margin; ~ not ordered by the proxy, "
        f"the {level}% interval of their difference holding 0)"
    )
    audit = halving.audit
    if audit is not None:
        verdict = "held" if audit.held else "did NOT hold"
        lines.append(
            f"audit (every candidate exact): exact winner {audit.winner} ({audit.exact[audit.winner]:.{digits}f}); the "
            f"screen's claim {verdict}; Kendall's τ-b between the screen's final ranking and the all-exact one "
            f"{audit.kendall_tau:.3f} as stated ({audit.kendall_tau_order:.3f} with each pair it leaves unordered in "
            f"its proxy order)"
        )
    if audit is not None and audit.full_task_ranking:
        full, shown = (
            "undefined (one place for all)" if math.isnan(t) else f"{t:.3f}"
            for t in (audit.kendall_tau_full_task, audit.kendall_tau_shown)
        )
        lines.append(
            f"the full tasks themselves show {places_line(audit.full_task_ranking, audit.full_task_places)} (~ the "
            f"{level}% interval of their exact difference holding 0): τ-b {full} against the exact order, what a "
            f"ranking stating only what its evidence shows gets with every candidate exact; τ-b between the places "
            f"the screen states and these: {shown}"
        )
    if audit is not None and audit.seeds:
        from embedscope.screen.rounds import seeds_summary

        over = seeds_summary(audit, halving.p_winner_kept)
        held, n = round(over["held"] * over["seeds"]), int(over["seeds"])
        lines.append(
            f"replayed at {len(audit.seeds)} more seeds (each on its own proxies, against the same exact runs): the "
            f"claim held at {held} of {n} seeds, where they stated {over['p_winner_kept']:.3f} on average; τ-b as "
            f"stated {over['tau_mean']:.3f} on average ({over['tau_min']:.3f} to {over['tau_max']:.3f})"
        )
    return lines


def ranking_line(halving: HalvingResult) -> str:
    """The final ranking by place: ``1. a, 2. b ≈ c ~ d, 5. e`` (models sharing a place joined: ``≈`` declared
    tied with the one before, ``~`` not ordered by the evidence).

    >>> from embedscope.screen.rounds import HalvingResult
    >>> h = HalvingResult([], [], ["a", "b", "c", "d", "e"], 1.0, 0.005, places=[0, 1, 1, 1, 4])
    >>> ranking_line(h)
    '1. a, 2. b ~ c ~ d, 5. e'
    """
    tied = {m for r in halving.rounds for v in r.tied.values() for m in v}
    return places_line(halving.ranking, halving.places or list(range(len(halving.ranking))), tied)


def places_line(ranking: Sequence[str], places: Sequence[int], tied: Collection[str] = ()) -> str:
    """``ranking`` by ``places``: models sharing a place joined by ``≈`` (in ``tied``: declared tied with the one
    before) or ``~`` (not ordered by the evidence).

    >>> places_line(["a", "b", "c"], [0, 1, 1])
    '1. a, 2. b ~ c'
    """
    parts: list[str] = []
    for i, (model, place) in enumerate(zip(ranking, places)):
        if i and place == places[i - 1]:
            parts[-1] += f" {'≈' if model in tied else '~'} {model}"
        else:
            parts.append(f"{place + 1}. {model}")
    return ", ".join(parts)


def _estimate(r: ProxyRound, key: str) -> str:
    seconds, tokens, spend = r.exact_estimate.get(key), r.exact_tokens.get(key), r.exact_spend.get(key)
    if seconds is None:
        return "exact cost unknown"
    paid = "" if tokens is None else f" and {tokens:,.0f} tokens" + ("" if spend is None else f" (${spend:.4f})")
    return f"about {seconds:.0f} s{paid} exact"


def exact_table(report: ScreenReport, digits: int = 4) -> str:
    """A screen that ran every candidate exactly: rank, model, exact mean with its CI and seconds (and API use)."""
    level = round(report.options.confidence * 100)
    usage = model_usage(report)
    costs = any(u is not None for u in usage.values())
    rows = [
        [
            str(i),
            m.model,
            _with_ci(m.exact, digits),
            f"{m.exact_seconds:.1f}",
            *(usage_cells(usage[m.model]) if costs else []),
        ]
        for i, m in enumerate(report.models, 1)
    ]
    header = ["exact rank", "model", f"exact mean [{level}% CI]", "exact s", *(USAGE_HEADER if costs else [])]
    return markdown_table(header, rows)


def screen_text(report: ScreenReport, digits: int = 4, plan: bool = True) -> str:
    """The whole report as printed (``plan`` False: without the plan's lines, for a caller that printed them
    first)."""
    head = report.plan.lines() if report.plan is not None and plan else []
    if report.plan is not None and not report.models:  # a dry run
        return "\n".join([*report.plan.lines(), "dry run: nothing was screened or written"])
    if report.fast_path == "exact":
        lines = [
            *head,
            f"screen: {len(report.models)} models run exactly once each, mean main score over {len(report.tasks)} "
            f"tasks ({', '.join(report.tasks)})",
            "",
            exact_table(report, digits),
            "",
            significance_line(report),
            "",
            f"wall time (measured): {report.exact_seconds:.1f} s",
        ]
        return "\n".join(lines + ([report.outcome_line() or ""] if report.plan else []))
    tau = "n/a (one model confirmed)" if math.isnan(report.kendall_tau) else f"{report.kendall_tau:.3f}"
    lines = [
        *head,
        f"screen: {len(report.models)} models on fast path {report.fast_path}, mean main score over "
        f"{len(report.tasks)} tasks ({', '.join(report.tasks)}); {len(report.confirmed)} confirmed exact",
        "",
        rankings_table(report, digits),
        "",
    ]
    lines += [f"note: {m.model}: {m.note}" for m in report.models if m.note]
    lines += [
        f"note: {m.model} on {f['task']}: per-text cosines {f['embedding_agreement']}"
        for m in report.models
        for f in m.fidelity
        if isinstance(f.get("embedding_agreement"), str)
    ]
    if report.halving is not None:
        lines += halving_lines(report.halving, digits, report.options.confidence) + [""]
    lines.append(f"Kendall's τ between the fast and exact rankings of the confirmed models: {tau}")
    lines.append(significance_line(report))
    fidelity = fidelity_table(report, digits)
    if fidelity:
        lines += ["", "fidelity, fast against exact (* significant shift):", "", fidelity]
    total = report.fast_seconds + report.exact_seconds + report.fidelity_seconds
    lines += [
        "",
        f"wall time (measured): fast pass {report.fast_seconds:.1f} s, exact pass {report.exact_seconds:.1f} s, "
        f"fidelity {report.fidelity_seconds:.1f} s; {total:.1f} s in all",
    ]
    outcome = report.outcome_line()
    return "\n".join(lines + ([outcome] if outcome else []))


def screen_csv(report: ScreenReport) -> str:
    """One row per model: both scores with their intervals, ranks, shift and seconds (and, with a model served by
    an API, each model's API use)."""
    usage = model_usage(report)
    costs = any(u is not None for u in usage.values())
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "model",
            "name",
            "fast_path_applied",
            "fast_rank" if report.halving is None else "screen_rank",
            "fast_mean",
            "fast_ci_low",
            "fast_ci_high",
            "confirmed",
            "exact_rank",
            "exact_mean",
            "exact_ci_low",
            "exact_ci_high",
            "shift",
            "fast_seconds",
            "exact_seconds",
            *([f"api_{k}" for k in USAGE_KEYS] if costs else []),
        ]
    )
    exact_rank = {name: i + 1 for i, name in enumerate(report.confirmed)}

    def cells(score: Any) -> list[Any]:
        return ["", "", ""] if score is None else [score.mean, score.ci_low, score.ci_high]

    for rank, m in zip(_ranks(report), report.models):
        writer.writerow(
            [
                m.model,
                m.name,
                m.fast_applied,
                rank,
                *cells(m.fast),
                m.model in exact_rank,
                exact_rank.get(m.model, ""),
                *cells(m.exact),
                "" if math.isnan(m.shift) else m.shift,
                m.fast_seconds,
                m.exact_seconds if m.exact else "",
                *([_csv_value((usage[m.model] or {}).get(k)) for k in USAGE_KEYS] if costs else []),
            ]
        )
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    return "" if value is None else value
