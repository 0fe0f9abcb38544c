"""fastbook-benchmark-style QA files (read by :mod:`embedscope.data.fastbook_qa`), and the study's statistics
and keyword queries (the keywords CSV is read by
:func:`embedscope.data.fastbook_qa.read_keyword_queries`, which QA folders use too).
"""

from __future__ import annotations

from embedscope.data.fastbook_qa import (
    FASTBOOK_URL,
    AnswerComponent,
    Benchmark,
    Question,
    QuestionContext,
    load_benchmark,
    parse_benchmark,
    read_keyword_queries,
)

__all__ = [
    "FASTBOOK_URL",
    "STAT_COLUMNS",
    "AnswerComponent",
    "Benchmark",
    "Question",
    "QuestionContext",
    "benchmark_stats",
    "load_benchmark",
    "parse_benchmark",
    "read_keyword_queries",
]

# ---------------------------------------------------------------------------------------------
# Statistics (the seed README's tables)


STAT_COLUMNS = (
    "questions",
    "answer components",
    "avg components per question",
    "empty contexts",
    "implicit components",
    "extraneous components",
)


def benchmark_stats(benchmark: Benchmark) -> dict[str, dict[str, float]]:
    """Per chapter and ``"Total"``: the README's counts (average rounded to one decimal as there)."""
    rows: dict[str, dict[str, float]] = {}
    groups: dict[str, list[Question]] = {
        str(c): [q for q in benchmark.questions if q.chapter == c] for c in benchmark.chapters()
    }
    groups["Total"] = list(benchmark.questions)
    for name, questions in groups.items():
        components = [c for q in questions for c in q.components]
        rows[name] = {
            "questions": len(questions),
            "answer components": len(components),
            "avg components per question": round(len(components) / len(questions), 1),
            "empty contexts": sum(1 for c in components if not c.context),
            "implicit components": sum(1 for c in components if not c.explicit_context),
            "extraneous components": sum(1 for c in components if c.extraneous_answer),
        }
    return rows
