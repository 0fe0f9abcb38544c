"""The built-in suite's main scores through OpenVINO f32 / bf16 / int8 MiniLM, and each one's shift against torch fp32.

Runs ``embedscope.evaluate`` with an :class:`~embedscope.models.openvino_backend.OpenVinoEncoder` object as the
model (a fresh embedding cache and results folder per path, in a temporary folder) for each path, and with ``minilm`` (sentence-transformers,
torch fp32: the anchor). Prints per task the main score, its shift, the mean shift and each path's encode time.

    .venv/bin/python bench/bench_openvino_suite.py [--work /tmp/ov-bench] [--paths f32,bf16,int8,int8-bf16]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--work", default="/tmp/ov-bench", help="holds ir/ and int8-mixed/ (bench_openvino.py --presets mixed)"
    )
    parser.add_argument("--paths", default="f32,bf16,int8,int8-bf16")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch fp32 anchor (shifts against OV f32)")
    args = parser.parse_args()

    import embedscope
    from embedscope.models.openvino_backend import OpenVinoEncoder
    from embedscope.models.specs import alias_path

    folder = alias_path("minilm")
    work = Path(args.work)
    setups = {
        "f32": (work / "ir", "f32"),
        "bf16": (work / "ir", "bf16"),
        "int8": (work / "int8-mixed", "f32"),
        "int8-bf16": (work / "int8-mixed", "bf16"),
    }
    scores: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    runs = ([] if args.no_torch else ["torch fp32"]) + args.paths.split(",")
    for name in runs:
        if name == "torch fp32":
            model: object = "minilm"
        else:
            ir, precision = setups[name]
            model = OpenVinoEncoder(ir, tokenizer=folder, inference_precision=precision, name=f"minilm-openvino-{name}")
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()  # a cache per run: each text is encoded once, never served across paths
            report = embedscope.evaluate(
                model, cache=str(Path(out) / "cache"), output_folder=str(Path(out) / "results")
            )
            seconds[name] = time.perf_counter() - t0
        scores[name] = {o.task.name: o.result.main_score() for o in report.outcomes}
        print(name, f"{seconds[name]:.1f} s", {k: round(v, 6) for k, v in scores[name].items()}, flush=True)
    anchor = scores[runs[0]]
    print(f"\nshift against {runs[0]}")
    for name in runs[1:]:
        shifts = {task: scores[name][task] - value for task, value in anchor.items()}
        mean = sum(scores[name].values()) / len(anchor) - sum(anchor.values()) / len(anchor)
        cells = "  ".join(f"{task} {shift:+.5f}" for task, shift in shifts.items())
        print(
            f"  {name:10s} mean {mean:+.5f}  max |shift| {max(map(abs, shifts.values())):.5f}  {cells}  ({seconds[name]:.0f} s)"
        )


if __name__ == "__main__":
    main()
