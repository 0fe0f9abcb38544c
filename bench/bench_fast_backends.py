"""Encode throughput of the fast backends against torch fp32, measured side by side in one run.

For each model (MiniLM, the ``minilm`` alias; all-mpnet-base-v2 with ``--mpnet DIR`` when it is installed) and each
text length (about 32 and about 240 tokens: BBC News articles cut to a number of words), every path encodes the
same texts with the same batch size (32, the CPU default): torch fp32 (the anchor), torch bf16 (``dtype=bf16``),
ONNX fp32 and int8 (``--backend onnx`` / ``onnx-int8``: exported, optimised / dynamically quantized) and, when
``embedscope.models.openvino_backend`` imports, OpenVINO fp32, bf16 and int8 (NNCF, calibrated on 300 other BBC
articles). Each row prints the best of ``--repeats`` timed runs (after one warm-up), texts per second, its ratio
to torch fp32 measured in this run, the per-text cosine of its vectors to torch fp32's (mean and minimum), and the
threads its runtime computed with (as a result records them: ``results.compute.thread_budget``); a line says
whether every path had the same budget, so a ratio never compares 2 threads with 16.
Exports go to ``--cache-dir`` (default: a temporary folder); the export time is printed once per path.

The shipped ONNX models (``minilm-int8``, an int8-weight graph; ``paraphrase-minilm-l3``, an fp32 graph with a
pooled output) run the fast paths that act on an ONNX graph (``embedscope.models.onnx_exports``) against
onnxruntime running the graph as shipped, the anchor of their rows: OpenVINO fp32 and bf16 reading the graph, and,
for an fp32 graph only, OpenVINO int8 (NNCF) and ONNX Runtime int8 (a path that refuses a graph prints its one
line). ``--onnx-models`` picks them (none: skip).

``--suite`` also runs the built-in suite (BBCNewsRetrieval, BBCNewsClustering, BBCNewsClassification,
LeeDocumentSimilarity) on each path and prints each task's main score shift against torch fp32 and the mean shift.

The machine's cores may be shared with other processes: take the best of several repeats, and compare ratios
rather than absolute times.

    PYTHONPATH=src .venv/bin/python bench/bench_fast_backends.py [--mpnet DIR] [--repeats 3] [--suite]
        [--onnx-models [SPEC ...]] [--skip-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

PATHS: list[tuple[str, dict[str, Any]]] = [
    ("torch fp32", {}),
    ("torch bf16", {"dtype": "bf16"}),
    ("onnx fp32", {"backend": "onnx"}),
    ("onnx int8", {"backend": "onnx-int8"}),
    ("openvino fp32", {"backend": "openvino"}),
    ("openvino bf16", {"backend": "openvino-bf16"}),
    ("openvino int8", {"backend": "openvino-int8"}),
]
ONNX_PATHS: list[tuple[str, dict[str, Any]]] = [
    ("onnx as given", {}),
    ("openvino fp32", {"backend": "openvino"}),
    ("openvino bf16", {"backend": "openvino-bf16"}),
    ("openvino int8", {"backend": "openvino-int8"}),
    ("onnx int8", {"backend": "onnx-int8"}),
]
LENGTHS = {"~32 tokens": (22, 256), "~240 tokens": (185, 64)}  # words kept per article, texts encoded


def bbc_articles() -> list[str]:
    from embedscope.tasks.classification import bbc_news_texts

    return [t for t in bbc_news_texts().texts if len(t.split()) >= 200]


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None and (
        importlib.util.find_spec("embedscope.models.openvino_backend") is not None
    )


def best_time(fn: Any, repeats: int) -> tuple[float, Any]:
    """The best wall time of ``fn()`` over ``repeats`` runs after one warm-up, and its last result."""
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(1) / np.linalg.norm(a64, axis=1) / np.linalg.norm(b64, axis=1)


def load(spec: str, options: dict[str, Any], cache_dir: Path, calibration: Path) -> tuple[Any, float]:
    from embedscope.models.specs import load_encoder

    extra: dict[str, Any] = {}
    if "backend" in options:
        extra["exports_dir"] = cache_dir
    if options.get("backend") == "openvino-int8":
        extra["calibration"] = str(calibration)
    t0 = time.perf_counter()
    encoder = load_encoder(spec, device="cpu", **options, **extra)
    return encoder, time.perf_counter() - t0


def threads_of(encoder: Any) -> str:
    """The compute threads a path ran with, as its runtime reports them (``results.compute.thread_budget``)."""
    from embedscope.results.compute import thread_budget

    budget = thread_budget(encoder)
    for runtime, key in (("onnxruntime", "intra_op"), ("openvino", "inference_num_threads"), ("torch", "intra_op")):
        if runtime in budget:
            value = budget[runtime].get(key)
            if value is None and runtime == "onnxruntime":  # 0 configured: onnxruntime's one per physical core
                value = f"0→{os.cpu_count()}"
            return f"{runtime} {value}"
    return "?"


def mean_tokens(encoder: Any, spec: str, texts: list[str]) -> float:
    """The mean number of tokens an encoder keeps of ``texts`` (its own tokenizer, else the torch model's)."""
    from embedscope.models.onnx_backend import _Tokenizer

    if isinstance(getattr(encoder, "tokenizer", None), _Tokenizer):
        return float(encoder.tokenizer(texts, encoder.max_seq_length, None)["attention_mask"].sum(1).mean())
    from transformers import AutoTokenizer

    from embedscope.models.specs import ALIASES, alias_path

    tokenizer = AutoTokenizer.from_pretrained(str(alias_path(spec) if spec in ALIASES else spec))
    return float(np.mean([len(ids) for ids in tokenizer(texts)["input_ids"]]))


def bench_model(
    label: str,
    spec: str,
    cache_dir: Path,
    repeats: int,
    suite: bool,
    all_paths: list[tuple[str, dict[str, Any]]] = PATHS,
) -> None:
    articles = bbc_articles()
    calibration = cache_dir / "calibration.txt"
    calibration.write_text("\n".join(" ".join(a.split()[:185]) for a in articles[-300:]), encoding="utf-8")
    paths = [(name, opts) for name, opts in all_paths if not opts.get("backend", "").startswith("openvino")]
    if openvino_available():
        paths = all_paths
    else:
        print("(OpenVINO rows skipped: embedscope.models.openvino_backend or openvino is not importable)")
    from embedscope.errors import EmbedscopeError

    encoders = {}
    for name, options in paths:
        try:
            encoders[name], seconds = load(spec, options, cache_dir, calibration)
        except EmbedscopeError as e:
            print(f"{label} {name}: refused: {e}")
            continue
        print(
            f"{label} {name}: loaded in {seconds:.1f} s"
            + (" (export included when new)" if "backend" in options else "")
        )
    paths = [(name, options) for name, options in paths if name in encoders]
    budgets = {name: threads_of(e) for name, e in encoders.items()}
    counts = {b.split()[-1] for b in budgets.values()}
    print(
        f"{label} thread budgets: "
        + ", ".join(f"{n}: {b}" for n, b in budgets.items())
        + (" (equal)" if len(counts) == 1 else " (NOT equal: the ratios compare different budgets)")
    )
    anchor_name = paths[0][0]
    first = encoders[anchor_name]
    for length, (words, count) in LENGTHS.items():
        texts = [" ".join(a.split()[:words]) for a in articles[:count]]
        tokens = mean_tokens(first, spec, texts[:32])
        print(f"\n{label}, {count} texts of {length} (mean {tokens:.0f} tokens kept), batch 32, best of {repeats}")
        versus = f"vs {anchor_name}"
        print(f"{'path':<15} {'seconds':>8} {'texts/s':>8} {versus:>16} {'cos mean':>9} {'cos min':>9} {'threads':>16}")
        anchor_time, anchor = None, None
        for name, encoder in encoders.items():
            seconds, vectors = best_time(
                lambda e=encoder, t=texts: e.encode(t, role="document", batch_size=32), repeats
            )
            if anchor is None:
                anchor_time, anchor = seconds, vectors
            c = cosines(vectors, anchor)
            ratio = anchor_time / seconds
            print(
                f"{name:<15} {seconds:8.2f} {count / seconds:8.1f} {ratio:15.2f}× {c.mean():9.5f} {c.min():9.5f} "
                f"{budgets[name]:>16}"
            )
    if suite:
        bench_suite(label, spec, paths, cache_dir, calibration)


def bench_suite(label: str, spec: str, paths: list[tuple[str, dict[str, Any]]], cache_dir: Path, calib: Path) -> None:
    import embedscope
    from embedscope.tasks.registry import DEFAULT_TASKS

    print(f"\n{label}: the built-in suite, main scores and their shift from torch fp32")
    anchor: dict[str, float] = {}
    for name, options in paths:
        model_options = {
            **options,
            **({"calibration": str(calib)} if options.get("backend") == "openvino-int8" else {}),
        }
        t0 = time.perf_counter()
        report = embedscope.evaluate(
            spec,
            list(DEFAULT_TASKS),
            model_options=model_options,
            output_folder=cache_dir / "results",
            cache_dir=cache_dir,
            show_progress=False,
        )
        scores = {o.task.name: o.result.main_score() for o in report.outcomes}
        anchor = anchor or scores
        shifts = {t: scores[t] - anchor[t] for t in scores}
        cells = "  ".join(f"{t} {scores[t]:.5f} ({shifts[t]:+.5f})" for t in scores)
        mean_shift = float(np.mean(list(shifts.values())))
        print(f"{name:<15} {time.perf_counter() - t0:7.1f} s  mean shift {mean_shift:+.5f}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpnet", help="an all-mpnet-base-v2 sentence-transformers folder (skipped when absent)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", help="where exports go (default: a temporary folder)")
    parser.add_argument("--suite", action="store_true", help="also the built-in suite's score shifts")
    parser.add_argument(
        "--onnx-models",
        nargs="*",
        default=["minilm-int8", "paraphrase-minilm-l3"],
        help="ONNX models whose graph-reading fast paths run against onnxruntime (default: the two shipped)",
    )
    parser.add_argument("--skip-torch", action="store_true", help="only the ONNX models")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores here; other processes may share them (the best of {args.repeats} runs is kept)")
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(args.cache_dir or tmp)
        cache_dir.mkdir(parents=True, exist_ok=True)
        for spec in args.onnx_models:
            bench_model(spec, spec, cache_dir, args.repeats, args.suite, ONNX_PATHS)
        if args.skip_torch:
            return
        bench_model("all-MiniLM-L6-v2", "minilm", cache_dir, args.repeats, args.suite)
        if args.mpnet and Path(args.mpnet).is_dir():
            bench_model("all-mpnet-base-v2", args.mpnet, cache_dir, args.repeats, args.suite)
        else:
            print("\nall-mpnet-base-v2 skipped: not installed (pass --mpnet DIR; see the offline models reference)")


if __name__ == "__main__":
    main()
