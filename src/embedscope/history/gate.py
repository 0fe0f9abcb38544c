"""``embedscope gate``: does the candidate drop below the baseline on any task, by more than a tolerance, with
significance?

Per task the two sides share, the paired test ``compare`` uses on the per-item scores (``CompareOptions``: the paired
t-test by default, :data:`GATE_OPTIONS`; any of compare's tests with its numbers), p-values Holm-adjusted across the
tasks. STS and pair classification are always tested by a bootstrap over pairs, as in ``compare``. A task **fails** when its
``Δ = candidate − baseline < −tolerance`` and its adjusted p-value is below ``alpha``; a drop that is not both is a
**warning**. The two sides must be like-for-like: the same *evaluation* per task (data fingerprint, task revision,
splits, protocol parameters, ``limits``, ``top_k``; :func:`~embedscope.history.folders.evaluation_record`) and every
baseline task present in the candidate; the *system under test* (model, options, pipeline, chunking, prompts,
backend) may differ, and the summary lists what did.

When both sides grouped a task's queries by the same field (run option ``group_by``), each group is tested too, as
``compare`` tests it (:func:`~embedscope.compare.core.compare_groups`: the same paired test on the group's paired
items, p-values adjusted across the task's groups). A group whose ``Δ < −tolerance`` with an adjusted p-value below
``alpha`` makes its task a **warning** that names the group, never a failure: the task's own verdict decides the
exit status.

Exit status: 0 (no task fails), 1 (one fails), 3 (not like-for-like: the line names what differs); 2 stays a usage
error (a folder of two models, an unknown tag, a side without per-item rows).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Any

from embedscope.compare.core import (
    CompareOptions,
    GroupComparison,
    check_options,
    compare_groups,
    json_safe,
    paired_test,
)
from embedscope.compare.stats import adjust
from embedscope.errors import ConfigError
from embedscope.history.sides import Side, load_side, side_kind
from embedscope.results.settings import settings_difference
from embedscope.results.table import markdown_table

PASSED, FAILED, NOT_COMPARABLE = 0, 1, 3
DEFAULT_TOLERANCE = 0.01
TEST_NAMES = {"t-test": "paired t-test", "permutation": "paired permutation test", "bootstrap": "paired bootstrap"}
SHOWN = 12  # system differences the table lists (the JSON and markdown hold all)
GATE_OPTIONS = CompareOptions(test="t-test")
"""The gate's default test: the paired t-test, which a CI can afford on many large tasks (50 tasks × 10,000 queries in
about 3 s, where 10,000 permutation and bootstrap rounds take about 110 s: ``bench/bench_store.py``); any of
``compare``'s tests can be asked for, with the same numbers as ``compare``."""
VERDICTS = ("pass", "improved", "warn", "fail", "not comparable")


@dataclass
class TaskGate:
    """One task's verdict: ``delta = candidate − baseline`` with the paired test's CI and p-values."""

    task: str
    metric: str
    baseline: float
    candidate: float
    delta: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    p_adjusted: float = math.nan
    test: str = ""
    n: int = 0
    verdict: str = "pass"
    reason: str = ""
    group_field: str = ""  # the queries' metadata field both sides are grouped by (run option group_by)
    groups: list[GroupComparison] = field(default_factory=list)  # per query group, p-values adjusted across groups
    dropped_groups: list[str] = field(default_factory=list)  # groups that drop beyond the tolerance, significantly


