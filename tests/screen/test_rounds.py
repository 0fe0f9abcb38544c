"""screen --proxy: successive halving's decisions against numpy, and whole screens of retrievers on a synthetic
retrieval task checked against running every candidate exact (the audit, and evaluate() on its own)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions
from embedscope.errors import ConfigError
from embedscope.screen import halving, rounds
from embedscope.screen.passes import MeanScore, mean_of
from embedscope.screen.report import halving_lines, screen_csv
from embedscope.screen.rounds import HalvingResult, ProxyRound
from embedscope.settings.screen import ScreenSettings
from embedscope.settings.sources import Layer, build_declared
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.types import Corpus, Queries, RetrievalData

OPTIONS = CompareOptions(rounds=2000)
CANDIDATES = ["fts5", "bm25", "bm25:method=robertson", "fts5:match=all"]


def _replicates(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.02, 3000)  # the paired part: the same resample moves every candidate alike
    return {
        "a": 0.70 + shared + rng.normal(0, 0.002, 3000),
        "b": 0.66 + shared + rng.normal(0, 0.002, 3000),  # clearly below a, though its own interval overlaps a's
        "c": 0.699 + shared + rng.normal(0, 0.001, 3000),  # within 0.005 of a
        "d": 0.695 + shared + rng.normal(0, 0.03, 3000),  # noisy: neither dropped nor shown equivalent
    }


def test_dropped_is_the_paired_difference_interval_above_zero() -> None:
    reps = _replicates()
    assert np.quantile(reps["b"], 0.975) > np.quantile(reps["a"], 0.025)  # the plain intervals overlap
    expected = [k for k in "bcd" if np.quantile(reps["a"] - reps[k], 0.025) > 0]
    assert halving.dropped(reps, 0.95) == expected == ["b"]


def test_equivalence_is_tost_with_the_bootstrap_interval() -> None:
    reps = _replicates()
    for other, margin in [("c", 0.005), ("c", 0.001), ("d", 0.005), ("d", 0.2)]:
        low, high = np.quantile(reps["a"] - reps[other], [0.05, 0.95])  # 1 − 2·0.05
        assert halving.equivalent(reps["a"], reps[other], margin, 0.05) == (-margin < low and high < margin)
        needed = max(abs(low), abs(high))  # the margin beyond which TOST ties them
        assert halving.equivalence_margin(reps["a"], reps[other], 0.05) == pytest.approx(needed)
        assert halving.equivalent(reps["a"], reps[other], needed * 1.001, 0.05)
        assert not halving.equivalent(reps["a"], reps[other], needed * 0.999, 0.05)
    assert halving.tie_groups(reps, 0.005, 0.05)[0] == ["a", "c"]
    assert halving.tie_groups({"a": reps["a"], "b": reps["b"]}, 0.005, 0.05) == [["a"], ["b"]]


def test_survivors_equal_to_each_other_but_not_to_the_leader_are_tied_too() -> None:
    reps = _replicates()
    pair = {"x": reps["b"] - 0.05, "y": reps["b"] - 0.0499}  # a model and its copy, well below the others
    every = {**reps, **pair}
    groups = halving.tie_groups(every, 0.005, 0.05)
    assert groups[0] == ["a", "c"] and ["y", "x"] in groups
    assert sorted(k for g in groups for k in g) == sorted(every)  # each candidate in one group
    for group in groups:  # each member equivalent to its group's best, by the bootstrap TOST interval
        for other in group[1:]:
            low, high = np.quantile(every[group[0]] - every[other], [0.05, 0.95])
            assert -0.005 < low and high < 0.005


def test_p_best_kept_counts_the_replicates_whose_best_is_kept() -> None:
    reps = _replicates()
    matrix = np.vstack([reps[k] for k in "abcd"])
    best = [("abcd")[i] for i in matrix.argmax(axis=0)]
    for kept in (["a"], ["a", "c"], ["a", "c", "d"], list("abcd")):
        assert halving.p_best_kept(reps, kept) == sum(b in kept for b in best) / len(best)
    assert halving.p_best_kept(reps, list("abcd")) == 1.0


@pytest.mark.parametrize(
    ("sizes", "message"),
    [([], "give the size of each round"), ([50, 20], "growing"), ([0.1, 50], "growing"), ([0], "proxy size")],
)
def test_proxy_sizes_that_cannot_be_rounds_are_refused(sizes, message) -> None:
    with pytest.raises(ConfigError, match=message):
        build_declared(ScreenSettings, [Layer("screen()", {"proxy": sizes}, "api")])


def _synthetic(n_docs: int = 1500, n_queries: int = 240, seed: int = 0) -> RetrievalData:
    """Queries made of three words of their one relevant document and two random words."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    docs = [" ".join(rng.choice(vocab, size=int(rng.integers(8, 40)))) for _ in range(n_docs)]
    targets = rng.integers(0, n_docs, n_queries)
    queries = [" ".join([*rng.choice(docs[d].split(), size=3), *rng.choice(vocab, size=2)]) for d in targets]
    return RetrievalData(
        Corpus(tuple(f"d{i}" for i in range(n_docs)), tuple(docs)),
        Queries(tuple(f"q{i}" for i in range(n_queries)), tuple(queries)),
        {f"q{i}": {f"d{d}": 1} for i, d in enumerate(targets)},
    )


@pytest.fixture(scope="module")
def synthetic_task() -> RetrievalTask:
    data = _synthetic()
    return RetrievalTask("Synthetic", lambda split: data)


