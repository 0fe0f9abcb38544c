"""Warm runs as a whole process: a re-run served entirely from the embedding cache loads no model.

For LeeDocumentSimilarity (2,450 texts) and a SciFact-sized BEIR folder (5,183 BBC passages, 300
queries), runs ``embedscope run --model minilm`` cold (empty cache), then warm (same cache, fresh
results folder) as separate processes, and prints the warm wall time against the goal (2.5 s) and
against the cold run of the same process in the same run. Scores must be identical.

    .venv/bin/python bench/bench_warm_run.py [--device auto]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 2.5


def write_scifact_sized(folder: Path) -> Path:
    """The bench_device corpus as a BEIR folder."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_device import scifact_sized

    data = scifact_sized(5183, 300).load_split("test")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, t in zip(data.corpus.ids, data.corpus.texts):
            f.write(json.dumps({"_id": i, "text": t}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, t in zip(data.queries.ids, data.queries.texts):
            f.write(json.dumps({"_id": i, "text": t}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, docs in data.qrels.items():
            for d, r in docs.items():
                f.write(f"{q}\t{d}\t{r}\n")
    return folder


def run(task: str, out: Path, cache: Path, device: str) -> tuple[float, dict]:
    env = {**os.environ, "EMBEDSCOPE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "embedscope",
        "run",
        "--model",
        "minilm",
        "--tasks",
        task,
        "--device",
        device,
        "--output-folder",
        str(out),
        "--json",
        "--no-progress",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    seconds = time.perf_counter() - t0
    return seconds, json.loads(proc.stdout)[0]["scores"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="embedscope-warm-"))
    tasks = {
        "LeeDocumentSimilarity": "LeeDocumentSimilarity",
        "SciFact-sized (5,183 docs)": str(write_scifact_sized(work / "scifact-sized")),
    }
    print(f"| task | cold s | warm s | warm/cold | goal < {GOAL_S} s | identical |")
    print("|---|---|---|---|---|---|")
    for label, task in tasks.items():
        cache = work / f"cache-{len(label)}"
        cold, a = run(task, work / f"cold-{len(label)}", cache, args.device)
        warm, b = run(task, work / f"warm-{len(label)}", cache, args.device)
        print(
            f"| {label} | {cold:.1f} | {warm:.2f} | {warm / cold:.3f} | {'met' if warm < GOAL_S else 'NOT met'} | "
            f"{json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)} |"
        )


if __name__ == "__main__":
    main()
