"""``screen --proxy``: successive halving on proxy tasks, then the survivors confirmed on the exact full tasks.

1. Round ``i`` scores every remaining candidate on the proxy of each task at size ``proxy[i]``
   (:mod:`embedscope.tasks.proxy`, seeded with the screen's seed; on the fast path where it applies), through the
   runner, so results and the embedding cache are reused and an interrupted screen resumes.
2. Each candidate's mean main score over the tasks comes with bootstrap replicates drawn with the same seeds for
   every candidate (paired). Candidates whose difference to the leader lies clearly above 0 are dropped; those
   equivalent within ``margin`` (TOST) to the leader, or to the best of the rest, are tied with it, and only the
   cheapest of each tie goes on (:mod:`embedscope.screen.halving`). A candidate whose exact run is estimated to
   cost at most ``CHEAP_SHARE`` (1%) of all of theirs together is never dropped and is always confirmed
   (:func:`cheap_candidates`: a proxy could only save that little, and can be biased against it); where the round
   shows it below the leader, it leaves the rounds there all the same (``ProxyRound.spared``), ranked with that
   round's dropped, so that no later round ranks it above candidates it scored below. The share of replicates
   whose best candidate is still in, multiplied over the rounds, is the stated probability that the exact winner
   survived. Every proxy of a round is built once (its data loaded and reduced once), whichever candidates run it.
3. The survivors run exact on the full tasks, the most replicates won per estimated cost first
   (:func:`~embedscope.screen.halving.confirm_order`): each one's exact cost is estimated from its last round (each
   phase of each proxy task but loading its data, divided by the share of the full task's work that phase did: a
   retrieval proxy's queries by the texts of the full query call's batches that hold them, its documents by their
   share, the rest by the share of all texts: :func:`exact_estimate`); when every survivor is a model behind an
   API, the tokens its texts cost, estimated the same way, instead of the seconds, and their price where every
   survivor has one (``price_per_mtok``: :func:`confirm_costs`; the cheapest of a tie is chosen the same way). Before
   each, the stated probability is recomputed with only the confirmed (and their ties) kept; once it reaches the
   screen's confidence, the survivors left stay unconfirmed, ranked by their proxy score, and the stated
   probability is that one. The confirmed models' exact ranking decides. ``audit``
   also runs every other candidate exact and says whether the claim held: the exact winner among the confirmed
   (or tied with one of them), and Kendall's τ between the screen's final ranking and the all-exact one;
   ``audit_seeds`` then replays the screen at that many more seeds against the same exact runs
   (:func:`replayed`), to say how often its claim holds on these data.

The screen's final ranking: the last round's candidates by their proxy score, the confirmed among them permuted
into their exact order (they take the places the confirmed hold), then each earlier round's dropped candidates by
their proxy score in that round; a tied model sits right after the one it tied with. A candidate confirmed only
because its exact run is next to free is one of the confirmed: its proxy place is one of theirs. The ranking states
an order only where the evidence shows one (:func:`stated_places`): tied models share a place, and a model shares
the place of the group above it unless it is shown below each of its models (both exact, or the interval of their
proxy difference above 0); ``audit``'s τ-b counts such pairs as ties.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.compare.core import CompareOptions
from embedscope.compare.items import TaskItems
from embedscope.errors import ConfigError, SettingError
from embedscope.files import atomic_write_text
from embedscope.models.device import CPU_BATCH_SIZE
from embedscope.screen import halving
from embedscope.screen.passes import (
    MeanScore,
    Pass,
    ScreenedModel,
    built_model,
    kendall_tau,
    mean_of,
    mean_replicates,
    mean_score,
    one_model,
    run_one,
)
from embedscope.settings import RunSettings
from embedscope.settings.run import ModelRun
from embedscope.settings.screen import ScreenSettings
from embedscope.tasks.proxy import Proxy, ProxySpec, phase_shares, proxy_task

# a candidate whose exact run is estimated to cost at most this share of all the round's candidates' together is not
# dropped on a proxy's word: dropping it saves next to nothing, and a proxy can be biased against it (a retrieval
# proxy's hard negatives are BM25's own top documents); it is confirmed exact
CHEAP_SHARE = 0.01


@dataclass
class ProxyRound:
    """One round of successive halving: who ran, on what, and what was decided."""

    size: int | float
    scores: dict[str, MeanScore]  # in this round's ranking order
    seconds: dict[str, float]
    dropped: list[str]
    tied: dict[str, list[str]]  # the one that goes on → the candidates it stands for
    p_best_kept: float
    proxies: dict[str, dict[str, Any]] = field(default_factory=dict)  # proxy task → its recipe and compositions
    exact_estimate: dict[str, float] = field(default_factory=dict)  # seconds each would take exact (estimated)
    exact_tokens: dict[str, float] = field(default_factory=dict)  # tokens each behind an API would cost exact
    exact_spend: dict[str, float] = field(default_factory=dict)  # what those tokens cost, where it has a price
    # never dropped, always confirmed: their exact runs cost next to nothing (:func:`cheap_candidates`)
    cheap: list[str] = field(default_factory=list)
    # each candidate's bootstrap replicates of its mean score on this round's proxies (paired; not written out)
    replicates: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    # the cheap that this round shows below the leader: they leave the rounds here, as the dropped do, ranked among
    # them by this round's scores, and are confirmed (not kept on for later rounds to rank above the dropped)
    spared: list[str] = field(default_factory=list)
    # each candidate going on that the round neither tied nor ordered below the leader → the tie margin within which
    # the round shows it equivalent to the leader (:func:`~embedscope.screen.halving.equivalence_margin`)
    undecided: dict[str, float] = field(default_factory=dict)

    def confirm_costs(self, keys: Sequence[str]) -> tuple[dict[str, float], str]:
        """What confirming each of ``keys`` would cost, and in what (:func:`confirm_costs`)."""
        return confirm_costs(self.exact_estimate, self.exact_tokens, keys, self.exact_spend)

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "scores": {k: {"mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high} for k, s in self.scores.items()},
            "seconds": self.seconds,
            "exact_estimate": self.exact_estimate,
            "exact_tokens": self.exact_tokens,
            "exact_spend": self.exact_spend,
            "cheap": self.cheap,
            "spared": self.spared,
            "dropped": self.dropped,
            "tied": self.tied,
            "p_best_kept": self.p_best_kept,
            "undecided": self.undecided,
            "proxies": self.proxies,
        }


@dataclass
class Audit:
    """Every candidate exact: whether the screen's claim held."""

    exact: dict[str, float]  # every candidate's exact mean score
    winner: str
    held: bool
    kendall_tau: float  # τ-b over the places the screen states (:func:`stated_places`)
    kendall_tau_order: float = math.nan  # τ-b of the ranking's order alone: only declared ties share a place
    seeds: list[SeedAudit] = field(default_factory=list)  # the screen replayed at other seeds (``audit_seeds``)
    # the all-exact ranking as the full tasks themselves show it (:func:`full_task_places`), and its τ-b against
    # the exact order: what stating only what the evidence shows gets with every candidate exact
    full_task_ranking: list[str] = field(default_factory=list)
    full_task_places: list[int] = field(default_factory=list)
    kendall_tau_full_task: float = math.nan
    # τ-b between the places the screen states and those the full tasks show, model by model: whether the screen
    # states what running every candidate exact shows (1 when the two are the same places)
    kendall_tau_shown: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "exact": self.exact,
            "winner": self.winner,
            "held": self.held,
            "kendall_tau": self.kendall_tau,
            "kendall_tau_order": self.kendall_tau_order,
            "full_task_ranking": self.full_task_ranking,
            "full_task_places": self.full_task_places,
            "kendall_tau_full_task": self.kendall_tau_full_task,
            "kendall_tau_shown": self.kendall_tau_shown,
            "seeds": [s.to_dict() for s in self.seeds],
        }


