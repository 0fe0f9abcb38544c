"""``embedscope`` command line: each command is one library call; heavy imports happen lazily."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Sequence

from embedscope.errors import ConfigError, EmbedscopeError


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a model on tasks (default: minilm on the 4 built-in tasks)",
        description="Evaluate a model on tasks and write MTEB-format results. With no arguments, evaluates the "
        "built-in 'minilm' model on the 4 built-in tasks, offline: BBCNewsRetrieval, BBCNewsClustering, "
        "BBCNewsClassification, LeeDocumentSimilarity (a retrieval pipeline: BBCNewsRetrieval only).",
    )
    p.add_argument("--model", "-m", default=None, help="alias (see 'embedscope models'), local path, hub id, or a "
                   "retriever: bm25, fts5, colbert:MODEL (options as bm25:k1=1.2,b=0.75)")
    _add_pipeline_options(p)
    p.add_argument("--tasks", "-t", nargs="+", default=None, help="task names (see 'embedscope tasks'), folders of "
                   "custom retrieval data, or TYPE:PATH (sts:pairs.csv …); default: the 4 built-in tasks")
    p.add_argument("--benchmark", "-b", default=None, metavar="NAME",
                   help="run one of mteb's benchmarks, e.g. \"MTEB(eng, v2)\" (see 'embedscope tasks --benchmarks')")
    p.add_argument("--task-param", action="append", default=None, metavar="NAME=VALUE",
                   help="protocol parameter, repeatable: samples_per_label, n_experiments (classification); "
                   "max_document_to_embed, max_fraction_of_documents_to_embed, n_experiments, legacy (clustering); "
                   "k (retrieval/reranking cutoffs, e.g. 1,10; multilabel neighbours), top_k (retrieval)")
    p.add_argument("--splits", nargs="+", default=None, metavar="SPLIT",
                   help="evaluate these splits instead of each task's own (e.g. validation)")
    p.add_argument("--config", "-c", default=None, help="YAML/JSON config (embedscope or EvalScope eval_config schema)")
    p.add_argument("--output-folder", default="results", help="where results go: <folder>/<org__model>/<revision>/<Task>.json; runs with other "
                   "settings (--pooling, --query-prompt, --max-seq-length, --dtype, --top-k, --limits …) go to "
                   "<folder>/<org__model>/<revision>/experiments/<settings-hash>/")
    p.add_argument("--batch-size", type=int, default=None,
                   help="texts per encoding batch (default: 32 on the CPU, MTEB's and the exact path; 256 on a GPU)")
    p.add_argument("--top-k", type=int, default=1000, help="documents kept per query (with a reranker: stage-1 candidates)")
    p.add_argument("--device", default="auto",
                   help="auto (default: the best accelerator here, else cpu) | cpu | cuda | cuda:N | mps; several "
                   "(cuda:0,cuda:1) shard the encoding, with the same vectors as one device")
    p.add_argument("--devices", default=None, metavar="LIST", help="the same as --device with a list: cuda:0,cuda:1")
    p.add_argument("--dtype", default=None, choices=("fp32", "fp16", "bf16"),
                   help="model precision: fp32 (default, the exact path), fp16 or bf16 (faster on GPUs; "
                   "scores shift slightly)")
    p.add_argument("--engine", default="local", choices=("local", "ray"),
                   help="where encoding runs: in this process (default) or on a Ray cluster (pip install 'embedscope[ray]')")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to use: auto (a running one), ray://host:10001, … (default: a new local cluster)")
    p.add_argument("--ray-workers", type=int, default=None, metavar="N",
                   help="Ray actors holding the model (default: one per GPU share, else one per CPU)")
    p.add_argument("--ray-gpus-per-worker", type=float, default=None, metavar="F",
                   help="GPUs each Ray actor asks for (e.g. 1, or 0.5 to pack two per GPU); workers then encode on cuda")
    p.add_argument("--overwrite", nargs="?", const="always", default="only-missing",
                   metavar="STRATEGY", help="re-run and replace stored results ('always', the default when the flag "
                   "is given alone), or only-missing | never | only-cache")
    p.add_argument("--save-predictions", action="store_true", help="also write each task's ranked run")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    p.add_argument("--cache-dir", default=None, help="embedding cache folder (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope)")
    p.add_argument("--limits", type=int, default=None, help="EvalScope limits: first N queries, judged docs only (inflates scores)")
    p.add_argument("--corpus-chunk-size", type=int, default=50_000,
                   help="documents encoded and scored at once (MTEB's 50,000; bounds memory)")
    p.add_argument("--data-dir", default=None, help="local copies of catalog datasets (<dir>/<Task>, hub layout)")
    p.add_argument("--backend", default=None, help="force sentence-transformers | transformers | onnx | static")
    p.add_argument("--pooling", default=None, help="cls | mean | max | lasttoken | weightedmean | mean_sqrt_len_tokens")
    p.add_argument("--max-seq-length", type=int, default=None, help="truncate texts to this many tokens")
    p.add_argument("--query-prompt", default=None, help="instruction prepended to queries only")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json or folder (ONNX models without one)")
    p.add_argument("--revision", default=None, help="hub revision of the model")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (they are shown only when stderr is a terminal)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.set_defaults(func=_cmd_run)


def _add_pipeline_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    """--retriever (repeatable), --fusion, --rrf-k, --weights, --reranker, --pipeline-name; see :func:`_pipeline_spec`."""
    p.add_argument("--retriever", action="append", default=None, metavar="SPEC", required=required,
                   help="first-stage retriever (repeat to fuse several): bm25[:k1=..,b=..,method=..], "
                   "fts5[:match=all], MODEL or dense:MODEL, colbert:MODEL")
    p.add_argument("--fusion", default=None, help="how to fuse several retrievers: rrf (default), wsum-min-max, "
                   "wsum-zmuv, wsum-none")
    p.add_argument("--rrf-k", type=int, default=None, help="RRF constant k (default 60)")
    p.add_argument("--weights", type=float, nargs="+", default=None, help="wsum weights, one per retriever")
    p.add_argument("--reranker", action="append", default=None, metavar="SPEC",
                   help="rerank the top --top-k candidates: a cross-encoder folder (or cross-encoder:PATH), "
                   "colbert:MODEL, or an embedding model; repeat for more stages")
    p.add_argument("--pipeline-name", default=None, help="name results are filed under (default: from the stages)")


def _model_options(args: argparse.Namespace) -> dict:
    names = ("backend", "pooling", "max_seq_length", "query_prompt", "tokenizer", "revision")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _pipeline_spec(args: argparse.Namespace) -> dict | None:
    """The ``Pipeline.build`` arguments given by --retriever/--reranker/--fusion, or None."""
    if not (args.retriever or args.reranker):
        if args.fusion or args.rrf_k is not None or args.weights or args.pipeline_name:
            raise EmbedscopeError("--fusion/--rrf-k/--weights/--pipeline-name need --retriever (two or more to fuse)")
        return None
    if args.model and args.retriever:
        raise EmbedscopeError("give the first stage with --model or with --retriever, not both")
    if args.pipeline_name is not None:
        from embedscope.results.store import check_path_name

        check_path_name(args.pipeline_name, "--pipeline-name")
    fusion = None
    if args.fusion or args.rrf_k is not None or args.weights:
        from dataclasses import replace

        from embedscope.retrieval.pipeline import parse_fusion

        overrides = {"k": args.rrf_k, "weights": tuple(args.weights) if args.weights else None}
        fusion = replace(parse_fusion(args.fusion or "rrf"), **{k: v for k, v in overrides.items() if v is not None})
    return {"retrievers": args.retriever or [args.model or "minilm"], "fusion": fusion,
            "rerankers": args.reranker or [], "name": args.pipeline_name}


def _cmd_run(args: argparse.Namespace) -> int:
    import embedscope

    pipeline = _pipeline_spec(args)
    if args.cache_dir and not args.no_cache and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise ConfigError(f"--cache-dir {args.cache_dir} is a file: give a folder for the embedding cache")
    from embedscope.tasks.params import parse_task_params

    task_params = parse_task_params(args.task_param)
    if args.config:
        if args.model or args.tasks or pipeline or args.benchmark or task_params or args.splits:
            raise EmbedscopeError("--config already names models and tasks: do not combine it with --model/--tasks/"
                                  "--benchmark/--task-param/--splits/--retriever/--reranker")
        reports = embedscope.evaluate_config(args.config)
    else:
        kwargs = dict(
            output_folder=args.output_folder, batch_size=args.batch_size, top_k=args.top_k,
            overwrite=args.overwrite, save_predictions=args.save_predictions,
            cache=False if args.no_cache else (args.cache_dir or True), limits=args.limits,
            corpus_chunk_size=args.corpus_chunk_size, show_progress=not args.no_progress and sys.stderr.isatty(),
            model_options=_model_options(args) or None, data_dir=args.data_dir,
            device=args.devices or args.device, dtype=args.dtype, engine=args.engine, ray_address=args.ray_address,
            ray_workers=args.ray_workers, ray_gpus_per_worker=args.ray_gpus_per_worker,
            task_params=task_params or None, splits=args.splits,
        )
        tasks = list(args.tasks or []) + _benchmark_specs(args.benchmark)
        if tasks:
            kwargs["tasks"] = tasks
        reports = [embedscope.evaluate(pipeline or args.model or "minilm", **kwargs)]
    for report in reports:
        if args.json:
            print(json.dumps([o.result.to_dict() for o in report.outcomes], indent=2))
        else:
            print(report.table())
            stages = report.stage_table()
            if stages:
                print(stages)
            for o in report.outcomes:
                print(f"{'reused' if o.reused else 'wrote'} {o.path}")
    return 0


def _benchmark_specs(name: str | None) -> list[str]:
    """The catalog tasks of benchmark ``name`` (none for None); its tasks outside the text catalog are named."""
    if not name:
        return []
    from embedscope.tasks.catalog import benchmark_specs

    specs, missing = benchmark_specs(name)
    if missing:
        print(f"embedscope: {name}: {len(missing)} task(s) are not text tasks embedscope runs, left out: "
              f"{', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}", file=sys.stderr)
    if not specs:
        raise ConfigError(f"{name}: none of its tasks is a text task embedscope runs")
    return specs


def _add_download(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("download", help="fetch catalog tasks' datasets (pinned revision) for offline runs",
                       description="Download each task's Hugging Face dataset at the revision mteb pins, into "
                       "DIR/<Task> as the hub lays it out; then run offline with --data-dir DIR.")
    p.add_argument("tasks", nargs="*", help="catalog task names")
    p.add_argument("--benchmark", "-b", default=None, metavar="NAME", help="also every text task of this benchmark")
    p.add_argument("--to", required=True, metavar="DIR", help="folder to download into")
    p.set_defaults(func=_cmd_download)


def _cmd_download(args: argparse.Namespace) -> int:
    from embedscope.tasks.catalog import catalog_entry, download_task_data

    names = list(dict.fromkeys(s.partition(":")[0] for s in [*args.tasks, *_benchmark_specs(args.benchmark)]))
    if not names:
        raise ConfigError("name the tasks to download (or --benchmark NAME)")
    for name in names:
        catalog_entry(name)  # every name checked before anything is fetched
    for folder in download_task_data(names, args.to):
        print(f"downloaded {folder}")
    print(f"run offline with --data-dir {args.to}")
    return 0


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score a precomputed run against qrels (no model)",
                       description="Score a run file (TREC or JSON {qid: {docid: score}}) against qrels "
                       "(TREC qrels, BEIR tsv, EvalScope qrels.jsonl or JSON) with trec_eval semantics.")
    p.add_argument("--qrels", required=True, help="relevance judgments: TREC qrels, BEIR tsv, qrels.jsonl or JSON")
    p.add_argument("--run", required=True, help="ranked run: TREC run file, JSON {qid: {docid: score}}, or a "
                   "predictions/<Task>_predictions.json written by 'run --save-predictions'")
    p.add_argument("--k", type=int, nargs="+", default=None, help="cutoffs (default 1 3 5 10 20 100 1000)")
    p.add_argument("--ignore-identical-ids", action="store_true",
                   help="drop a document whose id equals the query id (MTEB's option for some tasks)")
    p.add_argument("--json", action="store_true", help="print all metrics as JSON with MTEB key names")
    p.add_argument("--per-query", default=None, metavar="FILE", help="also write each query's metrics as CSV to FILE")
    p.set_defaults(func=_cmd_score)


def _cmd_score(args: argparse.Namespace) -> int:
    from embedscope.evaluation.scoring import rank_run

    ranking = rank_run(args.qrels, args.run, k_values=args.k, ignore_identical_ids=args.ignore_identical_ids)
    if args.per_query:
        from embedscope.results.store import atomic_write_text

        atomic_write_text(args.per_query, ranking.per_query_csv())
    scores = ranking.to_mteb()
    if args.json:
        print(json.dumps(scores, indent=2, sort_keys=True))
        return 0
    from embedscope.results.table import markdown_table

    families = ("ndcg", "map", "recall", "precision", "hit_rate", "mrr")
    ks = sorted({int(k.rsplit("_", 1)[1]) for k in scores if k.startswith("ndcg_at_")})
    rows = [[f, *[f"{scores[f'{f}_at_{k}']:.5f}" for k in ks]] for f in families]
    print(markdown_table(["metric", *[f"@{k}" for k in ks]], rows))
    return 0


def _add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the built-in model aliases (they ship on PyPI and work offline)")
    p.set_defaults(func=_cmd_models)


def _cmd_models(args: argparse.Namespace) -> int:
    from embedscope.models.specs import list_aliases

    for name, description in list_aliases().items():
        print(f"{name:24s} {description}")
    return 0


def _add_tasks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list tasks: built-in (offline) and every MTEB text task (the catalog)",
                       description="List tasks. Built-in tasks run offline; catalog tasks need their Hugging Face "
                       "dataset (online, or a local copy passed with --data-dir; 'embedscope download' fetches it).")
    from embedscope.tasks.types import TypeNames

    # %(task_types)s: the registered types, listed when help is printed (the task modules load only then)
    p.add_argument("--type", default=None, help="%(task_types)s").task_types = TypeNames()
    p.add_argument("--language", "-l", default=None, help="ISO 639-3 code such as rus, cmn, eng")
    p.add_argument("--name", default=None, help="substring of the task name")
    p.add_argument("--suite", default=None, help="C-MTEB | ruMTEB | MTEB(eng)")
    p.add_argument("--benchmark", "-b", default=None, metavar="NAME", help="tasks of one of mteb's benchmarks, "
                   "e.g. \"MTEB(eng, v2)\"")
    p.add_argument("--benchmarks", action="store_true", help="list mteb's benchmarks instead of tasks")
    p.add_argument("--data-dir", default=None, help="also say which tasks have a local copy in this folder")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_tasks)


def _size(size: object) -> str:
    if not isinstance(size, dict) or not size:
        return ""
    if "documents" in size:
        return f"{size.get('queries', 0):,} q / {size['documents']:,} docs"
    return f"{size.get('samples', 0):,}"


def _cmd_tasks(args: argparse.Namespace) -> int:
    from embedscope.results.table import markdown_table

    if args.benchmarks:
        from embedscope.tasks.catalog import benchmark_specs, benchmarks

        listing = [[name, str(len(names)), str(len(benchmark_specs(name)[1]))] for name, names in benchmarks().items()]
        print(markdown_table(["benchmark", "tasks", "not text (left out)"], listing))
        return 0
    from embedscope.tasks.registry import task_listing

    rows = task_listing(type=args.type, language=args.language, name=args.name, suite=args.suite,
                        benchmark=args.benchmark, data_dir=args.data_dir)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    headers = ["task", "type", "languages", "main score", "size", "data"] + (["local copy"] if args.data_dir else [])
    table = [[r["name"], r["type"], _languages(r["languages"]), r["main_score"], _size(r.get("size")), r["data"]]
             + ([r.get("local") or "-"] if args.data_dir else []) for r in rows]
    print(markdown_table(headers, table))
    held = f", {sum(1 for r in rows if r.get('local'))} with a local copy in {args.data_dir}" if args.data_dir else ""
    print(f"{len(rows)} tasks{held}")
    if args.benchmark:
        from embedscope.tasks.catalog import benchmark_specs

        missing = benchmark_specs(args.benchmark)[1]
        if missing:
            print(f"not text tasks embedscope runs ({len(missing)}): {', '.join(missing)}")
    return 0


def _languages(languages: list[str]) -> str:
    return ",".join(languages) if len(languages) <= 6 else f"{','.join(languages[:5])},… ({len(languages)})"


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="aggregate result folders: per task, per task type and overall, models side by side")
    p.add_argument("folders", nargs="+", help="results folders (as written by 'embedscope run' or mteb)")
    p.add_argument("--format", choices=("markdown", "csv"), default="markdown", help="table format printed")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the tables as CSV to FILE")
    p.add_argument("--digits", type=int, default=3, help="decimals shown (default 3)")
    p.add_argument("--benchmark", "-b", default=None, metavar="NAME",
                   help="only the tasks of one of mteb's benchmarks, e.g. \"MTEB(eng, v2)\"")
    p.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML report (sortable "
                   "leaderboard, per-task charts with intervals and significance, run metadata) to FILE")
    p.add_argument("--baseline", default=None, help="model (name or folder) the HTML report tests others against "
                   "(default: the first)")
    p.add_argument("--test", default="permutation", help="significance test for --html (as in 'compare')")
    p.add_argument("--rounds", type=int, default=10_000, help="resamples for --html intervals and tests")
    p.add_argument("--seed", type=int, default=42, help="random seed of --html's resampling (default 42)")
    p.add_argument("--correction", default="holm", help="holm (default) | bonferroni | none")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from embedscope.results.report import build_report, collect_results, restrict_to_benchmark

    rows = collect_results(args.folders)
    if args.benchmark:
        rows = restrict_to_benchmark(rows, args.benchmark)
    tables = build_report(rows, digits=args.digits, borda=bool(args.benchmark))
    print(tables.csv() if args.format == "csv" else tables.markdown())
    if args.csv:
        from embedscope.results.store import atomic_write_text

        atomic_write_text(args.csv, tables.csv())
    if args.html:
        from embedscope.compare.core import CompareOptions, check_options
        from embedscope.results.html import build_html
        from embedscope.results.store import atomic_write_text

        options = CompareOptions(test=args.test, rounds=args.rounds, seed=args.seed, correction=args.correction)
        check_options(options)
        atomic_write_text(args.html, build_html(args.folders, args.baseline, options))
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="feature-extraction / sentence-similarity evaluator (Spearman x100 on STS pairs)",
                       description="Encode sentence pairs, cosine similarity, Spearman x100 against the gold "
                       "scores, printed and written as JSON (the ONNX evaluator's format).")
    p.add_argument("-m", "--model", required=True, help="ONNX file, model folder or built-in alias")
    p.add_argument("--model-id", default=None, help="model id recorded in the JSON (default: the model's name)")
    p.add_argument("--task", default="feature-extraction", help="feature-extraction | sentence-similarity")
    p.add_argument("--dataset", required=True, help="CSV/JSONL/Parquet file, dataset folder or hub id")
    p.add_argument("--split", default="test", help="split to evaluate (default test)")
    p.add_argument("--samples", type=int, default=None, help="shuffle with seed 42 and keep N pairs")
    p.add_argument("--column", action="append", default=None, metavar="KEY=COLUMN",
                   help="input_column_1=, input_column_2=, score_column= (defaults sentence1, sentence2, score)")
    p.add_argument("--output", default=None, help="write the JSON here too")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json or folder (ONNX models without one)")
    p.add_argument("--batch-size", type=int, default=32, help="texts per encoding batch (default 32)")
    p.add_argument("--reference-model", default=None, metavar="M",
                   help="also encode with M (e.g. the original of a quantized export) and add how closely the model "
                   "reproduces it: score shift with CI and p, per-text cosine, similarity agreement")
    p.set_defaults(func=_cmd_eval)


def _model_path(encoder, spec: str) -> str:
    """The file or folder the model was loaded from (aliases resolve to their installed path)."""
    import re

    source = str(getattr(encoder, "source", "") or spec)
    match = re.match(r"alias:\S+ \((.*)\)$", source)
    return match.group(1) if match else source


def _cmd_eval(args: argparse.Namespace) -> int:
    from embedscope.evaluation.feature_extraction import evaluate_feature_extraction, parse_column_mapping
    from embedscope.models.specs import load_encoder

    columns = parse_column_mapping(args.column)
    encoder = load_encoder(args.model, **({"tokenizer": args.tokenizer} if args.tokenizer else {}))
    record = evaluate_feature_extraction(
        encoder, model_id=args.model_id or encoder.name, model_path=_model_path(encoder, args.model),
        dataset=args.dataset, task=args.task, split=args.split, samples=args.samples, columns=columns,
        batch_size=args.batch_size, reference=load_encoder(args.reference_model) if args.reference_model else None,
    )
    text = json.dumps(record, indent=2, ensure_ascii=False)
    print(text)
    if args.output:
        from embedscope.results.store import atomic_write_text

        atomic_write_text(_eval_output_path(args.output, record), text + "\n")
    return 0


def _eval_output_path(output: str, record: dict) -> str:
    """``output``, or a file named after the model and task inside it when it is a folder (or ends in /)."""
    import os
    import re

    if not (output.endswith(("/", os.sep)) or os.path.isdir(output)):
        return output
    stem = re.sub(r"[^\w.-]+", "_", f"{record.get('model_id', 'model')}_{record.get('task', 'eval')}").strip("._")
    return os.path.join(output, f"{stem or 'eval'}.json")


def _add_chunk_options(p: argparse.ArgumentParser, method: str = "tokens") -> None:
    from embedscope.data.documents import CHUNK_METHODS

    p.add_argument("--method", "--chunking", dest="method", choices=CHUNK_METHODS, default=method,
                   help=f"sentence-aware token windows, groups of paragraphs, or fastbook-reference (the study's "
                   f"corpus: each document cut in halves, then 500-token windows with 64 overlap); default {method}")
    p.add_argument("--chunk-size", type=int, default=500, help="tokens per passage (method tokens)")
    p.add_argument("--overlap", type=int, default=64, help="tokens shared by neighbouring passages (method tokens)")
    p.add_argument("--tokenizer", default="cl100k_base", help="cl100k_base (tiktoken), a model alias or tokenizer.json")
    p.add_argument("--paragraphs", type=int, default=1, help="paragraphs per passage (method paragraphs)")
    p.add_argument("--no-headers", action="store_true", help="drop Markdown header paragraphs (method paragraphs)")
    p.add_argument("--stop-at", default="## Questionnaire", help="stop reading a document at the first markdown "
                   "cell (or line) containing this; '' reads everything")


def _chunk_options(args: argparse.Namespace):
    from embedscope.data.documents import ChunkOptions

    return ChunkOptions(method=args.method, chunk_size=args.chunk_size, overlap=args.overlap, tokenizer=args.tokenizer,
                        paragraphs=args.paragraphs, keep_headers=not args.no_headers, stop_at=args.stop_at or None)


def _add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chunk", help="notebooks / Markdown files → passages (corpus.jsonl)",
                       description="Read Jupyter notebooks (markdown and code cell sources, outputs dropped) and "
                       "Markdown files, chunk them, and write a BEIR-style corpus.jsonl with source and chapter.")
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("-o", "--output", required=True, help="corpus.jsonl to write")
    _add_chunk_options(p)
    p.set_defaults(func=_cmd_chunk)


def _cmd_chunk(args: argparse.Namespace) -> int:
    from embedscope.data.documents import chunk_documents, write_passages

    passages = chunk_documents(args.paths, _chunk_options(args))
    write_passages(passages, args.output)
    print(f"wrote {len(passages)} passages from {len({p.source for p in passages})} documents to {args.output}")
    return 0


def _add_fastbook(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fastbook", help="the fastbook benchmark (multi-component QA retrieval): stats, run, export-beir")
    fsub = p.add_subparsers(dest="fastbook_command", required=True)
    stats = fsub.add_parser("stats", help="questions, components, empty / implicit / extraneous per chapter")
    stats.add_argument("benchmark", help="benchmark JSON file (or its URL when online)")
    stats.set_defaults(func=_cmd_fastbook_stats)
    for name, func, helptext in (("run", _cmd_fastbook_run, "search every question and print Modified MRR@k / Recall@k"),
                                 ("export-beir", _cmd_fastbook_export, "write the benchmark as a BEIR folder")):
        r = fsub.add_parser(name, help=helptext)
        r.add_argument("--benchmark", required=True, help="benchmark JSON file (or its URL when online)")
        source = r.add_mutually_exclusive_group(required=True)
        source.add_argument("--notebooks", nargs="+", help="chapter notebooks / Markdown files or their folder")
        source.add_argument("--passages", help="a corpus.jsonl written by 'embedscope chunk'")
        r.add_argument("--scope", choices=("chapter", "all"), default="chapter" if name == "run" else "all",
                       help="search (and judge) only the question's own chapter, or all passages")
        _add_chunk_options(r, method="fastbook-reference")
        r.set_defaults(func=func)
        if name == "export-beir":
            r.add_argument("-o", "--output", required=True, help="folder to write")
            continue
        _add_pipeline_options(r, required=True)
        r.set_defaults(model=None)
        r.add_argument("--queries", default="question", metavar="question|FILE",
                       help="'question' (default): the question text, surrounding quotes stripped; or a keywords CSV "
                       "(chapter,question_number,question_text,keywords) for the fts5 retriever(s)")
        r.add_argument("--table-csv", default=None, metavar="FILE", help="also write the per-chapter table as CSV")
        r.add_argument("--k", type=int, default=10, help="cutoff of Modified MRR@k / Recall@k")
        r.add_argument("--top-k", type=int, default=None, help="stage-1 candidates when reranking (default k)")
        r.add_argument("--exclude-extraneous", action="store_true", help="leave out extraneous answer components")
        r.add_argument("--exclude-implicit", action="store_true", help="leave out implicit (explicit_context false) ones")
        r.add_argument("--output-folder", default=None, help="write MTEB-format results and a per-question CSV here")
        r.add_argument("--overwrite", action="store_true", help="replace a stored result in --output-folder")
        r.add_argument("--batch-size", type=int, default=32, help="texts per encoding batch (default 32)")
        r.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")


def _passages(args: argparse.Namespace):
    from embedscope.data.documents import chunk_documents, read_passages

    return read_passages(args.passages) if args.passages else chunk_documents(args.notebooks, _chunk_options(args))


def _cmd_fastbook_stats(args: argparse.Namespace) -> int:
    from embedscope.data.fastbook import STAT_COLUMNS, benchmark_stats, load_benchmark
    from embedscope.results.table import markdown_table

    stats = benchmark_stats(load_benchmark(args.benchmark))
    print(markdown_table(["chapter", *STAT_COLUMNS], [[name, *[f"{row[c]:g}" for c in STAT_COLUMNS]]
                                                      for name, row in stats.items()]))
    return 0


def _cmd_fastbook_run(args: argparse.Namespace) -> int:
    from embedscope.data.fastbook import load_benchmark, read_keyword_queries
    from embedscope.evaluation.fastbook import run_fastbook
    from embedscope.models.cache import EmbeddingCache

    spec = _pipeline_spec(args)
    benchmark = load_benchmark(args.benchmark)
    keywords = None if args.queries == "question" else read_keyword_queries(args.queries, benchmark)
    report = run_fastbook(
        benchmark, _passages(args), spec["retrievers"], fusion=spec["fusion"], name=spec["name"],
        rerankers=spec["rerankers"], keywords=keywords, scope=args.scope, k=args.k, top_k=args.top_k,
        exclude_extraneous=args.exclude_extraneous, exclude_implicit=args.exclude_implicit,
        output_folder=args.output_folder, overwrite=args.overwrite, batch_size=args.batch_size,
        cache=None if args.no_cache else EmbeddingCache(),
    )
    print(report.table())
    if report.path:
        print(f"wrote {report.path} and {report.csv_path}")
    else:
        print("results not written: give --output-folder DIR to keep them (MTEB-format JSON and a per-question CSV)",
              file=sys.stderr)
    if args.table_csv:
        from embedscope.results.store import atomic_write_text

        atomic_write_text(args.table_csv, report.table_csv())
        print(f"wrote {args.table_csv}")
    return 0


def _cmd_fastbook_export(args: argparse.Namespace) -> int:
    from embedscope.data.fastbook import export_beir, load_benchmark

    folder = export_beir(load_benchmark(args.benchmark), _passages(args), args.output, scope=args.scope)
    print(f"wrote BEIR folder {folder} (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="significance of score differences between result folders (one model each)",
                       description="For each task the folders share: main-score difference, confidence interval and "
                       "p-value of every pair of models, from the per-item scores saved beside the results.")
    p.add_argument("folders", nargs="*", help="results folders, one model each (the first is the reference)")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL", help="instead of folders: evaluate two models "
                   "on --tasks (stored results and the embedding cache are reused) and add per-text embedding "
                   "agreement (cosine of each text's two vectors) to the fidelity measures")
    p.add_argument("--output-folder", default="results", help="where --models writes its results")
    p.add_argument("--cache-dir", default=None, help="embedding cache folder for --models")
    p.add_argument("--no-cache", action="store_true", help="--models without the embedding cache")
    p.add_argument("--limits", type=int, default=None, help="--models: EvalScope limits (first N items)")
    p.add_argument("--test", default="permutation", help="permutation (Fisher's randomisation, default) | t-test | "
                   "bootstrap; STS and pair classification always use a bootstrap over pairs")
    p.add_argument("--rounds", type=int, default=10_000, help="randomisation / bootstrap rounds (default 10,000)")
    p.add_argument("--seed", type=int, default=42, help="random seed of the tests and intervals (default 42)")
    p.add_argument("--correction", default="holm", help="multiple-comparison correction: holm (default) | "
                   "bonferroni | none")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level for the markers (default 0.05)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals")
    p.add_argument("--tasks", "-t", nargs="+", default=None, help="only these shared tasks")
    p.add_argument("--fidelity", action="store_true", help="also measure agreement with the first folder: top-10 "
                   "Jaccard and RBO (rankings), similarity Spearman and discordant pairs (STS, pair classification)")
    p.add_argument("--digits", type=int, default=4, help="decimals shown (default 4)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    from embedscope.compare.core import CompareOptions, compare_folders
    from embedscope.compare.render import comparison_text

    options = CompareOptions(args.test, args.rounds, args.seed, args.correction, args.alpha, args.confidence)
    if args.models:
        from embedscope.compare.embeddings import compare_model_runs

        if args.folders:
            raise ConfigError("give result folders or --models, not both")
        cache = False if args.no_cache else (args.cache_dir or True)
        comparison = compare_model_runs(args.models, args.tasks or [], args.output_folder, options, cache=cache,
                                        limits=args.limits)
    else:
        comparison = compare_folders(args.folders, options, args.tasks, fidelity=args.fidelity)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2, allow_nan=False))
    else:
        print(comparison_text(comparison, args.digits))
    return 0

def _add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the embedding cache: list its stores, verify their vectors, clear them")
    csub = p.add_subparsers(dest="cache_command", required=True)
    for name, helptext in (("list", "each store: model, fingerprint, vector count, width and size"),
                           ("verify", "check each store's database and vectors (length, NaN/inf); exit 1 on a problem"),
                           ("clear", "delete the stores (all, or --model's)")):
        c = csub.add_parser(name, help=helptext)
        c.add_argument("--cache-dir", default=None,
                       help="embedding cache folder, as for run (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope)")
        c.add_argument("--model", default=None, help="only this model's stores (its name, or a fingerprint prefix)")
        c.set_defaults(func=_cmd_cache)
        if name == "verify":
            c.add_argument("--repair", action="store_true",
                           help="drop bad vectors and move damaged stores aside (they are re-encoded on the next run)")


def _cmd_cache(args: argparse.Namespace) -> int:
    from embedscope.models import cache_admin
    from embedscope.results.table import markdown_table

    folder = cache_admin.EmbeddingCache(args.cache_dir).directory
    if args.cache_command == "list":
        stores = cache_admin.list_stores(folder, args.model)
        errors = any(s.error for s in stores)
        rows = [[s.model, s.fingerprint[:12], "?" if s.vectors is None else str(s.vectors), str(s.dim or ""),
                 f"{s.bytes / 1e6:.1f} MB", *([s.error] if errors else [])] for s in stores]
        header = ["model", "fingerprint", "vectors", "dim", "size", *(["error"] if errors else [])]
        print(markdown_table(header, rows) if rows
              else f"no stores in {folder}" + (f" for model {args.model!r}" if args.model else ""))
        return 0
    if args.cache_command == "verify":
        reports = cache_admin.verify_stores(folder, args.model, repair=args.repair)
        for r in reports:
            status = "ok" if r.ok else "; ".join(r.problems)
            print(f"{r.model} {r.fingerprint[:12]}: {r.checked} vectors checked, {status}"
                  + (f" ({r.repaired})" if r.repaired else ""))
        if not reports:
            print(f"no stores in {folder}")
        return 0 if all(r.ok for r in reports) or args.repair else 1
    removed = cache_admin.clear_stores(folder, args.model)
    print(f"deleted {len(removed)} store(s), {sum(s.vectors or 0 for s in removed)} vectors, "
          f"{sum(s.bytes for s in removed) / 1e6:.1f} MB from {folder}")
    return 0



def build_parser() -> argparse.ArgumentParser:
    from embedscope import __version__

    parser = argparse.ArgumentParser(prog="embedscope", description="Evaluate embedding models and retrieval setups.")
    parser.add_argument("--version", action="version", version=f"embedscope {__version__}")
    parser.add_argument("--verbose", "-v", action="count", default=0,
                        help="more log output (-vv: debug); give it before the command: embedscope -v run …")
    sub = parser.add_subparsers(dest="command")
    for add in (_add_run, _add_score, _add_eval, _add_models, _add_tasks, _add_download, _add_report, _add_compare,
                _add_chunk, _add_fastbook, _add_cache):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    try:
        return int(args.func(args) or 0)
    except (EmbedscopeError, OSError, UnicodeDecodeError, sqlite3.Error) as e:
        if args.verbose:
            import traceback

            traceback.print_exc()
        from embedscope.messages import clip_text

        print(f"embedscope: error: {clip_text(_one_line(e))}", file=sys.stderr)
        return 2


def _one_line(error: BaseException) -> str:
    """What went wrong, in one line: embedscope's own message, or the file an OS error names and why."""
    if isinstance(error, EmbedscopeError):
        return str(error)
    if isinstance(error, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({error}); save it as UTF-8 (run with --verbose to see which)"
    if isinstance(error, sqlite3.Error):
        return f"embedding cache: {error}; free some disk space, or run with --no-cache"
    if isinstance(error, OSError) and error.errno == errno.ENOSPC and error.filename is None:
        return f"no space left on device while writing ({error}); free some disk space and run again"
    if isinstance(error, OSError) and error.filename is not None:
        target = f" -> {error.filename2}" if error.filename2 else ""
        return f"{error.filename}{target}: {error.strerror or error}"
    return str(error)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
