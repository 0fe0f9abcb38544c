"""The fastbook study's corpus side: which passages answer a question, and the benchmark as a BEIR folder.

A passage is relevant to a question when it holds (after ``ftfy.fix_text``, the scoring's rule)
any context string of any of the question's components.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embedscope.studies.fastbook.data import Benchmark, Question
from embedscope.studies.fastbook.metrics import fixed


def relevant_passages(question: Question, passages: Sequence[Any]) -> list[str]:
    """Ids of the passages holding (after ftfy) any context string of any of the question's components."""
    contexts = [fixed(c) for comp in question.components for c in comp.context]
    return [p.id for p in passages if any(c in fixed(p.text) for c in contexts)]


def export_beir(benchmark: Benchmark, passages: Sequence[Any], folder: str | Path, *, scope: str = "all") -> Path:
    """The benchmark as a BEIR folder: passages → corpus.jsonl, questions → queries.jsonl, and qrels
    (``qrels/test.tsv``) marking a passage relevant (1) when it holds any context of any component.
    With ``scope="chapter"`` only passages of the question's own chapter can be relevant."""
    from embedscope.data.documents import check_unique_ids
    from embedscope.files import atomic_write_text

    check_unique_ids(passages, "fastbook export-beir")
    folder = Path(folder)
    atomic_write_text(
        folder / "corpus.jsonl", "".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in passages)
    )
    atomic_write_text(
        folder / "queries.jsonl",
        "".join(
            json.dumps({"_id": q.qid, "text": q.query_text, "chapter": q.chapter}, ensure_ascii=False) + "\n"
            for q in benchmark.questions
        ),
    )
    rows = ["query-id\tcorpus-id\tscore"]
    for q in benchmark.questions:
        pool = [p for p in passages if scope == "all" or p.chapter == q.chapter]
        rows += [f"{q.qid}\t{pid}\t1" for pid in relevant_passages(q, pool)]
    atomic_write_text(folder / "qrels" / "test.tsv", "\n".join(rows) + "\n")
    return folder
