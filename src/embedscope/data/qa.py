"""QA over documents: questions whose relevance is context strings, and the documents that hold the answers.

A folder with ``documents/`` (notebooks, Markdown or text files: :data:`~embedscope.data.documents.DOCUMENT_SUFFIXES`)
and the questions, either ``questions.json`` in the fastbook benchmark's format (each question's contexts are those
of its answer components; its text the question) or
``questions.jsonl``, one ``{"_id", "text", "contexts": [...]}`` per line. The corpus is one text per document
(:func:`~embedscope.data.documents.read_document`; ids are the file names, :func:`document_names`); a document is
relevant to a question when it holds one of its contexts (any context of any answer component). Besides the standard
metrics, the task reports the fastbook benchmark's Modified MRR@k and Recall@k over the answer components
(:mod:`embedscope.metrics.components`; with ``ftfy.fix_text`` on both sides, as the study). Retrieval over such data is meant to be chunked: the task
chunks the documents (the run's ``chunking``, else token windows of 500 tokens) and recomputes relevance per passage
(:mod:`embedscope.data.chunked`).
"""

from __future__ import annotations

from pathlib import Path

from embedscope.data.chunked import context_qrels
from embedscope.data.documents import chapter_from_name, document_names, document_paths, read_document
from embedscope.data.fastbook_qa import load_benchmark
from embedscope.data.jsonl import iter_jsonl
from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData

QUESTION_FILES = ("questions.json", "questions.jsonl")


def is_qa_folder(folder: Path) -> bool:
    """Whether ``folder`` holds ``documents/`` and a questions file."""
    return (folder / "documents").is_dir() and any((folder / n).is_file() for n in QUESTION_FILES)


Components = dict[str, tuple[tuple[str, ...], ...]]


def read_questions(folder: Path) -> tuple[Queries, Components]:
    """The questions of a QA folder and each one's answer components (each its context strings; a questions.jsonl
    row is one component)."""
    if (folder / "questions.json").is_file():
        benchmark = load_benchmark(folder / "questions.json")
        questions = benchmark.questions
        chapters = {"chapter": tuple(q.chapter for q in questions)}  # filter_field chapter: the study's scope
        queries = Queries(tuple(q.qid for q in questions), tuple(q.query_text for q in questions), chapters)
        return queries, {q.qid: tuple(tuple(c.context) for c in q.components) for q in questions}
    path = folder / "questions.jsonl"
    ids: list[str] = []
    texts: list[str] = []
    contexts: Components = {}
    for line, row in iter_jsonl(path):
        qid, text, wanted = row.get("_id", row.get("id")), row.get("text"), row.get("contexts")
        if qid is None or not isinstance(text, str):
            raise DataFormatError(f"{path}:{line}: a question needs '_id' and 'text'")
        if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
            raise DataFormatError(f"{path}:{line}: 'contexts' must be a list of strings (the passages that answer it)")
        if str(qid) in contexts:
            raise DataFormatError(f"{path}:{line}: question id {qid!r} occurs twice")
        ids.append(str(qid))
        texts.append(text)
        contexts[str(qid)] = (tuple(wanted),)
    return Queries(tuple(ids), tuple(texts)), contexts


def load_qa_folder(folder: str | Path, split: str = "test") -> RetrievalData:
    """One split (``test``, the only one) of a QA folder (see the module docstring)."""
    folder = Path(folder)
    if split != "test":
        raise DataFormatError(f"{folder}: no split {split!r}; available: test (a QA folder has one split, 'test')")
    files = document_paths([folder / "documents"])
    if not files:
        raise DataFormatError(f"{folder / 'documents'}: no documents (.ipynb, .md, .markdown, .txt)")
    names = document_names(files)
    chapters = {"chapter": tuple(chapter_from_name(f.name) for f in files)}
    corpus = Corpus(tuple(names), tuple(read_document(f) for f in files), chapters)
    queries, components = read_questions(folder)
    contexts = {qid: tuple(c for comp in comps for c in comp) for qid, comps in components.items()}
    return RetrievalData(
        corpus,
        queries,
        context_qrels(contexts, corpus),
        name=folder.name,
        split=split,
        source=str(folder),
        contexts=contexts,
        components=components,
        documents=tuple(files),
    )
