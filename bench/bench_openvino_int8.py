"""NNCF settings for ``--backend openvino-int8`` on MiniLM: each one's built-in suite shift and its speed at ~240 tokens.

For each named setting (:class:`~embedscope.models.openvino_backend.Int8Settings`) the fp32 IR is quantized as
``embedscope run --backend openvino-int8`` does it (calibrated on the seeded sample of the built-in suite's own
texts, :class:`~embedscope.evaluation.models.TaskCalibration`), the built-in suite is evaluated on it (a fresh cache
per setting) and each task's main score shift against torch fp32 (evaluated in the same run) is printed with the
mean shift. Speed: 64 BBC News passages of ~240 tokens encoded at batch 32, best of ``--repeats`` after a warm-up,
with torch fp32 timed in the same run (its ratio). BBCNewsClustering (k-means) moves most with small vector changes.

    PYTHONPATH=src .venv/bin/python bench/bench_openvino_int8.py [--settings default,nosq-fullbc] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def settings_table() -> dict[str, Any]:
    from embedscope.models.openvino_backend import INT8_DEFAULT, Int8Settings

    return {
        "default": INT8_DEFAULT,
        "sq0.95": Int8Settings(smooth_quant_alpha=0.95),  # NNCF's own default for transformers
        "sq0.5": Int8Settings(smooth_quant_alpha=0.5),
        "nosq": Int8Settings(smooth_quant_alpha=None),
        "nosq-fullbc": Int8Settings(smooth_quant_alpha=None, fast_bias_correction=False),
        "sq0.5-fullbc": Int8Settings(smooth_quant_alpha=0.5, fast_bias_correction=False),
        "nosq-minmax": Int8Settings(smooth_quant_alpha=None, activation_range="minmax"),
        "nosq-last-fp32": Int8Settings(smooth_quant_alpha=None, fp32_patterns=(r".*encoder\.layer\.5\.",)),
    }


def passages(count: int = 64, words: int = 185) -> list[str]:
    from embedscope.data.builtin import bbc_news_articles

    bodies = [a.body for a in bbc_news_articles() if len(a.body.split()) >= 200]
    return [" ".join(b.split()[:words]) for b in bodies[:count]]


def best_seconds(encoder: Any, texts: list[str], repeats: int) -> float:
    encoder.encode(texts, role="document", batch_size=32)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        encoder.encode(texts, role="document", batch_size=32)
        best = min(best, time.perf_counter() - t0)
    return best


def suite_scores(model: Any) -> dict[str, float]:
    import embedscope

    with tempfile.TemporaryDirectory() as out:
        report = embedscope.evaluate(model, cache=f"{out}/cache", output_folder=f"{out}/results")
    return {o.task.name: o.result.main_score() for o in report.outcomes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="default,nosq,nosq-fullbc", help="comma-separated names")
    parser.add_argument("--work", default=None, help="folder for the IRs (default: a temporary folder)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from embedscope.evaluation.models import TaskCalibration
    from embedscope.evaluation.plan import entry_tasks
    from embedscope.models.openvino_backend import OpenVinoEncoder, export_ir, quantize_ir_int8
    from embedscope.models.specs import alias_path, load_encoder
    from embedscope.settings.run import ModelRun, RunSettings

    table = settings_table()
    names = args.settings.split(",")
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"--settings: unknown {unknown}; known: {', '.join(table)}")
    folder = alias_path("minilm")
    work = Path(args.work or tempfile.mkdtemp(prefix="ov-int8-"))
    if not (work / "ir" / "model.xml").is_file():
        export_ir(folder, work / "ir", max_seq_length=256)
    calibration = TaskCalibration(lambda: entry_tasks(None, ModelRun("minilm", {}), RunSettings()))()
    texts = passages()
    torch_seconds = best_seconds(load_encoder("minilm", device="cpu"), texts, args.repeats)
    anchor = suite_scores("minilm")
    print(f"torch fp32: {torch_seconds:.2f} s for {len(texts)} texts of ~240 tokens; suite {anchor}", flush=True)
    for name in names:
        target = work / name
        if not (target / "model.xml").is_file():
            quantize_ir_int8(
                work / "ir",
                target,
                tokenizer_source=folder,
                calibration_texts=calibration,
                max_seq_length=256,
                settings=table[name],
            )
        encoder = OpenVinoEncoder(target, tokenizer=folder, name=f"minilm-openvino-int8-{name}")
        seconds = best_seconds(encoder, texts, args.repeats)
        scores = suite_scores(encoder)
        shifts = {task: scores[task] - value for task, value in anchor.items()}
        mean = sum(shifts.values()) / len(shifts)
        cells = "  ".join(f"{task} {shift:+.5f}" for task, shift in shifts.items())
        print(f"{name:15s} mean {mean:+.5f}  {cells}  {torch_seconds / seconds:.2f}x torch fp32", flush=True)


if __name__ == "__main__":
    main()
