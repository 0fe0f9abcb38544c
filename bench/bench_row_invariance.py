"""Does a model's row depend only on its own text and its batch's padded length, or on the rest of its batch too?

Why the embedding cache serves a vector only in its own batch (``docs/results.md#embedding-cache``): a row that
followed its padded length alone could be served to any batch of that width (a proxy's texts to the full task), but
whether it does depends on the CPU's kernels. Every batch of the backend's own plan over real BBC News articles and
their leads is encoded whole, then as its longest row with 0, 1, half and all but one of the others; each row is
compared bit for bit with the whole batch's. Printed per model: rows compared, rows equal, the largest difference,
and the CPU. ``--short`` keeps only the texts shorter than the model's maximum (where small batches differ most).

    .venv/bin/python bench/bench_row_invariance.py [--models minilm minilm-int8 paraphrase-minilm-l3] [--texts 256]
        [--short]
"""

from __future__ import annotations

import argparse
import random
import time

from embedscope.data.builtin import bbc_news_articles
from embedscope.models.specs import load_encoder
from embedscope.testing.rows import compare_rows


def texts_of_every_length(n: int, seed: int = 0) -> list[str]:
    """``n`` BBC News texts, half whole articles (truncated by most models) and half their first sentences."""
    rng = random.Random(seed)
    articles = [a.body for a in rng.sample(list(bbc_news_articles()), n)]
    return [t if i % 2 else t.split(". ")[0] for i, t in enumerate(articles)]


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor."""
    import platform
    from pathlib import Path

    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "minilm-int8", "paraphrase-minilm-l3"])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--short", action="store_true", help="only texts shorter than the model's maximum")
    args = parser.parse_args()
    texts = texts_of_every_length(args.texts)
    print(f"\n== rows against their whole batch: BBC News texts, batches of {args.batch_size}, on {cpu_name()}")
    for spec in args.models:
        encoder = load_encoder(spec)
        kept = texts
        if args.short:
            lengths = encoder.padded_lengths(texts, role="document")
            kept = [t for t, n in zip(texts, lengths) if n < max(lengths)]
        started = time.perf_counter()
        rows = compare_rows(encoder, kept, args.batch_size)
        print(
            f"  {spec:24s} {encoder.backend:22s} {len(kept):4d} texts: {rows.equal:4d} of {rows.compared:4d} rows "
            f"equal, largest difference {rows.largest:.2e} ({time.perf_counter() - started:.1f} s)"
        )


if __name__ == "__main__":
    main()
