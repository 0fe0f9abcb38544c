"""Does a model's row depend only on its own text and its batch's padded length? (the row cache's claim)

The embedding cache serves a row to any batch of the same padded length where the backend says its rows follow
it (``rows_follow_padded_length``: sentence-transformers and transformers on the CPU in float32;
``docs/results.md#embedding-cache``). This measures the claim on this machine, for any model that says its padded
lengths: every batch of the backend's own plan over real BBC News articles and queries (their leads) is encoded
whole, then as its longest row with 0, 1, half and all but one of the others; each row is compared bit for bit
with the whole batch's. Printed per model: rows compared, rows equal, the largest difference, and whether the
backend claims it (a claimed model with a row unequal is a defect; an unclaimed one with every row equal is a
claim that could be made, on this machine).

    .venv/bin/python bench/bench_row_invariance.py [--models minilm minilm-int8 paraphrase-minilm-l3] [--texts 256]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "minilm-int8", "paraphrase-minilm-l3"])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    texts = texts_of_every_length(args.texts)
    print(f"\n== rows against their whole batch: {len(texts)} BBC News texts, batches of {args.batch_size}")
    for spec in args.models:
        encoder = load_encoder(spec)
        started = time.perf_counter()
        rows = compare_rows(encoder, texts, args.batch_size)
        claimed = bool(encoder.rows_follow_padded_length)
        verdict = (
            "as claimed"
            if (rows.equal == rows.compared) == claimed
            else ("CLAIMED, NOT SO" if claimed else "could claim")
        )
        print(
            f"  {spec:24s} {encoder.backend:22s} {rows.equal:4d} of {rows.compared:4d} rows equal, largest difference "
            f"{rows.largest:.2e}; claimed {claimed}: {verdict} ({time.perf_counter() - started:.1f} s)"
        )


if __name__ == "__main__":
    main()