def _audited(task: RetrievalTask, folder: Path, **extra):
    """The screen of ``CANDIDATES`` on ``task`` in rounds of 30 and 90 queries, audited: the report and its rounds."""
    report = embedscope.screen(
        CANDIDATES, [task], proxy=[30, 90], audit=True, output_folder=folder, show_progress=False,
        compare_options=OPTIONS, **extra,
    )  # fmt: skip
    assert report.halving is not None and report.halving.audit is not None
    return report, report.halving


@pytest.mark.slow
def test_a_halving_screen_names_the_exact_winner_and_its_audit_agrees_with_evaluate(synthetic_task, tmp_path) -> None:
    report, halving_result = _audited(synthetic_task, tmp_path)
    assert halving_result.audit is not None
    exact = {m: embedscope.evaluate(m, [synthetic_task], output_folder=tmp_path / "alone", show_progress=False)
             for m in CANDIDATES}  # fmt: skip
    exact_means = {m: r.outcomes[0].result.main_score() for m, r in exact.items()}
    assert halving_result.audit.exact == pytest.approx(exact_means, abs=1e-5)  # stored results round to 5 digits
    winner = max(exact_means, key=exact_means.get)
    assert halving_result.audit.winner == winner and halving_result.confirmed[0] == winner
    assert halving_result.audit.held and halving_result.p_winner_kept > 0.5
    places = halving_result.places
    assert len(places) == len(CANDIDATES) and places[0] == 0 and places == sorted(places)
    tau = kendalltau([-p for p in places], [exact_means[m] for m in halving_result.ranking]).statistic
    assert halving_result.audit.kendall_tau == pytest.approx(tau)  # τ-b over the places the screen states
    ties = {k: v for r in halving_result.rounds for k, v in r.tied.items()}
    order = [-p for p in rounds.tied_places(halving_result.ranking, ties)]
    in_order = kendalltau(order, [exact_means[m] for m in halving_result.ranking]).statistic
    assert halving_result.audit.kendall_tau_order == pytest.approx(in_order)
    for r in halving_result.rounds:  # each survivor neither dropped nor tied: the margin TOST would need, above ours
        lead = max(r.replicates, key=lambda k: float(np.mean(r.replicates[k])))
        for k, needed in r.undecided.items():
            low, high = np.quantile(r.replicates[lead] - r.replicates[k], [0.05, 0.95])
            assert needed == pytest.approx(max(-low, high)) and needed >= halving_result.margin
    audit = halving_result.audit
    assert audit.full_task_ranking == sorted(CANDIDATES, key=lambda m: -exact_means[m])
    full = kendalltau([-p for p in audit.full_task_places], [exact_means[m] for m in audit.full_task_ranking])
    assert audit.kendall_tau_full_task == pytest.approx(full.statistic)
    full_place = dict(zip(audit.full_task_ranking, audit.full_task_places))
    shown = kendalltau([-p for p in places], [-full_place[m] for m in halving_result.ranking]).statistic
    assert audit.kendall_tau_shown == pytest.approx(shown, nan_ok=True)
    assert any("the full tasks themselves show" in line for line in halving_lines(halving_result))
    rows = list(csv.DictReader(io.StringIO(screen_csv(report))))
    assert [int(r["screen_rank"]) for r in rows] == [p + 1 for p in places]
    assert [r["model"] for r in rows] == halving_result.ranking
    assert sorted(halving_result.ranking) == sorted(CANDIDATES)
    first = halving_result.rounds[0]
    assert list(first.scores) == sorted(CANDIDATES, key=lambda m: -first.scores[m].mean)
    assert "fts5:match=all" in first.dropped  # ANDing five words, two of them random, finds next to nothing
    assert "audit (every candidate exact)" in report.table() and "round 1 on proxies of size 30" in report.table()
    saved = json.loads((tmp_path / "proxies" / "Synthetic.proxy-n30-s42-b32.json").read_text())  # batches of 32
    assert saved["size"] == 30 and saved["seed"] == 42 and len(saved["compositions"]["test"]["queries"]) == 30
    assert saved["batch_size"] == 32 and saved["compositions"]["test"]["batch_size"] == 32


@pytest.mark.slow
def test_a_second_halving_screen_evaluates_nothing_again(synthetic_task, tmp_path, monkeypatch) -> None:
    kwargs = {"proxy": [30, 90], "output_folder": tmp_path, "show_progress": False, "compare_options": OPTIONS}
    first = embedscope.screen(CANDIDATES, [synthetic_task], **kwargs)
    calls: list[str] = []
    original = RetrievalTask.evaluate_split

    def counting(self, split, encoder, options):
        calls.append(self.name)
        return original(self, split, encoder, options)

    monkeypatch.setattr(RetrievalTask, "evaluate_split", counting)
    second = embedscope.screen(CANDIDATES, [synthetic_task], **kwargs)
    assert calls == []
    one, two = first.to_dict()["halving"], second.to_dict()["halving"]
    for r in (*one["rounds"], *two["rounds"]):
        r.pop("seconds"), r.pop("proxies")
    assert one == two