@dataclass(frozen=True)
class SeedAudit:
    """The screen replayed at another seed (its own proxies and bootstrap) against the same exact runs: what it
    claimed and whether that held."""

    seed: int
    held: bool
    p_winner_kept: float
    kendall_tau: float
    kendall_tau_order: float
    confirmed: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def seeds_summary(audit: Audit, p_winner_kept: float) -> dict[str, float]:
    """The audited screen and its replays together (``p_winner_kept``: the screen's own stated probability): the
    share of seeds at which the claim held beside the mean stated probability (a calibrated screen has the two
    close), and τ-b as stated, mean and range.

    >>> a = Audit({}, "m", True, 1.0, 1.0, [SeedAudit(1, False, 0.9, 0.5, 0.5, ["m"])])
    >>> seeds_summary(a, 0.95)
    {'seeds': 2, 'held': 0.5, 'p_winner_kept': 0.925, 'tau_mean': 0.75, 'tau_min': 0.5, 'tau_max': 1.0}
    """
    held = [audit.held, *(s.held for s in audit.seeds)]
    p = [p_winner_kept, *(s.p_winner_kept for s in audit.seeds)]
    tau = [audit.kendall_tau, *(s.kendall_tau for s in audit.seeds)]
    return {
        "seeds": len(held),
        "held": float(np.mean(held)),
        "p_winner_kept": float(np.mean(p)),
        "tau_mean": float(np.nanmean(tau)),
        "tau_min": float(np.nanmin(tau)),
        "tau_max": float(np.nanmax(tau)),
    }


