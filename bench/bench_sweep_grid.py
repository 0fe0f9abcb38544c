"""The BBC grid of issue 22 as one ``embedscope sweep`` against the separate ``embedscope run`` processes that give
the same points.

Grid (one sweep file, sub-grids for the axes that apply to the dense retriever only): BBCNewsRetrieval chunked by
token windows of 3 sizes × ({bm25} + {dense} × truncate_dim × precision {fp32, int8, binary} + {rrf of bm25 and
dense}). With ``--model minilm --dims null,128,64`` it is the issue's 3 × (1 + 9 + 1) = 33 points.

Cache policy, the same on both sides: each side gets its own embedding cache folder, empty at its start and shared
by that side's processes; every process writes to a results folder of its own, empty at its start. So each side
encodes each chunking's passages once, cold. Printed: both wall times and their ratio (the anchor is the sum of the
separate runs), and each point's score on both sides (they must be equal).

    .venv/bin/python bench/bench_sweep_grid.py [--model static-64 --dims null,32,16] [--limits 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from embedscope.sweep.grid import axis_path, with_value

sys.path.insert(0, str(Path(__file__).parent))
from _util import embedscope_process  # noqa: E402

TASK = "BBCNewsRetrieval"


def grid_file(model: str, sizes: list[int], dims: list[Any], limits: int | None) -> dict[str, Any]:
    base: dict[str, Any] = {"tasks": [TASK], "chunking": {"method": "tokens"}, "show_progress": False}
    if limits is not None:
        base["limits"] = limits
    return {
        "base": base,
        "axes": {"chunking.chunk_size": sizes},
        "grids": [
            {"axes": {"model": ["bm25"]}},
            {"axes": {"model": [model], "truncate_dim": dims, "precision": ["fp32", "int8", "binary"]}},
            {"axes": {"pipeline": [{"retrievers": ["bm25", model], "fusion": "rrf"}]}},
        ],
    }


def point_configs(grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Each point's settings as a config file, in the sweep's order (shared axes, then each sub-grid's)."""
    import itertools

    out = []
    for sub in grid["grids"]:
        axes = {**grid["axes"], **sub["axes"]}
        for combo in itertools.product(*axes.values()):
            config = json.loads(json.dumps(grid["base"]))
            for key, value in zip(axes, combo):
                parts = axis_path(key)
                config[str(parts[0])] = with_value(config.get(str(parts[0])), parts[1:], value, key)
            out.append({k: v for k, v in config.items() if v is not None})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="static-64", help="the dense model (default static-64)")
    parser.add_argument("--sizes", default="128,256,512", help="token window sizes (default 128,256,512)")
    parser.add_argument("--dims", default="null,32,16", help="truncate_dim values, null = all (default null,32,16)")
    parser.add_argument("--limits", type=int, help="EvalScope limits: the first N queries, their judged documents")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    dims = [yaml.safe_load(d) for d in args.dims.split(",")]
    grid = grid_file(args.model, sizes, dims, args.limits)
    configs = point_configs(grid)
    with tempfile.TemporaryDirectory(prefix="bench-grid-") as tmp:
        root = Path(tmp)
        (root / "grid.yaml").write_text(yaml.safe_dump(grid, sort_keys=False), encoding="utf-8")
        sweep_s, done = embedscope_process(
            [
                "sweep",
                "--grid",
                str(root / "grid.yaml"),
                "--output-folder",
                str(root / "sweep"),
                "--json",
                "--rounds",
                "1000",
            ],
            root / "sweep-cache",
        )
        rows = json.loads(done.stdout)["rows"]
        print(f"sweep: {len(rows)} points in {sweep_s:.1f} s", flush=True)
        runs_s, scores = 0.0, []
        for i, config in enumerate(configs):
            path = root / f"point-{i}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
            out = root / f"run-{i}"
            seconds, _ = embedscope_process(
                ["run", "--config", str(path), "--output-folder", str(out)], root / "run-cache"
            )
            runs_s += seconds
            (result,) = list(out.rglob(f"{TASK}.json"))
            scores.append(float(json.loads(result.read_text())["scores"]["test"][0]["main_score"]))
        print(f"\n{len(rows)} points on {TASK} (chunk sizes {sizes}, dense model {args.model}, dims {dims})")
        print(f"sweep wall time      {sweep_s:8.1f} s")
        print(f"separate runs        {runs_s:8.1f} s ({len(configs)} processes)")
        print(f"ratio sweep / runs   {sweep_s / runs_s:8.3f}")
        equal = sum(row["score"] == s for row, s in zip(rows, scores))
        print(f"points equal to their separate run: {equal}/{len(rows)}")
        print("\n| point | sweep score | run score | equal |\n|---|---|---|---|")
        for row, score in zip(rows, scores):
            print(f"| {row['label']} | {row['score']!r} | {score!r} | {row['score'] == score} |")


if __name__ == "__main__":
    main()
