"""The screen's plan: before it encodes, what running every candidate exactly would cost, what a screen with proxy
rounds would cost at best and at worst, and which of the two the screen takes.

Each candidate's exact cost is estimated on this machine: ``run --dry-run``'s stated-throughput seconds
(:func:`~embedscope.evaluation.estimate.estimate_run`, its tokens counted on :data:`COUNTED_TEXTS` texts of each role
and task), scaled by the ratio of the measured to the stated seconds of encoding a few of its tasks' own texts (two
batches of :data:`~embedscope.evaluation.estimate.SAMPLE_TEXTS` texts of like lengths a task, around the median and
the 90th percentile, encoded without the cache after one warm-up text; the model's load and warm-up are measured
too), plus what each task's protocol took on hash vectors (loading, fitting, scoring: the run's work besides
encoding). A model behind an API costs the tokens its texts are counted at; a candidate that encodes nothing (BM25,
FTS5) is not estimated and counts 0.

A screen with proxy rounds of sizes ``s`` on ``n`` candidates, ``E_i`` each one's exact cost, ``L_i`` its load,
``r_i = Σ_s share(s) × E_i`` its rounds' encoding (``share``: the fraction, or the count over the task's queries)::

    every exact   E = Σ E_i
    worst         E + Σ_i L_i × |s|  (+ Σ r_i without the cache)   every candidate confirmed: with the cache its
                                                                    proxies' vectors serve its exact run
    best          min_j (E_j + Σ_{i≠j} r_i) + Σ_i L_i × |s|         one candidate confirmed

With no way to screen named (no ``fast``, ``confirm``, ``fidelity`` nor ``proxy``), the screen takes the proxy rounds
(:data:`DEFAULT_PROXY`) when they can cost at most :data:`WORST_OVERHEAD` beyond running every candidate and their
best case saves more than their worst case loses; otherwise it runs each candidate exactly once (the answer with its
significance, at the plain runs' cost plus the plan's). A fast pass is never the default: its vectors serve no exact
run, so at worst it costs the plain runs and a fast pass more.

>>> costs = (CandidateCost("a", 100.0, 2.0, ""), CandidateCost("b", 50.0, 2.0, ""), CandidateCost("c", 10.0, 1.0, ""))
>>> worst, best = proxy_bounds(costs, (0.05,), cache=True)
>>> round(worst, 2), round(best, 2)
(165.0, 22.5)
>>> choose_mode(costs, (0.05,), cache=True)[0]
'proxy'
>>> choose_mode((CandidateCost("a", 2.0, 1.0, ""), CandidateCost("b", 2.0, 1.0, "")), (0.05,), cache=True)[0]
'exact'
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embedscope.settings import RunSettings
from embedscope.settings.run import ModelRun

COUNTED_TEXTS = 256  # texts of each role and task the plan tokenizes (each standing for its neighbours)
DEFAULT_PROXY: tuple[float, ...] = (0.05,)  # the rounds a planned screen takes (one round on 5% proxies)
WORST_OVERHEAD = 0.10  # the most a planned screen may cost beyond running every candidate, as a share of that


@dataclass(frozen=True)
class CandidateCost:
    """One candidate's estimated exact cost (in the plan's unit; None: not estimated), its measured load and
    warm-up seconds, and what the estimate rests on."""

    model: str
    exact: float | None
    load_seconds: float
    basis: str


@dataclass(frozen=True)
class ScreenPlan:
    """What a screen will do and what it should cost (see the module docstring); ``lines()`` is what it prints
    first, and all that ``dry_run`` prints."""

    mode: str  # "proxy", "exact" or "fast"
    named: bool  # the mode was named by the user
    proxy: tuple[int | float, ...]
    unit: str  # "seconds" or "tokens"
    candidates: tuple[CandidateCost, ...]
    cache: bool
    reason: str
    seconds: float = 0.0  # the plan's own wall time
    bounds: tuple[float, float] | None = field(default=None)  # the chosen mode's (best, worst) estimate

    @property
    def every_exact(self) -> float:
        """The estimated cost of running every candidate exactly."""
        return sum(c.exact or 0.0 for c in self.candidates)

    def lines(self) -> list[str]:
        """The plan as printed: the chosen mode with its estimate beside running every candidate, and each
        candidate's estimate."""
        every = _amount(self.every_exact, self.unit)
        if self.mode == "exact":
            head = f"plan: run each of {len(self.candidates)} candidates exactly once (≈ {every}): {self.reason}"
        elif self.mode == "proxy":
            sizes = " → ".join(map(str, self.proxy))
            low, high = self.bounds or (math.nan, math.nan)
            head = (
                f"plan: proxy rounds ({sizes}) then confirm the survivors exactly: ≈ {_amount(low, self.unit)} to "
                f"{_amount(high, self.unit)}, against ≈ {every} running every candidate exactly; {self.reason}"
            )
        else:
            head = f"plan: a fast pass, then confirm the leaders exactly (not estimated); every candidate exactly ≈ {every}"
        rows = "; ".join(
            f"{c.model} {_amount(c.exact, self.unit) if c.exact is not None else 'not estimated'} ({c.basis})"
            for c in self.candidates
        )
        return [head, f"  exact cost of each: {rows}; planned in {self.seconds:.1f} s"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "named": self.named,
            "proxy": list(self.proxy),
            "unit": self.unit,
            "every_exact": self.every_exact,
            "bounds": list(self.bounds) if self.bounds else None,
            "candidates": [
                {"model": c.model, "exact": c.exact, "load_seconds": c.load_seconds, "basis": c.basis}
                for c in self.candidates
            ],
            "cache": self.cache,
            "reason": self.reason,
            "seconds": self.seconds,
        }