@pytest.mark.slow
def test_replays_at_other_seeds_are_the_screens_run_at_those_seeds(synthetic_task, tmp_path, monkeypatch) -> None:
    costs = {"fts5": 1.0, "bm25": 2.0, "bm25:method=robertson": 3.0, "fts5:match=all": 4.0}

    def fixed_costs(seconds, tokens, keys, spend=None):  # measured seconds would make the cheapest of a tie vary
        return {k: costs[k] for k in keys}, "seconds"

    monkeypatch.setattr(rounds, "confirm_costs", fixed_costs)
    kwargs = {"proxy": [30, 90], "audit": True, "show_progress": False}
    report = embedscope.screen(
        CANDIDATES, [synthetic_task], audit_seeds=2, output_folder=tmp_path / "replayed", compare_options=OPTIONS,
        **kwargs,
    )  # fmt: skip
    result = report.halving
    assert result is not None and result.audit is not None
    seeds = result.audit.seeds
    assert [s.seed for s in seeds] == [OPTIONS.seed + 1, OPTIONS.seed + 2]
    for replay in seeds:  # each replay is the screen run on its own at that seed
        alone = embedscope.screen(
            CANDIDATES, [synthetic_task], output_folder=tmp_path / f"seed-{replay.seed}",
            compare_options=dataclasses.replace(OPTIONS, seed=replay.seed), **kwargs,
        ).halving  # fmt: skip
        assert alone is not None and alone.audit is not None
        assert replay.held == alone.audit.held and replay.confirmed == alone.confirmed
        assert replay.p_winner_kept == alone.p_winner_kept
        assert replay.kendall_tau == pytest.approx(alone.audit.kendall_tau, nan_ok=True)
        assert replay.kendall_tau_order == pytest.approx(alone.audit.kendall_tau_order, nan_ok=True)
    drawn = [
        json.loads((tmp_path / "replayed" / "proxies" / f"Synthetic.proxy-n30-s{s}-b32.json").read_text())
        for s in (OPTIONS.seed, *(r.seed for r in seeds))
    ]
    queries = [tuple(d["compositions"]["test"]["queries"]) for d in drawn]
    assert len(set(queries)) == 3  # each seed drew its own proxy
    summary = report.to_dict()["halving"]["audit_seeds"]
    held = [result.audit.held, *(s.held for s in seeds)]
    assert summary["seeds"] == 3 and summary["held"] == pytest.approx(sum(held) / 3)
    stated = [result.p_winner_kept, *(s.p_winner_kept for s in seeds)]
    assert summary["p_winner_kept"] == pytest.approx(sum(stated) / 3)
    taus = [result.audit.kendall_tau, *(s.kendall_tau for s in seeds)]
    assert summary["tau_min"] == pytest.approx(min(taus)) and summary["tau_max"] == pytest.approx(max(taus))
    assert f"the claim held at {sum(held)} of 3 seeds" in report.table()


@pytest.mark.slow
def test_a_replay_weighs_cost_by_its_screens_estimates_not_by_its_cached_proxies(synthetic_task, tmp_path, monkeypatch):
    calls: list[tuple[dict[str, float] | None, HalvingResult]] = []
    halving_screen = rounds.halving_screen

    def recorded(*args, **kwargs):  # each replay (and the screen itself where its module looks it up now)
        result = halving_screen(*args, **kwargs)
        calls.append((kwargs.get("costs"), result))
        return result

    monkeypatch.setattr(rounds, "halving_screen", recorded)
    _, result = _audited(synthetic_task, tmp_path, audit_seeds=2)
    replays = [(costs, replay) for costs, replay in calls if replay is not result]
    assert len(replays) == 2
    estimated = {k: v for r in result.rounds for k, v in r.exact_estimate.items()}  # each from its last round
    assert sorted(estimated) == sorted(CANDIDATES) and all(v > 0 for v in estimated.values())
    for costs, replay in replays:
        assert costs == estimated
        for r in replay.rounds:  # the decisions that weigh cost saw the screen's estimates, not the replay's times
            assert r.exact_estimate == {k: estimated[k] for k in r.scores}
            assert r.cheap == rounds.cheap_candidates(r.exact_estimate, "seconds")


@pytest.mark.slow
def test_a_candidate_next_to_free_that_a_round_shows_below_the_leader_leaves_the_rounds_and_is_confirmed(
    synthetic_task, tmp_path, monkeypatch
) -> None:
    free = "fts5:match=all"  # clearly below the leader on a proxy of 30 (see the first test)
    monkeypatch.setattr(rounds, "cheap_candidates", lambda costs, unit, share=0.01: [k for k in costs if k == free])
    report, result = _audited(synthetic_task, tmp_path)
    assert result.audit is not None
    first, second = result.rounds
    assert first.spared == [free] and free in first.cheap and free not in first.dropped
    assert free not in second.scores  # not kept on to be ranked above the candidates round 1 dropped
    assert free in result.confirmed and free not in result.unconfirmed
    assert result.audit.exact[free] == pytest.approx(mean_of(next(m for m in report.models if m.model == free).exact))
    later = [k for k in result.ranking if k in second.scores]
    assert result.ranking[: len(later)] == later  # round 2's candidates first, then round 1's: free, last
    assert result.ranking[-1] == free and result.places[-1] == len(CANDIDATES) - 1
    assert result.to_dict()["rounds"][0]["spared"] == [free]
    assert f"ranked with the dropped but confirmed, their exact runs next to free: {free}" in report.table()


