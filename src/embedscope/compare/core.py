"""``embedscope compare``: per shared task, each pair of models' main-score difference, CI and p-value.

Tests (``test``): ``permutation`` (Fisher's randomisation, default), ``t-test`` (paired Student) or
``bootstrap`` (paired), on per-item values whose mean is the score (per query for rankings, per
experiment for classification and clustering). STS and pair-classification scores are statistics of
all pairs (Spearman, average precision), so they are always tested by a bootstrap over pairs. The CI
is the t interval for the t-test and the bootstrap percentile interval otherwise. p-values are then
adjusted across every comparison (``correction``: Holm by default). Items are paired by
``(split, hf_subset, id)``; only items both models scored count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.items import ModelResults, TaskItems, load_model_results, pair_statistic, paired_items
from embedscope.compare.stats import (
    PairedOutcome,
    adjust,
    bootstrap_test,
    paired_bootstrap,
    paired_t_test,
    permutation_test,
)
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.results.settings import settings_difference
from embedscope.results.usage import file_usage, total_usage

TESTS = ("permutation", "t-test", "bootstrap")


@dataclass(frozen=True)
class CompareOptions:
    """How comparisons are tested.

    Examples:
        >>> from embedscope import CompareOptions
        >>> options = CompareOptions(test="t-test", rounds=2000)
        >>> options.test, options.correction, options.alpha
        ('t-test', 'holm', 0.05)
    """

    test: str = "permutation"
    rounds: int = 10_000
    seed: int = 42
    correction: str = "holm"
    alpha: float = 0.05
    confidence: float = 0.95
    allow_mismatch: bool = False  # compare results computed with other settings or data (the difference is shown)


@dataclass
class TaskComparison:
    """Model ``b`` against model ``a`` on one task: ``delta = score_b − score_a``."""

    task: str
    task_type: str
    metric: str
    model_a: str
    model_b: str
    score_a: float
    score_b: float
    delta: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    p_adjusted: float = math.nan
    test: str = ""
    n: int = 0
    significant: bool = False
    only_a: int = 0  # items only model a scored (not tested)
    only_b: int = 0
    settings_difference: str = ""  # run/task settings or data that differ (with allow_mismatch)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    group_field: str = ""  # the queries' metadata field both results are grouped by (run option group_by)
    groups: list[GroupComparison] = field(default_factory=list)  # per query group, p-values adjusted across groups


@dataclass
class Comparison:
    """Every pairwise comparison of the models on their shared tasks: ``table()`` is what ``embedscope compare``
    prints, ``to_dict()`` its ``--json``.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> out = tempfile.mkdtemp()
        >>> for words in (["cat", "dog", "fish"], ["cat", "dog"]):
        ...     _ = embedscope.evaluate(KeywordEncoder(words, name="kw/" + "-".join(words)), [tiny_retrieval_task()],
        ...                             output_folder=f"{out}/{len(words)}", cache=False, show_progress=False)
        >>> comparison = embedscope.compare([f"{out}/3", f"{out}/2"], options=embedscope.CompareOptions(rounds=200))
        >>> row = comparison.rows[0]
        >>> row.task, row.model_a, row.model_b, row.delta < 0
        ('TinyRetrieval', 'kw/cat-dog-fish', 'kw/cat-dog', True)
    """

    models: list[str]
    tasks: list[str]
    scores: dict[str, dict[str, float]]  # model -> task -> main score
    rows: list[TaskComparison]
    options: CompareOptions
    notes: list[str] = field(default_factory=list)  # about the comparison as a whole (which folder was read)
    usage: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """model -> its API use over the shared tasks (requests, tokens, spend, latency; None: a local model)"""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: NaN (no test possible) becomes None."""
        return json_safe(
            {
                "models": self.models,
                "tasks": self.tasks,
                "scores": self.scores,
                "options": asdict(self.options),
                "comparisons": [asdict(r) for r in self.rows],
                "api_usage": self.usage,
                **({"notes": self.notes} if self.notes else {}),
            }
        )

    def table(self, digits: int = 4) -> str:
        """What ``embedscope compare`` prints: leaderboard, legend and details, as markdown."""
        from embedscope.compare.render import comparison_text

        return comparison_text(self, digits)


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity inside it (dicts and lists) replaced by None, for strict JSON.

    >>> json_safe({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def paired_test(a: TaskItems, b: TaskItems, options: CompareOptions) -> PairedOutcome | None:
    """The paired test of ``b`` against ``a`` on one task (None when there are no shared items to test)."""
    ia, ib = paired_items(a, b)
    if a.kind != b.kind or a.kind == "none" or len(ia) < 2:
        return None
    if a.kind == "pairs":
        stat = pair_statistic(a.metric)
        if stat is None or not all(c in a.columns for c in b.columns):
            return None
        ca = {k: v[ia] for k, v in a.columns.items()}
        cb = {k: v[ib] for k, v in b.columns.items()}
        every = np.arange(len(ia))[None, :]
        observed = float(stat(cb, every)[0] - stat(ca, every)[0])
        return bootstrap_test(
            lambda idx: stat(cb, idx) - stat(ca, idx),
            observed,
            len(ia),
            options.rounds,
            options.seed,
            options.confidence,
            name="bootstrap-pairs",
        )
    va, vb = a.values[ia], b.values[ib]
    if options.test == "t-test":
        return paired_t_test(va, vb, options.confidence)
    boot = paired_bootstrap(va, vb, options.rounds, options.seed, options.confidence)
    if options.test == "bootstrap":
        return boot
    p = permutation_test(va, vb, options.rounds, options.seed)
    return PairedOutcome("permutation", boot.delta, boot.ci_low, boot.ci_high, p, boot.n)


def score_interval(items: TaskItems, options: CompareOptions = CompareOptions()) -> tuple[float, float]:
    """Bootstrap percentile interval of one model's task score: resample items (mean of per-item values,
    or the pair statistic recomputed); (nan, nan) without per-item scores."""
    if items.kind == "mean" and len(items.values) >= 2:
        values = items.values
        out = bootstrap_test(
            lambda idx: values[idx].mean(axis=1),
            float(values.mean()),
            len(values),
            options.rounds,
            options.seed,
            options.confidence,
        )
        return out.ci_low, out.ci_high
    stat = pair_statistic(items.metric) if items.kind == "pairs" else None
    n = len(items.keys)
    if stat is None or n < 2:
        return math.nan, math.nan
    columns = items.columns
    out = bootstrap_test(
        lambda idx: stat(columns, idx), items.score, n, options.rounds, options.seed, options.confidence
    )
    return out.ci_low, out.ci_high


@dataclass(frozen=True)
class GroupComparison:
    """Model ``b`` against model ``a`` on one group of one task (``delta = score_b − score_a`` on paired items)."""

    group: str
    n: int
    score_a: float
    score_b: float
    delta: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    p_adjusted: float = math.nan
    significant: bool = False


def in_group(items: TaskItems, group: str) -> TaskItems:
    """The items of one group (their keys and values), as a task of their own."""
    keep = np.array([i for i, g in enumerate(items.groups) if g == group], dtype=np.int64)
    return replace(
        items,
        keys=tuple(items.keys[i] for i in keep),
        values=items.values[keep],
        groups=tuple(items.groups[i] for i in keep),
        score=float(items.values[keep].mean()) if len(keep) else math.nan,
    )


def compare_groups(a: TaskItems, b: TaskItems, options: CompareOptions) -> list[GroupComparison]:
    """Per group (both results grouped by the same field, per-item values of means), the paired test of ``b``
    against ``a`` on that group's items and its p-value adjusted across the groups ([] when they are not so
    grouped)."""
    if not a.group_field or a.group_field != b.group_field or a.kind != "mean" or b.kind != "mean":
        return []
    if len(a.groups) != len(a.keys) or len(b.groups) != len(b.keys):
        return []
    rows = []
    for group in sorted(set(a.groups) & set(b.groups)):
        ga, gb = in_group(a, group), in_group(b, group)
        where = {k: i for i, k in enumerate(gb.keys)}
        ia = [i for i, k in enumerate(ga.keys) if k in where]
        if not ia:
            continue
        sa, sb = float(ga.values[ia].mean()), float(gb.values[[where[ga.keys[i]] for i in ia]].mean())
        outcome = paired_test(ga, gb, options)
        if outcome is None:
            rows.append(GroupComparison(group, len(ia), sa, sb, sb - sa))
        else:
            rows.append(
                GroupComparison(
                    group, outcome.n, sa, sb, outcome.delta, outcome.ci_low, outcome.ci_high, outcome.p_value
                )
            )
    adjusted = adjust([r.p_value for r in rows], options.correction)
    return [replace(r, p_adjusted=p, significant=bool(p < options.alpha)) for r, p in zip(rows, adjusted)]


MAX_ROUNDS = 10_000_000  # resamples held at once stay within memory (a float per item and round)


def check_options(options: CompareOptions) -> None:
    """Refuse options a user can get wrong, with one line each."""
    if options.test not in TESTS:
        raise UnknownNameError("test", options.test, TESTS)
    adjust([], options.correction)
    if not 1 <= options.rounds <= MAX_ROUNDS:
        raise ConfigError(f"--rounds must be an integer from 1 to {MAX_ROUNDS:,}, not {options.rounds}")
    if not 0 < options.alpha < 1 or not 0 < options.confidence < 1:
        raise ConfigError("--alpha and --confidence must lie strictly between 0 and 1")


def compare_models(
    models: Sequence[ModelResults],
    options: CompareOptions = CompareOptions(),
    tasks: Sequence[str] | None = None,
    extra: Callable[[TaskItems, TaskItems], dict[str, Any]] | None = None,
) -> Comparison:
    """Compare every pair of models (earlier one as ``a``) on the tasks all of them have."""
    check_options(options)
    if len(models) < 2:
        raise ConfigError("compare needs at least two results folders")
    names = unique_names([m.name for m in models])
    shared = [t for t in models[0].tasks if all(t in m.tasks for m in models[1:])]
    if tasks is not None:
        unknown = [t for t in tasks if t not in shared]
        if unknown:
            raise UnknownNameError("shared task", unknown[0], shared)
        shared = list(tasks)
    if not shared:
        raise ConfigError(
            "the results folders have no task in common: "
            + "; ".join(f"{n}: {', '.join(sorted(m.tasks)) or '-'}" for n, m in zip(names, models))
        )
    rows = []
    for i in range(len(models)):
        for j in range(i + 1, len(models)):
            for task in shared:
                a, b = models[i].tasks[task], models[j].tasks[task]
                row = TaskComparison(
                    task, a.task_type, a.metric, names[i], names[j], a.score, b.score, b.score - a.score
                )
                check_settings(a, b, row, options.allow_mismatch)
                note_pairing(a, b, row)
                outcome = paired_test(a, b, options)
                if outcome is not None:
                    row.ci_low, row.ci_high, row.p_value = outcome.ci_low, outcome.ci_high, outcome.p_value
                    row.test, row.n = outcome.test, outcome.n
                if extra is not None:
                    row.extra = extra(a, b)
                row.groups = compare_groups(a, b, options)
                row.group_field = (a.group_field or "") if row.groups else ""
                rows.append(row)
    for row, p in zip(rows, adjust([r.p_value for r in rows], options.correction)):
        row.p_adjusted = p
        row.significant = bool(p < options.alpha)
    scores = {n: {t: m.tasks[t].score for t in shared} for n, m in zip(names, models)}
    usage = {n: total_usage([file_usage(m.tasks[t].path) for t in shared]) for n, m in zip(names, models)}
    return Comparison(names, shared, scores, rows, options, [m.note for m in models if m.note], usage)


def check_settings(a: TaskItems, b: TaskItems, row: TaskComparison, allow_mismatch: bool) -> None:
    """Refuse (or, with ``allow_mismatch``, record in ``row``) results computed with other run or task settings
    or on other data; a result that records none (e.g. mteb's own) is noted as unchecked."""
    missing = [items.path for items in (a, b) if not items.settings]
    if missing:
        row.notes.append("settings not recorded in " + " and ".join(map(str, missing)) + "; not checked")
        return
    difference = settings_difference(a.settings, b.settings)
    if not difference:
        return
    if not allow_mismatch:
        raise ConfigError(
            f"{a.task}: {a.path} and {b.path} were computed with other settings or data ({difference}); "
            "compare them anyway with --allow-mismatch"
        )
    row.settings_difference = difference
    row.notes.append(f"settings differ: {difference}")


def note_pairing(a: TaskItems, b: TaskItems, row: TaskComparison) -> None:
    """Count the items only one model scored and name the file that holds them."""
    if a.kind == "none" or b.kind == "none":
        return
    ka, kb = set(a.keys), set(b.keys)
    row.only_a, row.only_b = len(ka - kb), len(kb - ka)
    for count, items in ((row.only_a, a), (row.only_b, b)):
        if count:
            row.notes.append(
                f"{len(ka & kb)} items paired; {count} only in {items.item_file or items.path} (not tested)"
            )


def unique_names(names: Sequence[str]) -> list[str]:
    """Model names, numbered when the same name occurs twice (``m``, ``m (2)``)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out


def compare_folders(
    folders: Sequence[str | Path],
    options: CompareOptions = CompareOptions(),
    tasks: Sequence[str] | None = None,
    fidelity: bool = False,
) -> Comparison:
    """:func:`compare_models` on result folders (one model each); ``fidelity`` adds agreement measures
    between each pair (see :mod:`embedscope.compare.fidelity`)."""
    check_options(options)
    models = [load_model_results(f) for f in folders]
    extra = None
    if fidelity:
        from embedscope.compare.fidelity import agreement

        extra = agreement
    return compare_models(models, options, tasks, extra)