def _amount(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "?"
    if unit == "tokens":
        return f"{value:,.0f} tokens"
    return f"{value / 60:.1f} min" if value >= 600 else f"{value:.0f} s"


def _share(size: int | float, queries: int) -> float:
    """The share of a task's work a proxy of ``size`` does: the fraction, or the count over its queries."""
    return float(size) if isinstance(size, float) else min(1.0, size / max(queries, 1))


def proxy_bounds(
    costs: Sequence[CandidateCost], sizes: Sequence[int | float], cache: bool, queries: int = 0
) -> tuple[float, float]:
    """The worst (every candidate confirmed) and best (one confirmed) cost of proxy rounds of ``sizes``."""
    exact = [c.exact or 0.0 for c in costs]
    rounds = [sum(_share(s, queries) for s in sizes) * e for e in exact]
    loads = sum(c.load_seconds for c in costs) * len(sizes)
    worst = sum(exact) + loads + (0.0 if cache else sum(rounds))
    best = min(exact[j] + sum(rounds) - rounds[j] for j in range(len(costs))) + loads
    return worst, best


def choose_mode(
    costs: Sequence[CandidateCost], sizes: Sequence[int | float], cache: bool, queries: int = 0, unit: str = "seconds"
) -> tuple[str, str, tuple[float, float]]:
    """``("proxy" | "exact", why, (best, worst))``: proxy rounds when at worst they cost at most
    :data:`WORST_OVERHEAD` beyond running every candidate and their best case saves more than their worst loses."""
    every = sum(c.exact or 0.0 for c in costs)
    if unit != "seconds":  # a load costs no tokens
        costs = [CandidateCost(c.model, c.exact, 0.0, c.basis) for c in costs]
    worst, best = proxy_bounds(costs, sizes, cache, queries)
    if every <= 0:
        return "exact", "no candidate's cost could be estimated, so no screen can be shown to save", (every, every)
    lose, save = worst - every, every - best
    if lose > WORST_OVERHEAD * every:
        why = (
            "without the cache the proxies' vectors would be encoded again" if not cache else "the candidates are cheap"
        )
        return (
            "exact",
            f"a screen could cost {lose / every:.0%} more than running them all ({why}), beyond the "
            f"{WORST_OVERHEAD:.0%} a screen may risk",
            (every, every),
        )
    if save <= lose:
        return (
            "exact",
            f"a screen could save at most {_amount(max(save, 0.0), unit)} and lose {_amount(lose, unit)}",
            (every, every),
        )
    return "proxy", f"at worst {lose / every:.0%} more, at best {save / every:.0%} less", (best, worst)


def measure_candidate(
    settings: RunSettings, run: ModelRun, groups: Sequence[Sequence[tuple[str, str]]]
) -> tuple[float, float] | None:
    """``(load seconds, sample seconds)`` of ``run``'s model on this machine: built without the cache, one short text
    encoded (loading and warming it up), then each group of texts of like lengths encoded as one batch per role and
    timed; None for a model that is not an encoder."""
    from embedscope.models.base import Encoder
    from embedscope.screen.passes import built_model

    started = time.perf_counter()
    model = built_model(settings, run, {}, None)
    if not isinstance(model, Encoder):
        return None
    model.encode(["warm up"], role="query")
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    for group in groups:
        for role in dict.fromkeys(r for r, _ in group):
            texts = [t for r, t in group if r == role]
            model.encode(texts, role=role, batch_size=len(texts))  # type: ignore[arg-type]
    measured = time.perf_counter() - started
    del model
    gc.collect()
    return loaded, measured


def candidate_costs(settings: RunSettings, runs: Sequence[ModelRun]) -> tuple[list[CandidateCost], str, int]:
    """Each candidate's estimated exact cost on this machine (see the module docstring), the unit they share
    (``tokens`` when every candidate is behind an API) and the fewest queries of a task."""
    from embedscope.evaluation.estimate import estimate_run
    from embedscope.models.api import is_api_model

    estimate = estimate_run(settings, count_at_most=COUNTED_TEXTS)
    by_run: dict[int, list[Any]] = {}
    for row in estimate.rows:
        by_run.setdefault(row.run, []).append(row)
    api = [is_api_model(r.model, dict(r.options)) for r in runs]
    unit = "tokens" if all(api) else "seconds"
    queries = min((role.texts for row in estimate.rows for role in row.roles if role.role == "query"), default=0)
    costs = []
    for i, run in enumerate(runs):
        rows = by_run.get(i, [])
        name = str(run.model)
        if api[i] and unit == "tokens":
            costs.append(CandidateCost(name, float(sum(r.tokens for r in rows)), 0.0, "tokens counted"))
            continue
        stated = [r.seconds for r in rows]
        if not rows or any(s is None for s in stated):
            costs.append(CandidateCost(name, None, 0.0, "not estimated: it encodes nothing"))
            continue
        groups = [group for r in rows for group in r.sample]
        sample_stated = sum(r.sample_seconds or 0.0 for r in rows)
        protocol = sum(r.protocol_seconds for r in rows)  # loading, fitting and scoring, as the run will
        measured = None if api[i] else measure_candidate(settings, run, groups)
        if measured is None or sample_stated <= 0:
            costs.append(CandidateCost(name, float(sum(stated)) + protocol, 0.0, "stated throughput"))
            continue
        loaded, seconds = measured
        ratio = seconds / sample_stated
        texts = sum(len(g) for g in groups)
        costs.append(CandidateCost(name, float(sum(stated)) * ratio + protocol, loaded, f"timed on {texts} texts"))
    return costs, unit, queries


def plan_screen(
    settings: RunSettings, runs: Sequence[ModelRun], mode: str | None, proxy: Sequence[int | float] | None
) -> ScreenPlan:
    """The plan of a screen of ``runs``: ``mode`` as named (``"fast"``, ``"proxy"`` with ``proxy``'s sizes), or
    chosen here when None (see the module docstring)."""
    started = time.perf_counter()
    costs, unit, queries = candidate_costs(settings, runs)
    sizes = tuple(proxy) if proxy else DEFAULT_PROXY
    chosen, why, found = choose_mode(costs, sizes, settings.cache, queries, unit)
    bounds: tuple[float, float] | None = found
    if mode == "proxy":
        chosen, why = "proxy", "named"
        worst, best = proxy_bounds(costs, sizes, settings.cache, queries)
        bounds = (best, worst)
    elif mode == "fast":
        chosen, why, bounds = "fast", "named", None
    return ScreenPlan(
        chosen,
        mode is not None,
        sizes,
        unit,
        tuple(costs),
        settings.cache,
        why,
        time.perf_counter() - started,
        bounds,
    )


def outcome_line(plan: ScreenPlan, spent: Mapping[str, float]) -> str:
    """What the screen cost against its plan's estimate (``spent``: ``{"seconds": …, "tokens": …}``)."""
    total = spent.get(plan.unit, math.nan)
    if plan.bounds is None:
        return f"the screen took {_amount(total, plan.unit)} (the plan did not estimate a fast pass)"
    low, high = plan.bounds
    where = "within" if low * 0.7 <= total <= high * 1.3 else "outside"
    every = plan.every_exact
    ratio = f"; {total / every:.2f}× the estimated cost of running every candidate exactly" if every > 0 else ""
    return (
        f"the screen took {_amount(total, plan.unit)} with its plan (estimated {_amount(low, plan.unit)} to "
        f"{_amount(high, plan.unit)}: {where} 30% of that range){ratio}"
    )