@dataclass
class GateResult:
    """A gate's verdict: ``exit_status`` (0, 1 or 3), ``table()`` as ``embedscope gate`` prints it, ``markdown()``
    for a pull-request comment, ``junit()`` for CI, ``to_dict()`` for JSON.

    Examples:
        >>> row = TaskGate("T", "ndcg_at_10", 0.80, 0.70, -0.10, p_adjusted=0.001, verdict="fail")
        >>> result = GateResult("tag:baseline", "results/new", [row], 0.01, GATE_OPTIONS)
        >>> result.exit_status, result.verdict, result.headline()[:5]
        (1, 'fail', 'FAIL:')
    """

    baseline: str
    candidate: str
    rows: list[TaskGate]
    tolerance: float
    options: CompareOptions
    mismatches: list[str] = field(default_factory=list)
    system_differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        if self.mismatches:
            return NOT_COMPARABLE
        return FAILED if any(r.verdict == "fail" for r in self.rows) else PASSED

    @property
    def verdict(self) -> str:
        return {PASSED: "pass", FAILED: "fail", NOT_COMPARABLE: "not comparable"}[self.exit_status]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "baseline": self.baseline,
                "candidate": self.candidate,
                "verdict": self.verdict,
                "exit_status": self.exit_status,
                "tolerance": self.tolerance,
                "options": asdict(self.options),
                "tasks": [asdict(r) for r in self.rows],
                "mismatches": self.mismatches,
                "system_differences": self.system_differences,
                "notes": self.notes,
            }
        )

    def headline(self) -> str:
        fails = [r.task for r in self.rows if r.verdict == "fail"]
        if self.mismatches:
            return f"NOT COMPARABLE: {self.mismatches[0]}" + (
                f" (and {len(self.mismatches) - 1} more)" if len(self.mismatches) > 1 else ""
            )
        if fails:
            return (
                f"FAIL: {len(fails)} of {len(self.rows)} tasks drop by more than {self.tolerance:g}, significantly: "
                + ", ".join(fails)
            )
        dips = [r.task for r in self.rows if r.verdict == "warn" and r.delta < 0]
        tail = f"; {len(dips)} dip(s) not significant or within the tolerance: {', '.join(dips)}" if dips else ""
        groups = [f"{r.task} ({', '.join(self._labels(r))})" for r in self.rows if r.dropped_groups]
        tail += f"; query groups that drop significantly: {'; '.join(groups)}" if groups else ""
        return f"PASS: no task drops by more than {self.tolerance:g} with significance ({len(self.rows)} tasks){tail}"

    @staticmethod
    def _labels(r: TaskGate) -> list[str]:
        return [f"{r.group_field}={g}" for g in r.dropped_groups]

    def _cells(self, r: TaskGate, digits: int) -> list[str]:
        def num(x: float) -> str:
            return "–" if math.isnan(x) else f"{x:+.{digits}f}" if x is r.delta else f"{x:.{digits}f}"

        ci = "–" if math.isnan(r.ci_low) else f"[{r.ci_low:+.{digits}f}, {r.ci_high:+.{digits}f}]"
        p = "–" if math.isnan(r.p_adjusted) else f"{r.p_adjusted:.3g}"
        return [r.task, r.metric, num(r.baseline), num(r.candidate), num(r.delta), ci, p, r.verdict]

    def _table(self, digits: int) -> str:
        header = [
            "task",
            "metric",
            "baseline",
            "candidate",
            "Δ",
            f"{self.options.confidence:.0%} CI",
            "p (adj.)",
            "verdict",
        ]
        return markdown_table(header, [self._cells(r, digits) for r in self.rows])

    def _group_table(self, digits: int) -> str:
        """Each query group of the tasks both sides grouped: its scores, Δ, CI and p-value adjusted across the
        task's groups; "drop" marks a group that drops beyond the tolerance, significantly ("" without groups)."""
        rows = []
        for r in self.rows:
            for g in r.groups:
                ci = "–" if math.isnan(g.ci_low) else f"[{g.ci_low:+.{digits}f}, {g.ci_high:+.{digits}f}]"
                rows.append(
                    [
                        r.task,
                        f"{r.group_field}={g.group}",
                        str(g.n),
                        f"{g.score_a:.{digits}f}",
                        f"{g.score_b:.{digits}f}",
                        f"{g.delta:+.{digits}f}",
                        ci,
                        "–" if math.isnan(g.p_adjusted) else f"{g.p_adjusted:.3g}",
                        "drop" if g.group in r.dropped_groups else "",
                    ]
                )
        if not rows:
            return ""
        header = [
            "task",
            "group",
            "n",
            "baseline",
            "candidate",
            "Δ",
            f"{self.options.confidence:.0%} CI",
            "p (adj.)",
            "",
        ]
        return markdown_table(header, rows)

    def _group_legend(self) -> str:
        return (
            f"query groups: p adjusted by {self.options.correction} across each task's groups; a group with "
            f"Δ < −{self.tolerance:g} and p < {self.options.alpha:g} warns"
        )

    def table(self, digits: int = 4) -> str:
        """What ``embedscope gate`` prints: the verdict, the per-task table, what differs and why."""
        lines = [self.headline(), "", f"baseline: {self.baseline}", f"candidate: {self.candidate}", ""]
        if self.rows:
            lines += [self._table(digits), ""]
        groups = self._group_table(digits)
        if groups:
            lines += [groups, ""]
        lines += [f"not comparable: {m}" for m in self.mismatches]
        if self.system_differences:
            lines.append("the system under test differs:")
            lines += [f"  {d}" for d in self.system_differences[:SHOWN]]
            lines += (
                [f"  … and {len(self.system_differences) - SHOWN} more"] if len(self.system_differences) > SHOWN else []
            )
        lines += [f"warning: {r.task}: {r.reason}" for r in self.rows if r.verdict == "warn"]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(
            f"test: {TEST_NAMES.get(self.options.test, self.options.test)} on per-item scores, p adjusted by "
            f"{self.options.correction} across tasks; "
            f"fail = Δ < −{self.tolerance:g} and p < {self.options.alpha:g}"
        )
        if groups:
            lines.append(self._group_legend())
        return "\n".join(lines).rstrip() + "\n"

    def markdown(self, digits: int = 4) -> str:
        """A summary fit for a pull-request comment."""
        icon = {PASSED: "✅", FAILED: "❌", NOT_COMPARABLE: "⚠️"}[self.exit_status]
        lines = [f"### {icon} embedscope gate: {self.headline()}", ""]
        lines += [f"Baseline `{self.baseline}` → candidate `{self.candidate}`.", ""]
        if self.rows:
            lines += [self._table(digits), ""]
        groups = self._group_table(digits)
        if groups:
            lines += ["Query groups:", "", groups, ""]
        lines += [f"- **not comparable**: {m}" for m in self.mismatches]
        lines += [f"- warning: {r.task}: {r.reason}" for r in self.rows if r.verdict == "warn"]
        if self.system_differences:
            lines += ["", "<details><summary>What differs in the system under test</summary>", ""]
            lines += [f"- `{d}`" for d in self.system_differences] + ["", "</details>"]
        lines += [
            "",
            f"<sub>{TEST_NAMES.get(self.options.test, self.options.test)} on per-item scores, "
            f"{self.options.correction}-adjusted across tasks; a task fails when Δ < −{self.tolerance:g} and "
            f"p < {self.options.alpha:g}" + (f"; {self._group_legend()}" if groups else "") + ".</sub>",
        ]
        return "\n".join(lines) + "\n"

    def junit(self) -> str:
        """A JUnit XML report: one test case per task (a failure per failing task, an error per one not
        comparable)."""
        suite = ET.Element(
            "testsuite",
            name="embedscope gate",
            tests=str(len(self.rows) + (1 if self.mismatches and not self.rows else 0)),
            failures=str(sum(r.verdict == "fail" for r in self.rows)),
            errors=str(sum(r.verdict == "not comparable" for r in self.rows) or (1 if self.mismatches else 0)),
        )
        for r in self.rows:
            case = ET.SubElement(suite, "testcase", classname="embedscope.gate", name=r.task)
            detail = f"{r.metric}: {r.baseline:.6f} → {r.candidate:.6f} (Δ {r.delta:+.6f}, p adj. {r.p_adjusted:.4g})"
            if r.verdict == "fail":
                ET.SubElement(case, "failure", message=f"dropped: {detail}").text = r.reason
            elif r.verdict == "not comparable":
                ET.SubElement(case, "error", message="not comparable").text = r.reason
            else:
                ET.SubElement(case, "system-out").text = f"{r.verdict}: {detail}" + (
                    f"; {r.reason}" if r.reason else ""
                )
        if self.mismatches and not self.rows:
            case = ET.SubElement(suite, "testcase", classname="embedscope.gate", name="like-for-like")
            ET.SubElement(case, "error", message="not comparable").text = "\n".join(self.mismatches)
        return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def check_tolerance(tolerance: float) -> float:
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance):
        raise ConfigError(f"tolerance: a finite number (a drop in the main score), not {tolerance!r}")
    if tolerance < 0:
        raise ConfigError(f"tolerance: a drop of at least 0, not {tolerance}")
    return float(tolerance)


