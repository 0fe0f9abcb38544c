"""How a retrieval proxy's query sample spreads, drawn as whole batches (a screen's recipe) or query by query.

A screen's bootstrap resamples a proxy's queries as if they were a simple random sample of the full task's. Drawn as
whole batches of the full run's corpus calls, the sampled queries come from a few length bands instead. This bench
measures what that does to the one number a screen decides on, the difference of two candidates' mean main score:
each candidate's per-query nDCG@10 on the full BBCNewsRetrieval (every candidate exact once), then for ``--draws``
seeds the mean difference over each recipe's sampled queries. Printed per pair: the spread (standard deviation) of
that difference over the seeds for the batch recipe and for plain query sampling (the anchor, measured in the same
run), their ratio, and the standard error the bootstrap of one proxy states (its queries' standard deviation ÷ √n).
The corpus' shrinking is left out on purpose (every value is the full task's): only the sampling design differs.

    .venv/bin/python bench/bench_proxy_sampling.py [--size 0.05] [--draws 400]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np

import embedscope
from embedscope.compare.items import task_items
from embedscope.data.builtin import bbc_news_retrieval
from embedscope.tasks.proxy import ProxySpec, retrieval_proxy

MODELS = ["bm25", "static-64", "paraphrase-minilm-l3"]


def per_query(model: str, folder: Path) -> dict[str, float]:
    """The model's nDCG@10 of each query on the full BBCNewsRetrieval."""
    report = embedscope.evaluate(model, ["BBCNewsRetrieval"], output_folder=folder, show_progress=False, cache=False)
    items = task_items(report.outcomes[0].path)
    return {key[2]: float(v) for key, v in zip(items.keys, items.values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=0.05)
    parser.add_argument("--draws", type=int, default=400)
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        scores = {m: per_query(m, Path(folder)) for m in MODELS}
    data = bbc_news_retrieval()
    draws: dict[str, list[list[str]]] = {"batches": [], "queries": []}
    for seed in range(args.draws):
        for recipe, batch_size in (("batches", 32), ("queries", None)):
            spec = ProxySpec(size=args.size, seed=seed, hard_negatives=0, batch_size=batch_size)
            draws[recipe].append(retrieval_proxy(data, spec)[1]["queries"])
    n = len(draws["batches"][0])
    print(f"BBCNewsRetrieval, proxies of {args.size} ({n} queries), {args.draws} seeds each; "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    for a, b in itertools.combinations(MODELS, 2):
        diff = {q: scores[a][q] - scores[b][q] for q in scores[a]}
        spread = {r: float(np.std([np.mean([diff[q] for q in qs]) for qs in draws[r]], ddof=1)) for r in draws}
        stated = float(np.mean([np.std([diff[q] for q in qs], ddof=1) / np.sqrt(len(qs)) for qs in draws["batches"]]))
        full = float(np.mean(list(diff.values())))
        print(
            f"  {a} − {b}: full {full:+.4f}; spread over seeds: batches {spread['batches']:.4f}, "
            f"queries (anchor) {spread['queries']:.4f}, ratio {spread['batches'] / spread['queries']:.2f}; "
            f"stated by one proxy's bootstrap {stated:.4f}"
        )


if __name__ == "__main__":
    main()
