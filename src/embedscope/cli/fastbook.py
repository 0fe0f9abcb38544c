"""``chunk`` and ``fastbook``: documents → passages, and the fastbook study (stats, run, export-beir)."""

from __future__ import annotations

import argparse
import sys

from embedscope.cli.options import add_pipeline_options, pipeline_spec
from embedscope.errors import ConfigError, SettingError


def _add_chunk_options(p: argparse.ArgumentParser, method: str = "tokens") -> None:
    from embedscope.data.documents import CHUNK_METHODS

    p.add_argument(
        "--method",
        "--chunking",
        dest="method",
        choices=CHUNK_METHODS,
        default=method,
        help=f"sentence-aware token windows, groups of paragraphs, fastbook-reference (the study's corpus: "
        f"each document cut in halves, then --chunk-size token windows, 500 by default, with the study's overlap "
        f"min(size/4, size/2, 64)), or the study's paragraph strategies fastbook-paragraphs-a..f; default {method}",
    )
    p.add_argument("--chunk-size", type=int, default=500, help="tokens per passage (tokens, fastbook-reference)")
    p.add_argument(
        "--overlap",
        type=int,
        default=None,
        help="tokens shared by neighbouring passages (method tokens; default 64; fastbook-reference: the study's rule)",
    )
    p.add_argument("--tokenizer", default="cl100k_base", help="cl100k_base (tiktoken), a model alias or tokenizer.json")
    p.add_argument("--paragraphs", type=int, default=1, help="paragraphs per passage (method paragraphs)")
    p.add_argument("--no-headers", action="store_true", help="drop Markdown header paragraphs (method paragraphs)")
    p.add_argument(
        "--stop-at",
        default="## Questionnaire",
        help="stop reading a document at the first markdown cell (or line) containing this; '' reads everything",
    )


def _chunk_options(args: argparse.Namespace):
    from embedscope.data.documents import ChunkOptions
    from embedscope.models.specs import tokenizer_location

    try:
        return ChunkOptions(
            method=args.method,
            chunk_size=args.chunk_size,
            overlap=args.overlap,
            tokenizer=tokenizer_location(args.tokenizer),
            paragraphs=args.paragraphs,
            keep_headers=not args.no_headers,
            stop_at=args.stop_at or None,
        )
    except SettingError as e:  # it names the chunking settings by key: name this command's flags
        raise ConfigError(e.named(lambda key: _CHUNK_FLAGS.get(key.removeprefix("chunking.")))) from None


_CHUNK_FLAGS = {"method": "--method", "overlap": "--overlap", "keep_headers": "--no-headers"}
_CHUNK_FLAGS.update({k: f"--{k.replace('_', '-')}" for k in ("chunk_size", "tokenizer", "paragraphs", "stop_at")})


def _add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chunk",
        help="notebooks / Markdown files → passages (corpus.jsonl)",
        description="Read Jupyter notebooks (markdown and code cell sources, outputs dropped) and "
        "Markdown files, chunk them, and write a BEIR-style corpus.jsonl with source and chapter.",
    )
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("-o", "--output", required=True, help="corpus.jsonl to write")
    _add_chunk_options(p)
    p.set_defaults(func=_cmd_chunk)


def _cmd_chunk(args: argparse.Namespace) -> int:
    from embedscope.data.documents import chunk_documents, document_paths, write_passages

    passages = chunk_documents(args.paths, _chunk_options(args))
    write_passages(passages, args.output)
    print(f"wrote {len(passages)} passages from {len(document_paths(args.paths))} documents to {args.output}")
    return 0


