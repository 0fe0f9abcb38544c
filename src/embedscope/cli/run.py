"""``run``, ``score`` and ``eval``: evaluate a model on tasks, score a precomputed run, the STS-pair evaluator."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from embedscope.cli.options import add_pipeline_options, pipeline_spec
from embedscope.errors import ConfigError
from embedscope.settings.sources import Layer

_RUN_DESCRIPTION = (
    "Evaluate a model on tasks and write MTEB-format results. With no arguments, evaluates the built-in 'minilm' model "
    "on the 4 built-in tasks, offline: BBCNewsRetrieval, BBCNewsClustering, BBCNewsClassification, "
    "LeeDocumentSimilarity (a retrieval pipeline: BBCNewsRetrieval only). Settings come from defaults, then --config, "
    "then the flags given here: an explicit flag overrides the config file's value (--print-settings shows each "
    "value and where it came from). A flag that cannot act in the chosen mode is an error, never dropped."
)
# flags whose value is a model option: the run-wide model_options.KEY (over each config model's own)
_MODEL_OPTION_FLAGS = (
    "backend",
    "pooling",
    "max_seq_length",
    "query_prompt",
    "tokenizer",
    "revision",
    "calibration",
    *("api_base", "api_key_env", "api_key_file", "dimensions", "price_per_mtok", "max_concurrency"),
    *("requests_per_minute", "tokens_per_minute", "texts_per_request", "tokens_per_request", "request_timeout"),
    *("max_retries", "tls_verify"),
)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a model on tasks (default: minilm on the 4 built-in tasks)",
        description=_RUN_DESCRIPTION,
        argument_default=argparse.SUPPRESS,  # only the flags given become a settings layer
    )
    p.add_argument(
        "--model",
        "-m",
        help="alias (see 'embedscope models'), local path, hub id, or a "
        "retriever: bm25, fts5, colbert:MODEL (options as bm25:k1=1.2,b=0.75)",
    )
    add_pipeline_options(p)
    p.add_argument(
        "--tasks",
        "-t",
        nargs="+",
        help="task names (see 'embedscope tasks'), folders of "
        "custom retrieval data, or TYPE:PATH (sts:pairs.csv …); default: the 4 built-in tasks",
    )
    p.add_argument(
        "--benchmark",
        "-b",
        metavar="NAME",
        help="run one of mteb's benchmarks, e.g. \"MTEB(eng, v2)\" (see 'embedscope tasks --benchmarks')",
    )
    p.add_argument(
        "--task-type",
        dest="task_types",
        nargs="+",
        metavar="TYPE",
        help="keep only the tasks of these types (as 'embedscope tasks --type'), e.g. Retrieval STS",
    )
    p.add_argument(
        "--language",
        dest="languages",
        nargs="+",
        metavar="LANG",
        help="keep only the tasks in these languages (ISO 639-3, e.g. eng rus)",
    )
    p.add_argument(
        "--task-param",
        action="append",
        metavar="NAME=VALUE",
        help="protocol parameter, repeatable: samples_per_label, n_experiments (classification); "
        "max_document_to_embed, max_fraction_of_documents_to_embed, n_experiments, legacy (clustering); "
        "k (retrieval/reranking cutoffs, e.g. 1,10; multilabel neighbours), top_k (retrieval)",
    )
    p.add_argument(
        "--splits",
        nargs="+",
        metavar="SPLIT",
        help="evaluate these splits instead of each task's own (e.g. validation)",
    )
    p.add_argument(
        "--config",
        "-c",
        help="YAML/JSON config (embedscope or EvalScope eval_config schema); flags given with it override its values",
    )
    p.add_argument(
        "--print-settings",
        action="store_true",
        help="print the resolved settings, each with where it came from (default, config file, flag), and stop",
    )
    p.add_argument(
        "--output-folder",
        help="where results go (default results): <folder>/<org__model>/<revision>/<Task>.json; runs with other "
        "settings (--pooling, --query-prompt, --max-seq-length, --dtype, --top-k, --limits …) go to "
        "<folder>/<org__model>/<revision>/experiments/<settings-hash>/",
    )
    p.add_argument(
        "--batch-size",
        help="texts per encoding batch (default: 32 on the CPU, MTEB's and the exact path; 256 on a GPU)",
    )
    p.add_argument(
        "--top-k", help="documents kept per query (default 1000; with a reranker: stage-1 candidates); retrieval only"
    )
    p.add_argument(
        "--device",
        help="auto (default: the best accelerator here, else cpu) | cpu | cuda | cuda:N | mps; several "
        "(cuda:0,cuda:1) shard the encoding, with the same vectors as one device",
    )
    p.add_argument("--devices", metavar="LIST", help="the same as --device with a list: cuda:0,cuda:1")
    p.add_argument(
        "--dtype",
        help="model precision: fp32 (default, the exact path), fp16 or bf16 (faster on GPUs; scores shift slightly)",
    )
    add_engine_options(p)
    p.add_argument(
        "--overwrite",
        nargs="?",
        const="always",
        metavar="STRATEGY",
        help="re-run and replace stored results ('always', the default when the flag "
        "is given alone), or only-missing (the default) | never | only-cache",
    )
    p.add_argument("--save-predictions", action="store_true", help="also write each task's ranked run")
    p.add_argument("--no-cache", dest="cache", action="store_false", help="do not use the embedding cache")
    p.add_argument("--cache-dir", help="embedding cache folder (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope)")
    p.add_argument("--limits", help="EvalScope limits: first N queries, judged docs only (inflates scores)")
    p.add_argument(
        "--corpus-chunk-size",
        help="documents encoded and scored at once (default MTEB's 50,000; bounds memory); retrieval only",
    )
    p.add_argument(
        "--filter-field",
        metavar="NAME",
        help="filtered search: each query searches only the documents whose metadata NAME equals its own (a column "
        "of the corpus and queries files, or a key of BEIR's metadata); BM25/FTS5 statistics stay whole-corpus",
    )
    p.add_argument(
        "--truncate-dim",
        metavar="D",
        help="dense retrieval on the first D dimensions of each vector (Matryoshka; re-normalised for cosine models); "
        "the cached vectors are reused",
    )
    p.add_argument(
        "--precision",
        help="dense retrieval on fp32 (default) | int8 (per-dimension ranges from the corpus) | binary (sign bits, "
        "Hamming distance) vectors, as sentence-transformers' quantize_embeddings",
    )
    p.add_argument(
        "--rescore",
        dest="rescore_multiplier",
        metavar="R",
        help="with --precision int8/binary: rescore the top R × top-k candidates with the float query",
    )
    p.add_argument(
        "--index",
        metavar="SPEC",
        help="dense retrieval through an approximate faiss index: exact (default) | hnsw:M=32,ef_construction=40,"
        "ef_search=16 | ivfpq:nlist=256,m=16,nbits=8,nprobe=8 (needs embedscope[ann]); reports ann_recall_at_10",
    )
    p.add_argument(
        "--chunking",
        dest="chunk_method",
        metavar="METHOD",
        help="retrieval on passages: chunk each document by tokens | paragraphs | fastbook-reference | "
        "fastbook-paragraphs-a … -f; relevance by document scores each document by its best passage, QA relevance "
        "(context strings) is recomputed per passage",
    )
    p.add_argument("--chunk-size", metavar="N", help="tokens per passage (chunking tokens, fastbook-reference)")
    p.add_argument("--chunk-overlap", metavar="N", help="tokens shared by neighbouring passages (chunking tokens)")
    p.add_argument(
        "--latency-sample",
        metavar="N",
        help="after the run, time N sampled queries one at a time (query encoded by the model, not the cache, then "
        "searched): p50/p95 latency in the result's query_latency; fp32 dense search only; scores unchanged",
    )
    p.add_argument("--data-dir", help="local copies of catalog datasets (<dir>/<Task>, hub layout)")
    p.add_argument(
        "--backend",
        help="force sentence-transformers | transformers | onnx | static; or a fast path of a torch model, exported "
        "once into the cache folder: onnx | onnx-int8 (needs embedscope[onnx-export]) | openvino | openvino-bf16 | "
        "openvino-int8 (needs embedscope[openvino])",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="--backend openvino-int8: texts to calibrate on (one a line, or .jsonl with 'text'); "
        "default: a seeded sample of 300 of the run's task texts",
    )
    p.add_argument("--pooling", help="cls | mean | max | lasttoken | weightedmean | mean_sqrt_len_tokens")
    p.add_argument("--max-seq-length", help="truncate texts to this many tokens")
    p.add_argument("--query-prompt", help="instruction prepended to queries only")
    p.add_argument("--tokenizer", help="tokenizer.json or folder (ONNX models without one)")
    p.add_argument("--revision", help="hub revision of the model")
    add_api_options(p)
    p.add_argument(
        "--no-progress",
        dest="show_progress",
        action="store_false",
        help="no progress bars (they are shown only when stderr is a terminal)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.set_defaults(func=_cmd_run, parser=p)


def add_api_options(p: argparse.ArgumentParser) -> None:
    """The options of a model behind an API (--model openai:NAME, cohere:NAME, voyage:NAME); no flag takes the key
    itself (a command line is seen by others): --api-key-env or --api-key-file."""
    g = p.add_argument_group("models behind an API (--model openai:NAME | cohere:NAME | voyage:NAME)")
    g.add_argument(
        "--api-base",
        metavar="URL",
        help="the service's base URL, e.g. http://127.0.0.1:8000/v1 for any "
        "OpenAI-compatible server (default: the provider's); plain http is for local addresses",
    )
    g.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the key (default OPENAI_API_KEY, CO_API_KEY or VOYAGE_API_KEY)",
    )
    g.add_argument("--api-key-file", metavar="FILE", help="file whose first line is the key")
    g.add_argument("--dimensions", metavar="D", help="vector dimensions the service returns (Matryoshka models)")
    g.add_argument("--price-per-mtok", metavar="USD", help="price per million tokens, for the reported cost")
    g.add_argument("--max-concurrency", metavar="N", help="requests in flight at once (default 4)")
    g.add_argument("--requests-per-minute", metavar="N", help="rate limit: requests a minute")
    g.add_argument("--tokens-per-minute", metavar="N", help="rate limit: tokens a minute")
    g.add_argument("--texts-per-request", metavar="N", help="texts per request (default: --batch-size)")
    g.add_argument("--tokens-per-request", metavar="N", help="estimated tokens per request at most")
    g.add_argument("--request-timeout", metavar="S", help="seconds before a request times out (default 60)")
    g.add_argument("--max-retries", metavar="N", help="retries of a throttled or failed request (default 6)")
    g.add_argument(
        "--no-tls-verify",
        dest="tls_verify",
        action="store_false",
        help="do not verify the service's TLS certificate (a self-signed local server)",
    )


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """--engine NAME, and --NAME-FIELD for each field of each registered engine's settings."""
    from embedscope.engines import engine_names, engine_settings

    names = engine_names()
    p.add_argument(
        "--engine",
        choices=names,
        help="where encoding runs: in this process (local, the default) or on a Ray cluster "
        "(pip install 'embedscope[ray]')",
    )
    for name in names:
        for field, info in engine_settings(name).model_fields.items():
            if field != "name":
                p.add_argument(
                    f"--{name}-{field.replace('_', '-')}",
                    dest=f"{name}_{field}",
                    metavar=field.split("_")[0].upper(),
                    help=f"{info.description or field} (with --engine {name})",
                )


