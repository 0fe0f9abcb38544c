"""``run``, ``score`` and ``eval``: evaluate a model on tasks, score a precomputed run, the STS-pair evaluator."""

from __future__ import annotations

import argparse
import json
import os
import sys

from embedscope.cli.options import add_pipeline_options, benchmark_tasks, pipeline_spec
from embedscope.errors import ConfigError, EmbedscopeError


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a model on tasks (default: minilm on the 4 built-in tasks)",
        description="Evaluate a model on tasks and write MTEB-format results. With no arguments, evaluates the "
        "built-in 'minilm' model on the 4 built-in tasks, offline: BBCNewsRetrieval, BBCNewsClustering, "
        "BBCNewsClassification, LeeDocumentSimilarity (a retrieval pipeline: BBCNewsRetrieval only).",
    )
    p.add_argument(
        "--model",
        "-m",
        default=None,
        help="alias (see 'embedscope models'), local path, hub id, or a "
        "retriever: bm25, fts5, colbert:MODEL (options as bm25:k1=1.2,b=0.75)",
    )
    add_pipeline_options(p)
    p.add_argument(
        "--tasks",
        "-t",
        nargs="+",
        default=None,
        help="task names (see 'embedscope tasks'), folders of "
        "custom retrieval data, or TYPE:PATH (sts:pairs.csv …); default: the 4 built-in tasks",
    )
    p.add_argument(
        "--benchmark",
        "-b",
        default=None,
        metavar="NAME",
        help="run one of mteb's benchmarks, e.g. \"MTEB(eng, v2)\" (see 'embedscope tasks --benchmarks')",
    )
    p.add_argument(
        "--task-param",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="protocol parameter, repeatable: samples_per_label, n_experiments (classification); "
        "max_document_to_embed, max_fraction_of_documents_to_embed, n_experiments, legacy (clustering); "
        "k (retrieval/reranking cutoffs, e.g. 1,10; multilabel neighbours), top_k (retrieval)",
    )
    p.add_argument(
        "--splits",
        nargs="+",
        default=None,
        metavar="SPLIT",
        help="evaluate these splits instead of each task's own (e.g. validation)",
    )
    p.add_argument("--config", "-c", default=None, help="YAML/JSON config (embedscope or EvalScope eval_config schema)")
    p.add_argument(
        "--output-folder",
        default="results",
        help="where results go: <folder>/<org__model>/<revision>/<Task>.json; runs with other "
        "settings (--pooling, --query-prompt, --max-seq-length, --dtype, --top-k, --limits …) go to "
        "<folder>/<org__model>/<revision>/experiments/<settings-hash>/",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="texts per encoding batch (default: 32 on the CPU, MTEB's and the exact path; 256 on a GPU)",
    )
    p.add_argument(
        "--top-k", type=int, default=1000, help="documents kept per query (with a reranker: stage-1 candidates)"
    )
    p.add_argument(
        "--device",
        default="auto",
        help="auto (default: the best accelerator here, else cpu) | cpu | cuda | cuda:N | mps; several "
        "(cuda:0,cuda:1) shard the encoding, with the same vectors as one device",
    )
    p.add_argument("--devices", default=None, metavar="LIST", help="the same as --device with a list: cuda:0,cuda:1")
    p.add_argument(
        "--dtype",
        default=None,
        choices=("fp32", "fp16", "bf16"),
        help="model precision: fp32 (default, the exact path), fp16 or bf16 (faster on GPUs; scores shift slightly)",
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=("local", "ray"),
        help="where encoding runs: in this process (default) or on a Ray cluster (pip install 'embedscope[ray]')",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster to use: auto (a running one), ray://host:10001, … (default: a new local cluster)",
    )
    p.add_argument(
        "--ray-workers",
        type=int,
        default=None,
        metavar="N",
        help="Ray actors holding the model (default: one per GPU share, else one per CPU)",
    )
    p.add_argument(
        "--ray-gpus-per-worker",
        type=float,
        default=None,
        metavar="F",
        help="GPUs each Ray actor asks for (e.g. 1, or 0.5 to pack two per GPU); workers then encode on cuda",
    )
    p.add_argument(
        "--overwrite",
        nargs="?",
        const="always",
        default="only-missing",
        metavar="STRATEGY",
        help="re-run and replace stored results ('always', the default when the flag "
        "is given alone), or only-missing | never | only-cache",
    )
    p.add_argument("--save-predictions", action="store_true", help="also write each task's ranked run")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    p.add_argument(
        "--cache-dir", default=None, help="embedding cache folder (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope)"
    )
    p.add_argument(
        "--limits", type=int, default=None, help="EvalScope limits: first N queries, judged docs only (inflates scores)"
    )
    p.add_argument(
        "--corpus-chunk-size",
        type=int,
        default=50_000,
        help="documents encoded and scored at once (MTEB's 50,000; bounds memory)",
    )
    p.add_argument("--data-dir", default=None, help="local copies of catalog datasets (<dir>/<Task>, hub layout)")
    p.add_argument("--backend", default=None, help="force sentence-transformers | transformers | onnx | static")
    p.add_argument("--pooling", default=None, help="cls | mean | max | lasttoken | weightedmean | mean_sqrt_len_tokens")
    p.add_argument("--max-seq-length", type=int, default=None, help="truncate texts to this many tokens")
    p.add_argument("--query-prompt", default=None, help="instruction prepended to queries only")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json or folder (ONNX models without one)")
    p.add_argument("--revision", default=None, help="hub revision of the model")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bars (they are shown only when stderr is a terminal)"
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.set_defaults(func=_cmd_run)