@dataclass
class HalvingResult:
    """What the proxy rounds and the confirmation found (``ScreenReport`` carries it)."""

    rounds: list[ProxyRound]
    confirmed: list[str]  # in exact ranking order
    ranking: list[str]  # the screen's final ranking of every candidate
    p_winner_kept: float
    margin: float
    audit: Audit | None = None
    exact_items: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # model → task → TaskItems
    unconfirmed: list[str] = field(default_factory=list)  # survivors left unconfirmed: the odds sufficed without them
    # each model's place in ``ranking`` (0 first): models tied, or not ordered by the evidence, share one (:func:`stated_places`)
    places: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": [r.to_dict() for r in self.rounds],
            "confirmed": self.confirmed,
            "unconfirmed": self.unconfirmed,
            "ranking": self.ranking,
            "places": self.places,
            "p_winner_kept": self.p_winner_kept,
            "margin": self.margin,
            "audit": self.audit.to_dict() if self.audit else None,
            "audit_seeds": seeds_summary(self.audit, self.p_winner_kept) if self.audit and self.audit.seeds else None,
        }


def halving_screen(
    settings: RunSettings,
    runs: Sequence[ModelRun],
    models: dict[str, ScreenedModel],
    overrides: Mapping[str, Any],
    screen: ScreenSettings,
    options: CompareOptions,
    costs: Mapping[str, float] | None = None,
    full_task: bool = True,
) -> HalvingResult:
    """Successive halving over ``runs`` on proxies of sizes ``screen.proxy``, then the survivors exact (see the
    module docstring); fills each model's ``fast`` (round 1's score), ``exact``, folders and times. ``screen.audit``
    runs every candidate exact too; ``screen.audit_seeds`` then replays the screen at that many more seeds
    (:func:`replayed`); models within ``screen.margin`` tie.
    ``costs``: each candidate's exact seconds where known beforehand (a replay's: its screen's estimates), used for
    the decisions that weigh cost instead of those estimated from this screen's proxy times. ``full_task``: the audit
    also states what the full tasks show (:func:`full_task_places`; a replay, which keeps only its own claim, skips
    it)."""
    if screen.proxy is None:
        raise ConfigError("a halving screen needs proxy rounds: give proxy sizes")
    specs, margin = [ProxySpec(size=s) for s in screen.proxy], screen.margin
    if settings.limits is not None:
        raise SettingError("limits", "{proxy} and {limits} both shrink the tasks: give one")
    by_key = {str(r.model): r for r in runs}
    full_tasks = {key: _model_tasks(settings, run) for key, run in by_key.items()}
    remaining = list(by_key)
    rounds: list[ProxyRound] = []
    replicates: dict[str, np.ndarray] = {}
    for i, spec in enumerate(specs):
        spec = ProxySpec(
            size=spec.size,
            seed=options.seed,
            batch_size=settings.batch_size or CPU_BATCH_SIZE,
            chunk_size=settings.corpus_chunk_size,
        )
        passes: dict[str, Any] = {}
        made: dict[tuple[str, str], Proxy] = {}
        for key in remaining:
            tasks = [_shared_proxy(made, t, spec) for t in full_tasks[key]]
            passes[key] = _proxy_pass(settings, by_key[key], overrides, tasks, models[key], first=i == 0)
        _write_proxies(settings, made.values())
        proxies = {p.task.name: _recipe(settings, p) for p in made.values()}
        api = {k: t for k in remaining if (t := _api_tokens(passes[k])) is not None}
        shares = {
            per_text: {name: phase_shares(r["compositions"], per_text=per_text) for name, r in proxies.items()}
            for per_text in (False, True)
        }
        estimate = {
            k: costs[k] if costs is not None and k in costs else exact_estimate(passes[k].work, shares[k in api])
            for k in remaining
        }
        tokens = {k: exact_estimate({task: {"*": n} for task, n in t.items()}, shares[True]) for k, t in api.items()}
        spend = {k: n * price / 1e6 for k, n in tokens.items() if (price := _price(by_key[k])) is not None}
        shared = sorted(set.intersection(*(set(p.items) for p in passes.values())))
        if not shared:
            raise ConfigError("screen: the models share no task (check each model's tasks)")
        items = {k: {t: passes[k].items[t] for t in shared} for k in remaining}
        replicates = {k: mean_replicates(items[k], options) for k in remaining}
        scores = {k: mean_score(items[k], options, replicates[k]) for k in remaining}
        if i == 0:
            for key in remaining:
                models[key].fast = scores[key]
        cheap = cheap_candidates(*confirm_costs(estimate, tokens, remaining, spend))
        below = halving.dropped(replicates, options.confidence)
        out = [k for k in below if k not in cheap]
        spared = [k for k in below if k in cheap]
        kept = [k for k in remaining if k not in out]  # the spared among them: they are confirmed
        tied: dict[str, list[str]] = {}
        going_on = {k: replicates[k] for k in kept if k not in spared}
        for group in halving.tie_groups(going_on, margin, options.alpha):
            if len(group) > 1:
                cost, _ = confirm_costs(estimate, tokens, group, spend)
                cheapest = min(group, key=lambda k: (cost[k], estimate[k]))
                tied[cheapest] = [k for k in group if k != cheapest]
        p_kept = halving.p_best_kept(replicates, kept)
        ranked = sorted(remaining, key=lambda k: -scores[k].mean)
        rounds.append(
            ProxyRound(
                spec.size,
                {k: scores[k] for k in ranked},
                {k: passes[k].seconds for k in ranked},
                sorted(out, key=lambda k: -scores[k].mean),
                tied,
                p_kept,
                proxies,
                {k: estimate[k] for k in ranked},
                {k: tokens[k] for k in ranked if k in tokens},
                {k: spend[k] for k in ranked if k in spend},
                [k for k in ranked if k in cheap],
                replicates,
                sorted(spared, key=lambda k: -scores[k].mean),
            )
        )
        remaining = [k for k in going_on if not any(k in v for v in tied.values())]
        best = halving.leader(going_on)
        rounds[-1].undecided = {
            k: halving.equivalence_margin(going_on[best], going_on[k], options.alpha)
            for k in remaining
            if k != best and best not in tied.get(k, [])
        }
        if len(remaining) == 1:
            break
    result = HalvingResult(rounds, [], [], math.prod(r.p_best_kept for r in rounds), margin)
    _confirm(settings, by_key, models, remaining, replicates, result, options)
    result.ranking = _final_ranking(result.confirmed, result.unconfirmed, rounds)
    result.places = stated_places(result.ranking, rounds, result.confirmed, options.confidence)
    if screen.audit:
        result.audit = _audit(settings, by_key, models, result, options, full_task)
        result.audit.seeds = replayed(
            settings, runs, overrides, screen, options, screen.audit_seeds, exact_estimates(result.rounds)
        )
    return result


