"""Scale: a synthetic 1M-document retrieval task end to end through the local Ray engine.

The static model (``static-64``, 64-d) encodes the corpus on a local Ray cluster; vectors stream
back into the embedding cache chunk by chunk, and the exact top-1000 search runs on the driver.
Prints the peak RSS of the driver process against the embeddings' size + 1 GB (the goal), and the
in-process rate for comparison (the anchor, measured in the same run on ``--anchor-docs`` documents
in a child process, so that its model does not sit in the driver's memory; the child also checks
that Ray gives the in-process scores).

    .venv/bin/python bench/bench_ray_scale.py [--docs 1000000] [--queries 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def synthetic_task(n_docs: int, n_queries: int, seed: int = 0):
    """Documents of 8–24 words from a 5,000-word Zipf vocabulary; each query is 4 words of one document."""
    from embedscope.tasks.retrieval import RetrievalTask
    from embedscope.types import Corpus, Queries, RetrievalData

    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    p = 1.0 / np.arange(1, 5001)
    p /= p.sum()
    lengths = rng.integers(8, 25, n_docs)
    words = vocab[rng.choice(5000, size=int(lengths.sum()), p=p)]
    ends = np.cumsum(lengths)
    texts = tuple(" ".join(words[e - n : e]) for e, n in zip(ends, lengths))
    ids = tuple(f"d{i}" for i in range(n_docs))
    targets = rng.choice(n_docs, n_queries, replace=False)
    q_texts = tuple(" ".join(texts[t].split()[:4]) for t in targets)
    q_ids = tuple(f"q{i}" for i in range(n_queries))
    qrels = {q: {ids[t]: 1} for q, t in zip(q_ids, targets)}

    def load(split: str) -> RetrievalData:
        return RetrievalData(Corpus(ids, texts), Queries(q_ids, q_texts), qrels, name="Synthetic1M", split=split)

    return RetrievalTask(name=f"Synthetic{n_docs}", load_split=load, description="synthetic scale test")


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class PeakRSS:
    """Samples this process's RSS every 50 ms (ru_maxrss also counts what happened before)."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def anchor(n_docs: int, n_queries: int, workers: int) -> None:
    """In-process rate on ``n_docs`` documents, and whether Ray gives the same scores (child process)."""
    import json

    import ray

    import embedscope

    work = Path(tempfile.mkdtemp(prefix="embedscope-ray-anchor-"))
    task = synthetic_task(n_docs, n_queries)
    t0 = time.perf_counter()
    local = embedscope.evaluate(
        "static-64", [task], output_folder=work / "local", cache=work / "c1", show_progress=False, device="cpu"
    )
    seconds = time.perf_counter() - t0
    ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False, configure_logging=False)
    remote = embedscope.evaluate(
        "static-64",
        [task],
        output_folder=work / "ray",
        cache=work / "c2",
        show_progress=False,
        engine="ray",
        ray_workers=workers,
    )
    same = json.dumps(local.outcomes[0].result.scores) == json.dumps(remote.outcomes[0].result.scores)
    print(json.dumps({"docs_per_s": n_docs / seconds, "seconds": seconds, "same": same}))
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--anchor-docs", type=int, default=100_000, help="in-process anchor size (same run)")
    parser.add_argument("--anchor-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.anchor_only:
        anchor(args.anchor_docs, args.queries, args.workers)
        return

    import json
    import subprocess
    import sys

    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--anchor-only",
            "--anchor-docs",
            str(args.anchor_docs),
            "--queries",
            str(args.queries),
            "--workers",
            str(args.workers),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    base = json.loads(child.stdout.strip().splitlines()[-1])

    import ray

    import embedscope

    work = Path(tempfile.mkdtemp(prefix="embedscope-ray-scale-"))
    ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = synthetic_task(args.docs, args.queries)
    before = rss_mb()
    t0 = time.perf_counter()
    with PeakRSS() as peak:
        report = embedscope.evaluate(
            "static-64",
            [task],
            output_folder=work / "ray",
            cache=work / "cache",
            show_progress=False,
            engine="ray",
            ray_workers=args.workers,
        )
    seconds = time.perf_counter() - t0
    embeddings_mb = args.docs * 64 * 4 / 2**20
    limit = embeddings_mb + 1024
    result = report.outcomes[0].result.scores["test"][0]
    rate = args.docs / seconds
    print(
        f"in-process anchor: {args.anchor_docs:,} docs in {base['seconds']:.1f} s ({base['docs_per_s']:,.0f} docs/s); "
        f"Ray gives the identical scores on it: {base['same']}"
    )
    print(
        f"Ray engine, {args.workers} workers: {args.docs:,} docs + {args.queries:,} queries end to end in "
        f"{seconds:.1f} s ({rate:,.0f} docs/s, {rate / base['docs_per_s']:.2f}x the in-process rate); "
        f"ndcg_at_10 {result['ndcg_at_10']:.5f}; encoded {report.cache.encoded:,} texts"
    )
    print(
        f"driver RSS: {before:,.0f} MB with the corpus in memory, peak {peak.peak:,.0f} MB; embeddings "
        f"{embeddings_mb:,.0f} MB; goal peak < embeddings + 1 GB = {limit:,.0f} MB -> "
        f"{'met' if peak.peak < limit else 'NOT met'} (peak/limit {peak.peak / limit:.2f}; "
        f"ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB)"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
