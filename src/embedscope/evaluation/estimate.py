"""``run --dry-run``: what a run would encode, cost, take and hold, without encoding or writing anything.

:func:`estimate_run` resolves the run's tasks as the run does (every check included), sizes each task once
(:mod:`embedscope.evaluation.workload`) and, per model and task, reports:

- the texts each role's encode calls hold and their tokens: the model's tokenizer (``tokenizer.json``, read without
  the weights) where it has one, else one token per 4 bytes of UTF-8 (a model behind an API counts so, as its
  ``--budget`` does); the prompts given in the model options are counted, a model's own configured prompts are not;
- the cost: a model behind an API, its distinct texts' tokens at ``price_per_mtok`` (each paid once: its answers are
  cached per text); ``local`` otherwise;
- the time, from stated throughputs, not a measurement (nothing is encoded): a transformer computes
  ``2 × parameters × tokens + 4 × layers × T² × H`` per text (T its tokens after truncation) at
  :data:`CPU_FLOPS` on the CPU or :data:`ACCELERATOR_FLOPS` on an accelerator; a static model looks up
  :data:`STATIC_TOKENS` tokens a second; a model behind an API answers a request in :data:`API_SECONDS`,
  ``max_concurrency`` (4) at once and within ``tokens_per_minute``; a pipeline or a model object: not estimated;
- the peak memory the memory guard estimates (:mod:`embedscope.evaluation.memory`) and the memory available.

No model is loaded (nor its library imported), no embedding cache is opened, no result or file is written.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from embedscope.evaluation.memory import (
    MemoryEstimate,
    ModelPlan,
    estimate_task,
    memory_available,
    plan_model,
    planned_tasks,
    task_sizes,
)
from embedscope.evaluation.plan import resolve_tasks
from embedscope.evaluation.workload import TaskWorkload, summarize, task_workload
from embedscope.messages import ITEM_CHARS, clip_text
from embedscope.models.api.encoder import DEFAULT_TEXTS_PER_REQUEST, estimate_tokens
from embedscope.models.base import prompted_texts
from embedscope.models.device import device_kind
from embedscope.models.shape import token_counter
from embedscope.profiling import format_bytes, resident_bytes
from embedscope.settings.run import RunSettings
from embedscope.tasks.base import Task
from embedscope.types import Role

CPU_FLOPS = 50e9  # assumed sustained float operations a second of a transformer on the CPU
ACCELERATOR_FLOPS = 20e12  # … on an accelerator
STATIC_TOKENS = 1e6  # tokens a second a static (lookup) model embeds
API_SECONDS = 0.5  # assumed seconds a request to a model behind an API takes
API_CONCURRENCY = 4  # requests in flight at once (an API model's default max_concurrency)
SAMPLE_TEXTS = 8  # texts in each group of like lengths a task keeps for a caller to time (TaskEstimate.sample)
SAMPLE_QUANTILES = (0.5, 0.9)  # where those groups lie in the task's order of token lengths
ASSUMPTIONS = (
    f"time assumes {CPU_FLOPS / 1e9:g} GFLOP/s on the CPU, {ACCELERATOR_FLOPS / 1e12:g} TFLOP/s on an accelerator, "
    f"{API_SECONDS:g} s an API request ({API_CONCURRENCY} at once); nothing was measured, encoded or written"
)


@dataclass(frozen=True)
class RoleCount:
    """One role of one task: the texts its encode calls hold, their tokens, the longest, and what counted them
    (``tokenizer`` or ``4 bytes a token``)."""

    role: Role
    texts: int
    tokens: int
    longest: int
    counted_by: str


@dataclass(frozen=True)
class TaskEstimate:
    """One model on one task: its texts and tokens per role, cost, time and memory."""

    model: str
    task: str
    roles: tuple[RoleCount, ...]
    cost: float | None  # US dollars (a model behind an API with a price); None: local, or no price
    cost_text: str  # "local", "$0.0012", "unpriced (41,200 tokens): give --price-per-mtok"
    seconds: float | None  # None: not estimated
    memory: MemoryEstimate
    # groups of its texts (role, text as the model is given it) of like token lengths, around the median and the
    # 90th percentile (SAMPLE_TEXTS each), and the stated seconds of encoding them, each group one batch: what a
    # caller times on this machine to scale ``seconds`` (``screen``'s plan)
    sample: tuple[tuple[tuple[Role, str], ...], ...] = ()
    sample_seconds: float | None = None
    run: int = 0  # the index of its model's run in the settings' model_runs()
    protocol_seconds: float = 0.0  # what running its protocol on hash vectors took here: loading, fitting, scoring

    @property
    def texts(self) -> int:
        return sum(r.texts for r in self.roles)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.roles)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "roles": {r.role: {"texts": r.texts, "tokens": r.tokens, "longest": r.longest} for r in self.roles},
            "tokens_counted_by": sorted({r.counted_by for r in self.roles}),
            "cost": self.cost,
            "cost_text": self.cost_text,
            "seconds": self.seconds,
            "memory": self.memory.to_dict(),
        }


@dataclass(frozen=True)
class RunEstimate:
    """Every model × task of a dry run (``table()`` is what ``run --dry-run`` prints; ``to_dict()`` plain data)."""

    rows: tuple[TaskEstimate, ...]

    def table(self) -> str:
        from embedscope.results.table import markdown_table

        counts = [
            [
                clip_text(e.model, ITEM_CHARS),
                e.task,
                r.role,
                f"{r.texts:,}",
                f"{r.tokens:,}",
                f"{r.longest:,}",
                r.counted_by,
            ]
            for e in self.rows
            for r in e.roles
        ]
        header = ["model", "task", "role", "texts", "tokens", "longest", "tokens counted by"]
        costs = [
            [
                clip_text(e.model, ITEM_CHARS),
                e.task,
                e.cost_text,
                _duration(e.seconds),
                format_bytes(e.memory.peak),
                format_bytes(e.memory.available),
                "yes" if e.memory.fits else "no",
            ]
            for e in self.rows
        ]
        cost_header = ["model", "task", "cost", "time (assumed)", "peak memory (estimated)", "available", "fits"]
        return "\n\n".join(
            [
                "dry run: what the run would encode (nothing encoded, nothing written)",
                markdown_table(header, counts),
                markdown_table(cost_header, costs),
                ASSUMPTIONS,
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": [e.to_dict() for e in self.rows], "assumptions": ASSUMPTIONS}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "not estimated"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 1 else "< 1 s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _prompted(texts: Sequence[str], role: Role, options: dict[str, Any]) -> list[str]:
    """The texts as the model is given them, with the prompts the model options give."""
    prompts = dict(options.get("prompts") or {})
    if options.get("query_prompt"):
        prompts["query"] = str(options["query_prompt"])
    return prompted_texts(list(texts), role, prompts) if prompts else list(texts)


def _seconds(plan: ModelPlan, lengths: Sequence[int], distinct_tokens: int, distinct_texts: int) -> float | None:
    """The stated-throughput time of encoding texts of these token ``lengths`` (see the module docstring)."""
    shape = plan.shape
    if plan.kind == "api":
        per_request = int(plan.options.get("texts_per_request") or plan.batch_size or DEFAULT_TEXTS_PER_REQUEST)
        requests = math.ceil(distinct_texts / max(per_request, 1))
        concurrency = int(plan.options.get("max_concurrency") or API_CONCURRENCY)
        seconds = requests / concurrency * API_SECONDS
        tpm = plan.options.get("tokens_per_minute")
        return max(seconds, distinct_tokens / int(tpm) * 60) if tpm else seconds
    if plan.kind != "local" or shape is None:
        return None
    if shape.runtime == "static":
        return sum(lengths) / STATIC_TOKENS
    flops = 0.0
    for n in lengths:
        t = min(n, shape.max_length)
        flops += 2 * shape.parameters * t + 4 * shape.layers * t * t * shape.hidden
    rate = CPU_FLOPS if device_kind(plan.device) == "cpu" else ACCELERATOR_FLOPS
    return flops / rate


def _cost(plan: ModelPlan, distinct_tokens: int) -> tuple[float | None, str]:
    if plan.kind != "api":
        return None, "local"
    price = plan.options.get("price_per_mtok")
    if price is None:
        return None, f"unpriced ({distinct_tokens:,} tokens): give --price-per-mtok"
    cost = distinct_tokens / 1e6 * float(price)
    return cost, f"${cost:.4f} ({distinct_tokens:,} tokens)"


def estimate_run(settings: RunSettings, count_at_most: int | None = None) -> RunEstimate:
    """What ``settings``' run would encode, cost, take and hold, per model and task (see the module docstring);
    nothing is encoded and nothing written. A setting's error names it as the user gave it, as :func:`run` does.
    ``count_at_most``: tokenize only that many texts of each role and task, each standing for its neighbours (a
    screen's plan: seconds instead of a minute on a large suite; token counts then approximate)."""
    from embedscope.errors import ConfigError, SettingError

    try:
        return _estimate(settings, count_at_most)
    except SettingError as e:
        raise ConfigError(e.named(getattr(settings, "display_name", str))) from None


def _estimate(settings: RunSettings, count_at_most: int | None = None) -> RunEstimate:
    tasks = resolve_tasks(settings)
    options = settings.search_options(show_progress=False)
    found: dict[int, tuple[Task, TaskWorkload]] = {}  # each task sized once (the task kept: its id stays its own)
    protocol: dict[int, float] = {}
    counters: dict[str, Any] = {}  # one tokenizer read per file (models of one family share it)
    counts: dict[tuple[Any, ...], list[int]] = {}  # and each task's texts counted once per tokenizer
    rows: list[TaskEstimate] = []
    for index, entry in enumerate(settings.model_runs()):
        plan = plan_model(entry, settings)
        tokenizer = str(plan.shape.tokenizer) if plan.shape is not None and plan.kind == "local" else ""
        if tokenizer and tokenizer not in counters:
            counters[tokenizer] = token_counter(plan.shape.tokenizer)  # type: ignore[union-attr]
        count = counters.get(tokenizer)
        chosen = planned_tasks(entry, tasks, settings, plan)
        for task in chosen:
            if id(task) not in found:
                started = time.perf_counter()
                found[id(task)] = (task, task_workload(task, options))
                protocol[id(task)] = time.perf_counter() - started
        resident, available = resident_bytes(), memory_available(settings)  # once the tasks are read, as the guard
        for task in chosen:
            work = found[id(task)][1]
            sizes = task_sizes(summarize(work), count)
            memory = estimate_task(plan, sizes, settings, resident=resident, available=available)
            roles: list[RoleCount] = []
            lengths: list[int] = []
            given: list[tuple[Role, str]] = []
            for role in dict.fromkeys(role for role, _, _ in work.calls()):
                texts = [t for r, call, _ in work.calls() if r == role for t in call]
                prompted = _prompted(texts, role, dict(plan.options))
                key = (tokenizer, id(task), role, len(prompted), tuple(prompted[:1]), tuple(prompted[-1:]))
                if key not in counts or not tokenizer:
                    counts[key] = _counted(prompted, count, count_at_most)
                counted = counts[key]
                lengths += counted
                given += [(role, t) for t in prompted]
                by = "tokenizer" if count is not None else "4 bytes a token"
                roles.append(RoleCount(role, len(texts), sum(counted), max(counted, default=0), by))
            distinct = [
                t for role, texts in work.distinct().items() for t in _prompted(texts, role, dict(plan.options))
            ]
            distinct_tokens = sum(estimate_tokens(t) for t in distinct) if plan.kind == "api" else 0
            cost, cost_text = _cost(plan, distinct_tokens)
            seconds = _seconds(plan, lengths, distinct_tokens, len(distinct))
            groups = length_groups(lengths, SAMPLE_QUANTILES, SAMPLE_TEXTS)
            sample = tuple(tuple(given[i] for i in group) for group in groups)
            sample_seconds = (
                sum(_seconds(plan, [lengths[i] for i in group], 0, len(group)) or 0.0 for group in groups)
                if plan.kind == "local"
                else None
            )
            rows.append(
                TaskEstimate(
                    plan.name,
                    task.name,
                    tuple(roles),
                    cost,
                    cost_text,
                    seconds,
                    memory,
                    sample,
                    sample_seconds,
                    index,
                    protocol[id(task)],
                )
            )
    return RunEstimate(tuple(rows))


def _counted(texts: Sequence[str], count: Any, at_most: int | None) -> list[int]:
    """Each text's tokens (``count``: the model's tokenizer; else one per 4 bytes); with ``at_most``, only that many
    texts at evenly spaced positions are counted and each stands for its neighbours (a plan's estimate, fast)."""
    if count is None:
        return [estimate_tokens(t) for t in texts]
    n = len(texts)
    if at_most is None or n <= at_most:
        return list(count(texts))
    positions = [i * n // at_most for i in range(at_most)]
    counted = count([texts[i] for i in positions])
    return [counted[i * at_most // n] for i in range(n)]


def length_groups(lengths: Sequence[int], quantiles: Sequence[float], size: int) -> list[list[int]]:
    """For each quantile, the indices of the ``size`` texts around that rank of ``lengths``' sorted order (texts of
    like lengths, batched as a run batches them), no index twice.

    >>> length_groups([50, 10, 40, 20, 30, 60], (0.5, 0.9), 2)
    [[3, 4], [2, 0]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    taken: set[int] = set()
    groups = []
    for q in quantiles:
        centre = round(q * (len(order) - 1))
        start = max(0, min(centre - size // 2, len(order) - size))
        group = [i for i in order[start : start + size] if i not in taken]
        taken.update(group)
        if group:
            groups.append(group)
    return groups
