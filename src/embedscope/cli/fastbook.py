"""``chunk`` and ``fastbook``: documents → passages, and the fastbook study (stats, run, export-beir)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from embedscope.cli.settings_flags import add_settings_flags, settings_layer
from embedscope.errors import ConfigError


def _settings(args: argparse.Namespace, method: str) -> Any:
    """The settings the flags give, over the chunking ``method`` this command defaults to."""
    from embedscope.settings import Layer, build_settings

    return build_settings([Layer("defaults", {"chunking": {"method": method}}, "api"), settings_layer(args)])


def _chunk_options(args: argparse.Namespace) -> Any:
    settings = _settings(args, args.default_chunking)
    assert settings.chunking is not None
    return settings.chunking.options()


def _add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chunk",
        help="notebooks / Markdown files → passages (corpus.jsonl)",
        description="Read Jupyter notebooks (markdown and code cell sources, outputs dropped) and "
        "Markdown files, chunk them, and write a BEIR-style corpus.jsonl with source and chapter.",
    )
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("-o", "--output", required=True, help="corpus.jsonl to write")
    add_settings_flags(p, ("chunking",))
    p.set_defaults(func=_cmd_chunk, default_chunking="tokens")


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
        r.add_argument(
            "--benchmark", dest="benchmark_file", required=True, help="benchmark JSON file (or its URL when online)"
        )
        source = r.add_mutually_exclusive_group(required=True)
        source.add_argument("--notebooks", nargs="+", help="chapter notebooks / Markdown files or their folder")
        source.add_argument("--passages", help="a corpus.jsonl written by 'embedscope chunk'")
        r.add_argument(
            "--scope",
            choices=("chapter", "all"),
            default="chapter" if name == "run" else "all",
            help="search (and judge) only the question's own chapter, or all passages",
        )
        add_settings_flags(r, ("chunking",))
        r.set_defaults(func=func, default_chunking="fastbook-reference")
        if name == "export-beir":
            r.add_argument("-o", "--output", required=True, help="folder to write")
            continue
        add_settings_flags(r, ("pipeline",), paths=("top_k", "output_folder", "overwrite", "batch_size", "cache"))
        r.add_argument(
            "--queries",
            default="question",
            metavar="question|FILE",
            help="'question' (default): the question text, surrounding quotes stripped; or a keywords CSV "
            "(chapter,question_number,question_text,keywords) for the fts5 retriever(s)",
        )
        r.add_argument("--table-csv", default=None, metavar="FILE", help="also write the per-chapter table as CSV")
        r.add_argument("--k", type=int, default=10, help="cutoff of Modified MRR@k / Recall@k")
        r.add_argument("--exclude-extraneous", action="store_true", help="leave out extraneous answer components")
        r.add_argument(
            "--exclude-implicit", action="store_true", help="leave out implicit (explicit_context false) ones"
        )


def _passages(args: argparse.Namespace, options: Any = None) -> Any:
    from embedscope.data.documents import chunk_documents, read_passages

    if args.passages:
        return read_passages(args.passages)
    return chunk_documents(args.notebooks, options if options is not None else _chunk_options(args))


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

    if not getattr(args, "pipeline__retrievers", None):
        raise ConfigError("fastbook run needs --retriever (repeat it to fuse several)")
    settings = _settings(args, args.default_chunking)
    assert settings.pipeline is not None and settings.chunking is not None
    spec = settings.pipeline.spec()
    given = settings.model_fields_set
    benchmark = load_benchmark(args.benchmark_file)
    keywords = None if args.queries == "question" else read_keyword_queries(args.queries, benchmark)
    passages = _passages(args, settings.chunking.options())
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
        top_k=settings.top_k if "top_k" in given else None,  # default: k
        exclude_extraneous=args.exclude_extraneous,
        exclude_implicit=args.exclude_implicit,
        output_folder=settings.output_folder if "output_folder" in given else None,
        overwrite=settings.overwrite == "always",
        batch_size=settings.batch_size,  # None: each stage's device default, as a run's pipeline
        cache=EmbeddingCache() if settings.cache else None,
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

    folder = export_beir(load_benchmark(args.benchmark_file), _passages(args), args.output, scope=args.scope)
    print(f"wrote BEIR folder {folder} (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the chunk and fastbook commands."""
    for add in (_add_chunk, _add_fastbook):
        add(sub)
