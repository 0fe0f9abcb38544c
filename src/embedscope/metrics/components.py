"""Answers with several components: Modified MRR@k and Modified Recall@k (the fastbook benchmark, seed 001).

Each component of a question's answer is satisfied by any of its context strings. A component is *found* at the
first rank (within the top ``k`` passages) whose passage holds one of its contexts, both compared after ``normalize``
(``ftfy.fix_text`` in the study; a case-sensitive substring test). A component without contexts is never found.

- Modified MRR@k = ``1 / max(found ranks)`` when every component is found within ``k``, else 0;
- Modified Recall@k = the fraction of components found within ``k``.

A question without components is left out of the averages (its per-question value is NaN).

>>> ranks = found_ranks([("cats purr",), ("dogs",)], ["nothing", "dogs bark", "cats purr loudly"], k=10)
>>> ranks, modified_mrr(ranks, 10), modified_recall(ranks, 2)
([3, 2], 0.3333333333333333, 0.5)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def _same(text: str) -> str:
    return text


def found_ranks(
    components: Sequence[Sequence[str]], passages: Sequence[str], k: int, normalize: Callable[[str], str] = _same
) -> list[int]:
    """Per component (its context strings), the 1-based rank of the first of the top ``k`` passages holding one of
    them; 0 = not found."""
    top = [normalize(p) for p in passages[:k]]
    ranks = []
    for contexts in components:
        wanted = [normalize(c) for c in contexts]
        ranks.append(next((r for r, p in enumerate(top, start=1) if any(c in p for c in wanted)), 0))
    return ranks


def modified_mrr(ranks: Sequence[int], k: int) -> float:
    """``1 / max(ranks)`` when every component is found within ``k`` (0 < rank <= k), else 0."""
    if not ranks or any(r == 0 or r > k for r in ranks):
        return 0.0
    return 1.0 / max(ranks)


def modified_recall(ranks: Sequence[int], k: int) -> float:
    """The fraction of components found within ``k``."""
    return sum(0 < r <= k for r in ranks) / len(ranks) if ranks else 0.0


def component_scores(
    components: Sequence[Sequence[Sequence[str]]],
    ranked_passages: Sequence[Sequence[str]],
    k_values: Sequence[int],
    normalize: Callable[[str], str] = _same,
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Mean ``modified_mrr_at_{k}`` / ``modified_recall_at_{k}`` over the questions with components, and each
    question's values (NaN for a question without components), for questions given as their components and their
    passages best first."""
    deepest = max(k_values)
    columns: dict[str, list[float]] = {f"modified_{m}_at_{k}": [] for k in k_values for m in ("mrr", "recall")}
    for comps, passages in zip(components, ranked_passages):
        ranks = found_ranks(comps, passages, deepest, normalize)
        for k in k_values:
            columns[f"modified_mrr_at_{k}"].append(modified_mrr(ranks, k) if comps else float("nan"))
            columns[f"modified_recall_at_{k}"].append(modified_recall(ranks, k) if comps else float("nan"))
    means = {
        name: float(np.nanmean(values)) if not np.all(np.isnan(values)) else 0.0 for name, values in columns.items()
    }
    return means, columns
