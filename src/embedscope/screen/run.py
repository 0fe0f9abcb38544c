"""Screen many models (``embedscope screen``): planned, on proxy rounds, or on a fast pass confirmed exactly.

With no mode named the screen plans first (:mod:`embedscope.screen.plan`): proxy rounds
(:mod:`embedscope.screen.rounds`) where they cannot cost much more than running every candidate, else each candidate
exactly once (ranked, the winner tested against the runner-up). A fast pass, when named:

1. Every model runs on the fast path: its own options with the fast path's overrides (:func:`fast_paths`, e.g.
   ``{"dtype": "bf16"}``), through :func:`~embedscope.evaluation.runner.run`, so stored results and the embedding
   cache are reused, an interrupted screen resumes, and the fast results land in their own experiments folder (the
   overrides are model options, which :func:`~embedscope.results.settings.experiment_kwargs` records).
2. Models are ranked by their mean main score over the tasks, with a bootstrap interval: each task's items are
   resampled (:func:`~embedscope.compare.stats.bootstrap_index_blocks`, the statistic compare uses for the task:
   the mean of per-item values or the pair statistic), the task scores of one resample are averaged, and the
   interval is the ``(1 ∓ c)/2`` percentiles of those means.
3. The top ``confirm`` models, and every model whose interval overlaps one of theirs, run exact (fp32, the model's
   own backend).
4. The exact ranking of those, Kendall's τ between the two rankings (``scipy.stats.kendalltau`` of the fast and
   exact mean scores), the exact winner against the runner-up (:func:`~embedscope.compare.core.compare_models`:
   the paired test per task, Holm-adjusted as compare does), and each confirmed model's fidelity: fast against
   exact, as ``compare --models`` measures it (score shift with CI, top-10 Jaccard/RBO or similarity Spearman, and
   the per-text cosine of the two vectors, read from the vectors both passes cached: never encoded again).

With ``fast="auto"`` (or a fast pass named by ``confirm`` or ``fidelity`` alone), each model takes the first of
:func:`fast_path_chain` that acts on it (an ONNX graph quantized already, which ``openvino-int8`` will not quantize
again, takes ``openvino-bf16``, or ``openvino`` where this CPU computes no bf16); a named ``--fast`` is the only one tried. A model on which no fast path can act (a static
model, bm25) is screened on its exact path, and the report says so on its row. Times are the wall times measured
here, nothing estimated.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.compare.core import CompareOptions, Comparison, check_options, compare_models, json_safe
from embedscope.compare.items import ModelResults, TaskItems
from embedscope.errors import ConfigError, EmbedscopeError, SettingError, UnknownNameError
from embedscope.screen.passes import (
    MeanScore,
    Pass,
    ScreenedModel,
    built_model,
    kendall_tau,
    mean_of,
    mean_score,
    one_model,
    run_one,
)
from embedscope.screen.plan import ScreenPlan, outcome_line, plan_screen
from embedscope.screen.rounds import (
    HalvingResult,
    halving_screen,
)
from embedscope.settings import Layer, RunSettings, build_settings
from embedscope.settings.run import ModelOptions, ModelRun
from embedscope.settings.screen import DEFAULT_CONFIRM, ScreenSettings, screen_values
from embedscope.settings.sources import build_declared

# the fast paths that are not a backend: the model options each sets, its rank in the default order, the module it
# needs and the extra that installs it. Every registered backend that declares a fast path joins them
# (:func:`fast_paths`).
DTYPE_FAST_PATHS: dict[str, tuple[dict[str, str], int, str, str]] = {"bf16": ({"dtype": "bf16"}, 3, "torch", "torch")}
# The default order (each backend's ``fast_rank``): fastest first, as bench/bench_fast_backends.py measured MiniLM's
# encode on 2 Zen 4 cores (~240-token texts, against torch fp32): OpenVINO int8 4.51×, OpenVINO bf16 2.86×, torch
# bf16 1.28× (ONNX int8 1.81×, OpenVINO fp32 1.63×).


def fast_paths() -> dict[str, dict[str, str]]:
    """Every fast path → the model options it sets on every model entry: each registered backend that declares one
    (:func:`~embedscope.models.backends.fast_paths`: ``{"backend": NAME}``), then the dtype paths."""
    from embedscope.models.backends import fast_paths as backend_fast_paths

    found = {b.name: {"backend": b.name} for b in backend_fast_paths()}
    return {**found, **{name: dict(path[0]) for name, path in DTYPE_FAST_PATHS.items()}}


def preference() -> tuple[str, ...]:
    """The fast paths in the default order (those with a rank; lower first)."""
    from embedscope.models.backends import fast_paths as backend_fast_paths

    ranked = [(b.fast_rank, b.name) for b in backend_fast_paths() if b.fast_rank is not None]
    ranked += [(path[1], name) for name, path in DTYPE_FAST_PATHS.items()]
    return tuple(name for _, name in sorted(ranked))


def _needs(name: str) -> tuple[str, str] | None:
    """The module fast path ``name`` needs and the extra that installs it."""
    from embedscope.models.backends import backend as backend_record
    from embedscope.models.backends import backend_names

    if name in DTYPE_FAST_PATHS:
        return DTYPE_FAST_PATHS[name][2], DTYPE_FAST_PATHS[name][3]
    if name in backend_names():
        record = backend_record(name)
        return (record.module, record.extra or record.module) if record.module else None
    return None


def fast_path_overrides(name: str) -> dict[str, str]:
    """The model options of fast path ``name``; a name this embedscope cannot run is refused naming the key
    ``fast``."""
    paths = fast_paths()
    if name not in paths:
        raise SettingError("fast", f"{{fast}}: {UnknownNameError('fast path', name, paths)}")
    overrides = paths[name]
    try:
        ModelOptions.model_validate(overrides)
    except (EmbedscopeError, ValueError) as e:  # a backend this embedscope does not know yet
        reason = str(e).strip().splitlines()[-1].strip() if str(e).strip() else "unknown"
        raise SettingError("fast", f"{{fast}} {name}: this embedscope cannot run it ({reason})") from None
    needed = _needs(name)
    if needed is not None and importlib.util.find_spec(needed[0]) is None:
        raise SettingError("fast", f"{{fast}} {name} needs {needed[0]}: pip install 'embedscope[{needed[1]}]'")
    return dict(overrides)


def default_fast_path() -> str:
    """The first of :func:`preference` that this embedscope can run here."""
    return fast_path_chain(None)[0][0]


# -- scores with intervals ------------------------------------------------------------------------------------


def confirm_set(scores: Mapping[str, MeanScore], confirm: int) -> list[str]:
    """The top ``confirm`` models by mean score, then every other model whose interval overlaps one of theirs (in
    ranking order)."""
    ranked = sorted(scores, key=lambda m: -scores[m].mean)
    top = ranked[:confirm]
    return top + [m for m in ranked[confirm:] if any(scores[m].overlaps(scores[t]) for t in top)]


# -- the screen -----------------------------------------------------------------------------------------------


@dataclass
class ScreenReport:
    """Everything a screen did and found: ``table()`` is what ``embedscope screen`` prints, ``to_dict()`` plain data.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.screen(["fts5", "fts5:match=all"], [tiny_retrieval_task()], fast="bf16", fidelity=False,
        ...                            output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> report.fast_path, report.tasks, report.to_dict()["models"][0]["model"]
        ('bf16', ['TinyRetrieval'], 'fts5')
    """

    fast_path: str
    tasks: list[str]
    models: list[ScreenedModel]  # in fast ranking order
    confirmed: list[str]  # in exact ranking order
    kendall_tau: float
    winner_vs_runner_up: Comparison | None
    fast_seconds: float
    exact_seconds: float
    fidelity_seconds: float
    options: CompareOptions
    halving: HalvingResult | None = None  # screen --proxy: the rounds, the odds and the audit
    plan: ScreenPlan | None = None  # what the screen planned (a screen whose mode it chose; any with dry_run)
    spent: dict[str, float] = dataclasses.field(default_factory=dict)  # {"seconds": wall time, "tokens": …}

    def model(self, name: str) -> ScreenedModel:
        return next(m for m in self.models if m.model == name)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes None)."""

        def score(s: MeanScore | None) -> dict[str, Any] | None:
            return None if s is None else {"mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high, "tasks": s.tasks}

        models = [
            {
                "model": m.model,
                "name": m.name,
                "fast_applied": m.fast_applied,
                "fast_path": m.fast_path,
                "note": m.note,
                "fast": score(m.fast),
                "exact": score(m.exact),
                "shift": m.shift,
                "fast_folder": str(m.fast_folder) if m.fast_folder else None,
                "exact_folder": str(m.exact_folder) if m.exact_folder else None,
                "fast_seconds": m.fast_seconds,
                "exact_seconds": m.exact_seconds,
                "fidelity": m.fidelity,
            }
            for m in self.models
        ]
        versus = self.winner_vs_runner_up.to_dict() if self.winner_vs_runner_up else None
        return json_safe(
            {
                "fast_path": self.fast_path,
                "tasks": self.tasks,
                "models": models,
                "confirmed": self.confirmed,
                "kendall_tau": self.kendall_tau,
                "winner_vs_runner_up": versus,
                "significance": self.significance_line(),
                "seconds": {"fast": self.fast_seconds, "exact": self.exact_seconds, "fidelity": self.fidelity_seconds},
                "halving": self.halving.to_dict() if self.halving else None,
                "plan": self.plan.to_dict() if self.plan else None,
                "spent": self.spent,
                "outcome": self.outcome_line(),
            }
        )

    def outcome_line(self) -> str | None:
        """What the screen cost against its plan's estimate (None without a plan, or for a dry run)."""
        if self.plan is None or not self.models:
            return None
        return outcome_line(self.plan, self.spent)

    def significance_line(self) -> str:
        """Whether the exact winner is significantly better than the runner-up, task by task."""
        from embedscope.screen.report import significance_line

        return significance_line(self)

    def text(self, digits: int = 4, plan: bool = True) -> str:
        """The report as printed; ``plan`` False leaves out the plan's lines (a caller that printed them first)."""
        from embedscope.screen.report import screen_text

        return screen_text(self, digits, plan)

    def table(self, digits: int = 4) -> str:
        """What ``embedscope screen`` prints (the verbs' return convention: ``table()`` and ``to_dict()``)."""
        return self.text(digits)


def _check(settings: RunSettings, fast_keys: Sequence[str]) -> list[ModelRun]:
    """The model runs of a screen; one line for what a screen cannot do (its own options are checked where
    :class:`ScreenSettings` is built)."""
    if settings.pipeline is not None or settings.pipelines:
        raise ConfigError("screen compares embedding models; a pipeline cannot take a fast path: drop it")
    if settings.dtype not in (None, "fp32"):
        named = getattr(settings, "display_name", lambda key: key)("dtype")
        raise SettingError(
            "fast", f"{named} {settings.dtype}: screen runs the exact pass in fp32 and the fast one on {{fast}}"
        )
    runs = settings.model_runs()
    if settings.model is None and not settings.models or len(runs) < 2:
        raise SettingError(
            "models",
            f"screen needs at least two models ({{models}} M1 M2 …), got {len(runs) if settings.models else 0}",
        )
    for run in runs:
        if not isinstance(run.model, str):
            raise ConfigError(
                f"screen: {run.model!r} is not a model name or path; a fast path is a set of model options, which "
                "apply only to models given by name or path"
            )
        if run.options.get("dtype") not in (None, "fp32"):
            raise ConfigError(f"screen: {run.model} sets dtype {run.options['dtype']}; its exact pass runs in fp32")
        taken = [k for k in fast_keys if run.options.get(k) is not None]
        if taken:
            raise ConfigError(f"screen: {run.model} sets {taken[0]}, which the fast path sets: drop it")
    seen: dict[str, str] = {}
    for run in runs:
        key = _model_key(str(run.model))
        if key in seen:
            same = f"{seen[key]} and {run.model} are" if seen[key] != run.model else f"{run.model} is"
            where = f" (both {key})" if seen[key] != run.model else ""
            raise ConfigError(f"screen: {same} one model given twice{where}: give it once")
        seen[key] = str(run.model)
    return runs


def _model_key(model: str) -> str:
    """What a model name stands for: the resolved path of a local model (``./tiny`` and ``tiny/`` alike), an
    alias in lower case, else the name as given."""
    from embedscope.models.specs import ALIASES

    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve())
    return model.strip().lower() if model.strip().lower() in ALIASES else model


def _preflight(
    settings: RunSettings, runs: Sequence[ModelRun], options: CompareOptions, outputs: Mapping[str, Any]
) -> None:
    """Everything the screen will need, before its first model runs: each model's exact-pass settings (its tasks,
    the model available, its options), the output folder, the report files and the seed; one error lists all."""
    from embedscope.sweep.preflight import Preflight, check_outputs, check_seed, check_settings

    check = Preflight("screen", "model")
    check_seed(check, "--seed", options.seed)
    check_outputs(check, outputs)
    for run in runs:
        one = one_model(settings, run, {})
        check_settings(check, f"model {run.model}", one, one.model_runs())
    check.raise_if_any()


def fast_path_chain(fast: str | None) -> list[tuple[str, dict[str, str]]]:
    """The fast paths a screen tries on each model, in order, with their model options: ``fast`` alone when named;
    by default every fast path of :func:`preference` that can run here, so that a model the first refuses (an ONNX
    graph quantized already, which ``openvino-int8`` will not quantize again) takes the next that applies."""
    if fast is not None and fast != "auto":
        return [(fast, fast_path_overrides(fast))]
    order = preference()
    chain = []
    for name in order:
        try:
            chain.append((name, fast_path_overrides(name)))
        except ConfigError:
            continue
    if not chain:
        raise SettingError("fast", f"no fast path can run here ({', '.join(order)}): name one with {{fast}}")
    return chain


def _fast_pass(
    settings: RunSettings, run: ModelRun, chain: Sequence[tuple[str, Mapping[str, Any]]], m: ScreenedModel
) -> Pass:
    """The model's fast run on the first path of ``chain`` that applies to it (``m`` records which, and why the
    ones before it did not); on its exact path (noted) when none can act on it: a model that embeds nothing (bm25),
    or one every fast path refuses."""
    refused: list[str] = []
    done = None
    if _embeds(settings, run):
        for name, overrides in chain:
            try:
                done = run_one(one_model(settings, run, overrides))
            except ConfigError as e:
                refused.append(f"{name}: {e}")
                continue
            m.fast_path, m.fast_overrides = name, dict(overrides)
            if refused:
                m.note = f"on fast path {name}; {'; '.join(refused)}"
            break
    else:
        refused.append(f"{run.model} runs no embedding model")
    if done is None:
        m.fast_applied, m.note = False, f"the fast path does not apply ({'; '.join(refused)}); screened exact"
        done = run_one(one_model(settings, run, {}))
    m.fast_folder, m.name, m.fast_seconds = done.folder, done.name, done.seconds
    return done


def screen_settings(
    settings: RunSettings,
    screen: ScreenSettings = ScreenSettings(),
    options: CompareOptions = CompareOptions(),
    outputs: Mapping[str, Any] | None = None,
    on_plan: Callable[[ScreenPlan], None] | None = None,
    dry_run: bool = False,
) -> ScreenReport:
    """Screen the models of ``settings`` as ``screen`` says (:class:`~embedscope.settings.screen.ScreenSettings`,
    checked once where it is built). ``outputs``: the report files that will be written (``{"--json": path}``),
    checked with everything else before the first model runs; ``on_plan``: called with the plan before anything is
    encoded (the command line prints it then).

    - No way to screen named: the plan (:mod:`embedscope.screen.plan`) times each candidate on a few texts and
      takes proxy rounds (:data:`~embedscope.screen.plan.DEFAULT_PROXY`) or runs each candidate exactly once.
    - ``screen.proxy``: the sizes of successive-halving rounds on proxy tasks (:mod:`embedscope.screen.rounds`;
      ties within ``screen.margin``, ``audit`` runs every candidate exact too and ``audit_seeds`` replays the
      screen at that many more seeds); their fast path is ``fast`` when given, else none (the proxies' vectors on the
      exact path serve the confirming run from the cache).
    - ``screen.fast``, ``confirm`` or ``fidelity``: a fast pass on ``fast`` (default: :func:`default_fast_path`),
      confirming the best ``confirm`` (default 2; and those whose interval overlaps theirs) exact; ``fidelity``
      False leaves out the per-text cosines.
    - ``dry_run``: the plan only (nothing screened or written), in ``report.plan``."""
    check_options(options)
    started = time.perf_counter()
    mode = screen.mode
    plan = None
    if mode is None or dry_run:
        runs = _check(settings, [])
        _preflight(settings, runs, options, outputs or {})
        plan = plan_screen(settings, runs, mode, screen.proxy)
        if on_plan is not None:
            on_plan(plan)
        if dry_run:
            return ScreenReport(plan.mode, [], [], [], math.nan, None, 0.0, 0.0, 0.0, options, plan=plan)
        if plan.mode == "proxy":
            screen = screen.model_copy(update={"proxy": list(plan.proxy)})
    if plan is not None and plan.mode == "exact":
        report = _exact_report(settings, runs, options)
    elif screen.proxy is not None:
        report = _halving_report(settings, screen, options, outputs, runs if plan is not None else None)
    else:
        report = _fast_report(settings, screen, options, outputs)
    report.plan = plan
    report.spent = {"seconds": time.perf_counter() - started, "tokens": _tokens(report)}
    return report


def _tokens(report: ScreenReport) -> float:
    """The tokens the screen's models were billed for (0 for local models)."""
    from embedscope.screen.report import model_usage

    return float(sum((u or {}).get("tokens") or 0 for u in model_usage(report).values()))


def winner_vs_runner_up(
    models: Mapping[str, ScreenedModel],
    passes: Mapping[str, Pass],
    confirmed: Sequence[str],
    tasks: Sequence[str],
    options: CompareOptions,
) -> Comparison | None:
    """The exact winner against the runner-up (the first two of ``confirmed``, by their exact ``passes``):
    compare's paired test per task; None with fewer than two."""
    if len(confirmed) < 2:
        return None
    pair = [
        ModelResults(models[k].name, passes[k].folder, {t: passes[k].items[t] for t in tasks}) for k in confirmed[:2]
    ]
    return compare_models(pair, options, tasks)


def _exact_report(settings: RunSettings, runs: Sequence[ModelRun], options: CompareOptions) -> ScreenReport:
    """Every candidate run exactly once (the plan found no screen that saves): ranked by exact mean score, the
    winner tested against the runner-up."""
    models = {str(r.model): ScreenedModel(str(r.model), fast_applied=False) for r in runs}
    passes: dict[str, Pass] = {}
    for r in runs:
        key = str(r.model)
        passes[key] = done = run_one(one_model(settings, r, {}), confirms=True)
        models[key].name, models[key].exact_folder, models[key].exact_seconds = done.name, done.folder, done.seconds
    tasks = _shared_tasks({k: p.items for k, p in passes.items()})
    for key, m in models.items():
        m.exact = mean_score({t: passes[key].items[t] for t in tasks}, options)
    confirmed = sorted(models, key=lambda k: -mean_of(models[k].exact))
    versus = winner_vs_runner_up(models, passes, confirmed, tasks, options)
    ranked = [models[k] for k in confirmed]
    seconds = sum(m.exact_seconds for m in ranked)
    return ScreenReport("exact", tasks, ranked, confirmed, math.nan, versus, 0.0, seconds, 0.0, options)


def _fast_report(
    settings: RunSettings, screen: ScreenSettings, options: CompareOptions, outputs: Mapping[str, Any] | None
) -> ScreenReport:
    """A fast pass on ``screen.fast``, the leaders confirmed exact (the module docstring's steps 1–4)."""
    fast = screen.fast
    confirm = DEFAULT_CONFIRM if screen.confirm is None else screen.confirm
    fidelity = screen.fidelity is not False
    chain = fast_path_chain(fast)
    fast = chain[0][0]
    runs = _check(settings, sorted({k for _, overrides in chain for k in overrides}))
    _preflight(settings, runs, options, outputs or {})
    models = {str(r.model): ScreenedModel(str(r.model)) for r in runs}
    fast_passes = {str(r.model): _fast_pass(settings, r, chain, models[str(r.model)]) for r in runs}
    tasks = _shared_tasks({k: p.items for k, p in fast_passes.items()})
    for key, m in models.items():
        m.fast = mean_score({t: fast_passes[key].items[t] for t in tasks}, options)
    chosen = confirm_set({k: m.fast for k, m in models.items() if m.fast is not None}, confirm)
    exact_passes: dict[str, Pass] = {}
    for r in runs:
        key = str(r.model)
        if key in chosen:
            m = models[key]
            exact_passes[key] = done = run_one(one_model(settings, r, {}), confirms=True)
            m.exact_folder, m.exact_seconds = done.folder, done.seconds
            m.exact = mean_score({t: done.items[t] for t in tasks}, options)
    confirmed = sorted(chosen, key=lambda k: -mean_of(models[k].exact))
    started = time.perf_counter()
    for r in runs:
        key = str(r.model)
        if key in chosen and models[key].fast_applied:
            exact, fast_done = exact_passes[key], fast_passes[key]
            models[key].fidelity = _fidelity(exact.items, fast_done.items, options, tasks)
            if fidelity:
                cosines = _embedding_agreement(settings, r, models[key].fast_overrides, [exact.tasks[t] for t in tasks])
                for row in models[key].fidelity:
                    row.update(cosines.get(row["task"], {}))
    fidelity_seconds = time.perf_counter() - started
    tau = kendall_tau([mean_of(models[k].fast) for k in chosen], [mean_of(models[k].exact) for k in chosen])
    versus = winner_vs_runner_up(models, exact_passes, confirmed, tasks, options)
    ranked = sorted(models.values(), key=lambda m: -mean_of(m.fast))
    return ScreenReport(
        fast,
        tasks,
        ranked,
        confirmed,
        tau,
        versus,
        sum(m.fast_seconds for m in ranked),
        sum(m.exact_seconds for m in ranked),
        fidelity_seconds,
        options,
    )


def _halving_report(
    settings: RunSettings,
    screen: ScreenSettings,
    options: CompareOptions,
    outputs: Mapping[str, Any] | None,
    runs: Sequence[ModelRun] | None = None,
) -> ScreenReport:
    """``screen --proxy``: the rounds of :func:`~embedscope.screen.rounds.halving_screen` as a :class:`ScreenReport`
    (``fast`` is round 1's score on the proxies). ``runs``: the model runs a plan already checked (with no fast
    path), else checked here."""
    fast, proxy = screen.fast, list(screen.proxy or ())
    fast = default_fast_path() if fast == "auto" else fast
    overrides = fast_path_overrides(fast) if fast is not None else {}
    if runs is None:
        runs = _check(settings, list(overrides))
        _preflight(settings, runs, options, outputs or {})
    models = {str(r.model): ScreenedModel(str(r.model)) for r in runs}
    result = halving_screen(settings, runs, models, overrides, screen, options)
    confirmed = result.confirmed
    tau = kendall_tau([mean_of(models[k].fast) for k in confirmed], [mean_of(models[k].exact) for k in confirmed])
    versus = None
    if len(confirmed) >= 2:
        pair = [
            ModelResults(models[k].name, models[k].exact_folder or Path(), result.exact_items[k]) for k in confirmed[:2]
        ]
        shared = sorted(set.intersection(*(set(p.tasks) for p in pair)))
        versus = compare_models(pair, options, shared)
    ranked = [models[k] for k in result.ranking]
    path = f"proxy {' → '.join(map(str, proxy))}" + (f" on {fast}" if fast is not None else "")
    return ScreenReport(
        path,
        sorted({t for r in result.rounds for t in r.proxies}),
        ranked,
        confirmed,
        tau,
        versus,
        sum(m.fast_seconds for m in ranked),
        sum(m.exact_seconds for m in ranked if m.model in confirmed),
        0.0,
        options,
        result,
    )


def _shared_tasks(items: Mapping[str, Mapping[str, TaskItems]]) -> list[str]:
    """The tasks every model has a result for (a model's own task list can narrow them)."""
    sets = [set(v) for v in items.values()]
    shared = sorted(set.intersection(*sets))
    if not shared:
        raise ConfigError("screen: the models share no task (check each model's tasks)")
    return shared


def _fidelity(
    exact: Mapping[str, TaskItems], fast: Mapping[str, TaskItems], options: CompareOptions, tasks: Sequence[str]
) -> list[dict[str, Any]]:
    """Fast against exact, task by task, as ``compare --fidelity`` measures it: the score shift fast → exact
    (exact − fast, compare's ``b − a`` with the fast result as ``a``) with its CI and adjusted p, and the agreement
    measures of :func:`~embedscope.compare.fidelity.agreement` (top-10 Jaccard and RBO for rankings; similarity
    Spearman and discordant pairs for STS and pair classification; all symmetric in the two results)."""
    from embedscope.compare.fidelity import agreement

    pair = [ModelResults("fast", Path(), dict(fast)), ModelResults("exact", Path(), dict(exact))]
    comparison = compare_models(pair, options, tasks, extra=agreement)
    return [
        {
            "task": r.task,
            "metric": r.metric,
            "fast": r.score_a,
            "exact": r.score_b,
            "shift": r.delta,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "p_adjusted": r.p_adjusted,
            "significant": r.significant,
            **r.extra,
        }
        for r in comparison.rows
    ]


def _embeds(settings: RunSettings, run: ModelRun) -> bool:
    """Whether the model is an encoder or a pipeline with an encoder in a stage (a fast path acts on those)."""
    from embedscope.models.base import Encoder

    built = built_model(settings, run, {})
    stage_models = getattr(built, "stage_models", None)
    return any(isinstance(x, Encoder) for x in (stage_models() if stage_models is not None else [built]))


def _embedding_agreement(
    settings: RunSettings, run: ModelRun, overrides: Mapping[str, Any], tasks: Sequence[Any]
) -> dict[str, dict[str, Any]]:
    """Per-text cosine of the exact and fast vectors of each task's texts
    (:func:`~embedscope.compare.embeddings.embedding_agreement`), read from the vectors the two passes cached and
    never encoded again (:class:`~embedscope.models.cache.ServedOnly`); a task whose vectors the cache does not
    hold for both says so."""
    from embedscope.compare.embeddings import embedding_agreement
    from embedscope.models.base import Encoder
    from embedscope.models.cache import CachedEncoder, EmbeddingCache, ServedOnly

    if not settings.cache:
        note = "not measured: the cache is off, so neither pass kept its vectors"
        return {t.name: {"embedding_agreement": note} for t in tasks}
    built = [built_model(settings, run, extra, None) for extra in ({}, overrides)]
    if not all(isinstance(b, Encoder) for b in built):  # a pipeline: its score shift is the fidelity figure
        return {}
    if any(b.fingerprint is None for b in built):
        note = "not measured: the model has no fingerprint, so its vectors are not cached"
        return {t.name: {"embedding_agreement": note} for t in tasks}
    cache = EmbeddingCache(settings.cache_dir)
    served = [CachedEncoder(ServedOnly(b), cache) for b in built]
    # None: each encoder's device default (models.device.default_batch_size), as the runner's passes had: the
    # same batches, so every vector those passes cached is served
    search = RunSettings(limits=settings.limits, corpus_chunk_size=settings.corpus_chunk_size).search_options(
        batch_size=run.batch_size or settings.batch_size, show_progress=False
    )
    return embedding_agreement(served[0], served[1], tasks, search)


def screen(
    models: Sequence[Any],
    tasks: Sequence[Any] | None = None,
    fast: str | None = None,
    confirm: int | None = None,
    *,
    compare_options: CompareOptions = CompareOptions(),
    dry_run: bool = False,
    **settings: Any,
) -> ScreenReport:
    """Screen ``models`` (names, paths or ``{model: …, options}`` mappings) on ``tasks`` (default: the built-in
    suite). With no mode named, a plan (:mod:`embedscope.screen.plan`) takes proxy rounds or runs each model
    exactly once, whichever cannot cost more than running them all (``dry_run=True``: the plan only, in
    ``report.plan``). ``proxy`` (the sizes of the rounds: counts or fractions) names successive halving on proxy
    tasks (ties within ``tie_margin``; ``audit`` runs every candidate exact too, and ``audit_seeds`` replays the
    screen at that many more seeds); ``fast`` (a path, or ``"auto"``), ``confirm`` (default 2) or ``fidelity``
    name a fast pass with the best ``confirm`` confirmed exact.
    ``settings``: any :class:`~embedscope.settings.screen.ScreenSettings` key (``proxy``, ``tie_margin``,
    ``audit``, ``audit_seeds``, ``fidelity``) and any :class:`~embedscope.settings.RunSettings` key, as
    :func:`~embedscope.evaluation.runner.evaluate` takes them; an error names the keyword.

    Examples:
        Retrievers have no fast path, so both passes run them exact here; a model (``minilm``, a folder) runs its
        fast pass on ``fast`` and only the leaders again exact.

        >>> import tempfile, embedscope
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.screen(["fts5", "fts5:match=all"], [tiny_retrieval_task()], fast="bf16", confirm=1,
        ...                            fidelity=False, output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> [m.model for m in report.models], report.table().startswith("screen: 2 models on fast path bf16")
        (['fts5', 'fts5:match=all'], True)
    """
    if "margin" in settings:  # its name until 2026-12: the key is tie_margin, as the flag --tie-margin
        warnings.warn("screen(margin=…) is now screen(tie_margin=…)", DeprecationWarning, stacklevel=2)
        settings["tie_margin"] = settings.pop("margin")
    given = {"fast": fast, "confirm": confirm} | screen_values(**settings)
    family = build_declared(
        ScreenSettings, [Layer("screen()", {k: v for k, v in given.items() if v is not None}, "api")]
    )
    values = {k: v for k, v in settings.items() if k not in ScreenSettings.model_fields}
    values["models"] = list(models)
    if tasks is not None:
        values["tasks"] = list(tasks)
    built = build_settings([Layer("screen()", values, "api")])
    return screen_settings(built, family, compare_options, dry_run=dry_run)
