"""Modified MRR@k / Recall@k over answer components, against a direct reading of the seed's definition."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedscope.metrics.components import component_scores

WORDS = st.sampled_from(["a", "b", "c", "d"])


def seed_definition(components, passages, k):
    """The fastbook README: a component is found at the first top-k passage holding a context; MRR is 1/(rank by
    which every component is found), 0 if one is missing; recall the fraction found."""
    ranks = []
    for contexts in components:
        hit = [r for r, p in enumerate(passages[:k], start=1) if any(c in p for c in contexts)]
        ranks.append(hit[0] if hit else None)
    if not ranks:
        return math.nan, math.nan
    mrr = 0.0 if None in ranks else 1.0 / max(ranks)
    return mrr, sum(r is not None for r in ranks) / len(ranks)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.lists(WORDS, max_size=2), max_size=3),
            st.lists(st.text(alphabet="abcd ", max_size=6), max_size=12),
        ),
        min_size=1,
        max_size=5,
    )
)
@pytest.mark.slow
def test_component_scores_follow_the_seeds_definition(questions):
    components = [[tuple(c) for c in comps] for comps, _ in questions]
    passages = [p for _, p in questions]
    means, columns = component_scores(components, passages, (1, 3, 10))
    for k in (1, 3, 10):
        expected = [seed_definition(c, p, k) for c, p in zip(components, passages)]
        for i, (mrr, recall) in enumerate(expected):
            got_mrr, got_recall = columns[f"modified_mrr_at_{k}"][i], columns[f"modified_recall_at_{k}"][i]
            assert (math.isnan(got_mrr) and math.isnan(mrr)) or got_mrr == mrr
            assert (math.isnan(got_recall) and math.isnan(recall)) or got_recall == recall
        kept = [m for m, _ in expected if not math.isnan(m)]
        assert math.isclose(means[f"modified_mrr_at_{k}"], sum(kept) / len(kept) if kept else 0.0, rel_tol=1e-12)
