"""fastbook-benchmark-style QA files (read by :mod:`embedscope.data.fastbook_qa`), and the study's statistics
and keyword queries.
"""

from __future__ import annotations

from pathlib import Path

from embedscope.data.fastbook_qa import (
    FASTBOOK_URL,
    AnswerComponent,
    Benchmark,
    Question,
    QuestionContext,
    int_field,
    load_benchmark,
    parse_benchmark,
)
from embedscope.errors import DataFormatError

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


def read_keyword_queries(path: str | Path, benchmark: Benchmark | None = None) -> dict[str, str]:
    """A keywords CSV (``chapter,question_number,question_text,keywords``) → ``{qid: keywords}``."""
    import csv

    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such keywords file")
    out: dict[str, str] = {}
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("chapter", "question_number", "keywords") if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(
                f"{path}: missing column(s) {missing}; the header must be "
                "chapter,question_number,question_text,keywords"
            )
        for line, row in enumerate(reader, start=2):
            chapter = int_field(row["chapter"], f"{path}:{line} chapter")
            number = int_field(row["question_number"], f"{path}:{line} question_number")
            out[f"{chapter}-{number}"] = row["keywords"] or ""
    if benchmark is not None:
        unknown = sorted(set(out) - {q.qid for q in benchmark.questions})
        if unknown:
            raise DataFormatError(f"{path}: keywords for questions not in the benchmark: {unknown[:5]}")
    return out
