"""Running the fastbook study: any retriever (or pipeline) over chunked documents, scored with
Modified MRR@k / Modified Recall@k overall and per chapter.

Queries are the question texts (surrounding quotes stripped) or, for FTS5 stages, keyword lists
from a CSV. Several retrievers can be fused and reranked, as in any :class:`Pipeline`. With
``scope="chapter"`` each question searches only the passages of its own chapter (the study's setting),
as a filter on one index of all passages (``SearchOptions.filter_field``): BM25's and FTS5's statistics
come from the whole book, as in the study's single FTS5 table; ``scope="all"`` searches every passage. Results are written in MTEB's result
format (one entry for all questions, one per chapter as ``hf_subset`` ``chapter_<n>``) with a
per-question CSV beside them.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.data.documents import Passage, check_unique_ids, passages_corpus
from embedscope.errors import ConfigError, DataFormatError, ResultExistsError
from embedscope.retrieval.pipeline import Pipeline, parse_stage
from embedscope.settings import RunSettings
from embedscope.studies.fastbook.data import Benchmark, Question
from embedscope.studies.fastbook.metrics import modified_mrr, modified_recall, scored_components
from embedscope.types import Queries

TASK_NAME = "FastbookBenchmark"


@dataclass
class FastbookReport:
    """Per-question rows, overall and per-chapter means, and where they were written."""

    pipeline: str
    k: int
    rows: list[dict[str, Any]]
    overall: dict[str, float]
    per_chapter: dict[int, dict[str, float]]
    seconds: float
    path: Path | None = None
    csv_path: Path | None = None

    def table(self) -> str:
        from embedscope.results.table import markdown_table

        mrr, rec = f"modified_mrr_at_{self.k}", f"modified_recall_at_{self.k}"
        body = [
            [str(c), str(int(v["questions"])), f"{v[mrr]:.4f}", f"{v[rec]:.4f}"] for c, v in self.per_chapter.items()
        ]
        body.append(
            ["all", str(int(self.overall["questions"])), f"{self.overall[mrr]:.4f}", f"{self.overall[rec]:.4f}"]
        )
        return f"retriever: {self.pipeline}\n\n" + markdown_table(
            ["chapter", "questions", f"Modified MRR@{self.k}", f"Modified Recall@{self.k}"], body
        )

    def csv(self) -> str:
        """The per-question rows as CSV."""
        return _csv_text(list(self.rows[0]), self.rows)

    def table_csv(self) -> str:
        """The per-chapter table as CSV (``chapter`` ``all`` for every question), full precision."""
        rows: list[dict[str, Any]] = [{"chapter": c, **v} for c, v in self.per_chapter.items()]
        rows.append({"chapter": "all", **self.overall})
        for row in rows:
            row["questions"] = int(row["questions"])
        return _csv_text(list(rows[0]), rows)


def _csv_text(fields: list[str], rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


Retrievers = str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]] | Pipeline


def build_pipeline(
    retriever: Retrievers,
    *,
    fusion: Any = None,
    rerankers: Sequence[Any] = (),
    keywords: Mapping[str, str] | None = None,
    cache: Any = None,
    name: str | None = None,
) -> Pipeline:
    """The pipeline for the study: one retriever or several fused (as ``Pipeline.build``), then rerankers.
    FTS5 stages get the keyword queries; the other stages search with the question text."""
    if isinstance(retriever, Pipeline):
        return retriever
    stages = [parse_stage(r) for r in ([retriever] if isinstance(retriever, (str, Mapping)) else retriever)]
    if keywords:
        fts5 = [stage for stage in stages if stage["type"] == "fts5"]
        if not fts5:
            raise ConfigError("keyword queries (--queries FILE) apply to the fts5 retriever only")
        for stage in fts5:
            stage["keywords"] = dict(keywords)
    return Pipeline.build(stages, fusion=fusion, rerankers=list(rerankers), cache=cache, name=name)


def _retrieved(
    pipeline: Pipeline,
    questions: list[Question],
    passages: list[Passage],
    k: int,
    batch_size: int | None,
    filter_field: str | None = None,
) -> dict[str, list[Passage]]:
    """Each question's top ``k`` passages; ``filter_field="chapter"``: among its own chapter's passages,
    searched in one index of all passages (:attr:`SearchOptions.filter_field`)."""
    if not passages:
        return {q.qid: [] for q in questions}
    queries = Queries(
        tuple(q.qid for q in questions),
        tuple(q.query_text for q in questions),
        {"chapter": tuple(q.chapter for q in questions)},
    )
    options = RunSettings(top_k=k, filter_field=filter_field).search_options(batch_size=batch_size, show_progress=False)
    run = pipeline.retrieve(queries, passages_corpus(passages), options)
    return {qid: [passages[i] for i in row if i >= 0][:k] for qid, row in zip(run.query_ids, run.doc_index)}


def run_fastbook(
    benchmark: Benchmark,
    passages: Sequence[Passage],
    retriever: Retrievers,
    *,
    fusion: Any = None,
    name: str | None = None,
    rerankers: Sequence[Any] = (),
    keywords: Mapping[str, str] | None = None,
    scope: str = "chapter",
    k: int = 10,
    top_k: int | None = None,
    exclude_extraneous: bool = False,
    exclude_implicit: bool = False,
    output_folder: str | Path | None = None,
    overwrite: bool = False,
    batch_size: int | None = None,
    cache: Any = None,
) -> FastbookReport:
    """Search every question, score Modified MRR@k / Recall@k, and (with ``output_folder``) write results.

    ``top_k`` is how many passages the pipeline returns (default ``k``; with a reranker, the candidates).
    Several retrievers are fused with ``fusion`` (default RRF), as in :meth:`Pipeline.build`. ``batch_size`` None
    lets each stage encode at its device's default (:func:`~embedscope.models.device.default_batch_size`: 32 on the
    CPU).
    """
    if scope not in ("chapter", "all"):
        raise ConfigError(f"scope must be 'chapter' or 'all', not {scope!r}")
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    passages = list(passages)
    check_unique_ids(passages, "fastbook run")
    if scope == "chapter" and any(p.chapter is None for p in passages):
        raise DataFormatError("scope 'chapter' needs the chapter of every passage (a number in each file name)")
    started = time.perf_counter()
    pipeline = build_pipeline(retriever, fusion=fusion, rerankers=rerankers, keywords=keywords, cache=cache, name=name)
    depth = max(k, top_k or k)
    if scope == "chapter":
        for chapter in benchmark.chapters():
            if not any(p.chapter == chapter for p in passages):
                raise DataFormatError(
                    f"chapter {chapter} has questions but no passages: add its document "
                    "(the chapter number is read from the file name)"
                )
    retrieved = _retrieved(
        pipeline, list(benchmark.questions), passages, depth, batch_size, "chapter" if scope == "chapter" else None
    )
    rows: list[dict[str, Any]] = []
    for q in benchmark.questions:
        components = scored_components(q, exclude_extraneous=exclude_extraneous, exclude_implicit=exclude_implicit)
        if not components:
            continue
        texts = [p.text for p in retrieved[q.qid]]
        rows.append(
            {
                "chapter": q.chapter,
                "question_number": q.question_number,
                "components": len(components),
                f"modified_mrr_at_{k}": modified_mrr(components, texts, k),
                f"modified_recall_at_{k}": modified_recall(components, texts, k),
                "retrieved": " ".join(p.id for p in retrieved[q.qid][:k]),
            }
        )
    if not rows:
        raise DataFormatError("no question has a component left to score (check the exclude options)")
    report = FastbookReport(
        pipeline.name,
        k,
        rows,
        _means(rows, k),
        {c: _means([r for r in rows if r["chapter"] == c], k) for c in sorted({r["chapter"] for r in rows})},
        time.perf_counter() - started,
    )
    if output_folder is not None:
        _write(report, pipeline, Path(output_folder), overwrite, scope)
    return report


def _means(rows: list[dict[str, Any]], k: int) -> dict[str, float]:
    n = len(rows)
    return {
        "questions": float(n),
        f"modified_mrr_at_{k}": sum(r[f"modified_mrr_at_{k}"] for r in rows) / n,
        f"modified_recall_at_{k}": sum(r[f"modified_recall_at_{k}"] for r in rows) / n,
    }


def _write(report: FastbookReport, pipeline: Pipeline, folder: Path, overwrite: bool, scope: str) -> None:
    from embedscope.files import atomic_write_text
    from embedscope.results.schema import TaskResult, now_iso
    from embedscope.results.store import ResultStore

    store = ResultStore(folder, pipeline.name, pipeline.revision)
    path = store.path(TASK_NAME)
    if path.exists() and not overwrite:
        raise ResultExistsError(f"{path} exists: pass --overwrite to replace it, or another --output-folder")
    mrr = f"modified_mrr_at_{report.k}"

    def entry(subset: str, values: dict[str, float]) -> dict[str, Any]:
        return {**values, "main_score": values[mrr], "hf_subset": subset, "languages": ["eng-Latn"]}

    entries = [entry("default", report.overall)]
    entries += [entry(f"chapter_{c}", v) for c, v in report.per_chapter.items()]
    result = TaskResult(
        task_name=TASK_NAME,
        dataset_revision="local",
        scores={"test": entries},
        evaluation_time=report.seconds,
        date=now_iso(),
        extra={"task_type": "MultiComponentRetrieval", "scope": scope, "k": report.k},
    )
    report.path = store.save(result)
    store.save_model_meta({**pipeline.describe(), "revision": pipeline.revision})
    report.csv_path = store.inside(path.with_name(f"{TASK_NAME}_per_question.csv"))
    atomic_write_text(report.csv_path, report.csv())