def test_options_a_halving_screen_cannot_use_are_refused(synthetic_task, tmp_path) -> None:
    kwargs = {"output_folder": tmp_path, "show_progress": False}
    with pytest.raises(ConfigError, match="^confirm: with proxy the rounds decide"):
        embedscope.screen(CANDIDATES[:2], [synthetic_task], proxy=[10], confirm=2, **kwargs)
    with pytest.raises(ConfigError, match="^audit applies to a screen with proxy"):
        embedscope.screen(CANDIDATES[:2], [synthetic_task], audit=True, fast="bf16", **kwargs)
    with pytest.raises(ConfigError, match="^proxy and limits both shrink the tasks"):
        embedscope.screen(CANDIDATES[:2], [synthetic_task], proxy=[10], limits=5, **kwargs)
    with pytest.raises(ConfigError, match="^audit_seeds: give audit too"):
        embedscope.screen(CANDIDATES[:2], [synthetic_task], proxy=[10], audit_seeds=3, **kwargs)
    with pytest.raises(ConfigError, match="^audit_seeds: Input should be a valid integer"):
        embedscope.screen(CANDIDATES[:2], [synthetic_task], proxy=[10], audit=True, audit_seeds=1.5, **kwargs)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--proxy", "ten"], "--proxy ten: give a count"),
        (["--proxy", "20", "10"], "give growing sizes"),
        (["--tie-margin", "0.01"], "--tie-margin applies to a screen with --proxy"),
        (["--proxy", "10", "--tie-margin", "-1"], "--tie-margin: Input should be greater than or equal to 0"),
        (["--proxy", "10", "--no-fidelity"], "--no-fidelity: a screen with --proxy measures no fidelity"),
        (["--proxy", "10", "--confidence", "1.5"], "--confidence: Input should be less than 1"),
        (["--proxy", "10", "--confidence", "nan"], "--confidence: Input should be a finite number"),
        (["--proxy", "10", "--audit-seeds", "2"], "--audit-seeds: give --audit too"),
        (["--audit-seeds", "2"], "--audit-seeds: give --audit too"),
        (
            ["--proxy", "10", "--audit", "--audit-seeds", "-1"],
            "--audit-seeds: Input should be greater than or equal to 0",
        ),
        (["--proxy", "10", "--audit", "--audit-seeds", "two"], "--audit-seeds: Input should be a valid integer"),
    ],
)
def test_the_cli_refuses_what_a_halving_screen_cannot_do_in_one_line(tmp_path, capsys, extra, message) -> None:
    from embedscope.testing.tiny import write_tiny_beir

    data = write_tiny_beir(tmp_path / "data")
    argv = ["screen", "--models", "bm25", "fts5", "--tasks", str(data), "--output-folder", str(tmp_path / "o")]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not Path(tmp_path / "o").exists()


def _confirming(
    monkeypatch,
    estimates: dict[str, float],
    replicates: dict[str, np.ndarray],
    confidence: float,
    tokens: dict[str, float] | None = None,
    spend: dict[str, float] | None = None,
    cheap: list[str] | None = None,
):
    """``rounds._confirm`` on one round of ``replicates`` whose exact runs are recorded, not run (``tokens``: the
    candidates behind an API and the tokens each would cost exact; ``spend``: what those cost at their prices)."""
    ran: list[str] = []

    def exact(settings, run, m, options):
        ran.append(m.model)
        m.exact = MeanScore(float(np.mean(replicates[m.model])), 0.0, 1.0, {})
        return {}

    monkeypatch.setattr(rounds, "_exact", exact)
    scores = {k: MeanScore(float(np.mean(v)), 0.0, 1.0, {}) for k, v in replicates.items()}
    one = ProxyRound(0.1, scores, {}, [], {}, 1.0, {}, estimates, tokens or {}, spend or {}, cheap or [])
    result = HalvingResult([one], [], [], 1.0, 0.005)
    models = {k: rounds.ScreenedModel(k) for k in replicates}
    options = CompareOptions(confidence=confidence)
    rounds._confirm(None, dict.fromkeys(replicates), models, list(replicates), replicates, result, options)  # type: ignore[arg-type]
    return ran, result


def test_survivors_are_confirmed_in_order_until_the_stated_probability_is_reached(monkeypatch) -> None:
    reps = _replicates()  # a leads; c within 0.001 of it; d noisy; b far below
    survivors = {k: reps[k] for k in "acd"}
    cost = {"a": 50.0, "c": 1.0, "d": 500.0}
    matrix = np.vstack([survivors[k] for k in "acd"])
    p_ac = float(np.isin(matrix.argmax(axis=0), [0, 1]).mean())  # numpy: the share whose best is a or c
    assert 0.5 < p_ac < 1.0
    ran, result = _confirming(monkeypatch, cost, survivors, confidence=p_ac)
    assert ran == ["c", "a"] and result.unconfirmed == ["d"] and result.p_winner_kept == p_ac
    result.ranking = rounds._final_ranking(result.confirmed, result.unconfirmed, result.rounds)
    lines = halving_lines(result)
    assert "left unconfirmed, the confirmed already reaching the stated probability: d (about 500 s exact)" in lines
    assert result.ranking[-1] == "d" and result.to_dict()["unconfirmed"] == ["d"]
    ran, result = _confirming(monkeypatch, cost, survivors, confidence=min(1.0, p_ac + 1e-9))
    assert ran == ["c", "a", "d"] and result.unconfirmed == [] and result.p_winner_kept == 1.0
    assert result.confirmed == sorted("acd", key=lambda k: -float(np.mean(survivors[k])))


def test_a_candidate_next_to_free_is_confirmed_whatever_the_odds(monkeypatch) -> None:
    reps = _replicates()  # a leads; c within 0.001 of it; d noisy; b far below
    cost = {"a": 500.0, "b": 2.0, "c": 400.0, "d": 450.0}
    assert rounds.cheap_candidates(cost, "seconds") == ["b"]  # 2 s of 1,352 s: under 1%
    matrix = np.vstack([reps[k] for k in "abcd"])
    wins = {k: float((matrix.argmax(axis=0) == i).mean()) for i, k in enumerate("abcd")}  # numpy
    assert wins["b"] == 0.0
    first = halving.confirm_order(list("abcd"), cost, wins)[0]
    ran, _ = _confirming(monkeypatch, cost, reps, confidence=1e-9)  # the first confirmed is enough
    assert ran == [first]  # by the odds alone, b is never worth confirming
    ran, result = _confirming(monkeypatch, cost, reps, confidence=1e-9, cheap=["b"])
    assert ran == [first, "b"] and "b" in result.confirmed and "b" not in result.unconfirmed
    result.ranking = rounds._final_ranking(result.confirmed, result.unconfirmed, result.rounds)
    by_proxy = sorted("abcd", key=lambda k: -float(np.mean(reps[k])))
    assert result.ranking == by_proxy and result.ranking[-1] == "b"  # confirmed as next to free: its proxy place
    lines = halving_lines(result)
    assert any("kept and confirmed whatever their proxy scores, their exact runs next to free: b" in x for x in lines)


