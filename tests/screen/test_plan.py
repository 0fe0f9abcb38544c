"""The screen's plan: each candidate's exact cost estimated on this machine, proxy rounds only where they can only
save, otherwise every candidate run exactly once; ``--dry-run`` prints the plan alone."""

from __future__ import annotations

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions
from embedscope.screen import plan as plan_module
from embedscope.screen.plan import WORST_OVERHEAD, CandidateCost, choose_mode, proxy_bounds
from embedscope.testing.tiny import tiny_retrieval_task, write_tiny_beir


def _costs(*rows: tuple[str, float, float]) -> list[CandidateCost]:
    return [CandidateCost(name, exact, load, "made up") for name, exact, load in rows]


def test_proxy_rounds_are_taken_where_at_worst_they_cost_little_and_at_best_they_save_much() -> None:
    costs = _costs(("mpnet", 1136.0, 3.0), ("minilm", 72.0, 2.0), ("l3", 30.0, 1.0), ("static", 2.0, 0.2))
    mode, why, (best, worst) = choose_mode(costs, (0.05,), cache=True)
    every, loads = 1240.0, 6.2
    rounds = [0.05 * e for e in (1136.0, 72.0, 30.0, 2.0)]
    assert worst == pytest.approx(every + loads)  # every candidate confirmed: its proxy vectors serve its exact run
    # one confirmed: the cheapest total is the static model's exact run and everyone else's rounds
    assert best == pytest.approx(2.0 + sum(rounds) - rounds[3] + loads)
    assert mode == "proxy" and "at worst 1% more" in why


def test_cheap_candidates_run_exactly_as_loading_them_for_a_round_costs_more_than_a_screen_may_risk() -> None:
    costs = _costs(("a", 2.0, 1.0), ("b", 3.0, 1.0), ("c", 2.5, 1.0))
    mode, why, bounds = choose_mode(costs, (0.05,), cache=True)
    assert mode == "exact" and bounds == (7.5, 7.5)
    assert f"beyond the {WORST_OVERHEAD:.0%} a screen may risk" in why and "cheap" in why


def test_without_the_cache_the_rounds_are_paid_again_and_the_plan_runs_each_candidate_exactly() -> None:
    costs = _costs(("a", 100.0, 1.0), ("b", 100.0, 1.0), ("c", 100.0, 1.0))
    assert choose_mode(costs, (0.05, 0.2), cache=True)[0] == "proxy"
    mode, why, _ = choose_mode(costs, (0.05, 0.2), cache=False)
    worst, _ = proxy_bounds(costs, (0.05, 0.2), cache=False)
    assert worst == pytest.approx(300.0 + 0.25 * 300.0 + 3.0 * 2)
    assert mode == "exact" and "without the cache" in why


def test_a_screen_that_could_lose_as_much_as_it_saves_is_not_taken() -> None:
    # rounds on half and then 90% of each task: at best a screen costs more than running both
    costs = _costs(("a", 100.0, 1.0), ("b", 100.0, 1.0))
    mode, why, _ = choose_mode(costs, (0.5, 0.9), cache=True)
    assert mode == "exact" and why == "a screen could save at most 0 s and lose 4 s"


def test_tokens_cost_no_loads_so_models_behind_an_api_screen_whenever_the_cache_keeps_their_vectors() -> None:
    costs = _costs(("a", 1e6, 5.0), ("b", 1e6, 5.0))
    mode, _, (best, worst) = choose_mode(costs, (0.05,), cache=True, unit="tokens")
    assert mode == "proxy" and worst == 2e6 and best == pytest.approx(1e6 + 0.05e6)


def test_a_count_size_is_a_share_of_the_fewest_queries() -> None:
    costs = _costs(("a", 100.0, 0.0), ("b", 100.0, 0.0))
    worst, best = proxy_bounds(costs, (10,), cache=False, queries=200)
    assert worst == pytest.approx(200.0 + 0.05 * 200.0) and best == pytest.approx(100.0 + 5.0)