def flag_layer(args: argparse.Namespace, spellings: dict[str, str]) -> Layer:
    """The flags given, as a settings layer; ``spellings`` maps each flag's dest to how it is written."""
    from embedscope.tasks.params import parse_task_params

    skip = ("func", "command", "verbose", "json", "config", "print_settings", "parser")
    given = {k: v for k, v in vars(args).items() if k not in skip and v is not None}
    names = {k: spellings.get(k, f"--{k.replace('_', '-')}") for k in given}
    values: dict[str, Any] = {}
    pipeline_flags = {k: given.pop(k) for k in _PIPELINE_KEYS if k in given}
    pipeline = pipeline_spec(argparse.Namespace(**pipeline_flags), given.get("model"))
    if pipeline is not None:
        values["pipeline"] = pipeline
        given.pop("model", None)  # the pipeline's first stage when --reranker came alone
        names["pipeline"] = "/".join(names[k] for k in pipeline_flags)
    if "devices" in given:
        given["device"] = given.pop("devices")
        names["device"] = "--devices"
    options = {k: given.pop(k) for k in _MODEL_OPTION_FLAGS if k in given}
    if options:
        values["model_options"] = options
        names.update({f"model_options.{k}": names[k] for k in options})
    chunking = {key: given.pop(flag) for flag, key in _CHUNK_FLAGS.items() if flag in given}
    if chunking:
        values["chunking"] = chunking
        names["chunking"] = "/".join(names[flag] for flag in _CHUNK_FLAGS if flag in names)
        names.update({f"chunking.{key}": names[flag] for flag, key in _CHUNK_FLAGS.items() if flag in names})
    if "task_param" in given:
        values["task_params"] = parse_task_params(given.pop("task_param"))
        names["task_params"] = "--task-param"
    values.update(given)
    return Layer("command line", values, "flag", names)