def test_the_report_names_each_proxy_drawn_plainly_and_why() -> None:
    why = "drawn plainly: covering 61 rows within the full run's batches would encode 576 texts, more than 2× …"
    proxies = {
        "Lee.proxy-f0.05-s42-b32": {"compositions": {"test": {"rows": [1, 2], "of_rows": 9, "plainly": why}}},
        "BBC.proxy-f0.05-s42-b32": {"compositions": {"test": {"rows": [1], "of_rows": 9, "batches": 1}}},
    }
    r = ProxyRound(0.05, {"a": MeanScore(0.5, 0.4, 0.6, {})}, {}, [], {}, 1.0, proxies=proxies)
    lines = halving_lines(HalvingResult([r], ["a"], ["a"], 1.0, 0.005))
    assert f"  Lee.proxy-f0.05-s42-b32 (test): {why}" in lines
    assert not [x for x in lines if "BBC.proxy" in x]


def test_a_costly_leader_is_confirmed_before_a_cheaper_candidate_few_replicates_favour(monkeypatch) -> None:
    reps = _replicates()  # a leads; c within 0.001 of it; b clearly below (it wins no replicate)
    survivors = {k: reps[k] for k in "abc"}
    cost = {"a": 500.0, "b": 10.0, "c": 1.0}
    matrix = np.vstack([survivors[k] for k in "abc"])
    wins = {k: float((matrix.argmax(axis=0) == i).mean()) for i, k in enumerate("abc")}  # numpy
    assert wins["b"] == 0.0 and wins["a"] > 0 and wins["c"] > 0
    p_ac = wins["a"] + wins["c"]
    ran, result = _confirming(monkeypatch, cost, survivors, confidence=p_ac)
    assert ran == ["c", "a"] and result.unconfirmed == ["b"]  # cheapest first would have run b (10 s) before a
    assert halving.confirm_order(list("abc"), cost, wins) == ["c", "a", "b"]


def test_models_behind_an_api_are_confirmed_by_the_tokens_they_cost_not_the_services_speed(monkeypatch) -> None:
    reps = _replicates()  # a leads; c within 0.001 of it; b clearly below
    survivors = {k: reps[k] for k in "abc"}
    seconds = {"a": 500.0, "b": 10.0, "c": 1.0}  # a's service is slow; every candidate sends the same texts
    tokens = {"a": 8e5, "b": 8e5, "c": 8e5}
    matrix = np.vstack([survivors[k] for k in "abc"])
    wins = {k: float((matrix.argmax(axis=0) == i).mean()) for i, k in enumerate("abc")}  # numpy
    assert wins["a"] > wins["c"] > 0
    ran, result = _confirming(monkeypatch, seconds, survivors, confidence=wins["a"], tokens=tokens)
    assert ran == ["a"] and result.unconfirmed == ["c", "b"]  # by seconds, c (1 s) would have been paid for first
    assert halving.confirm_order(list("abc"), seconds, wins)[0] == "c"
    assert result.rounds[0].confirm_costs(list("abc")) == (tokens, "tokens")
    mixed = ProxyRound(0.1, {}, {}, [], {}, 1.0, {}, seconds, {"a": 8e5, "c": 8e5})  # b is a local model
    assert mixed.confirm_costs(list("abc")) == (seconds, "seconds")  # the one cost a mix shares
    lines = halving_lines(result)
    assert any("c (about 1 s and 800,000 tokens exact)" in line for line in lines)


def test_models_behind_an_api_with_prices_are_confirmed_by_what_their_tokens_cost(monkeypatch) -> None:
    reps = _replicates()  # a leads; c within 0.001 of it; b clearly below
    survivors = {k: reps[k] for k in "abc"}
    seconds = {"a": 500.0, "b": 10.0, "c": 1.0}
    tokens = {"a": 8e5, "b": 8e5, "c": 8e5}
    spend = {"a": 8e5 * 13.0 / 1e6, "b": 8e5 * 0.02 / 1e6, "c": 8e5 * 0.02 / 1e6}  # a's price is 650 times c's
    matrix = np.vstack([survivors[k] for k in "abc"])
    wins = {k: float((matrix.argmax(axis=0) == i).mean()) for i, k in enumerate("abc")}  # numpy
    assert wins["a"] > wins["c"] > 0 and wins["c"] / spend["c"] > wins["a"] / spend["a"]
    ran, _ = _confirming(monkeypatch, seconds, survivors, confidence=wins["a"], tokens=tokens)
    assert ran == ["a"]  # by tokens, equal for all three, the leader goes first
    ran, result = _confirming(monkeypatch, seconds, survivors, confidence=1.0, tokens=tokens, spend=spend)
    assert ran[0] == "c" and ran.index("c") < ran.index("a")  # by money, the cheap contender goes first
    assert result.rounds[0].confirm_costs(list("abc")) == (spend, "spend")
    unpriced = ProxyRound(0.1, {}, {}, [], {}, 1.0, {}, seconds, tokens, {"a": 10.4, "c": 0.016})  # b has no price
    assert unpriced.confirm_costs(list("abc")) == (tokens, "tokens")
    result.unconfirmed = ["b"]
    result.ranking = rounds._final_ranking(result.confirmed, result.unconfirmed, result.rounds)
    assert any("b (about 10 s and 800,000 tokens ($0.0160) exact)" in line for line in halving_lines(result))


