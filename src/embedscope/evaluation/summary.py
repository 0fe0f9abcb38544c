"""What a run prints: one row per task and split, and one per pipeline stage (markdown tables), with each reranking
stage's failures: recall vs ranking."""

from __future__ import annotations

from typing import TYPE_CHECKING

from embedscope.results.table import fmt, markdown_table
from embedscope.results.usage import USAGE_HEADER, recorded_usage, total_usage, usage_cells

if TYPE_CHECKING:  # pragma: no cover
    from embedscope.evaluation.runner import EvaluationReport

SUMMARY_METRICS = ("ndcg_at_10", "recall_at_10", "mrr_at_10", "map_at_100", "recall_at_100")


def summary_table(report: EvaluationReport) -> str:
    """Main score and common retrieval metrics per task and split, with timing and cache use; for a model served by
    an API, each task's requests, tokens, requests the cache saved, spend and request latency (on its first row)."""
    usages = [recorded_usage(o.result.extra) for o in report.outcomes]
    with_usage = any(u is not None for u in usages)
    header = ["task", "type", "split", "main score", *SUMMARY_METRICS, "seconds", "source"]
    header += USAGE_HEADER if with_usage else []
    rows = []
    for outcome, usage in zip(report.outcomes, usages):
        first = True
        for split, entries in outcome.result.scores.items():
            for entry in entries:
                main = f"{entry.get('main_score', float('nan')):.5f} ({outcome.task.main_score})"
                rows.append(
                    [
                        outcome.task.name,
                        outcome.task.type,
                        split if entry.get("hf_subset", "default") == "default" else f"{split}/{entry['hf_subset']}",
                        main,
                        *[fmt(entry.get(m)) for m in SUMMARY_METRICS],
                        "" if outcome.result.evaluation_time is None else f"{outcome.result.evaluation_time:.1f}",
                        "stored result" if outcome.reused else "evaluated",
                        *(usage_cells(usage if first else None) if with_usage else []),
                    ]
                )
                first = False
    lines = [f"model: {report.model_name} (revision {report.revision})", "", markdown_table(header, rows)]
    lines += sparse_lines(report)
    if report.cache is not None:
        lines.append("")
        lines.append(
            f"embedding cache: {report.cache.hits} texts served, {report.cache.encoded} encoded; "
            f"total {report.seconds:.1f} s"
        )
    total = total_usage([u for u, o in zip(usages, report.outcomes) if not o.reused])
    if total is not None:
        cost = "" if total["cost"] is None else f", cost {total['cost']:.4f}"
        lines += [] if report.cache is not None else [""]
        lines.append(
            f"API: {total['requests']} requests, {total['tokens']} tokens{cost}; the cache saved "
            f"{total['avoided_requests']} requests ({total['avoided_tokens']} tokens)"
        )
    return "\n".join(lines + group_lines(report))


def group_lines(report: EvaluationReport) -> list[str]:
    """The query groups (``group_by``) of every task and split: the group, its query count, main score and 95%
    bootstrap CI (a group of fewer than two queries has none, and says so); [] without groups."""
    rows = []
    for outcome in report.outcomes:
        for split, entries in outcome.result.scores.items():
            for entry in entries:
                for name, groups in (entry.get("groups") or {}).items():
                    for value, g in groups.items():
                        ci = (
                            f"[{g['ci_low']:.5f}, {g['ci_high']:.5f}]"
                            if g.get("ci_low") is not None
                            else "none: fewer than 2 queries"
                        )
                        rows.append(
                            [outcome.task.name, split, f"{name}={value}", str(g["n"]), fmt(g["main_score"]), ci]
                        )
    if not rows:
        return []
    return ["", "query groups:", "", markdown_table(["task", "split", "group", "n", "main score", "95% CI"], rows)]


def sparse_lines(report: EvaluationReport) -> list[str]:
    """A learned-sparse model's costs per task and split (:data:`embedscope.retrieval.sparse.COST_KEYS`), one line
    each: active terms per query and per document (mean, p95), FLOPS per query-document pair, the index's size."""
    lines = []
    for outcome in report.outcomes:
        for split, entries in outcome.result.scores.items():
            for entry in entries:
                if "sparse_flops" not in entry:
                    continue
                lines.append(
                    f"sparse vectors ({outcome.task.name} {split}): "
                    f"{entry['sparse_active_dims_query_mean']:.1f} active terms per query "
                    f"(p95 {entry['sparse_active_dims_query_p95']:.0f}), "
                    f"{entry['sparse_active_dims_document_mean']:.1f} per document "
                    f"(p95 {entry['sparse_active_dims_document_p95']:.0f}); "
                    f"FLOPS {entry['sparse_flops']:.2f} per query-document pair; "
                    f"index {entry['sparse_index_bytes'] / 2**20:.1f} MiB"
                )
    return ["", *lines] if lines else []


def stage_table(report: EvaluationReport) -> str:
    """One row per pipeline stage and split: main score, seconds, peak RSS and its growth (MB)."""
    rows = []
    for outcome in report.outcomes:
        for split, stages in (outcome.result.extra or {}).get("pipeline_stages", {}).items():
            for st in stages:
                rows.append(
                    [
                        outcome.task.name,
                        split,
                        st["stage"],
                        st["kind"],
                        st["name"],
                        fmt(st.get("main_score")),
                        f"{st.get('seconds', 0.0):.2f}",
                        f"{st.get('peak_rss_mb', 0.0):.0f}",
                        f"{st.get('peak_delta_mb', 0.0):.0f}",
                    ]
                )
    if not rows:
        return ""
    header = ["task", "split", "stage", "kind", "component", "main score", "seconds", "peak RSS MB", "peak Δ MB"]
    failures = failure_lines(report)
    return "\n" + markdown_table(header, rows) + ("\n\n" + "\n".join(failures) if failures else "")


def failure_lines(report: EvaluationReport) -> list[str]:
    """One line per stage that ranks given candidates (a reranker, a fusion) and split: how many queries had no
    relevant candidate (recall) or ranked one too low (ranking), and the loss ``1 − mean nDCG@10`` split into recall,
    ranking and partial recall (:mod:`embedscope.metrics.failures`)."""
    lines = []
    for outcome in report.outcomes:
        for split, stages in (outcome.result.extra or {}).get("pipeline_stages", {}).items():
            for st in stages:
                f = st.get("failures")
                if not f:
                    continue
                lines.append(
                    f"failures ({outcome.task.name} {split}, {st['stage']} {st['name']}): {f['candidate_miss']} of "
                    f"{f['queries']} queries have no relevant document among the candidates (recall), {f['ranking']} "
                    f"rank one too low (ranking); loss {f['loss']:.3f} = {f['loss_recall']:.3f} recall + "
                    f"{f['loss_ranking']:.3f} ranking + {f['loss_partial']:.3f} partial recall"
                )
    return lines