def _add_fastbook(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fastbook", help="the fastbook benchmark (multi-component QA retrieval): stats, run, export-beir"
    )
    fsub = p.add_subparsers(dest="fastbook_command", required=True)
    stats = fsub.add_parser("stats", help="questions, components, empty / implicit / extraneous per chapter")
    stats.add_argument("benchmark", help="benchmark JSON file (or its URL when online)")
    stats.set_defaults(func=_cmd_fastbook_stats)
    for name, func, helptext in (
        ("run", _cmd_fastbook_run, "search every question and print Modified MRR@k / Recall@k"),
        ("export-beir", _cmd_fastbook_export, "write the benchmark as a BEIR folder"),
    ):
        r = fsub.add_parser(name, help=helptext)
        r.add_argument("--benchmark", required=True, help="benchmark JSON file (or its URL when online)")
        source = r.add_mutually_exclusive_group(required=True)
        source.add_argument("--notebooks", nargs="+", help="chapter notebooks / Markdown files or their folder")
        source.add_argument("--passages", help="a corpus.jsonl written by 'embedscope chunk'")
        r.add_argument(
            "--scope",
            choices=("chapter", "all"),
            default="chapter" if name == "run" else "all",
            help="search (and judge) only the question's own chapter, or all passages",
        )
        _add_chunk_options(r, method="fastbook-reference")
        r.set_defaults(func=func)
        if name == "export-beir":
            r.add_argument("-o", "--output", required=True, help="folder to write")
            continue
        add_pipeline_options(r, required=True)
        r.set_defaults(model=None)
        r.add_argument(
            "--queries",
            default="question",
            metavar="question|FILE",
            help="'question' (default): the question text, surrounding quotes stripped; or a keywords CSV "
            "(chapter,question_number,question_text,keywords) for the fts5 retriever(s)",
        )
        r.add_argument("--table-csv", default=None, metavar="FILE", help="also write the per-chapter table as CSV")
        r.add_argument("--k", type=int, default=10, help="cutoff of Modified MRR@k / Recall@k")
        r.add_argument("--top-k", type=int, default=None, help="stage-1 candidates when reranking (default k)")
        r.add_argument("--exclude-extraneous", action="store_true", help="leave out extraneous answer components")
        r.add_argument(
            "--exclude-implicit", action="store_true", help="leave out implicit (explicit_context false) ones"
        )
        r.add_argument("--output-folder", default=None, help="write MTEB-format results and a per-question CSV here")
        r.add_argument("--overwrite", action="store_true", help="replace a stored result in --output-folder")
        r.add_argument("--batch-size", type=int, default=32, help="texts per encoding batch (default 32)")
        r.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")


def _passages(args: argparse.Namespace):
    from embedscope.data.documents import chunk_documents, read_passages

    return read_passages(args.passages) if args.passages else chunk_documents(args.notebooks, _chunk_options(args))


def _cmd_fastbook_stats(args: argparse.Namespace) -> int:
    from embedscope.results.table import markdown_table
    from embedscope.studies.fastbook.data import STAT_COLUMNS, benchmark_stats, load_benchmark

    stats = benchmark_stats(load_benchmark(args.benchmark))
    print(
        markdown_table(
            ["chapter", *STAT_COLUMNS], [[name, *[f"{row[c]:g}" for c in STAT_COLUMNS]] for name, row in stats.items()]
        )
    )
    return 0


def _cmd_fastbook_run(args: argparse.Namespace) -> int:
    from embedscope.data.documents import document_paths
    from embedscope.models.cache import EmbeddingCache
    from embedscope.studies.fastbook.data import load_benchmark, read_keyword_queries
    from embedscope.studies.fastbook.run import run_fastbook

    spec = pipeline_spec(args)
    assert spec is not None  # --retriever is required here
    benchmark = load_benchmark(args.benchmark)
    keywords = None if args.queries == "question" else read_keyword_queries(args.queries, benchmark)
    passages = _passages(args)
    documents = len(document_paths(args.notebooks)) if args.notebooks else len({p.source for p in passages})
    print(f"{len(passages)} passages from {documents} documents", file=sys.stderr)
    report = run_fastbook(
        benchmark,
        passages,
        spec["retrievers"],
        fusion=spec["fusion"],
        name=spec["name"],
        rerankers=spec["rerankers"],
        keywords=keywords,
        scope=args.scope,
        k=args.k,
        top_k=args.top_k,
        exclude_extraneous=args.exclude_extraneous,
        exclude_implicit=args.exclude_implicit,
        output_folder=args.output_folder,
        overwrite=args.overwrite,
        batch_size=args.batch_size,
        cache=None if args.no_cache else EmbeddingCache(),
    )
    print(report.table())
    if report.path:
        print(f"wrote {report.path} and {report.csv_path}")
    else:
        print(
            "results not written: give --output-folder DIR to keep them (MTEB-format JSON and a per-question CSV)",
            file=sys.stderr,
        )
    if args.table_csv:
        from embedscope.files import atomic_write_text

        atomic_write_text(args.table_csv, report.table_csv())
        print(f"wrote {args.table_csv}")
    return 0


def _cmd_fastbook_export(args: argparse.Namespace) -> int:
    from embedscope.studies.fastbook.corpus import export_beir
    from embedscope.studies.fastbook.data import load_benchmark

    folder = export_beir(load_benchmark(args.benchmark), _passages(args), args.output, scope=args.scope)
    print(f"wrote BEIR folder {folder} (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the chunk and fastbook commands."""
    for add in (_add_chunk, _add_fastbook):
        add(sub)