def test_a_results_tokens_are_those_billed_and_those_the_cache_spared() -> None:
    from embedscope.results.schema import TaskResult
    from embedscope.screen.passes import needed_tokens

    def result(extra: dict) -> TaskResult:
        return TaskResult("T", "rev", {}, extra=extra)

    assert needed_tokens(result({"api_usage": {"tokens": 120, "avoided_tokens": 30, "requests": 2}})) == 150.0
    assert needed_tokens(result({"api_usage": {"tokens": 0, "avoided_tokens": 150}})) == 150.0  # all served
    assert needed_tokens(result({})) is None  # a local model


def _keyword_vectors(served: dict[str, list[str]]):
    from embedscope.testing.fakes import KeywordEncoder

    encoders = {name: KeywordEncoder(words) for name, words in served.items()}
    return lambda model, texts: encoders[model].encode(texts, role="document")


@pytest.mark.slow
def test_a_halving_screen_of_api_models_sends_no_text_twice_to_one_model(synthetic_task, tmp_path) -> None:
    from support.api_server import ApiServer, fake_tokens

    vocab = [f"w{i}" for i in range(300)]
    served = {"all-words": vocab, "most-words": vocab[:240], "few-words": vocab[:15]}
    with ApiServer(vectors=_keyword_vectors(served)) as server:
        candidates = [
            {"model": f"openai:{name}", "api_base": server.url, "api_key": "sk-test-0123", "price_per_mtok": 0.02 * n}
            for n, name in enumerate(served, 1)
        ]
        report = embedscope.screen(
            candidates, [synthetic_task], proxy=[30, 90], output_folder=tmp_path, show_progress=False,
            compare_options=OPTIONS, audit=True,
        )  # fmt: skip
    result = report.halving
    assert result is not None and result.audit is not None and result.audit.held
    sent = Counter((r.body["model"], t) for r in server.requests for t in r.texts)
    assert max(sent.values()) == 1  # the embedding cache: no text paid for twice by one model within the screen
    data = synthetic_task.load_split("test")
    everything = set(data.queries.texts) | set(data.corpus.texts)
    for name in served:  # audited: every candidate ran its full task once, each text sent once all told
        assert {t for (m, t) in sent if m == name} == everything
    assert "openai:few-words" in result.rounds[0].dropped
    full_tokens = sum(fake_tokens(t) for t in everything)  # what each exact run costs
    for key, estimate in result.rounds[0].exact_tokens.items():  # from the proxy's tokens and its share of texts
        assert 0.5 * full_tokens < estimate < 2 * full_tokens, key
    assert set(result.rounds[0].exact_tokens) == {f"openai:{n}" for n in served}
    for n, name in enumerate(served, 1):  # at each candidate's price
        key = f"openai:{name}"
        assert result.rounds[0].exact_spend[key] == pytest.approx(result.rounds[0].exact_tokens[key] * 0.02 * n / 1e6)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-test-0123" in p.read_bytes()]  # the key is in no file


def _counted_tiny_models(tmp_path: Path, monkeypatch) -> tuple[list[str], Counter]:
    """Two tiny real sentence-transformers, and a counter of every ``(model, role, text)`` their backend encodes."""
    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder
    from support.tiny_models import build_tiny_sentence_transformer

    models = [str(build_tiny_sentence_transformer(tmp_path / f"tiny-{seed}", seed=seed)) for seed in (0, 1)]
    encoded: Counter = Counter()
    original = SentenceTransformerEncoder._encode

    def counted(self, texts, role, batch_size, show_progress):
        encoded.update((self.name, role, t) for t in texts)
        return original(self, texts, role, batch_size, show_progress)

    monkeypatch.setattr(SentenceTransformerEncoder, "_encode", counted)
    return models, encoded


@pytest.mark.slow
def test_a_halving_screen_of_local_models_encodes_each_text_once(synthetic_task, tmp_path, monkeypatch):
    """Local models: a vector depends on its batch (``bench/bench_row_invariance.py``), so a proxy's documents are
    whole batches of the full task's corpus call and its queries are encoded in the batches of the full query call
    that hold them, as those calls batch them; the confirming run is served them: no text is encoded twice by one
    model, nor by the audit's replays at other seeds (their proxies are whole batches of the same calls); the
    confirmed exact scores equal an uncached evaluate's, to the bit."""
    models, encoded = _counted_tiny_models(tmp_path, monkeypatch)
    report = embedscope.screen(
        [*models, "bm25"], [synthetic_task], proxy=[60], audit=True, audit_seeds=2, output_folder=tmp_path / "screen",
        show_progress=False, compare_options=OPTIONS,
    )  # fmt: skip
    result = report.halving
    assert result is not None and result.audit is not None and len(result.audit.seeds) == 2  # replays included
    composition = next(iter(result.rounds[0].proxies.values()))["compositions"]["test"]
    data = synthetic_task.load_split("test")
    assert composition["batches"] >= 1 and 0 < len(composition["documents"]) < len(data.corpus)
    assert 0 < len(composition["queries"]) < len(data.queries)
    in_data = {"document": Counter(data.corpus.texts), "query": Counter(data.queries.texts)}
    for model in models:
        name = Path(model).name
        for role, texts in in_data.items():
            mine = {t: n for (m, r, t), n in encoded.items() if m == name and r == role}
            assert mine == dict(texts), role  # every text encoded, as often as the task holds it: once
    for model in models:  # the exact scores equal an uncached run's
        alone = embedscope.evaluate(
            model, [synthetic_task], output_folder=tmp_path / "alone", cache_dir=tmp_path / "fresh",
            show_progress=False,
        )  # fmt: skip
        assert result.audit.exact[model] == alone.outcomes[0].result.main_score()


