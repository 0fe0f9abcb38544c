"""OpenVINO fast paths against torch fp32: one MiniLM forward over 32 texts, in one process.

Texts: 32 BBC News passages of ~240 tokens (``long``) and of ~32 tokens (``short``), built from
the articles that ship offline; the int8 model is calibrated on other passages of the same set.
Each path times the forward pass alone (tokenized inputs in hand; pooling is the same numpy code
for every path): torch fp32 (the anchor), torch bf16 autocast, OpenVINO f32 / bf16 (the
``INFERENCE_PRECISION_HINT``), and static int8 (NNCF) at f32 and bf16 inference precision, each
at LATENCY (one stream) and THROUGHPUT (streams, the batch split across an ``AsyncInferQueue``).
Others share this machine's cores: each figure is the best of ``--repeats`` runs.

It also prints each path's cosine against torch fp32's pooled vectors (mean, min).

    .venv/bin/python bench/bench_openvino.py [--repeats 7] [--work /tmp/ov-bench]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def passages(words: int, start: int, count: int) -> list[str]:
    """``count`` passages of ``words`` words, one per BBC article from ``start``."""
    from embedscope.data.builtin import bbc_news_articles

    articles = bbc_news_articles()[start : start + count]
    return [" ".join(a.body.split()[:words]) for a in articles]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def ov_runner(xml: Path, precision: str, mode: str, batch: dict[str, np.ndarray], streams: int = 2) -> Callable:
    """A callable running ``batch`` on the compiled IR: one request (LATENCY) or split across streams (THROUGHPUT)."""
    import openvino as ov

    from embedscope.models.batching import cpu_threads

    core = ov.Core()
    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": cpu_threads()}
    if mode == "latency":
        config.update({"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
    else:
        config.update({"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": streams})
    compiled = core.compile_model(str(xml), "CPU", config)
    names = [p.get_any_name() for p in compiled.inputs]
    feed = {n: batch[n] for n in names}
    if mode == "latency":
        request = compiled.create_infer_request()
        return lambda: request.infer(feed)[0].copy()
    n = len(batch["input_ids"])
    parts = np.array_split(np.arange(n), streams)
    queue = ov.AsyncInferQueue(compiled, streams)
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda req, i: results.__setitem__(i, req.get_output_tensor(0).data.copy()))

    def run() -> np.ndarray:
        for i, idx in enumerate(parts):
            queue.start_async({k: v[idx] for k, v in feed.items()}, i)
        queue.wait_all()
        return np.concatenate([results[i] for i in range(len(parts))])

    return run


def quantized(ir: Path, work: Path, preset: str, folder: Path, count: int) -> Path:
    """The int8 IR for ``preset`` (built once in ``work``), calibrated on passages not timed here."""
    import nncf
    import openvino as ov

    from embedscope.models.onnx_backend import _Tokenizer
    from embedscope.models.openvino_backend import calibration_batches

    target = work / f"int8-{preset}"
    if (target / "model.xml").is_file():
        return target
    calib = passages(180, 100, count) + passages(24, 100 + count, 100)
    model = ov.Core().read_model(str(ir / "model.xml"))
    names = [p.get_any_name() for p in model.inputs]
    data = calibration_batches(_Tokenizer(folder), calib, max_seq_length=256, input_names=names)
    q = nncf.quantize(
        model,
        nncf.Dataset(data),
        preset=nncf.QuantizationPreset.MIXED if preset == "mixed" else nncf.QuantizationPreset.PERFORMANCE,
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(data),
    )
    target.mkdir(parents=True, exist_ok=True)
    ov.save_model(q, str(target / "model.xml"), compress_to_fp16=False)
    return target


def encode_end_to_end(folder: Path, irs: list[tuple[str, Path]], texts: list[str], repeats: int) -> None:
    """encode() of ``texts`` (tokenize, forward, pool, normalise; batch 32): sentence-transformers fp32
    against :class:`OpenVinoEncoder` per IR, precision and stream count, interleaved, best of ``repeats``."""
    from sentence_transformers import SentenceTransformer

    from embedscope.models.openvino_backend import OpenVinoEncoder

    st = SentenceTransformer(str(folder), device="cpu")
    runners: dict[str, Callable[[], np.ndarray]] = {
        "sentence-transformers fp32": lambda: st.encode(texts, batch_size=32, convert_to_numpy=True)
    }
    for label, path in irs:
        for precision in ("f32", "bf16"):
            for streams in (1, 2):
                enc = OpenVinoEncoder(path, tokenizer=folder, inference_precision=precision, streams=streams)
                runners[f"{label} {precision} streams={streams}"] = lambda e=enc: e.encode(texts, role="document")
    best = dict.fromkeys(runners, float("inf"))
    outs = {name: fn() for name, fn in runners.items()}
    for _ in range(repeats):
        for name, fn in runners.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    anchor_name = "sentence-transformers fp32"
    print(f"\nencode() of {len(texts)} passages of ~240 tokens, batch 32 (best of {repeats})")
    for name in runners:
        cos = cosines(outs[name], outs[anchor_name])
        print(
            f"  {name:36s} {best[name]:7.2f} s  {len(texts) / best[name]:6.1f} texts/s  "
            f"{best[anchor_name] / best[name]:5.2f}x  cosine mean {cos.mean():.5f} min {cos.min():.5f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--work", default="/tmp/ov-bench")
    parser.add_argument("--calibration", type=int, default=300, help="passages to calibrate int8 on")
    parser.add_argument("--presets", default="performance", help="NNCF presets to compare: performance,mixed")
    parser.add_argument("--modes", default="latency,throughput:2", help="latency, throughput:STREAMS")
    parser.add_argument("--lengths", default="180,24", help="words per passage (180 ~ 240 tokens, 24 ~ 32)")
    parser.add_argument("--encode", type=int, default=0, help="also time encode() end to end on this many passages")
    args = parser.parse_args()

    import torch
    from transformers import AutoModel

    from embedscope.models.batching import cpu_threads
    from embedscope.models.onnx_backend import _Tokenizer
    from embedscope.models.openvino_backend import export_ir
    from embedscope.models.pooling import pool
    from embedscope.models.specs import alias_path

    torch.set_num_threads(cpu_threads())
    folder = alias_path("minilm")
    work = Path(args.work)
    ir = work / "ir"
    if not (ir / "model.xml").is_file():
        export_ir(folder, ir, max_seq_length=256)
    irs = [("OpenVINO", ir)] + [
        (f"OV int8 {p}", quantized(ir, work, p, folder, args.calibration)) for p in args.presets.split(",")
    ]
    if args.encode:
        encode_end_to_end(folder, irs, passages(180, 0, args.encode), args.repeats)
        return
    torch_model = AutoModel.from_pretrained(str(folder)).eval()
    tokenizer = _Tokenizer(folder)
    for words in (int(w) for w in args.lengths.split(",")):
        texts = passages(words, 0, 32)
        batch = tokenizer(texts, 256, None)
        tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
        mask = batch["attention_mask"]
        print(f"\n32 texts of {words} words (padded to {mask.shape[1]}, mean {mask.sum(1).mean():.0f} tokens)")

        def torch_fp32(tensors: dict[str, Any] = tensors) -> np.ndarray:
            with torch.inference_mode():
                return torch_model(**tensors).last_hidden_state.numpy()

        def torch_bf16(tensors: dict[str, Any] = tensors) -> np.ndarray:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                return torch_model(**tensors).last_hidden_state.float().numpy()

        runners: dict[str, Callable[[], Any]] = {"torch fp32": torch_fp32, "torch bf16 autocast": torch_bf16}
        for label, path in irs:
            for precision in ("f32", "bf16"):
                for mode in args.modes.split(","):
                    kind, _, streams = mode.partition(":")
                    runners[f"{label} {precision} {mode}"] = ov_runner(
                        path / "model.xml", precision, kind, batch, int(streams or 1)
                    )
        best = dict.fromkeys(runners, float("inf"))
        outs = {name: fn() for name, fn in runners.items()}  # warm-up
        for _ in range(args.repeats):  # interleaved, so load from other processes hits every path alike
            for name, fn in runners.items():
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
        anchor = pool(outs["torch fp32"], mask, "mean")
        for name in runners:
            cos = cosines(pool(outs[name], mask, "mean"), anchor)
            print(
                f"  {name:36s} {best[name] * 1000:8.1f} ms  {best['torch fp32'] / best[name]:5.2f}x  "
                f"cosine vs torch fp32 mean {cos.mean():.5f} min {cos.min():.5f}"
            )


if __name__ == "__main__":
    main()