def replayed(
    settings: RunSettings,
    runs: Sequence[ModelRun],
    overrides: Mapping[str, Any],
    screen: ScreenSettings,
    options: CompareOptions,
    seeds: int,
    costs: Mapping[str, float] | None = None,
) -> list[SeedAudit]:
    """The screen again at seeds ``options.seed + 1`` … ``+ seeds``, each audited: its own proxies and bootstrap,
    the same exact runs (stored by the audit, so reused). What one seed's screen claims is partly the luck of its
    proxies; over the replays, how often the claim held says how far its stated probability can be trusted on
    these data. A proxy drawn within the full run's calls has its vectors served by the cache (a model behind an
    API is served every text: its full run cached them), so a replay's proxy times say nothing of what a model
    costs: its decisions that weigh cost take ``costs``, the screen's own estimates (:func:`exact_estimates`), as a
    screen at that seed on a cold cache would estimate them."""
    out: list[SeedAudit] = []
    for seed in range(options.seed + 1, options.seed + 1 + seeds):
        models = {str(r.model): ScreenedModel(str(r.model)) for r in runs}
        again = halving_screen(
            settings, runs, models, overrides, screen.model_copy(update={"audit": True, "audit_seeds": 0}),
            dataclasses.replace(options, seed=seed), costs=costs, full_task=False,
        )  # fmt: skip
        assert again.audit is not None
        claim = again.audit
        out.append(
            SeedAudit(
                seed, claim.held, again.p_winner_kept, claim.kendall_tau, claim.kendall_tau_order, again.confirmed
            )
        )
    return out


def exact_estimates(rounds: Sequence[ProxyRound]) -> dict[str, float]:
    """Each candidate's estimated exact seconds, from the last round it ran (the largest proxy it was timed on).

    >>> one = ProxyRound(0.05, {}, {}, [], {}, 1.0, exact_estimate={"a": 90.0, "b": 8.0})
    >>> two = ProxyRound(0.2, {}, {}, [], {}, 1.0, exact_estimate={"a": 80.0})
    >>> exact_estimates([one, two])
    {'a': 80.0, 'b': 8.0}
    """
    return {k: v for r in rounds for k, v in r.exact_estimate.items()}


def confirm_costs(
    seconds: Mapping[str, float],
    tokens: Mapping[str, float],
    keys: Sequence[str],
    spend: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], str]:
    """What confirming each of ``keys`` would cost, and in what: when every one of them is a model behind an API,
    the money its tokens cost where every one has a price (``price_per_mtok``), else the tokens (what its user pays
    for; the service's speed is not the model's); otherwise the seconds (a local model's cost, and the only one a
    mix of the two shares).

    >>> confirm_costs({"a": 9.0, "b": 1.0}, {"a": 100.0, "b": 100.0}, ["a", "b"])
    ({'a': 100.0, 'b': 100.0}, 'tokens')
    >>> confirm_costs({"a": 9.0, "b": 1.0}, {"a": 100.0, "b": 100.0}, ["a", "b"], {"a": 0.2, "b": 1.3})
    ({'a': 0.2, 'b': 1.3}, 'spend')
    >>> confirm_costs({"a": 9.0, "local": 1.0}, {"a": 100.0}, ["a", "local"])
    ({'a': 9.0, 'local': 1.0}, 'seconds')
    """
    if keys and all(k in tokens for k in keys):
        if spend is not None and all(k in spend for k in keys):
            return {k: spend[k] for k in keys}, "spend"
        return {k: tokens[k] for k in keys}, "tokens"
    return {k: seconds.get(k, 0.0) for k in keys}, "seconds"