@pytest.mark.slow
def test_a_halving_screen_of_local_models_on_row_tasks_encodes_each_text_as_often_as_the_full_tasks(
    tmp_path, monkeypatch
):
    """Row tasks (STS, pair classification, classification, clustering): each proxy is drawn as whole batches of the
    full run's calls and encoded within them, so a model that also runs the full task (here every one: the audit)
    encodes each text as often as the full tasks alone encode it, replays at other seeds included; the exact scores
    equal an uncached evaluate's."""
    from embedscope.settings import RunSettings
    from embedscope.tasks.base import recorded_protocol
    from embedscope.testing.tiny import tiny_tasks_of_every_type

    kinds = ("STS", "PairClassification", "Classification", "Clustering")
    tasks = [t for t in tiny_tasks_of_every_type(n=200) if t.type in kinds and getattr(t, "protocol", "v2") == "v2"]
    models, encoded = _counted_tiny_models(tmp_path, monkeypatch)
    report = embedscope.screen(
        models, tasks, proxy=[0.3], audit=True, audit_seeds=1, output_folder=tmp_path / "screen", batch_size=16,
        show_progress=False, compare_options=OPTIONS,
    )  # fmt: skip
    result = report.halving
    assert result is not None and result.audit is not None and len(result.audit.seeds) == 1
    recipes = [json.loads(p.read_text()) for p in sorted((tmp_path / "screen" / "proxies").glob("*.json"))]
    assert len(recipes) == 2 * len(tasks)  # the screen's and its replay's: each drawn within the full calls
    for recipe in recipes:
        composition = recipe["compositions"]["test"]
        assert composition["batches"] >= 1 and composition["texts"] < composition["of_texts"], recipe
    in_screen = Counter(encoded)
    encoded.clear()
    for model in models:  # the full tasks alone, with a cache of their own: what the screen may encode, and scores
        alone = embedscope.evaluate(
            model, tasks, output_folder=tmp_path / "alone", cache_dir=tmp_path / "fresh", batch_size=16,
            show_progress=False,
        )  # fmt: skip
        mean = float(np.mean([outcome.result.main_score() for outcome in alone.outcomes]))
        assert result.audit.exact[model] == pytest.approx(mean, abs=1e-12)
    assert in_screen == encoded and sum(encoded.values()) > 0  # every text as often as the full tasks encode it
    options = RunSettings(batch_size=16).search_options(show_progress=False)  # which is every text of their calls
    assert {t for (_, r, t) in encoded} == {t for task in tasks for (r, t) in recorded_protocol(task, options).texts}


def test_the_confirmed_take_the_places_of_the_confirmed_in_their_exact_order_and_no_one_else_moves() -> None:
    rng = np.random.default_rng(0)
    keys = list("abcdefg")
    for _ in range(200):
        proxy = dict(zip(keys, rng.permutation(len(keys)).tolist()))
        r = ProxyRound(0.1, {k: MeanScore(float(v), 0, 1, {}) for k, v in proxy.items()}, {}, [], {}, 1.0)
        confirmed = [str(k) for k in rng.choice(keys, size=int(rng.integers(1, len(keys) + 1)), replace=False)]
        unconfirmed = [k for k in keys if k not in confirmed]
        ranking = rounds._final_ranking(confirmed, unconfirmed, [r])
        by_proxy = sorted(keys, key=lambda k: -proxy[k])
        assert sorted(ranking) == keys  # every candidate once
        slots = [i for i, k in enumerate(by_proxy) if k in confirmed]
        assert [ranking[i] for i in slots] == confirmed  # the confirmed's places, in exact order
        assert all(ranking[i] == k for i, k in enumerate(by_proxy) if k not in confirmed)  # the others stay


def test_models_declared_tied_share_a_place_and_tau_b_counts_them_as_a_tie() -> None:
    from embedscope.screen.passes import kendall_tau
    from embedscope.screen.rounds import tied_places

    ranking = ["a", "b", "c", "d"]
    places = tied_places(ranking, {"b": ["c"]})
    assert places == [0, 1, 1, 3]
    exact = {"a": 0.9, "b": 0.7, "c": 0.8, "d": 0.1}  # c above b exact: the tie is neither concordant nor discordant
    concordant, discordant, tied_in_screen, pairs = 5, 0, 1, 6  # counted by hand
    expected = (concordant - discordant) / math.sqrt((pairs - tied_in_screen) * pairs)
    assert kendall_tau([-p for p in places], [exact[m] for m in ranking]) == pytest.approx(expected)
    assert kendall_tau([-p for p in range(4)], [exact[m] for m in ranking]) == pytest.approx(4 / 6)  # untied: 5 C 1 D


def _proxy_round(reps: dict[str, np.ndarray], tied: dict[str, list[str]] | None = None) -> ProxyRound:
    scores = {k: MeanScore(float(np.mean(v)), 0.0, 1.0, {}) for k, v in reps.items()}
    return ProxyRound(0.1, scores, {}, [], tied or {}, 1.0, replicates=reps)