_CHUNK_FLAGS = {"chunk_method": "method", "chunk_size": "chunk_size", "chunk_overlap": "overlap"}
_PIPELINE_KEYS = ("retriever", "fusion", "rrf_k", "weights", "reranker", "pipeline_name")


def _flag_spellings(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings}


def _cmd_run(args: argparse.Namespace) -> int:
    from embedscope.evaluation.runner import run
    from embedscope.settings import build_settings
    from embedscope.settings.files import config_layer

    layers = [config_layer(args.config)] if getattr(args, "config", None) else []
    layers.append(flag_layer(args, _flag_spellings(args.parser)))
    settings = build_settings(layers)
    if getattr(args, "print_settings", False):
        print(settings_table(settings))
        return 0
    if (
        settings.cache_dir
        and settings.cache
        and os.path.exists(settings.cache_dir)
        and not os.path.isdir(settings.cache_dir)
    ):
        raise ConfigError(f"{settings.display_name('cache_dir')} {settings.cache_dir} is a file: give a folder")
    for report in run(settings):
        if getattr(args, "json", False):
            print(json.dumps([o.result.to_dict() for o in report.outcomes], indent=2))
            continue
        print(report.table())
        stages = report.stage_table()
        if stages:
            print(stages)
        for o in report.outcomes:
            print(f"{'reused' if o.reused else 'wrote'} {o.path}")
    return 0