def _model_options(args: argparse.Namespace) -> dict:
    names = ("backend", "pooling", "max_seq_length", "query_prompt", "tokenizer", "revision")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _cmd_run(args: argparse.Namespace) -> int:
    import embedscope

    pipeline = pipeline_spec(args)
    if args.cache_dir and not args.no_cache and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise ConfigError(f"--cache-dir {args.cache_dir} is a file: give a folder for the embedding cache")
    from embedscope.tasks.params import parse_task_params

    task_params = parse_task_params(args.task_param)
    if args.config:
        if args.model or args.tasks or pipeline or args.benchmark or task_params or args.splits:
            raise EmbedscopeError(
                "--config already names models and tasks: do not combine it with --model/--tasks/"
                "--benchmark/--task-param/--splits/--retriever/--reranker"
            )
        reports = embedscope.evaluate_config(args.config)
    else:
        kwargs = dict(
            output_folder=args.output_folder,
            batch_size=args.batch_size,
            top_k=args.top_k,
            overwrite=args.overwrite,
            save_predictions=args.save_predictions,
            cache=False if args.no_cache else (args.cache_dir or True),
            limits=args.limits,
            corpus_chunk_size=args.corpus_chunk_size,
            show_progress=not args.no_progress and sys.stderr.isatty(),
            model_options=_model_options(args) or None,
            data_dir=args.data_dir,
            device=args.devices or args.device,
            dtype=args.dtype,
            engine=args.engine,
            ray_address=args.ray_address,
            ray_workers=args.ray_workers,
            ray_gpus_per_worker=args.ray_gpus_per_worker,
            task_params=task_params or None,
            splits=args.splits,
        )
        tasks = list(args.tasks or []) + benchmark_tasks(args.benchmark)
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


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score a precomputed run against qrels (no model)",
        description="Score a run file (TREC or JSON {qid: {docid: score}}) against qrels "
        "(TREC qrels, BEIR tsv, EvalScope qrels.jsonl or JSON) with trec_eval semantics.",
    )
    p.add_argument("--qrels", required=True, help="relevance judgments: TREC qrels, BEIR tsv, qrels.jsonl or JSON")
    p.add_argument(
        "--run",
        required=True,
        help="ranked run: TREC run file, JSON {qid: {docid: score}}, or a "
        "predictions/<Task>_predictions.json written by 'run --save-predictions'",
    )
    p.add_argument("--k", type=int, nargs="+", default=None, help="cutoffs (default 1 3 5 10 20 100 1000)")
    p.add_argument(
        "--ignore-identical-ids",
        action="store_true",
        help="drop a document whose id equals the query id (MTEB's option for some tasks)",
    )
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


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="feature-extraction / sentence-similarity evaluator (Spearman x100 on STS pairs)",
        description="Encode sentence pairs, cosine similarity, Spearman x100 against the gold "
        "scores, printed and written as JSON (the ONNX evaluator's format).",
    )
    p.add_argument("-m", "--model", required=True, help="ONNX file, model folder or built-in alias")
    p.add_argument("--model-id", default=None, help="model id recorded in the JSON (default: the model's name)")
    p.add_argument("--task", default="feature-extraction", help="feature-extraction | sentence-similarity")
    p.add_argument("--dataset", required=True, help="CSV/JSONL/Parquet file, dataset folder or hub id")
    p.add_argument("--split", default="test", help="split to evaluate (default test)")
    p.add_argument("--samples", type=int, default=None, help="shuffle with seed 42 and keep N pairs")
    p.add_argument(
        "--column",
        action="append",
        default=None,
        metavar="KEY=COLUMN",
        help="input_column_1=, input_column_2=, score_column= (defaults sentence1, sentence2, score)",
    )
    p.add_argument("--output", default=None, help="write the JSON here too")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json or folder (ONNX models without one)")
    p.add_argument("--batch-size", type=int, default=32, help="texts per encoding batch (default 32)")
    p.add_argument(
        "--reference-model",
        default=None,
        metavar="M",
        help="also encode with M (e.g. the original of a quantized export) and add how closely the model "
        "reproduces it: score shift with CI and p, per-text cosine, similarity agreement",
    )
    p.set_defaults(func=_cmd_eval)


def _model_path(encoder, spec: str) -> str:
    """The file or folder the model was loaded from (aliases resolve to their installed path)."""
    import re

    source = str(getattr(encoder, "source", "") or spec)
    match = re.match(r"alias:\S+ \((.*)\)$", source)
    return match.group(1) if match else source


def _cmd_eval(args: argparse.Namespace) -> int:
    from embedscope.evaluation.feature_extraction import (
        check_dataset,
        evaluate_feature_extraction,
        parse_column_mapping,
    )
    from embedscope.models.specs import load_encoder

    columns = parse_column_mapping(args.column)
    check_dataset(args.dataset)  # before the model loads
    encoder = load_encoder(args.model, **({"tokenizer": args.tokenizer} if args.tokenizer else {}))
    record = evaluate_feature_extraction(
        encoder,
        model_id=args.model_id or encoder.name,
        model_path=_model_path(encoder, args.model),
        dataset=args.dataset,
        task=args.task,
        split=args.split,
        samples=args.samples,
        columns=columns,
        batch_size=args.batch_size,
        reference=load_encoder(args.reference_model) if args.reference_model else None,
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add the run, score and eval commands."""
    for add in (_add_run, _add_score, _add_eval):
        add(sub)