def test_the_final_ranking_states_an_order_only_where_the_proxy_or_the_exact_runs_show_one() -> None:
    reps = _replicates()  # a 0.70; c 0.699 and d 0.695 (noisy) not apart from a; b clearly below
    ranking = sorted(reps, key=lambda k: -float(np.mean(reps[k])))
    assert ranking == ["a", "c", "d", "b"]

    def holds_zero(above: str, below: str) -> bool:  # numpy: the 95% interval of the paired difference
        low, high = np.quantile(reps[above] - reps[below], [0.025, 0.975])
        return bool(low <= 0 <= high)

    assert holds_zero("a", "c") and holds_zero("a", "d") and not holds_zero("a", "b")
    assert holds_zero("c", "d") and not holds_zero("c", "b") and holds_zero("d", "b")
    one = [_proxy_round(reps)]
    # b lies clearly below a and c, but not below the noisy d of their group: a place below the group would state
    # b below d too, so b joins it
    assert rounds.stated_places(ranking, one, ["a"], 0.95) == [0, 0, 0, 0]
    assert rounds.stated_places(ranking, one, ["a", "c"], 0.95) == [0, 1, 1, 1]  # a and c ordered by their exact runs
    assert rounds.stated_places(ranking, one, ["a", "c", "d"], 0.95) == [0, 1, 2, 2]  # c, d exact; b not below d
    assert rounds.stated_places(ranking, one, ["a", "c", "d", "b"], 0.95) == [0, 1, 2, 3]  # every one exact
    apart = [_proxy_round({k: v for k, v in reps.items() if k != "d"})]
    assert rounds.stated_places(["a", "c", "b"], apart, ["a"], 0.95) == [0, 0, 2]  # below every one of a's group
    dropped_earlier = [_proxy_round(reps), _proxy_round({k: reps[k] for k in "acb"})]  # d last scored in round 1
    assert rounds.stated_places(["a", "c", "b", "d"], dropped_earlier, ["a"], 0.95) == [0, 0, 2, 3]
    tied = [_proxy_round({k: reps[k] for k in "ab"} | {"c": reps["a"] - 0.001}, tied={"a": ["c"]})]
    assert rounds.stated_places(["a", "c", "b"], tied, ["a"], 0.95) == [0, 0, 2]  # declared tied: a's place


def test_an_order_the_proxy_contradicts_is_not_stated() -> None:
    reps = _replicates()  # b clearly below a
    # a confirmed model placed by its exact run above one its proxy score lies clearly below: no order stated
    assert rounds.stated_places(["b", "a"], [_proxy_round(reps)], ["b"], 0.95) == [0, 0]


def test_tau_b_counts_models_the_screen_does_not_order_as_ties() -> None:
    reps = _replicates()
    reps["b"] = reps["b"] - 0.2  # below the noisy d too
    result = HalvingResult([_proxy_round(reps)], ["a"], ["a", "c", "d", "b"], 1.0, 0.005)
    result.places = rounds.stated_places(result.ranking, result.rounds, result.confirmed, 0.95)
    exact = {"a": 0.9, "c": 0.7, "d": 0.8, "b": 0.1}  # d above c exact: the proxy's order of them was wrong
    concordant, discordant, tied_in_screen, pairs = 3, 0, 3, 6  # a, c and d share a place: 3 pairs tied
    expected = (concordant - discordant) / math.sqrt((pairs - tied_in_screen) * pairs)
    places = [-p for p in result.places]
    assert rounds.kendall_tau(places, [exact[m] for m in result.ranking]) == pytest.approx(expected)
    strict = rounds.kendall_tau([-i for i in range(4)], [exact[m] for m in result.ranking])
    assert strict == pytest.approx((5 - 1) / 6)  # the proxy's own order: c above d, 1 discordant
    assert strict < expected
    assert "the screen's final ranking: 1. a ~ c ~ d, 4. b" in "\n".join(halving_lines(result))


def _items(values: dict[str, np.ndarray], task: str = "t", keys: tuple | None = None) -> dict:
    from embedscope.compare.items import TaskItems

    return {
        m: TaskItems(task, "Retrieval", "ndcg_at_10", float(v.mean()), "mean", keys or tuple(range(len(v))), v)
        for m, v in values.items()
    }


def test_the_full_tasks_own_places_join_only_what_their_paired_difference_does_not_show() -> None:
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.8, 600)
    nudge = np.zeros(600)
    nudge[:60] = rng.normal(0, 0.01, 60)  # c is b but for 60 queries, by noise: nothing a test can see
    values = {
        "a": base + 0.3 + rng.normal(0, 0.02, 600),
        "b": base + 0.1,
        "c": base + 0.1 + nudge,
        "d": base + rng.normal(0, 0.02, 600),
    }
    for other in ("b", "c", "d"):  # an independent paired test agrees on each pair the walk decides
        assert ttest_rel(values["a"], values[other]).pvalue < 1e-6
    assert ttest_rel(values["b"], values["c"]).pvalue > 0.05
    items = {m: {"t": v} for m, v in _items(values).items()}
    shown = rounds.full_task_places(items, OPTIONS)
    assert shown is not None
    ranking, places = shown
    means = {m: float(v.mean()) for m, v in values.items()}
    assert ranking == sorted(means, key=lambda m: -means[m])
    assert places == [0, 1, 1, 3]
    tau = kendalltau([-p for p in places], [means[m] for m in ranking]).statistic
    assert tau == pytest.approx(5 / math.sqrt(5 * 6))  # 5 concordant, the b–c pair tied in the places only
    unaligned = {m: {"t": v} for m, v in _items({"a": values["a"]}).items()}
    unaligned |= {m: {"t": v} for m, v in _items({"b": values["b"]}, keys=tuple(range(1, 601))).items()}
    assert rounds.full_task_places(unaligned, OPTIONS) is None  # not the same queries: no paired difference
    assert rounds.full_task_places({}, OPTIONS) is None