def settings_table(settings: Any) -> str:
    """Every setting, its resolved value and where it came from; then each model with its own options."""
    from embedscope.results.table import markdown_table

    def origin(key: str) -> str:
        source = settings.source(key)
        return f"{source} ({settings.display_name(key)})" if source == "command line" else source

    def shown(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    dumped = settings.model_dump(mode="json", exclude={"engine"})
    dumped["model_options"] = settings.model_options.given()
    rows = [[key, shown(value), origin(key)] for key, value in dumped.items()]
    rows.append(["engine", shown(settings.engine.model_dump(mode="json")), origin("engine")])
    models = []
    for n, r in enumerate(settings.model_runs()):
        placed = ",".join(settings.engine.devices(r.options.get("device") or settings.device))
        models.append([str(n), shown(r.model), shown(r.options), placed, shown(r.tasks)])
    header = ["#", "model", "its options (run-wide ones included)", "devices (resolved)", "its tasks (null: all)"]
    return markdown_table(["setting", "value", "from"], rows) + "\n\n" + markdown_table(header, models)


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
        from embedscope.files import atomic_write_text

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
    p.add_argument(
        "--task",
        default="feature-extraction",
        choices=("feature-extraction", "sentence-similarity"),
        help="feature-extraction (default) | sentence-similarity",
    )
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

    for flag, value in (("--batch-size", args.batch_size), ("--samples", args.samples)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value}: give a positive integer")
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
        from embedscope.files import atomic_write_text

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
