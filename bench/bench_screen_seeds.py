"""A screen over many seeds: how often one run names the winner, how its τ and its overhead spread.

One ``bench_screen_proxy.py`` run is one seed of the screen (its proxies are drawn with ``--seed``, 42 by default),
and on a candidate set whose middle candidates lie close together exact, what one seed's proxy says of them is
partly luck. This bench replays the same screen for ``--draws`` seeds on the vectors an anchor encoded:

* ``bench_screen_proxy.py --keep DIR`` leaves its anchor (every candidate exact: results and the embedding cache
  of the full runs) in ``DIR`` with ``anchor.json``: each candidate's exact score and wall time, and what one cold
  screen measured: each candidate's proxy seconds, the proxies' share of the full task's texts, and the screen's
  seconds besides the candidates' runs;
* for each seed, the real screen with ``--audit`` (``screen.rounds.halving_screen``) on ``DIR``: a retrieval proxy is
  drawn as whole batches of the full run's corpus call, so every vector it needs is served by the cache, and
  ``--audit``'s exact runs are the stored ones. Its decisions are the screen's own, those that weigh cost taken on
  the cold screen's estimates of each candidate's exact seconds (``costs``, as ``--audit-seeds`` replays are: the
  cache makes a replay's own proxy times next to nothing); only its seconds are not measured;
* its cost is modelled from the anchor's measured seconds: a confirmed candidate costs its exact run (its proxy's
  texts are served back to its confirming run, so the two together encode its texts once: measured for minilm,
  proxy 19.3 s + confirming run 82.5 s against 102.9 s exact), any other candidate what its proxy cost in the cold
  screen, scaled by this seed's share of the texts against that screen's (``--proxy`` replays other rounds: a
  round the cold screen did not run costs its last round's, scaled by the share), plus the cold screen's seconds
  besides the candidates' runs. The overhead is the issue's: (screen − the winner's exact) ÷ (the others' exact).

Printed per seed and summed up: whether the exact winner was named (or tied with the one named), the stated
probability, τ-b as stated and of the order alone, the modelled overhead, what was confirmed; then the share of seeds
at which each criterion holds (τ ≥ 0.8, overhead ≤ 0.35) and both together, beside the all-exact ranking as the full
task itself shows it (``Audit.full_task_places``: the same rule with every candidate exact) and its τ-b.

    .venv/bin/python bench/bench_screen_proxy.py --suite retrieval --proxy 0.05 --model DIR --keep ANCHOR
    .venv/bin/python bench/bench_screen_seeds.py --folder ANCHOR [--draws 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from embedscope.compare.core import CompareOptions
from embedscope.screen.passes import ScreenedModel
from embedscope.screen.report import places_line, ranking_line
from embedscope.screen.rounds import HalvingResult, halving_screen
from embedscope.settings.screen import ScreenSettings
from embedscope.settings.sources import Layer, build_settings
from embedscope.tasks.proxy import kept_share

TAU_BOUND, OVERHEAD_BOUND = 0.8, 0.35


def round_share(result: HalvingResult, index: int) -> float:
    """The share of the full tasks' texts round ``index``'s proxies kept (their mean over the tasks)."""
    shares = [kept_share(p["compositions"]) for p in result.rounds[index].proxies.values()]
    known = [s for s in shares if s is not None]
    return sum(known) / len(known) if known else 1.0


def modelled_seconds(result: HalvingResult, anchor: dict[str, Any]) -> float:
    """The screen's seconds, modelled from the anchor's measurements (see the module docstring)."""
    exact = {m: v["seconds"] for m, v in anchor["exact"].items()}
    cold = anchor["cold_screen"]
    total = cold["besides_candidates"]
    for model in exact:
        if model in result.confirmed:
            total += exact[model]
            continue
        for i, r in enumerate(result.rounds):
            if model in r.scores:  # a round the cold screen did not run: its last round's, scaled by the share
                j = min(i, len(cold["shares"]) - 1)
                total += cold["proxy_seconds"][j][model] * round_share(result, i) / cold["shares"][j]
    return total


def one_seed(seed: int, folder: Path, anchor: dict[str, Any]) -> dict[str, Any]:
    """The screen at ``seed`` on the anchor's folder, audited, with its modelled cost."""
    started = time.perf_counter()
    values = {"models": anchor["models"], "output_folder": folder, "cache_dir": folder / "cache"}
    if anchor["tasks"] is not None:  # else the built-in suite
        values["tasks"] = anchor["tasks"]
    settings = build_settings([Layer("bench_screen_seeds", {**values, "show_progress": False}, "api")])
    runs = settings.model_runs()
    halving = halving_screen(
        settings, runs, {str(r.model): ScreenedModel(str(r.model)) for r in runs}, {},
        ScreenSettings(proxy=anchor["proxy"], audit=True), CompareOptions(seed=seed),
        costs=anchor["cold_screen"]["exact_estimate"],
    )  # fmt: skip
    assert halving.audit is not None
    exact = {m: v["seconds"] for m, v in anchor["exact"].items()}
    winner = halving.audit.winner
    others = sum(exact.values()) - exact[winner]
    return {
        "seed": seed,
        "held": halving.audit.held,
        "named": halving.confirmed[0],
        "p": halving.p_winner_kept,
        "tau": halving.audit.kendall_tau,
        "tau_order": halving.audit.kendall_tau_order,
        "overhead": (modelled_seconds(halving, anchor) - exact[winner]) / others,
        "confirmed": halving.confirmed,
        "ranking": ranking_line(halving),
        "full_task": places_line(halving.audit.full_task_ranking, halving.audit.full_task_places),
        "tau_full_task": halving.audit.kendall_tau_full_task,
        "tau_shown": halving.audit.kendall_tau_shown,
        "replay_seconds": time.perf_counter() - started,
    }


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The share of seeds meeting each criterion, and the spread of τ and of the overhead."""
    n = len(rows)
    tau_ok = [r["tau"] >= TAU_BOUND for r in rows]
    cost_ok = [r["overhead"] <= OVERHEAD_BOUND for r in rows]
    held = [r["held"] for r in rows]

    def spread(key: str) -> str:
        values = sorted(r[key] for r in rows)
        return f"median {statistics.median(values):.3f}, range {values[0]:.3f} to {values[-1]:.3f}"

    return [
        f"seeds: {n}",
        f"the full task itself shows {rows[0]['full_task']} (the screen's confidence): tau-b "
        f"{rows[0]['tau_full_task']:.3f} against the exact order, with every candidate exact",
        f"exact winner named (or tied with the one named): {sum(held)}/{n}; mean stated probability "
        f"{statistics.fmean(r['p'] for r in rows):.3f}",
        f"tau-b as stated: mean {statistics.fmean(r['tau'] for r in rows):.3f}, {spread('tau')}; "
        f">= {TAU_BOUND}: {sum(tau_ok)}/{n}",
        f"tau-b between the places stated and those the full task shows: mean "
        f"{statistics.fmean(r['tau_shown'] for r in rows):.3f}, {spread('tau_shown')}; equal places (1.0): "
        f"{sum(r['tau_shown'] > 1 - 1e-9 for r in rows)}/{n}",
        f"tau-b of the order alone: mean {statistics.fmean(r['tau_order'] for r in rows):.3f}, {spread('tau_order')}",
        f"modelled overhead: mean {statistics.fmean(r['overhead'] for r in rows):.3f}, {spread('overhead')}; "
        f"<= {OVERHEAD_BOUND}: {sum(cost_ok)}/{n}",
        f"every criterion at once (winner, tau, overhead): "
        f"{sum(h and t and c for h, t, c in zip(held, tau_ok, cost_ok))}/{n}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--folder", type=Path, required=True, help="an anchor left by bench_screen_proxy.py --keep")
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--proxy", nargs="+", type=float, help="other rounds than the cold screen's (their proxies' seconds scaled)"
    )
    args = parser.parse_args()
    anchor = json.loads((args.folder / "anchor.json").read_text(encoding="utf-8"))
    if "exact_estimate" not in anchor["cold_screen"]:
        parser.error(f"{args.folder / 'anchor.json'}: no cold_screen.exact_estimate (an older anchor): keep a new one")
    if args.proxy:
        anchor["proxy"] = args.proxy
    print(f"== {len(anchor['models'])} candidates on {anchor['tasks']}, proxy rounds {anchor['proxy']}")
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.draws):
        row = one_seed(seed, args.folder, anchor)
        rows.append(row)
        print(
            f"  seed {seed:3d}: {'held' if row['held'] else 'MISSED'} (named {row['named']}, P {row['p']:.3f}); "
            f"tau {row['tau']:.3f} (order {row['tau_order']:.3f}, against the full task's places "
            f"{row['tau_shown']:.3f}); overhead {row['overhead']:.3f}; "
            f"{row['ranking']} [{row['replay_seconds']:.0f} s]",
            flush=True,
        )
    for line in summary(rows):
        print("  " + line)


if __name__ == "__main__":
    main()