def gate(
    baseline: str,
    candidate: str,
    *,
    store: Any | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    options: CompareOptions = GATE_OPTIONS,
) -> GateResult:
    """Gate ``candidate`` against ``baseline`` (each a result folder, ``tag:NAME`` or ``run:ID`` of ``store``: a
    :class:`~embedscope.history.store.Store` or its URL, by default ``$EMBEDSCOPE_STORE``); see the module docstring.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> out = tempfile.mkdtemp()
        >>> url = f"sqlite:///{out}/history.db"
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"], name="kw/base"), [tiny_retrieval_task()],
        ...                         output_folder=f"{out}/base", store=url, tag="baseline", cache=False, show_progress=False)
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"], name="kw/new"), [tiny_retrieval_task()],
        ...                         output_folder=f"{out}/new", cache=False, show_progress=False)
        >>> result = embedscope.gate("tag:baseline", f"{out}/new", store=url, options=embedscope.CompareOptions(rounds=200))
        >>> result.exit_status, result.rows[0].verdict, result.to_dict()["verdict"]
        (0, 'pass', 'pass')
    """
    check_options(options)
    tolerance = check_tolerance(tolerance)
    if store is None and any(side_kind(s) == "store" for s in (baseline, candidate)):
        from embedscope.history.kinds import store_url_from

        store = store_url_from(None)
    if isinstance(store, str):
        from embedscope.history.store import Store

        store = Store(store, create=False)
    base, cand = load_side(baseline, store), load_side(candidate, store)
    return gate_sides(base, cand, tolerance, options)


