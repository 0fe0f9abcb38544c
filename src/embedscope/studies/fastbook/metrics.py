"""Modified MRR@k and Modified Recall@k of the fastbook benchmark (seed 001), exactly as defined there.

A component is *found* at the first rank (within the top ``k`` passages) whose passage contains
any of its context strings, compared after ``ftfy.fix_text`` on both sides (case-sensitive
substring). A component without contexts is never found.

- Modified MRR@k: ``1 / (the rank by which every component is found)``; 0 if any is not found.
- Modified Recall@k: the fraction of components found.

Components can be left out (extraneous ones, implicit ones); a question left with no component is
left out of the averages.

>>> from embedscope.studies.fastbook.data import AnswerComponent
>>> comps = [AnswerComponent("a", "simple", ("cats purr",), True, False),
...          AnswerComponent("b", "simple", ("dogs",), True, False)]
>>> passages = ["nothing", "dogs bark", "cats purr loudly"]
>>> modified_mrr(comps, passages, k=10), modified_recall(comps, passages, k=2)
(0.3333333333333333, 0.5)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from embedscope.data.fastbook_qa import fixed
from embedscope.studies.fastbook.data import AnswerComponent, Question


def found_ranks(
    components: Sequence[AnswerComponent], passages: Sequence[str], k: int, normalize: Callable[[str], str] = fixed
) -> list[int]:
    """Per component, the 1-based rank of the first passage (top ``k``) holding one of its contexts; 0 = not found."""
    top = [normalize(p) for p in passages[:k]]
    ranks = []
    for comp in components:
        contexts = [normalize(c) for c in comp.context]
        ranks.append(next((r for r, p in enumerate(top, start=1) if any(c in p for c in contexts)), 0))
    return ranks


def modified_mrr(components: Sequence[AnswerComponent], passages: Sequence[str], k: int = 10) -> float:
    ranks = found_ranks(components, passages, k)
    if not ranks or 0 in ranks:
        return 0.0
    return 1.0 / max(ranks)


def modified_recall(components: Sequence[AnswerComponent], passages: Sequence[str], k: int = 10) -> float:
    ranks = found_ranks(components, passages, k)
    return sum(r > 0 for r in ranks) / len(ranks) if ranks else 0.0


def scored_components(
    question: Question, *, exclude_extraneous: bool = False, exclude_implicit: bool = False
) -> list[AnswerComponent]:
    """The components that count (all by default, as in the original study)."""
    return [
        c
        for c in question.components
        if not (exclude_extraneous and c.extraneous_answer) and not (exclude_implicit and not c.explicit_context)
    ]
