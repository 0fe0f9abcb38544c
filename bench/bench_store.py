"""The results store and the gate: what recording costs beside the run it records, and how fast a gate decides.

1. A real run (bm25 on the whole BBCNewsRetrieval, 2,225 per-query rows), then its recording into the store: the
   recording's share of the run (goal < 5%).
2. A made-up result of 100,000 per-item rows recorded (SQLite and, with ``--postgres URL``, PostgreSQL): its seconds,
   beside the same run's cost per query scaled to 100,000 queries (the run such a result would come from).
3. A gate over 50 tasks × 10,000 queries (made-up per-item rows, a drop on some tasks), beside ``compare`` of the
   same two folders in the same run (the anchor: the same paired tests); goal < 5 s.

    python bench/bench_store.py [--postgres postgresql://USER:PASSWORD@127.0.0.1:PORT/DB]
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from _util import best_time  # noqa: E402

from support.made_up import retrieval_values, write_result  # noqa: E402


def real_run(root: Path) -> tuple[float, Path]:
    """bm25 on the whole BBCNewsRetrieval: its wall time and its result folder."""
    import embedscope

    started = time.perf_counter()
    report = embedscope.evaluate("bm25", ["BBCNewsRetrieval"], output_folder=str(root / "bm25"), show_progress=False)
    return time.perf_counter() - started, report.outcomes[0].path.parent


def record_seconds(url: str, folder: Path) -> float:
    """Seconds to read and record one run folder into a new store at ``url`` (best of 3, each into a fresh store)."""
    import dataclasses

    from embedscope.history.folders import read_run
    from embedscope.history.store import Store

    store = Store(url)
    n = iter(range(1000))

    def once() -> None:
        record = read_run(folder)
        store.record(dataclasses.replace(record, model=f"{record.model}-{next(n)}"))  # a new run each time

    seconds, _ = best_time(once, repeats=3, warmup=0)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=None, help="also measure a PostgreSQL store at this URL")
    parser.add_argument("--skip-permutation", action="store_true", help="time the gate's default test only")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-store-"))
    stores = {"sqlite": f"sqlite:///{root}/store.db"}
    if args.postgres:
        stores["postgresql"] = args.postgres

    run_s, folder = real_run(root)
    print(f"1. bm25 on BBCNewsRetrieval (2,225 queries): run {run_s:.2f} s")
    for kind, url in stores.items():
        rec = record_seconds(url, folder)
        print(f"   recording it in {kind}: {rec * 1000:.1f} ms = {rec / run_s:.2%} of the run (goal < 5%)")

    big = write_result(root / "big", "org/big", "Big", retrieval_values(100_000, 0.5, 0))
    per_query = run_s / 2225
    print(f"2. a result of 100,000 per-item rows ({(big / 'Big.per_item.jsonl.gz').stat().st_size / 1e6:.1f} MB gzip)")
    for kind, url in stores.items():
        rec = record_seconds(url, big)
        anchor = per_query * 100_000
        print(f"   recorded in {kind}: {rec:.2f} s; the run it comes from at bm25's pace: {anchor:.0f} s "
              f"→ {rec / anchor:.2%} of it (goal < 5%)")  # fmt: skip

    from embedscope.compare.core import CompareOptions, compare_folders
    from embedscope.history.gate import gate

    base, cand = root / "base", root / "cand"
    for t in range(50):
        values = retrieval_values(10_000, 0.6, seed=t)
        write_result(base, "org/base", f"Task{t:02d}", values)
        shifted = np.clip(
            values + (-0.02 if t % 10 == 0 else 0.0) + np.random.default_rng(t).normal(0, 0.01, 10_000), 0, 1
        )
        write_result(cand, "org/cand", f"Task{t:02d}", shifted)
    tests = (("t-test", 3),) if args.skip_permutation else (("t-test", 3), ("permutation", 1))
    for test, repeats in tests:  # the gate's default, then compare's default
        gate_s, result = best_time(
            functools.partial(gate, str(base), str(cand), options=CompareOptions(test=test)), repeats, 0
        )
        compare_s, _ = best_time(
            functools.partial(compare_folders, [base, cand], CompareOptions(test=test)), repeats, 0
        )
        fails = sum(r.verdict == "fail" for r in result.rows)
        print(f"3. gate over 50 tasks × 10,000 queries ({test}): {gate_s:.2f} s (goal < 5 s); compare of the same "
              f"folders {compare_s:.2f} s → ratio {gate_s / compare_s:.2f}; exit {result.exit_status}, {fails} tasks fail")  # fmt: skip


if __name__ == "__main__":
    main()
