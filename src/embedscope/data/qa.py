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

A QA folder can also carry per-stage queries: ``fts_keywords.csv`` in the fastbook study's keyword format
(``chapter,question_number,question_text,keywords``, rows matched to questions by chapter and number) gives every
full-text (FTS5) stage its keywords instead of the question text, as the study searched (and as ``fastbook run
--queries fts_keywords.csv``). They travel as the queries' metadata field :func:`stage_query_field` ``("fts5")``;
a question without a row is searched with its text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedscope.data.chunked import context_qrels
from embedscope.data.documents import chapter_from_name, document_names, document_paths, read_document
from embedscope.data.fastbook_qa import load_benchmark, read_keyword_queries
from embedscope.data.jsonl import iter_jsonl
from embedscope.errors import DataFormatError
from embedscope.types import Corpus, Queries, RetrievalData

QUESTION_FILES = ("questions.json", "questions.jsonl")
STAGE_QUERY_FILES = {"fts5": "fts_keywords.csv"}
"""Per-stage query files a QA folder may hold: stage type → file name (the fastbook study's keywords CSV)."""


def stage_query_field(stage: str) -> str:
    """The queries' metadata field that holds a stage type's own query per question (None: the question text).

    >>> stage_query_field("fts5")
    'query:fts5'
    """
    return f"query:{stage}"


def is_qa_folder(folder: Path) -> bool:
    """Whether ``folder`` holds ``documents/`` and a questions file."""
    return (folder / "documents").is_dir() and any((folder / n).is_file() for n in QUESTION_FILES)


Components = dict[str, tuple[tuple[str, ...], ...]]


def read_questions(folder: Path) -> tuple[Queries, Components]:
    """The questions of a QA folder and each one's answer components (each its context strings; a questions.jsonl
    row is one component). A folder holding both files is refused: which one to score would be a guess."""
    present = [n for n in QUESTION_FILES if (folder / n).is_file()]
    if len(present) > 1:
        raise DataFormatError(
            f"{folder}: holds both {' and '.join(present)}; keep one questions file (which to score is ambiguous)"
        )
    if (folder / "questions.json").is_file():
        benchmark = load_benchmark(folder / "questions.json")
        questions = benchmark.questions
        metadata: dict[str, tuple[Any, ...]] = {"chapter": tuple(q.chapter for q in questions)}  # the study scope
        qids = tuple(q.qid for q in questions)
        metadata.update(stage_queries(folder, qids))
        queries = Queries(qids, tuple(q.query_text for q in questions), metadata)
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
    if any((folder / name).is_file() for name in STAGE_QUERY_FILES.values()):
        names = ", ".join(STAGE_QUERY_FILES.values())
        raise DataFormatError(
            f"{folder}: {names} matches questions by chapter and question_number, which questions.jsonl has not; "
            "use questions.json (the fastbook format) with it"
        )
    return Queries(tuple(ids), tuple(texts)), contexts


def stage_queries(folder: Path, ids: tuple[str, ...]) -> dict[str, tuple[str | None, ...]]:
    """The per-stage query fields of a QA folder's questions (``{stage_query_field(stage): (query or None, …)}``)
    from the files of :data:`STAGE_QUERY_FILES` it holds; a row for a question the folder has not is refused."""
    fields: dict[str, tuple[str | None, ...]] = {}
    for stage, name in STAGE_QUERY_FILES.items():
        path = folder / name
        if not path.is_file():
            continue
        by_question = read_keyword_queries(path)
        unknown = sorted(set(by_question) - set(ids))
        if unknown:
            raise DataFormatError(f"{path}: rows for questions not in questions.json: {', '.join(unknown[:5])}")
        fields[stage_query_field(stage)] = tuple(by_question.get(q) for q in ids)
    return fields


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
