"""`embedscope score` as a whole process against pytrec_eval's whole process, on the same files.

A TREC run of 10,000 queries × 1,000 docs (~257 MB; scores rounded to 4 decimals, so ties occur)
and TREC qrels (1–5 graded judgments per query, most inside the run) are written to a temporary
folder. Timed, each as its own process (median of 3 after one warm-up that also fills the page cache):

- embedscope: ``python -m embedscope score --qrels Q --run R --json`` (every MTEB key at
  k = 1,3,5,10,20,100,1000: ndcg, map, recall, precision, hit rate, MRR and their nAUCs);
- pytrec_eval: ``pytrec_eval.parse_qrel`` / ``parse_run`` (its own file readers), then
  ``RelevanceEvaluator.evaluate`` for ndcg_cut, map_cut, recall, P at the same k, and the means.

Prints wall times, the ratio (pytrec_eval / embedscope), each process's CPU time (user + system, from
``wait4``: steadier than wall time on a loaded machine) and peak RSS against the run file's size, and
the largest difference between the two processes' means.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P"}

PYTREC_SCRIPT = """
import json, sys
import pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
measures = {m + "." + ",".join(map(str, %r)) for m in %r}
per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
keys = next(iter(per_query.values())).keys()
print(json.dumps({k: sum(v[k] for v in per_query.values()) / len(per_query) for k in keys}))
""" % (K_VALUES, tuple(TREC_NAMES.values()))  # noqa: UP031 (the script has braces: % keeps them literal)


def write_data(
    folder: Path, n_queries: int = 10_000, depth: int = 1_000, n_docs: int = 100_000, seed: int = 0
) -> tuple[Path, Path]:
    """``run.trec`` (ranked lines, rank 1..depth) and ``qrels.trec`` in ``folder``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    run_path, qrels_path = folder / "run.trec", folder / "qrels.trec"
    qid = np.repeat(np.array([f"q{i}" for i in range(n_queries)]), depth)
    docs = (rng.integers(0, n_docs, size=(n_queries, 1)) + 97 * np.arange(depth)) % n_docs  # distinct per query
    scores = -np.sort(-np.round(rng.normal(size=(n_queries, depth)), 4), axis=1)
    table = pa.table(
        {
            "qid": qid,
            "q0": np.full(qid.shape, "Q0"),
            "doc": np.char.add("d", docs.ravel().astype(str)),
            "rank": np.tile(np.arange(1, depth + 1), n_queries),
            "score": scores.ravel(),
            "tag": np.full(qid.shape, "r"),
        }
    )
    pacsv.write_csv(table, run_path, pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    lines = []
    for i in range(n_queries):
        n = int(rng.integers(1, 6))
        picked = np.where(rng.random(n) < 0.8, docs[i, rng.integers(0, depth, size=n)], rng.integers(0, n_docs, size=n))
        lines += [
            f"q{i} 0 d{d} {r}" for d, r in zip(dict.fromkeys(picked.tolist()), rng.integers(0, 4, size=n).tolist())
        ]
    qrels_path.write_text("\n".join(lines) + "\n")
    return run_path, qrels_path


def timed_process(args: list[str]) -> tuple[float, float, str, float]:
    """Wall seconds, peak RSS (MB), stdout and CPU seconds (user + system) of one child process."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"{args[:4]} failed: {proc.stderr.read().decode()[-2000:]}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode(), usage.ru_utime + usage.ru_stime


def median_process(args: list[str], repeats: int) -> tuple[float, float, str, float]:
    runs = [timed_process(args) for _ in range(repeats + 1)][1:]  # the first one warms the page cache
    return (
        statistics.median(r[0] for r in runs),
        max(r[1] for r in runs),
        runs[-1][2],
        statistics.median(r[3] for r in runs),
    )


def main() -> None:
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        # in a child: Linux keeps a process's peak RSS across fork + exec, so the timed children must be
        # forked from a small parent
        subprocess.run([sys.executable, __file__, "--write", tmp], check=True)
        run_path, qrels_path = Path(tmp) / "run.trec", Path(tmp) / "qrels.trec"
        size_mb = run_path.stat().st_size / 1e6
        print(f"data: 10,000 queries x 1,000 docs, run {size_mb:.0f} MB, written in {time.perf_counter() - t0:.1f} s")
        ours_t, ours_rss, ours_out, ours_cpu = median_process(
            [sys.executable, "-m", "embedscope", "score", "--qrels", str(qrels_path), "--run", str(run_path), "--json"],
            repeats,
        )
        theirs_t, theirs_rss, theirs_out, theirs_cpu = median_process(
            [sys.executable, "-c", PYTREC_SCRIPT, str(qrels_path), str(run_path)], max(1, repeats - 2)
        )
    import resource

    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ours, theirs = json.loads(ours_out), json.loads(theirs_out)
    worst = max(
        abs(ours[f"{m}_at_{k}"] - round(theirs[f"{t}_{k}"], 5)) for m, t in TREC_NAMES.items() for k in K_VALUES
    )
    print(
        f"embedscope score --json: {ours_t:.2f} s (CPU {ours_cpu:.2f} s), peak RSS {ours_rss:.0f} MB "
        f"({ours_rss / size_mb:.2f}x the run file)"
    )
    print(f"bench process RSS when forking: {parent_rss:.0f} MB (included in both peaks)")
    print(
        f"pytrec_eval (parse_qrel/parse_run + evaluate): {theirs_t:.2f} s (CPU {theirs_cpu:.2f} s), "
        f"peak RSS {theirs_rss:.0f} MB"
    )
    print(f"ratio (pytrec_eval / embedscope): {theirs_t / ours_t:.1f}x wall, {theirs_cpu / ours_cpu:.1f}x CPU")
    print(f"max |mean difference| vs pytrec_eval (ndcg/map/recall/P at every k, rounded to 5): {worst:.3g}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write_data(Path(sys.argv[2]))
    else:
        main()
