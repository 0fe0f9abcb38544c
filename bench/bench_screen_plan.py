"""The default screen (no mode named: its plan chooses) against running every candidate exactly, in the same run.

Every candidate runs exactly, one after another, on fresh output and cache folders (the anchor: the plain runs a
user would make instead), then ``embedscope.screen(models, tasks)`` with no mode, cold, on folders of its own.
Printed: each candidate's exact score and seconds beside the plan's estimate of them, the mode the plan took and
why, the screen's seconds against the plain runs' (the issue's bound: at most 1.1×), the plan's estimated range
against what the screen then cost (the bound: within 30%), and the screen's winner or tie against the exact winner.
A fixed probe (all-MiniLM-L6-v2, uncached, 400 BBC documents) is timed after the anchor and after the screen: the
machine's drift between the two.

    .venv/bin/python bench/bench_screen_plan.py [--tasks T …] [--model DIR …] [--models M …]

Default: the four shipped models (minilm, minilm-int8, paraphrase-minilm-l3, static-64) on BBCNewsRetrieval,
BBCNewsClassification and LeeDocumentSimilarity (issue 54's measurement).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_screen_proxy import probe

import embedscope

SHIPPED = ["minilm", "minilm-int8", "paraphrase-minilm-l3", "static-64"]
TASKS = ["BBCNewsRetrieval", "BBCNewsClassification", "LeeDocumentSimilarity"]


def plain_runs(models: list[str], tasks: list[str], folder: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Each candidate exactly, cold: its mean main score over the tasks and its wall time."""
    scores, seconds = {}, {}
    for model in models:
        started = time.perf_counter()
        report = embedscope.evaluate(
            model, tasks, output_folder=folder, cache_dir=folder / "cache", show_progress=False
        )
        seconds[model] = time.perf_counter() - started
        main = [o.result.main_score() for o in report.outcomes]
        scores[model] = sum(main) / len(main)
    return scores, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=SHIPPED)
    parser.add_argument("--model", nargs="*", default=[], help="more candidates (folders), e.g. all-mpnet-base-v2")
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    args = parser.parse_args()
    models, tasks = [*args.models, *args.model], list(args.tasks)
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as screen_dir:
        exact, seconds = plain_runs(models, tasks, Path(plain_dir))
        probe_anchor = probe()
        started = time.perf_counter()
        report = embedscope.screen(
            models, tasks, output_folder=screen_dir, cache_dir=Path(screen_dir) / "cache", show_progress=False
        )
        screen_seconds = time.perf_counter() - started
        probe_screen = probe()
    plan = report.plan
    assert plan is not None
    every = sum(seconds.values())
    estimated = {c.model: c for c in plan.candidates}
    print(f"== {len(models)} candidates on {', '.join(tasks)}")
    for m in models:
        c = estimated[m]
        guess = f"{c.exact:7.1f} s" if c.exact is not None else "not estimated"
        print(f"  {m:24s} exact {exact[m]:.5f} in {seconds[m]:7.1f} s; the plan estimated {guess} ({c.basis})")
    print(f"  plain runs, one after another: {every:.1f} s (the plan estimated {plan.every_exact:.1f} s)")
    print(f"  the plan ({plan.seconds:.1f} s) took {plan.mode}: {plan.reason}")
    print(f"  default screen: {screen_seconds:.1f} s; ratio to the plain runs {screen_seconds / every:.3f} (bound 1.1)")
    if plan.bounds is not None:
        low, high = plan.bounds
        inside = low * 0.7 <= screen_seconds <= high * 1.3
        print(
            f"  the plan's range {low:.1f} s to {high:.1f} s: the screen's cost {'within' if inside else 'OUTSIDE'} 30%"
        )
    for m in report.confirmed:  # a confirmation costs no more than the model's plain run (its proxies cached)
        inside = report.model(m).exact_seconds
        print(
            f"  {m:24s} confirmed in {inside:7.1f} s inside the screen, {seconds[m]:7.1f} s plain ({inside / seconds[m]:.2f}×)"
        )
    winner = max(exact, key=lambda m: exact[m])
    named = report.confirmed[0] if report.confirmed else None
    ties = report.halving.rounds[-1].tied if report.halving is not None and report.halving.rounds else {}
    held = named == winner or winner in ties.get(named or "", [])
    print(f"  exact winner {winner}; the screen names {named} (ties {ties}): {'held' if held else 'MISSED'}")
    print(f"  {report.significance_line()}")
    print(
        f"  machine speed: probe {probe_anchor:.1f} s after the plain runs, {probe_screen:.1f} s after the screen "
        f"(×{probe_screen / probe_anchor:.3f})"
    )


if __name__ == "__main__":
    main()
