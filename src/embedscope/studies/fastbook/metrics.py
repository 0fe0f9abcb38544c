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
from embedscope.metrics.components import found_ranks as components_found_ranks
from embedscope.metrics.components import modified_mrr as mrr_of_ranks
from embedscope.metrics.components import modified_recall as recall_of_ranks
from embedscope.studies.fastbook.data import AnswerComponent, Question


def found_ranks(
    components: Sequence[AnswerComponent], passages: Sequence[str], k: int, normalize: Callable[[str], str] = fixed
) -> list[int]:
    """Per component, the 1-based rank of the first passage (top ``k``) holding one of its contexts; 0 = not found
    (:func:`embedscope.metrics.components.found_ranks` on the components' contexts)."""
    return components_found_ranks([c.context for c in components], passages, k, normalize)


def modified_mrr(components: Sequence[AnswerComponent], passages: Sequence[str], k: int = 10) -> float:
    return mrr_of_ranks(found_ranks(components, passages, k), k)


def modified_recall(components: Sequence[AnswerComponent], passages: Sequence[str], k: int = 10) -> float:
    return recall_of_ranks(found_ranks(components, passages, k), k)


def scored_components(
    question: Question, *, exclude_extraneous: bool = False, exclude_implicit: bool = False
) -> list[AnswerComponent]:
    """The components that count (all by default, as in the original study)."""
    return [
        c
        for c in question.components
        if not (exclude_extraneous and c.extraneous_answer) and not (exclude_implicit and not c.explicit_context)
    ]
