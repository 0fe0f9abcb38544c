"""Encoding on whatever device is here: embedscope against bare sentence-transformers, same device, same run.

Data: a SciFact-sized corpus built from the BBC News articles that ship offline — 5,183 passages of
about 180 words (~240 tokens), 300 queries (article titles), each relevant to its article's first
passage. Model: all-MiniLM-L6-v2 (``minilm``).

For each dtype (fp32 only on a CPU; fp32, fp16, bf16 on an accelerator) and batch size (32, the
exact path, and the device's default when it differs):

- sentences/s encoding the corpus: bare ``SentenceTransformer.encode`` vs embedscope's encoder;
- end to end (encode queries and corpus, exact top-1000, metrics): bare sentence-transformers
  plus torch top-k vs ``embedscope.evaluate`` (cache off), with the ratio (goal: <= 1.2 at fp32/32);
- ndcg_at_10, and for fp16/bf16 its shift against fp32; on an accelerator, the fp32 shift against
  the CPU run (goal: <= 1e-5), unless ``--no-cpu-reference``.

    .venv/bin/python bench/bench_device.py [--device auto] [--docs 5183] [--queries 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def scifact_sized(n_docs: int, n_queries: int):
    """Passages of ~180 words from BBC articles (in article order) and title queries."""
    from embedscope.data.builtin import bbc_news_articles
    from embedscope.tasks.retrieval import RetrievalTask
    from embedscope.types import Corpus, Queries, RetrievalData

    ids: list[str] = []
    texts: list[str] = []
    first: dict[str, str] = {}
    articles = bbc_news_articles()
    for a in articles:  # 2,225 articles give about 5,500 passages
        words = " ".join(a.paragraphs).split()
        for start in range(0, len(words), 180):
            if len(texts) < n_docs:
                first.setdefault(a.id, f"{a.id}#{len(ids)}")
                ids.append(f"{a.id}#{len(ids)}")
                texts.append(" ".join(words[start : start + 180]))
    picked = [a for a in articles if a.id in first][:n_queries]
    queries = Queries(tuple(a.id for a in picked), tuple(a.title for a in picked))
    qrels = {a.id: {first[a.id]: 1} for a in picked}

    def load(split: str) -> RetrievalData:
        return RetrievalData(Corpus(tuple(ids), tuple(texts)), queries, qrels, name="SciFactSized", split=split)

    return RetrievalTask(name="SciFactSized", load_split=load, description="SciFact-sized BBC passages")


def bare_end_to_end(model, task, batch_size: int) -> float:
    """sentence-transformers encode + torch top-1000, the work embedscope does, timed."""
    import torch

    data = task.load_split("test")
    t0 = time.perf_counter()
    q = model.encode(list(data.queries.texts), batch_size=batch_size, convert_to_tensor=True)
    d = model.encode(list(data.corpus.texts), batch_size=batch_size, convert_to_tensor=True)
    scores = torch.nn.functional.normalize(q.float(), dim=1) @ torch.nn.functional.normalize(d.float(), dim=1).T
    torch.topk(scores, min(1000, d.shape[0]), dim=1).indices.cpu()
    return time.perf_counter() - t0


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--docs", type=int, default=5183)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtypes", nargs="+", default=None, help="default: fp32 on a CPU, fp32 fp16 bf16 elsewhere")
    parser.add_argument("--no-cpu-reference", action="store_true")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    import embedscope
    from embedscope.models.device import default_batch_size, resolve_device, torch_dtype
    from embedscope.models.specs import alias_path, load_encoder

    device = resolve_device(args.device)
    dtypes = args.dtypes or (["fp32"] if device == "cpu" else ["fp32", "fp16", "bf16"])
    sizes = sorted({32, default_batch_size(device)})
    task = scifact_sized(args.docs, args.queries)
    texts = list(task.load_split("test").corpus.texts)
    path = str(alias_path("minilm"))
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else device
    print(f"device {device} ({name}); corpus {len(texts):,} passages, {args.queries} queries; median of {args.repeats}")
    print(
        "| dtype | batch | bare ST docs/s | embedscope docs/s | bare e2e s | embedscope e2e s | ratio | ndcg@10 | shift |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    work = Path(tempfile.mkdtemp(prefix="embedscope-device-"))
    reference: dict[str, float] = {}
    for dtype in dtypes:
        bare = SentenceTransformer(path, device=device)
        if dtype != "fp32":
            bare.to(torch_dtype(dtype))
        ours = load_encoder("minilm", device=device, dtype=dtype)
        for size in sizes:

            def timed(fn):
                times = []
                for _ in range(args.repeats):
                    sync(device)
                    t0 = time.perf_counter()
                    fn()
                    sync(device)
                    times.append(time.perf_counter() - t0)
                return float(np.median(times))

            bare.encode(texts[:64], batch_size=size)  # warm-up
            t_bare = timed(lambda bare=bare, size=size: bare.encode(texts, batch_size=size))
            t_ours = timed(lambda ours=ours, size=size: ours.encode(texts, role="document", batch_size=size))
            e2e_bare = float(np.median([bare_end_to_end(bare, task, size) for _ in range(args.repeats)]))
            runs = []
            for r in range(args.repeats):
                t0 = time.perf_counter()
                rep = embedscope.evaluate(
                    ours,
                    [task],
                    output_folder=work / f"{dtype}-{size}-{r}",
                    cache=False,
                    show_progress=False,
                    batch_size=size,
                )
                runs.append(time.perf_counter() - t0)
            e2e_ours = float(np.median(runs))
            ndcg = rep.outcomes[0].result.scores["test"][0]["ndcg_at_10"]
            if dtype == "fp32":
                reference[f"{size}"] = ndcg
            base = reference.get(f"{size}")
            shift = "" if dtype == "fp32" or base is None else f"{ndcg - base:+.5f} vs fp32"
            print(
                f"| {dtype} | {size} | {len(texts) / t_bare:,.0f} | {len(texts) / t_ours:,.0f} | {e2e_bare:.2f} | "
                f"{e2e_ours:.2f} | {e2e_ours / e2e_bare:.2f} | {ndcg:.5f} | {shift} |"
            )
    if device != "cpu" and not args.no_cpu_reference and "fp32" in dtypes:
        cpu = embedscope.evaluate(
            "minilm", [task], output_folder=work / "cpu", cache=False, show_progress=False, device="cpu", batch_size=32
        )
        cpu_ndcg = cpu.outcomes[0].result.scores["test"][0]["ndcg_at_10"]
        print(
            f"fp32 ndcg_at_10 on the CPU {cpu_ndcg:.5f}; {device} at batch 32 {reference['32']:.5f}; "
            f"|shift| {abs(reference['32'] - cpu_ndcg):.1e} (goal <= 1e-5)"
        )


if __name__ == "__main__":
    main()
