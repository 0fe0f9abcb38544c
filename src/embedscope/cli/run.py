"""``run``, ``score`` and ``eval``: evaluate a model on tasks, score a precomputed run, the STS-pair evaluator."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from embedscope.cli.settings_flags import add_dry_run_flag, add_settings_flags, settings_layer
from embedscope.errors import ConfigError
from embedscope.results.compute import truncation_lines
from embedscope.settings.options import GROUPS

_RUN_DESCRIPTION = (
    "Evaluate a model on tasks and write MTEB-format results. With no arguments, evaluates the built-in 'minilm' model "
    "on the 4 built-in tasks, offline: BBCNewsRetrieval, BBCNewsClustering, BBCNewsClassification, "
    "LeeDocumentSimilarity (a retrieval pipeline: BBCNewsRetrieval only). Settings come from defaults, then --config, "
    "then the flags given here: an explicit flag overrides the config file's value (--print-settings shows each "
    "value and where it came from). A flag that cannot act in the chosen mode is an error, never dropped."
)
RUN_GROUPS = GROUPS  # run takes every settings group


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a model on tasks (default: minilm on the 4 built-in tasks)",
        description=_RUN_DESCRIPTION,
        argument_default=argparse.SUPPRESS,  # only the flags given become a settings layer
    )
    add_settings_flags(p, RUN_GROUPS, exclude=("models",))
    p.add_argument(
        "--config",
        "-c",
        help="YAML/JSON config (embedscope or EvalScope eval_config schema); flags given with it override its values",
    )
    p.add_argument(
        "--print-settings",
        action="store_true",
        help="check the settings as the run does, print each resolved value with where it came from (default, "
        "config file, flag), and stop",
    )
    add_dry_run_flag(
        p,
        "check the settings as the run does, and print per model and task the texts and tokens each role would "
        "encode, the cost (models behind an API), the time (from stated throughputs) and the estimated peak memory, "
        "and stop: nothing is encoded or written",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.set_defaults(func=_cmd_run, parser=p)


def _cmd_run(args: argparse.Namespace) -> int:
    from embedscope.evaluation.runner import run
    from embedscope.settings import build_settings
    from embedscope.settings.files import config_layer

    layers = [config_layer(args.config)] if getattr(args, "config", None) else []
    layers.append(settings_layer(args))
    settings = build_settings(layers)
    if getattr(args, "print_settings", False):
        from embedscope.evaluation.plan import check_run

        check_run(settings)
        print(settings_table(settings))
        return 0
    if getattr(args, "dry_run", False):
        from embedscope.evaluation.estimate import estimate_run

        estimate = estimate_run(settings)
        print(json.dumps(estimate.to_dict(), indent=2) if getattr(args, "json", False) else estimate.table())
        return 0
    if (
        settings.cache_dir
        and settings.cache
        and os.path.exists(settings.cache_dir)
        and not os.path.isdir(settings.cache_dir)
    ):
        raise ConfigError(f"{settings.display_name('cache_dir')} {settings.cache_dir} is a file: give a folder")
    from embedscope.settings.evalscope import work_dir_session

    with work_dir_session(layers):  # an EvalScope config's work_dir: its configuration and log
        reports = run(settings)
    for report in reports:
        if getattr(args, "json", False):
            print(json.dumps([o.result.to_dict() for o in report.outcomes], indent=2))
            continue
        print(report.table())
        stages = report.stage_table()
        if stages:
            print(stages)
        for o in report.outcomes:
            for line in truncation_lines(o.task.name, o.result.extra.get("truncated")):
                print(line)
        for o in report.outcomes:
            print(f"{'reused' if o.reused else 'wrote'} {o.path}")
    return print_recorded(reports)


def print_recorded(reports: Any) -> int:
    """Say where the results store recorded each report (stderr); 2 when a recording failed (the results stay)."""
    status = 0
    for report in reports:
        recorded = getattr(report, "recorded", None)
        if recorded is None:
            continue
        if recorded.error:
            print(f"embedscope: error: {recorded.error}", file=sys.stderr)
            status = 2
        else:
            print(recorded.line(), file=sys.stderr)
    return status


def settings_table(settings: Any) -> str:
    """Every setting, its resolved value and where it came from; then each model with its own options."""
    from embedscope.results.table import markdown_table

    def origin(key: str) -> str:
        source = settings.source(key)
        return f"{source} ({settings.display_name(key)})" if source == "command line" else source

    def shown(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    def named(value: Any) -> str:  # a task object (a custom_tasks entry of an EvalScope config, evaluate()'s tasks)
        name = getattr(value, "name", None)
        return f"{name} ({type(value).__name__})" if isinstance(name, str) else repr(value)

    dumped = settings.model_dump(mode="json", exclude={"engine"}, fallback=named)
    dumped["tasks"] = [t if isinstance(t, str) else named(t) for t in settings.tasks]
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
    add_settings_flags(p, paths=("model", "model_options.tokenizer", "batch_size"))  # -m, --tokenizer, --batch-size
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
    from embedscope.settings import build_settings

    if args.samples is not None and args.samples < 1:
        raise ConfigError(f"--samples {args.samples}: give a positive integer")
    settings = build_settings([settings_layer(args)])
    if settings.model is None:
        raise ConfigError("eval needs -m/--model: an ONNX file, model folder or built-in alias")
    columns = parse_column_mapping(args.column)
    check_dataset(args.dataset)  # before the model loads
    encoder = load_encoder(settings.model, tokenizer=settings.model_options.tokenizer)
    record = evaluate_feature_extraction(
        encoder,
        model_id=args.model_id or encoder.name,
        model_path=_model_path(encoder, settings.model),
        dataset=args.dataset,
        task=args.task,
        split=args.split,
        samples=args.samples,
        columns=columns,
        batch_size=settings.batch_size,  # None: each encoder's device default (models.device.default_batch_size)
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