def gate_sides(base: Side, cand: Side, tolerance: float, options: CompareOptions) -> GateResult:
    """The gate of two loaded sides (see :func:`gate`)."""
    result = GateResult(base.label, cand.label, [], tolerance, options, notes=[*base.notes, *cand.notes])
    missing = [t for t in base.tasks if t not in cand.tasks]
    if missing:
        result.mismatches.append(f"the candidate has no result for {', '.join(missing)} (the baseline has)")
    extra = [t for t in cand.tasks if t not in base.tasks]
    if extra:
        result.notes.append(f"not gated (the baseline has no result): {', '.join(extra)}")
    shared = [t for t in base.tasks if t in cand.tasks]
    for task in shared:
        a, b = base.tasks[task], cand.tasks[task]
        for side, items in ((base, a), (cand, b)):
            if items.kind == "none":
                raise ConfigError(
                    f"{side.label}: {task} has no per-item rows ({items.path}); a gate tests per-item scores: "
                    "re-run it with embedscope (which writes <Task>.per_item.jsonl.gz)"
                )
        row = TaskGate(task, a.metric, a.score, b.score, b.score - a.score)
        differs = evaluation_difference(base.evaluations[task], cand.evaluations[task])
        if differs:
            row.verdict, row.reason = "not comparable", differs
            result.mismatches.append(f"{task}: the evaluation differs ({differs})")
        else:
            outcome = paired_test(a, b, options)
            if outcome is not None:
                row.ci_low, row.ci_high, row.p_value = outcome.ci_low, outcome.ci_high, outcome.p_value
                row.test, row.n = outcome.test, outcome.n
            row.groups = compare_groups(a, b, options)
            row.group_field = (a.group_field or "") if row.groups else ""
        result.rows.append(row)
    tested = [r for r in result.rows if r.verdict != "not comparable"]
    for row, p in zip(tested, adjust([r.p_value for r in tested], options.correction)):
        row.p_adjusted = p
        row.verdict, row.reason = verdict(row, tolerance, options.alpha)
        row.dropped_groups, why = group_drops(row, tolerance, options.alpha)
        if why:
            row.verdict = row.verdict if row.verdict == "fail" else "warn"
            row.reason = "; ".join(part for part in (row.reason, why) if part)
    result.system_differences = system_differences(base.system, cand.system)
    return result