def test_a_default_screen_of_retrievers_runs_each_exactly_once_with_the_scores_evaluate_gives(tmp_path) -> None:
    task = tiny_retrieval_task()
    report = embedscope.screen(["bm25", "fts5"], [task], output_folder=tmp_path / "o", show_progress=False)
    assert report.plan is not None and report.plan.mode == "exact" and report.halving is None
    assert report.fast_path == "exact" and sorted(report.confirmed) == ["bm25", "fts5"]
    for m in report.models:
        alone = embedscope.evaluate(m.model, [task], output_folder=tmp_path / "alone", show_progress=False)
        assert m.exact is not None and m.exact.mean == alone.outcomes[0].result.main_score()
    scores = [m.exact.mean for m in report.models if m.exact is not None]
    assert scores == sorted(scores, reverse=True)
    text = report.table()
    assert text.startswith("plan: run each of 2 candidates exactly once")
    assert "run exactly once each" in text and report.significance_line() in text
    assert "the screen took" in text and report.to_dict()["plan"]["mode"] == "exact"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    from support.tiny_models import build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("plan")
    models = [str(build_tiny_sentence_transformer(root / f"m{seed}", seed=seed)) for seed in range(3)]
    return models, str(write_tiny_beir(root / "tiny"))


@pytest.mark.slow
def test_each_model_is_timed_on_its_own_texts_and_the_dry_run_prints_the_plan_and_writes_nothing(
    tiny, tmp_path, capsys
) -> None:
    models, task = tiny
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["screen", "--models", *models, "--tasks", task, "--output-folder", str(out), "--cache-dir", str(cache)]
    assert main([*argv, "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("plan: ") and printed[-1] == "dry run: nothing was screened or written"
    assert all(f"{m} " in printed[1] for m in models) and "timed on" in printed[1]
    assert not out.exists() and not cache.exists()


@pytest.mark.slow
def test_a_planned_proxy_screen_runs_the_plans_rounds_and_says_what_it_cost(tiny, tmp_path, monkeypatch) -> None:
    models, task = tiny

    def made_up(settings, runs):  # costs that make the rounds pay, whatever this machine's speed
        return [CandidateCost(str(r.model), 100.0 * (i + 1), 0.0, "made up") for i, r in enumerate(runs)], "seconds", 0

    from embedscope.screen import run as screen_run

    checked = []
    preflight = screen_run._preflight
    monkeypatch.setattr(screen_run, "_preflight", lambda *a: checked.append(1) or preflight(*a))
    monkeypatch.setattr(plan_module, "candidate_costs", made_up)
    monkeypatch.setattr(plan_module, "DEFAULT_PROXY", (0.5,))
    report = embedscope.screen(
        models, [task], output_folder=tmp_path / "o", cache_dir=tmp_path / "c", show_progress=False,
        compare_options=CompareOptions(rounds=200),
    )  # fmt: skip
    assert report.plan is not None and report.plan.mode == "proxy" and report.plan.proxy == (0.5,)
    assert report.halving is not None and [r.size for r in report.halving.rounds] == [0.5]
    assert report.spent["seconds"] > 0 and "with its plan (estimated" in report.table()
    assert checked == [1]  # the plan's check of the models serves the rounds


@pytest.mark.slow
def test_a_named_mode_is_not_planned_unless_asked_for_a_dry_run(tiny, tmp_path) -> None:
    models, task = tiny
    report = embedscope.screen(
        models[:2], [task], fast="bf16", confirm=1, fidelity=False, output_folder=tmp_path / "o", show_progress=False
    )
    assert report.plan is None and report.fast_path == "bf16"
    planned = embedscope.screen(models[:2], [task], proxy=[0.5], dry_run=True, output_folder=tmp_path / "p")
    assert planned.plan is not None and planned.plan.mode == "proxy" and planned.plan.named
    assert planned.models == [] and not (tmp_path / "p").exists()


def test_the_plans_lines_name_each_candidates_estimate_and_what_it_rests_on() -> None:
    costs = tuple(_costs(("a", 120.0, 1.0), ("b", 60.0, 1.0)))
    plan = plan_module.ScreenPlan("proxy", False, (0.05,), "seconds", costs, True, "why", 1.5, (70.0, 182.0))
    head, each = plan.lines()
    assert head == (
        "plan: proxy rounds (0.05) then confirm the survivors exactly: ≈ 70 s to 182 s, against ≈ 180 s running every "
        "candidate exactly; why"
    )
    assert each == "  exact cost of each: a 120 s (made up); b 60 s (made up); planned in 1.5 s"
    line = plan_module.outcome_line(plan, {"seconds": 150.0})
    assert "within 30% of that range" in line and "0.83× the estimated cost" in line