def cheap_candidates(costs: Mapping[str, float], unit: str, share: float = CHEAP_SHARE) -> list[str]:
    """The candidates whose exact run costs at most ``share`` of all of theirs together, in seconds (the only unit
    in which a local candidate can be next to free; tokens and spend are alike for every model behind an API).

    >>> cheap_candidates({"mpnet": 1136.0, "minilm": 72.3, "bm25": 1.0, "static": 1.8}, "seconds")
    ['bm25', 'static']
    >>> cheap_candidates({"a": 1e6, "b": 1e3}, "tokens")
    []
    """
    if unit != "seconds":
        return []
    total = sum(costs.values())
    return [k for k, c in costs.items() if c <= share * total]


def _price(run: ModelRun) -> float | None:
    """A candidate's price per million tokens (its ``price_per_mtok`` option), None without one."""
    price = run.options.get("price_per_mtok")
    return None if price is None else float(price)


def _api_tokens(done: Pass) -> dict[str, float] | None:
    """Each task's tokens, where every task of the pass recorded those of a model behind an API (else None)."""
    tokens = {task: n for task, n in done.tokens.items() if n is not None}
    return tokens if tokens and len(tokens) == len(done.tokens) else None


def exact_estimate(work: Mapping[str, Mapping[str, float]], shares: Mapping[str, Mapping[str, float] | None]) -> float:
    """Seconds (or tokens) a candidate would take on the full tasks: each proxy task's phases
    (:func:`~embedscope.screen.passes.work_phases`), each divided by the share of the full task's work that phase
    of the proxy does (:func:`~embedscope.tasks.proxy.phase_shares`; ``"*"`` for a phase not named there; as
    measured where the share is unknown).

    >>> work = {"A.proxy-f0.1-s0": {"encode_queries": 4.0, "encode_corpus": 1.0}, "B.proxy-f0.1-s0": {"*": 1.0}}
    >>> exact_estimate(work, {"A.proxy-f0.1-s0": {"*": 0.1, "encode_queries": 0.8}})
    16.0
    """
    total = 0.0
    for task, phases in work.items():
        share = shares.get(task) or {}
        total += sum(seconds / (share.get(phase) or share.get("*") or 1.0) for phase, seconds in phases.items())
    return total


def _confirm(
    settings: RunSettings,
    by_key: Mapping[str, ModelRun],
    models: dict[str, ScreenedModel],
    survivors: Sequence[str],
    replicates: Mapping[str, np.ndarray],
    result: HalvingResult,
    options: CompareOptions,
) -> None:
    """Run the survivors exact, the most replicates won per estimated second first
    (:func:`~embedscope.screen.halving.confirm_order`), until the stated probability that the exact winner is among
    the confirmed (or tied with one of them) reaches ``options.confidence``; the others stay unconfirmed. The last
    round's replicates give that probability (:func:`~embedscope.screen.halving.p_best_kept`)."""
    last = result.rounds[-1]
    earlier = math.prod(r.p_best_kept for r in result.rounds[:-1])
    confirmed: list[str] = []
    wins = {
        k: halving.p_best_kept(replicates, [c for c in _covered([k], result.rounds) if c in replicates])
        for k in survivors
        if k in replicates
    }
    costs, _ = last.confirm_costs(list(survivors))
    order = halving.confirm_order(survivors, costs, wins)

    def confirm(key: str) -> None:
        result.exact_items[key] = _exact(settings, by_key[key], models[key], options)
        confirmed.append(key)

    for key in (k for r in result.rounds for k in r.spared):  # next to free: confirmed whatever the odds
        confirm(key)
    for n, key in enumerate(order):
        if any(k in survivors for k in confirmed):
            covered = [k for k in _covered(confirmed, result.rounds) if k in replicates]
            p = earlier * halving.p_best_kept(replicates, covered)
            if p >= options.confidence:
                rest = [k for k in order[n:] if k not in last.cheap]
                result.unconfirmed = sorted(rest, key=lambda k: -last.scores[k].mean)
                result.p_winner_kept = p
                for cheap in (k for k in order[n:] if k in last.cheap):  # confirmed whatever the odds: next to free
                    confirm(cheap)
                break
        confirm(key)
    result.confirmed = sorted(confirmed, key=lambda k: -mean_of(models[k].exact))