def verdict(row: TaskGate, tolerance: float, alpha: float) -> tuple[str, str]:
    """``fail`` (Δ < −tolerance and adjusted p < alpha), ``warn`` (any other drop), ``improved`` (a significant
    gain), else ``pass``; and why.

    >>> verdict(TaskGate("T", "ndcg_at_10", 0.8, 0.7, -0.1, p_adjusted=0.001), 0.01, 0.05)[0]
    'fail'
    >>> verdict(TaskGate("T", "ndcg_at_10", 0.8, 0.7, -0.1, p_adjusted=0.2), 0.01, 0.05)
    ('warn', 'dropped by 0.1000, not significant (p adj. 0.2)')
    """
    significant = not math.isnan(row.p_adjusted) and row.p_adjusted < alpha
    if row.delta < 0:
        if row.delta < -tolerance and significant:
            return "fail", f"dropped by {-row.delta:.4f} (> {tolerance:g}), p adj. {row.p_adjusted:.3g} < {alpha:g}"
        if not significant:
            return "warn", f"dropped by {-row.delta:.4f}, not significant (p adj. {row.p_adjusted:.3g})"
        return "warn", f"dropped by {-row.delta:.4f}, significantly, but within the tolerance {tolerance:g}"
    if row.delta > 0 and significant:
        return "improved", ""
    return "pass", ""


def group_drops(row: TaskGate, tolerance: float, alpha: float) -> tuple[list[str], str]:
    """The query groups of ``row`` that drop by more than ``tolerance`` with an adjusted p-value (across the task's
    groups) below ``alpha``, and a reason naming them ("" when none does).

    >>> g = GroupComparison("de", 40, 0.8, 0.6, -0.2, p_adjusted=0.004)
    >>> group_drops(TaskGate("T", "ndcg_at_10", 0.8, 0.79, -0.01, group_field="lang", groups=[g]), 0.01, 0.05)
    (['de'], 'query group lang=de dropped by 0.2000 (> 0.01), p adj. 0.004 < 0.05')
    """
    dropped = [g for g in row.groups if g.delta < -tolerance and not math.isnan(g.p_adjusted) and g.p_adjusted < alpha]
    if not dropped:
        return [], ""
    parts = [
        f"{row.group_field}={g.group} dropped by {-g.delta:.4f} (> {tolerance:g}), p adj. {g.p_adjusted:.3g} < {alpha:g}"
        for g in dropped
    ]
    noun = "query group" if len(parts) == 1 else "query groups"
    return [g.group for g in dropped], f"{noun} {'; '.join(parts)}"


def evaluation_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """What differs between two evaluation records ("" when like-for-like); unrecorded settings are a difference,
    since they cannot be checked."""
    unrecorded = [n for n, e in (("baseline", a), ("candidate", b)) if not e.get("recorded")]
    if unrecorded:
        return f"the {' and '.join(unrecorded)} recorded no settings or data fingerprint, so nothing can be checked"
    return settings_difference(
        {k: v for k, v in a.items() if k != "recorded"}, {k: v for k, v in b.items() if k != "recorded"}
    )


def system_differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """What differs in the system under test (model, options, pipeline, search settings, placement): one
    ``key: old → new`` per differing value, long values clipped.

    >>> system_differences({"model": {"fingerprint": "f" * 64}, "settings": {}}, {"model": {"fingerprint": "e" * 64},
    ...                    "settings": {"truncate_dim": 128}})
    ["model.fingerprint: 'ffffffffffff…' → 'eeeeeeeeeeee…'", 'settings.truncate_dim: None → 128']
    """
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += system_differences(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    if a == b:
        return []
    return [f"{prefix.rstrip('.')}: {_short(a)} → {_short(b)}"]


def _short(value: Any) -> str:
    """A value for a difference line: hashes cut to 12 characters, anything else to 60."""
    if isinstance(value, str) and len(value) >= 32 and all(c in "0123456789abcdef" for c in value):
        return repr(value[:12] + "…")
    from embedscope.messages import clip

    return clip(value, 60)
