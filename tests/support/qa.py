"""A tiny QA-over-documents folder (documents/ + questions.json in the fastbook benchmark's format)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

WORDS = ("cat", "dog", "fish", "bird", "rain", "sun", "stock", "market", "tea", "boat", "tree", "lamp")


def write_qa_folder(folder: Path, n_docs: int = 4, paragraphs: int = 12, n_questions: int = 20, seed: int = 3) -> Path:
    """Markdown documents of random word paragraphs; each question asks for two words of one paragraph, whose
    sentence is its context (a few contexts span two paragraphs, so some chunkings cut them)."""
    rng = np.random.default_rng(seed)
    docs = []
    (folder / "documents").mkdir(parents=True)
    for d in range(n_docs):
        paras = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))) + "." for _ in range(paragraphs)]
        docs.append(paras)
        text = f"# Chapter {d + 1}\n\n" + "\n\n".join(paras) + "\n"
        (folder / "documents" / f"{d + 1:02d}_chapter.md").write_text(text, encoding="utf-8")
    questions = []
    for q in range(n_questions):
        d, p = int(rng.integers(n_docs)), int(rng.integers(paragraphs - 1))
        context = docs[d][p] if q % 5 else docs[d][p] + "\n\n" + docs[d][p + 1]
        a, b = context.split()[:2]
        questions.append(
            {
                "chapter": d + 1,
                "question_number": q + 1,
                "question_text": f"{a} {b.rstrip('.')}",
                "gold_standard_answer": context,
                "answer_context": [
                    {
                        "answer_component": context,
                        "scoring_type": "simple",
                        "context": [context],
                        "explicit_context": "true",
                        "extraneous_answer": "false",
                    }
                ],
                "question_context": [],
            }
        )
    (folder / "questions.json").write_text(json.dumps({"questions": questions}), encoding="utf-8")
    return folder