def _covered(confirmed: Sequence[str], rounds: Sequence[ProxyRound]) -> set[str]:
    """The confirmed and every candidate tied, round by round, with one of them."""
    covered = set(confirmed)
    while True:
        more = {o for r in rounds for key, others in r.tied.items() if key in covered for o in others}
        if more <= covered:
            return covered
        covered |= more


def _shared_proxy(made: dict[tuple[str, str], Proxy], task: Any, spec: ProxySpec) -> Proxy:
    """One proxy per task (name and data revision) in a round, whoever runs it: its data is loaded and reduced once."""
    key = (task.name, str(task.dataset_revision))
    if key not in made:
        made[key] = proxy_task(task, spec)
    return made[key]


def _model_tasks(settings: RunSettings, run: ModelRun) -> list[Any]:
    """The full tasks this model evaluates (the run's tasks, else the default suite's that suit it)."""
    from embedscope.evaluation.plan import model_tasks, resolve_tasks
    from embedscope.retrieval.roles import model_roles

    one = one_model(settings, run, {})
    model = built_model(settings, run, {})
    return model_tasks(resolve_tasks(one), one.model_runs()[0], model_roles(model), one, str(run.model))


def _proxy_pass(
    settings: RunSettings,
    run: ModelRun,
    overrides: Mapping[str, Any],
    tasks: Sequence[Proxy],
    m: ScreenedModel,
    first: bool,
) -> Any:
    """One candidate on the proxy tasks: on the fast path when it applies to the model (else exact, noted)."""
    proxied = settings.model_copy(update={"tasks": [p.task for p in tasks]})
    candidate = _untargeted(run)
    done = None
    if overrides and m.fast_applied:
        try:
            done = run_one(one_model(proxied, candidate, overrides))
        except ConfigError as e:
            if first:
                m.fast_applied, m.note = False, f"the fast path does not apply ({e}); screened exact"
    if done is None:
        done = run_one(one_model(proxied, candidate, {}))
    if first:
        m.fast_folder, m.name = done.folder, done.name
    m.fast_seconds += done.seconds
    return done


def _untargeted(run: ModelRun) -> ModelRun:
    """``run`` without its own task list (its proxies are the round's tasks)."""
    from dataclasses import replace

    return replace(run, tasks=None)


def _recipe(settings: RunSettings, proxy: Proxy) -> dict[str, Any]:
    """The proxy's recipe and compositions; those of its file when a resumed screen did not load its data."""
    spec = proxy.spec
    compositions = proxy.compositions
    path = _proxy_file(settings, proxy.task.name)
    if not compositions and path.is_file():
        compositions = json.loads(path.read_text(encoding="utf-8")).get("compositions", {})
    return {
        "of": proxy.task.name.rsplit(".", 1)[0],
        "size": spec.size,
        "seed": spec.seed,
        "hard_negatives": spec.hard_negatives,
        "random_documents": spec.random_documents,
        "batch_size": spec.batch_size,
        "chunk_size": spec.chunk_size,
        "compositions": compositions,
    }


def _proxy_file(settings: RunSettings, name: str) -> Path:
    return Path(settings.output_folder) / "proxies" / f"{name}.json"


def _write_proxies(settings: RunSettings, proxies: Iterable[Proxy]) -> None:
    """Each proxy's recipe and composition beside the results (``proxies/NAME.json``), for re-use and audit; one
    whose data a resumed screen did not load keeps the file written when it was."""
    for proxy in proxies:
        path = _proxy_file(settings, proxy.task.name)
        if proxy.compositions or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(_recipe(settings, proxy), indent=1, sort_keys=True) + "\n")


def _exact(settings: RunSettings, run: ModelRun, m: ScreenedModel, options: CompareOptions) -> dict[str, Any]:
    """The model exact on its full tasks; each task's items."""
    done = run_one(one_model(settings, run, {}), confirms=True)
    m.exact_folder, m.exact_seconds = done.folder, done.seconds
    m.name = m.name or done.name
    m.exact = mean_score(done.items, options)
    return done.items


