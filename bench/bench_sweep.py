"""A sweep against the separate runs that give the same points, and what each post-processing point costs.

The BBC grid of issue 22, reduced to what runs on 2 cores in a few minutes: BBCNewsRetrieval × {bm25, dense
static-64, rrf of the two}, and for the dense retriever truncate_dim {null, 32} × precision {fp32, int8, binary}
(8 points; a sweep grid is a product, so it is two ``embedscope sweep`` processes: the dense grid, then the
pipelines). The anchor is the sum of 8 separate ``embedscope run`` processes giving the same points.

Cache policy, the same on both sides: each side gets its own embedding cache folder, empty at its start and shared
by that side's processes (as a sweep's points share it); every process writes to a results folder of its own that
is empty at its start. So each side encodes the corpus once, cold, and reuses the vectors after.

Printed: both wall times and their ratio; each point's score on both sides (they must be equal); each
post-processing point's wall time in the sweep (the ``ran in`` of its line) and its search phases, against the
corpus encode of the first dense point (issue 22's target: under 5% each).

    .venv/bin/python bench/bench_sweep.py [--model static-64]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _util import embedscope_process  # noqa: E402

TASK = "BBCNewsRetrieval"
TARGET = 0.05
_RAN = re.compile(r"^sweep \[\d+/\d+, \d+s\] (.*): (?:ran in ([\d.]+)s|reused)$")
_NOT_SEARCH = ("load_data", "metrics", "encode_corpus", "encode_queries")


def points(model: str) -> list[tuple[str, list[str]]]:
    """Each point as a label and its ``run`` flags, in the order the two sweeps run them."""
    out = []
    for dim in (None, 32):  # the sweep's order: axes truncate_dim then precision
        for precision in ("fp32", "int8", "binary"):
            flags = ["--model", model, "--precision", precision] + ([] if dim is None else ["--truncate-dim", str(dim)])
            out.append((f"{model} dim={dim} {precision}", flags))
    out.append(("bm25", ["--model", "bm25"]))
    out.append((f"rrf(bm25, {model})", ["--retriever", "bm25", "--retriever", model, "--fusion", "rrf"]))
    return out


def sweeps(model: str, folder: Path) -> list[list[str]]:
    base = ["sweep", "--tasks", TASK, "--output-folder", str(folder), "--json", "--rounds", "1000"]
    dense = [*base, "--set", f"model={model}", "--axis", "truncate_dim=null,32", "--axis", "precision=fp32,int8,binary"]
    pipes = [*base, "--axis", f"pipeline=[{{retriever: bm25}}, {{retrievers: [bm25, {model}], fusion: rrf}}]"]
    return [dense, pipes]


def phases(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in json.loads(path.read_text(encoding="utf-8")).get("evaluation_phases") or []:
        out[p["name"]] = out.get(p["name"], 0.0) + float(p["end"]) - float(p["start"])
    return out


def main_score(path: Path) -> float:
    entries = json.loads(path.read_text(encoding="utf-8"))["scores"]["test"]
    return float(entries[0]["main_score"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="static-64", help="the dense model (default static-64)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        root = Path(tmp)
        # the sweep: two processes, one cold cache
        sweep_s, rows, ran = 0.0, [], {}
        for n, argv in enumerate(sweeps(args.model, root / "sweep-results")):
            seconds, done = embedscope_process(argv, root / "sweep-cache")
            sweep_s += seconds
            rows += json.loads(done.stdout)["rows"]
            for line in done.stderr.splitlines():
                m = _RAN.match(line.strip())
                if m:
                    ran[(n, m.group(1))] = float(m.group(2)) if m.group(2) else 0.0
            print(f"sweep {n + 1}: {seconds:.1f} s", flush=True)
        # the anchor: one fresh process per point, one cold cache shared by them, a fresh results folder each
        runs_s, run_scores = 0.0, []
        for i, (label, flags) in enumerate(points(args.model)):
            out = root / f"run-{i}"
            seconds, _ = embedscope_process(
                ["run", *flags, "--tasks", TASK, "--output-folder", str(out)], root / "run-cache"
            )
            runs_s += seconds
            (path,) = list(out.rglob(f"{TASK}.json"))
            run_scores.append(main_score(path))
            print(f"run {label}: {seconds:.1f} s", flush=True)

        print(f"\n{len(rows)} points on {TASK}, dense model {args.model}, 2 sweeps against {len(run_scores)} runs")
        print(f"sweep wall time      {sweep_s:8.1f} s")
        print(f"separate runs        {runs_s:8.1f} s")
        print(f"ratio sweep / runs   {sweep_s / runs_s:8.3f}")
        print("\n| point | sweep score | run score | equal |")
        print("|---|---|---|---|")
        for (label, _), row, score in zip(points(args.model), rows, run_scores):
            print(f"| {label} | {row['score']!r} | {score!r} | {row['score'] == score} |")

        dense = rows[:6]
        encode = phases(Path(dense[0]["path"]))["encode_corpus"]
        print(f"\none corpus encode (point 0, cold cache): {encode:.2f} s")
        print("| point | point wall s | / encode | search s | / encode | under 5% |")
        print("|---|---|---|---|---|---|")
        labels = list(ran)
        for key, row in zip(labels[1:6], dense[1:]):
            wall = ran[key]
            search = sum(v for k, v in phases(Path(row["path"])).items() if k not in _NOT_SEARCH)
            print(
                f"| {key[1]} | {wall:.2f} | {wall / encode:.1%} | {search:.3f} | {search / encode:.1%} "
                f"| {wall / encode < TARGET} |"
            )


if __name__ == "__main__":
    main()