def _final_ranking(confirmed: list[str], unconfirmed: list[str], rounds: Sequence[ProxyRound]) -> list[str]:
    """Every candidate: round by round, the last first, the candidates of each round not placed yet by their score
    on its proxy, except that the confirmed (``confirmed``: by exact score) take the places of the confirmed in their
    exact order; a tied model right after the one confirmed or ranked for it. A candidate confirmed because its exact
    run is next to free is permuted with the other confirmed from the place its proxy score gives it.

    >>> from embedscope.screen.passes import MeanScore
    >>> r = ProxyRound(0.1, {k: MeanScore(v, 0, 1, {}) for k, v in {"a": .9, "b": .8, "c": .7, "d": .2}.items()},
    ...                {}, ["c"], {}, 1.0, {}, {})
    >>> _final_ranking(["d", "a"], ["b"], [r])  # d and a confirmed, d better exact: d takes a's place
    ['d', 'b', 'c', 'a']
    >>> _final_ranking(["b", "a"], [], [r])  # b placed in a's place first; b's own place then goes to a
    ['b', 'a', 'c', 'd']
    """
    ranking: list[str] = []
    tied_with = round_ties(rounds)
    ties = {m for v in tied_with.values() for m in v}
    exact_order = iter(confirmed)
    chosen = set(confirmed)
    slots: set[str] = set()  # the confirmed whose place (their last round's) has been given to one of them

    def place(key: str) -> None:
        ranking.append(key)
        for other in tied_with.get(key, []):
            place(other)

    for r in reversed(rounds):
        for key in sorted(r.scores, key=lambda k: -r.scores[k].mean):
            if key in ties:
                continue
            if key in chosen:  # its place goes to the next confirmed in exact order, whoever was placed before
                if key not in slots:
                    slots.add(key)
                    place(next(exact_order))
            elif key not in ranking:
                place(key)
    for key in [*confirmed, *unconfirmed]:  # any not scored by a round (none in a screen's own result)
        if key not in ranking:
            place(key)
    return ranking


def _audit(
    settings: RunSettings,
    by_key: Mapping[str, ModelRun],
    models: dict[str, ScreenedModel],
    result: HalvingResult,
    options: CompareOptions,
    full_task: bool = True,
) -> Audit:
    """Every candidate exact (stored results reused): the exact winner, whether the claim held, τ; with
    ``full_task`` also what the full tasks themselves show (:func:`full_task_places`) and τ against it."""
    exact: dict[str, float] = {}
    for key, run in by_key.items():
        m = models[key]
        if m.exact is None:
            result.exact_items[key] = _exact(settings, run, m, options)
        exact[key] = m.exact.mean if m.exact else math.nan
    winner = max(exact, key=lambda k: exact[k])
    covered = _covered(result.confirmed, result.rounds)
    order = result.ranking
    scores = [exact[k] for k in order]
    tau = kendall_tau([-p for p in result.places], scores)
    ordered = kendall_tau([-p for p in tied_places(order, round_ties(result.rounds))], scores)
    audit = Audit(exact, winner, winner in covered, tau, ordered)
    if not full_task:
        return audit
    shown = full_task_places({k: result.exact_items[k] for k in by_key if k in result.exact_items}, options)
    if shown is not None and len(shown[0]) == len(by_key):
        audit.full_task_ranking, audit.full_task_places = shown
        audit.kendall_tau_full_task = kendall_tau([-p for p in shown[1]], [exact[k] for k in shown[0]])
        full_place = dict(zip(*shown))
        audit.kendall_tau_shown = kendall_tau([-p for p in result.places], [-full_place[k] for k in order])
    return audit


def round_ties(rounds: Sequence[ProxyRound]) -> dict[str, list[str]]:
    """Every round's ties: the model that went on → the models it stands for."""
    return {k: v for r in rounds for k, v in r.tied.items()}


def tied_places(ranking: Sequence[str], tied: Mapping[str, Sequence[str]]) -> list[int]:
    """Each model's place in ``ranking``, except that a model declared tied with another (``tied``: a round's ties)
    shares that one's place, so that τ-b counts the pair as a tie, as the screen states it.

    >>> tied_places(["a", "b", "c", "d"], {"b": ["c"], "c": ["d"]})
    [0, 1, 1, 1]
    """
    head = {m: k for k, v in tied.items() for m in v}

    def first(model: str) -> str:
        while model in head:
            model = head[model]
        return model

    return [ranking.index(first(m)) for m in ranking]


def stated_places(
    ranking: Sequence[str], rounds: Sequence[ProxyRound], exact: Sequence[str], confidence: float
) -> list[int]:
    """Each model's place in the screen's final ``ranking`` (0 first), where the screen states an order only where
    it has one: models declared tied share a place (:func:`tied_places`), and so do neighbours whose order rests on
    a proxy that does not show it. Walking down the ranking, a model joins the place of the group above it unless
    it is ordered below every model of that group: both run exact (``exact``: their exact scores order them), or
    last scored in different rounds (the halving ordered them), or the ``confidence`` interval of that model's proxy
    score minus its own, over that round's paired replicates, lies above 0
    (:func:`~embedscope.screen.halving.difference_interval`). A place below a group states an order against each of
    its models, so each must be shown, not only the group's first (the easiest to be below). Kendall's τ-b then
    counts such a pair as a tie, neither concordant nor discordant, as the screen states it.

    >>> from embedscope.screen.passes import MeanScore
    >>> noise = np.random.default_rng(0).normal(0, 0.01, 1000)
    >>> reps = {"a": 0.9 + noise, "b": 0.6 + noise, "c": 0.59 + noise * 2, "d": 0.2 + noise}
    >>> r = ProxyRound(0.1, {k: MeanScore(float(v.mean()), 0, 1, {}) for k, v in reps.items()}, {}, ["b", "c", "d"],
    ...                {}, 1.0, replicates=reps)
    >>> stated_places(["a", "b", "c", "d"], [r], ["a"], 0.95)  # b above c by 0.01 ± more than that: not ordered
    [0, 1, 1, 3]
    >>> stated_places(["a", "b", "c", "d"], [r], ["a", "b", "c"], 0.95)  # b and c both exact: their exact scores order them
    [0, 1, 2, 3]
    >>> reps["d"] = 0.575 + noise  # clearly below b, not below the noisy c of b's group
    >>> stated_places(["a", "b", "c", "d"], [r], ["a"], 0.95)
    [0, 1, 1, 1]
    """
    tied = tied_places(ranking, round_ties(rounds))
    last_round = {m: i for i, r in enumerate(rounds) for m in r.scores}
    done = set(exact)

    def ordered(above: str, below: str) -> bool:
        if above in done and below in done:
            return True
        i = last_round.get(above)
        if i is None or i != last_round.get(below):
            return True
        reps = rounds[i].replicates
        if above not in reps or below not in reps:
            return True
        return halving.difference_interval(reps[above], reps[below], confidence)[0] > 0

    return places_shown(ranking, ordered, tied)


def places_shown(
    ranking: Sequence[str], ordered: Callable[[str, str], bool], tied: Sequence[int] | None = None
) -> list[int]:
    """Each model's place in ``ranking`` (0 first) where ``ordered(above, below)`` says whether the evidence shows
    ``above`` better: walking down, a model joins the place of the group above it unless it is shown below each of
    that group's models; ``tied[i]`` (default ``i``) is the index of the model whose place model ``i`` shares by a
    declared tie.

    >>> shown = {("a", "b"), ("a", "c"), ("a", "d"), ("c", "d")}
    >>> places_shown(["a", "b", "c", "d"], lambda x, y: (x, y) in shown)  # b ~ c; d not shown below b: it joins
    [0, 1, 1, 1]
    >>> places_shown(["a", "b", "c", "d"], lambda x, y: (x, y) in shown | {("b", "d")})
    [0, 1, 1, 3]
    """
    tied = list(range(len(ranking))) if tied is None else tied
    out: list[int] = []
    head = 0  # where the group above starts
    for i, model in enumerate(ranking):
        if i and tied[i] != i:  # tied with one above it: its place, wherever that one went
            out.append(out[tied[i]])
            continue
        if i and not all(ordered(above, model) for above in ranking[head:i]):
            out.append(out[head])
            continue
        head = i
        out.append(i)
    return out


def full_task_places(
    exact_items: Mapping[str, Mapping[str, TaskItems]], options: CompareOptions
) -> tuple[list[str], list[int]] | None:
    """The all-exact ranking as the full tasks themselves show it: every candidate by its exact mean score over the
    tasks all of them ran, a model sharing the place of the group above it unless the ``options.confidence`` interval
    of each of that group's paired bootstrap difference to it (the screen's resamples of the exact items) lies above
    0 (:func:`places_shown`). τ-b of these places against the exact means is what a ranking that states only what
    its evidence shows gets with every candidate run exact; ``None`` when the models' items are not the same items.

    >>> from embedscope.compare.items import TaskItems
    >>> rng = np.random.default_rng(0)
    >>> values = {m: b + rng.normal(0, 0.05, 400) for m, b in {"a": 0.9, "b": 0.5, "c": 0.499}.items()}
    >>> items = {m: {"t": TaskItems("t", "Retrieval", "ndcg_at_10", float(v.mean()), "mean", tuple(range(400)), v)}
    ...          for m, v in values.items()}
    >>> full_task_places(items, CompareOptions(rounds=2000))  # b and c 0.001 apart, each ± 0.05 a query: one place
    (['a', 'b', 'c'], [0, 1, 1])
    """
    if not exact_items:
        return None
    names = sorted(set.intersection(*(set(t) for t in exact_items.values())))
    first = next(iter(exact_items.values()))
    if not names or any(items[t].keys != first[t].keys for items in exact_items.values() for t in names):
        return None
    replicates = {k: mean_replicates({t: items[t] for t in names}, options) for k, items in exact_items.items()}
    means = {k: float(np.mean([items[t].score for t in names])) for k, items in exact_items.items()}
    ranking = sorted(means, key=lambda k: -means[k])

    def shown(above: str, below: str) -> bool:
        return halving.difference_interval(replicates[above], replicates[below], options.confidence)[0] > 0

    return ranking, places_shown(ranking, shown)
