"""A round of hostile and careless inputs over every command and option (issue 21), generated deterministically.

Each case runs the CLI in-process in a sandbox (its own working folder, HOME, TMPDIR and cache) and must end in
exit code 0 or 2, never a traceback; an input that must be refused exits 2 with one line on stderr; nothing is
written outside the folders the case names. A one-line error that names neither the flag, key, value nor file it is
about counts as *weak*; the round allows at most 5.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.testing.tiny import write_tiny_beir

pytestmark = pytest.mark.slow

Argv = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    name: str
    argv: Argv
    mention: str  # what a good error names (a flag, key, value or file name)
    refused: bool = True  # the input must be refused (exit 2)


def _file(root: Path, name: str, text: str | bytes) -> str:
    path = root / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def _loop(root: Path) -> str:
    loop = root / "in" / "loop"
    loop.parent.mkdir(parents=True, exist_ok=True)
    if not loop.is_symlink():
        os.symlink(loop, loop)
    return str(loop)


QRELS = "q1 0 d1 1\nq2 0 d2 1\n"
RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d2 1 3.0 r\n"
BAD_NUMBERS = ("0", "-1", "nan", "inf", "-inf", "1e400", "abc", "", "2.5", "99999999999999999999999")


def _run_number_cases() -> list[Case]:
    """Every numeric option of ``run`` with every hostile number (a value that is valid for it is run for real)."""
    valid = {
        "--batch-size": ("2",),
        "--top-k": ("2",),
        "--limits": ("2",),
        "--corpus-chunk-size": ("2",),
        "--max-seq-length": ("8",),
        "--rrf-k": ("0",),
    }
    cases = []
    for flag in valid:
        for value in BAD_NUMBERS:
            if flag == "--rrf-k" and value in ("0", "99999999999999999999999"):
                continue  # valid RRF constants

            def argv(root: Path, flag: str = flag, value: str = value) -> list[str]:
                extra = ["--retriever", "bm25", "--retriever", "fts5"] if flag == "--rrf-k" else ["--model", "bm25"]
                tasks = ["--tasks", str(write_tiny_beir(root / "data"))]
                return ["run", *extra, *tasks, flag, value, "--output-folder", str(root / "out"), "--no-cache"]

            huge = value == "99999999999999999999999"  # a valid size: top-k, limits and sizes are caps, not allocations
            big = huge and flag in ("--top-k", "--limits", "--corpus-chunk-size", "--batch-size")
            mention = "max_seq_length" if flag == "--max-seq-length" and _valid("--batch-size", value) else flag
            cases.append(Case(f"run {flag} {value!r}", argv, mention, refused=not big))
    return cases


def _run_flag_cases() -> list[Case]:
    def run(*args: str) -> Argv:
        return lambda root: ["run", *[a.replace("{data}", str(write_tiny_beir(root / "data"))) for a in args]]

    out = ["--output-folder", "{out}"]

    def with_out(*args: str) -> Argv:
        return lambda root: [
            "run",
            *[
                a.replace("{data}", str(write_tiny_beir(root / "data"))).replace("{out}", str(root / "out"))
                for a in (*args, *out)
            ],
        ]

    return [
        Case("run --ray-workers without ray", run("--ray-workers", "2", "--print-settings"), "--ray-workers"),
        Case("run --ray-address without ray", run("--ray-address", "auto", "--print-settings"), "--ray-address"),
        Case("run --ray-gpus nan", run("--engine", "ray", "--ray-gpus-per-worker", "nan", "--print-settings"), "--ray"),
        Case("run --ray-gpus -1", run("--engine", "ray", "--ray-gpus-per-worker", "-1", "--print-settings"), "--ray"),
        Case("run --ray-workers 0", run("--engine", "ray", "--ray-workers", "0", "--print-settings"), "--ray-workers"),
        Case("run --engine spark", run("--engine", "spark"), "spark"),
        Case("run --device gpu", run("--device", "gpu", "--print-settings"), "gpu"),
        Case("run --device cuda", with_out("--device", "cuda", "--tasks", "{data}", "--model", "static-64"), "cuda"),
        Case("run --devices cpu,auto", run("--devices", "cpu,auto", "--print-settings"), "auto"),
        Case("run --dtype int4", run("--dtype", "int4", "--print-settings"), "int4"),
        Case("run --overwrite sometimes", run("--overwrite", "sometimes", "--print-settings"), "sometimes"),
        Case("run --output-folder empty", run("--output-folder", "", "--print-settings"), "--output-folder"),
        Case("run --weights nan", run("--retriever", "bm25", "--retriever", "fts5", "--weights", "nan", "1"), "nan"),
        Case("run --weights inf", run("--retriever", "bm25", "--retriever", "fts5", "--weights", "inf", "1"), "inf"),
        Case("run --weights without retriever", run("--weights", "1", "2"), "--weights"),
        Case(
            "run --fusion bogus", with_out("--retriever", "bm25", "--retriever", "fts5", "--fusion", "bogus"), "bogus"
        ),
        Case(
            "run --fusion one retriever",
            with_out("--retriever", "bm25", "--fusion", "rrf", "--tasks", "{data}"),
            "fusion",
        ),
        Case("run --model and --retriever", run("--model", "bm25", "--retriever", "fts5"), "--retriever"),
        Case("run bm25:k1=abc", with_out("--model", "bm25:k1=abc", "--tasks", "{data}"), "k1"),
        Case("run bm25:k1=inf", with_out("--model", "bm25:k1=inf", "--tasks", "{data}"), "k1"),
        Case("run bm25:b=2", with_out("--model", "bm25:b=2", "--tasks", "{data}"), "b"),
        Case("run bm25:foo=1", with_out("--model", "bm25:foo=1", "--tasks", "{data}"), "foo"),
        Case("run bm25:method=x", with_out("--model", "bm25:method=x", "--tasks", "{data}"), "x"),
        Case("run fts5:match=some", with_out("--model", "fts5:match=some", "--tasks", "{data}"), "some"),
        Case("run --task-param k=nan", run("--task-param", "k=nan", "--print-settings"), "nan"),
        Case("run --task-param noeq", run("--task-param", "k"), "--task-param"),
        Case(
            "run --task-param unknown", with_out("--task-param", "foo=1", "--model", "bm25", "--tasks", "{data}"), "foo"
        ),
        Case("run --task-param k=0", with_out("--task-param", "k=0", "--model", "bm25", "--tasks", "{data}"), "k"),
        Case("run --task-type Foo", with_out("--task-type", "Foo", "--model", "bm25", "--tasks", "{data}"), "Foo"),
        Case(
            "run --task-type filters all", with_out("--task-type", "STS", "--model", "bm25", "--tasks", "{data}"), "STS"
        ),
        Case("run --language xx", with_out("--language", "xx", "--model", "bm25", "--tasks", "{data}"), "xx"),
        Case("run --top-k on STS", with_out("--top-k", "5", "--tasks", "LeeDocumentSimilarity"), "--top-k"),
        Case(
            "run --save-predictions on STS",
            with_out("--save-predictions", "--tasks", "LeeDocumentSimilarity"),
            "--save",
        ),
        Case("run unknown task", with_out("--model", "bm25", "--tasks", "NoSuchTask"), "NoSuchTask"),
        Case("run missing folder", with_out("--model", "bm25", "--tasks", "./missing_folder"), "missing_folder"),
        Case("run missing file", with_out("--model", "bm25", "--tasks", "sts:missing.csv"), "missing.csv"),
        Case("run unknown type prefix", with_out("--model", "bm25", "--tasks", "foo:{data}"), "foo"),
        Case("run --benchmark bogus", with_out("--model", "bm25", "--benchmark", "MTEB(xxx)"), "MTEB(xxx)"),
        Case("run --splits bogus", with_out("--model", "bm25", "--tasks", "{data}", "--splits", "nosplit"), "nosplit"),
        Case("run --pooling bogus", run("--pooling", "bogus", "--print-settings"), "bogus"),
        Case("run --backend bogus", run("--backend", "bogus", "--print-settings"), "bogus"),
        Case("run --model missing path", with_out("--model", "./no/such/model", "--tasks", "{data}"), "no/such/model"),
        Case("run --model unknown alias", with_out("--model", "minilmm", "--tasks", "{data}"), "minilmm"),
        Case("run --revision ../x", run("--revision", "../x", "--print-settings"), "../x"),
        Case("run --pipeline-name a/b", with_out("--retriever", "bm25", "--pipeline-name", "a/b"), "a/b"),
        Case(
            "run --reranker missing",
            with_out("--retriever", "bm25", "--reranker", "./no_reranker", "--tasks", "{data}"),
            "no_reranker",
        ),
        Case("run --config missing", run("--config", "missing.yaml"), "missing.yaml"),
        Case(
            "run --cache-dir file",
            lambda r: [
                "run",
                "--model",
                "bm25",
                "--tasks",
                str(write_tiny_beir(r / "data")),
                "--cache-dir",
                _file(r, "c.txt", "x"),
                "--output-folder",
                str(r / "out"),
            ],
            "c.txt",
        ),
        Case(
            "run --output-folder loop",
            lambda r: [
                "run",
                "--model",
                "bm25",
                "--tasks",
                str(write_tiny_beir(r / "data")),
                "--output-folder",
                _loop(r),
            ],
            "loop",
        ),
        Case(
            "run --output-folder file",
            lambda r: [
                "run",
                "--model",
                "bm25",
                "--tasks",
                str(write_tiny_beir(r / "data")),
                "--output-folder",
                _file(r, "o.txt", "x"),
            ],
            "o.txt",
        ),
        Case(
            "run --data-dir file",
            lambda r: [
                "run",
                "--model",
                "bm25",
                "--tasks",
                "SciFact",
                "--data-dir",
                _file(r, "d.txt", "x"),
                "--output-folder",
                str(r / "out"),
            ],
            "d.txt",
        ),
        Case("run unknown flag", run("--bogus-flag"), "--bogus-flag"),
    ]


CONFIGS: dict[str, str] = {
    "unknown key": "limitz: 3\n",
    "wrong type": "batch_size: abc\n",
    "zero batch": "batch_size: 0\n",
    "nan limits": "limits: .nan\n",
    "inf top_k": "top_k: .inf\n",
    "negative limits": "limits: -2\n",
    "model option unknown": "models: [{model: static-64, foo: bar}]\n",
    "model entry without model": "models: [{device: cpu}]\n",
    "model option wrong type": "models: [{model: static-64, max_seq_length: abc}]\n",
    "pipeline unknown key": "pipeline: {retriever: bm25, rerank: x}\n",
    "pipeline nan weight": "pipeline: {retrievers: [bm25, fts5], fusion: {method: wsum, weights: [.nan, 1]}}\n",
    "pipeline empty": "pipeline: {}\n",
    "engine unknown": "engine: spark\n",
    "ray option without ray": "ray_workers: 2\n",
    "ray workers zero": "engine: ray\nray_workers: 0\n",
    "custom task escaping name": "custom_tasks: [{name: ../x, data_path: .}]\n",
    "custom task unknown key": "custom_tasks: [{name: x, data_path: ., foo: 1}]\n",
    "custom task missing path": "custom_tasks: [{name: x}]\n",
    "task_params nan": "task_params: {k: .nan}\n",
    "task_types unknown": "task_types: [Foo]\ntasks: [LeeDocumentSimilarity]\n",
    "overwrite unknown": "overwrite: sometimes\n",
    "output folder empty": "output_folder: ''\n",
    "device unknown": "device: gpu\n",
    "dtype unknown": "dtype: int4\n",
    "verbosity 9": "verbosity: 9\n",
    "malformed yaml": "a: [1,\n b: 2\n",
    "python tag": "a: !!python/object:os.system x\n",
    "top-level list": "- a\n- b\n",
    "evalscope unknown eval key": json.dumps(
        {"eval_config": {"models": [{"model_name_or_path": "m"}], "eval": {"task_name": ["x"]}}}
    ),
    "evalscope batch abc": json.dumps(
        {"eval_config": {"models": [{"model_name_or_path": "m", "encode_kwargs": {"batch_size": "abc"}}]}}
    ),
    "evalscope encode unknown": json.dumps(
        {"eval_config": {"models": [{"model_name_or_path": "m", "encode_kwargs": {"foo": 1}}]}}
    ),
    "evalscope no models": json.dumps({"eval_config": {"eval": {"task_names": ["x"]}}}),
    "evalscope no tasks": json.dumps({"eval_config": {"models": [{"model_name_or_path": "m"}]}}),
    "evalscope api model": json.dumps(
        {"eval_config": {"models": [{"model_name": "m", "api_base": "http://x"}], "eval": {"task_names": ["x"]}}}
    ),
    "evalscope torch_dtype int8": json.dumps(
        {
            "eval_config": {
                "models": [{"model_name_or_path": "m", "model_kwargs": {"torch_dtype": "int8"}}],
                "eval": {"task_names": ["x"]},
            }
        }
    ),
    "evalscope config_kwargs": json.dumps(
        {
            "eval_config": {
                "models": [{"model_name_or_path": "m", "config_kwargs": {"a": 1}}],
                "eval": {"task_names": ["x"]},
            }
        }
    ),
    "evalscope tool other": json.dumps(
        {"eval_config": {"tool": "RAGAS", "models": [{"model_name_or_path": "m"}], "eval": {"task_names": ["x"]}}}
    ),
    "evalscope hub modelscope": json.dumps(
        {
            "eval_config": {
                "models": [{"model_name_or_path": "org/remote", "hub": "modelscope"}],
                "eval": {"task_names": ["x"]},
            }
        }
    ),
    "evalscope two cross-encoders": json.dumps(
        {
            "eval_config": {
                "models": [
                    {"model_name_or_path": "a"},
                    {"model_name_or_path": "b", "is_cross_encoder": True},
                    {"model_name_or_path": "c", "is_cross_encoder": True},
                ],
                "eval": {"task_names": ["T"]},
            }
        }
    ),
    "evalscope limits nan": '{"eval_config": {"models": [{"model_name_or_path": "m"}], "eval": {"task_names": ["x"], "limits": NaN}}}',
    "evalscope verbosity 7": json.dumps(
        {"eval_config": {"models": [{"model_name_or_path": "m"}], "eval": {"task_names": ["x"], "verbosity": 7}}}
    ),
    "evalscope work_dir": json.dumps(
        {"eval_backend": "RAGEval", "work_dir": " ", "eval_config": {"models": [{"model_name_or_path": "m"}]}}
    ),
}
_CONFIG_MENTION = {
    "malformed yaml": "line",
    "python tag": "python",
    "top-level list": "mapping",
    "evalscope no models": "models",
    "evalscope no tasks": "tasks",
    "evalscope api model": "API",
    "evalscope tool other": "RAGAS",
    "evalscope two cross-encoders": "cross-encoder",
    "evalscope limits nan": "limits",
    "evalscope task_types filter all": "task_types",
    "evalscope languages filter all": "languages",
    "task_types unknown": "Foo",
    "custom task missing path": "data_path",
    "model entry without model": "model",
    "pipeline empty": "pipeline",
    "evalscope hub modelscope": "modelscope",
    "evalscope torch_dtype int8": "torch_dtype",
    "evalscope config_kwargs": "config_kwargs",
    "evalscope work_dir": "work_dir",
}


# configs whose problem shows when the run starts (tasks resolved): run for real, on cheap models and tiny data
_RUN_CONFIGS = {
    "evalscope task_types filter all": json.dumps(
        {
            "eval_config": {
                "models": [{"model_name_or_path": "bm25"}],
                "eval": {
                    "task_names": ["LeeDocumentSimilarity"],
                    "task_types": ["Clustering"],
                    "output_folder": "{out}",
                },
            }
        }
    ),
    "evalscope languages filter all": json.dumps(
        {
            "eval_config": {
                "models": [{"model_name_or_path": "bm25"}],
                "eval": {"task_names": ["LeeDocumentSimilarity"], "languages": ["zho"], "output_folder": "{out}"},
            }
        }
    ),
    "task_types unknown": "model: bm25\ntasks: ['{data}']\ntask_types: [Foo]\noutput_folder: '{out}'\n",
    "task_types filter all": "model: bm25\ntasks: ['{data}']\ntask_types: [STS]\noutput_folder: '{out}'\n",
    "languages filter all": "model: bm25\ntasks: ['{data}']\nlanguages: [zho]\noutput_folder: '{out}'\n",
    "model option on bm25": "model: bm25\nmodel_options: {pooling: cls}\ntasks: ['{data}']\noutput_folder: '{out}'\n",
    "top_k on STS": "model: static-64\ntasks: [LeeDocumentSimilarity]\ntop_k: 5\noutput_folder: '{out}'\n",
    "custom task folder missing": "model: bm25\ncustom_tasks: [{name: x, data_path: ./nope}]\noutput_folder: '{out}'\n",
    "custom task param of another type": (
        "model: bm25\ncustom_tasks: [{name: x, data_path: '{data}', samples_per_label: 3}]\noutput_folder: '{out}'\n"
    ),
}
_CONFIG_MENTION.update(
    {
        "task_types filter all": "STS",
        "languages filter all": "zho",
        "model option on bm25": "pooling",
        "top_k on STS": "top_k",
        "custom task folder missing": "nope",
        "custom task param of another type": "samples_per_label",
    }
)


def _config_cases() -> list[Case]:
    cases = []
    for label, text in {**CONFIGS, **_RUN_CONFIGS}.items():
        suffix = ".json" if text.startswith("{") else ".yaml"
        run_it = label in _RUN_CONFIGS

        def argv(root: Path, text: str = text, suffix: str = suffix, run_it: bool = run_it) -> list[str]:
            text = text.replace("{data}", str(write_tiny_beir(root / "data"))).replace("{out}", str(root / "out"))
            path = _file(root, f"config{suffix}", text)
            return ["run", "--config", path] if run_it else ["run", "--config", path, "--print-settings"]

        cases.append(Case(f"config {label}", argv, _CONFIG_MENTION.get(label, "config")))
    return cases


RUN_FILES: dict[str, str | bytes] = {
    "inf score": "q1 Q0 d1 1 inf r\n",
    "-inf score": "q1 Q0 d1 1 -inf r\n",
    "nan score": "q1 Q0 d1 1 nan r\n",
    "1e400 score": "q1 Q0 d1 1 1e400 r\n",
    "too few fields": "q1 Q0 d1 1\n",
    "word score": "q1 Q0 d1 1 high r\n",
    "duplicate doc": "q1 Q0 d1 1 1.0 r\nq1 Q0 d1 2 0.5 r\n",
    "empty": "",
    "json array": "[1, 2, 3]",
    "json inf": '{"q1": {"d1": 1e400}}',
    "json nan": '{"q1": {"d1": NaN}}',
    "json nested wrong": '{"q1": ["d1"]}',
    "json string score": '{"q1": {"d1": "x"}}',
    "binary": "\x00\x01\x02\x03",
    "not utf8 json": b'{"q1": {"d\xe9": 1}}',
}
QRELS_FILES = {
    "empty": "",
    "nan relevance": "q1 0 d1 nan\n",
    "inf relevance": "q1 0 d1 inf\n",
    "word relevance": "q1 0 d1 high\n",
    "too few fields": "q1 0 d1\n",
    "json array": "[1]",
}


def _score_cases() -> list[Case]:
    cases = []
    for label, text in RUN_FILES.items():
        suffix = ".json" if text[:1] in ("{", "[", b"{"[:1], b"["[:1]) else ".trec"

        def argv(root: Path, text: str | bytes = text, suffix: str = suffix) -> list[str]:
            return ["score", "--qrels", _file(root, "q.trec", QRELS), "--run", _file(root, f"run{suffix}", text)]

        cases.append(Case(f"score run {label}", argv, "run"))
    for label, text in QRELS_FILES.items():
        suffix = ".json" if text.startswith(("{", "[")) else ".trec"

        def argv(root: Path, text: str = text, suffix: str = suffix) -> list[str]:
            return ["score", "--qrels", _file(root, f"q{suffix}", text), "--run", _file(root, "r.trec", RUN)]

        cases.append(Case(f"score qrels {label}", argv, "q"))

    def score(*extra: str) -> Argv:
        return lambda root: [
            "score",
            "--qrels",
            _file(root, "q.trec", QRELS),
            "--run",
            _file(root, "r.trec", RUN),
            *extra,
        ]

    for k in ("0", "-1", "abc", "nan"):
        cases.append(Case(f"score --k {k}", score("--k", k), "--k"))
    cases += [
        Case(
            "score --per-query folder",
            lambda r: [*score()(r), "--per-query", str((r / "pq").mkdir() or r / "pq")],
            "pq",
        ),
        Case("score --per-query loop", lambda r: [*score()(r), "--per-query", _loop(r) + "/x.csv"], "loop"),
        Case(
            "score missing run",
            lambda r: ["score", "--qrels", _file(r, "q.trec", QRELS), "--run", "missing.trec"],
            "missing.trec",
        ),
        Case(
            "score missing qrels",
            lambda r: ["score", "--qrels", "missing.qrels", "--run", _file(r, "r.trec", RUN)],
            "missing.qrels",
        ),
        Case(
            "score run is a folder", lambda r: ["score", "--qrels", _file(r, "q.trec", QRELS), "--run", str(r)], "run"
        ),
    ]
    return cases


def _results(root: Path, name: str, limits: int | None = None, per_item: bool = True) -> str:
    """A result folder as ``run`` writes it, made with a keyword encoder on the tiny task."""
    from embedscope.evaluation.runner import evaluate
    from embedscope.testing.fakes import KeywordEncoder
    from embedscope.testing.tiny import tiny_retrieval_task

    folder = root / "res" / name
    if not folder.exists():
        evaluate(
            KeywordEncoder(["cat", "dog"], name=f"toy/{name}"),
            [tiny_retrieval_task()],
            output_folder=folder,
            cache=False,
            show_progress=False,
            limits=limits,
        )
    return str(folder)


def _compare_cases() -> list[Case]:
    def compare(*extra: str) -> Argv:
        return lambda root: ["compare", _results(root, "a"), _results(root, "b"), *extra]

    cases = [
        Case(f"compare {flag} {value}", compare(flag, value), flag)
        for flag, values in {
            "--digits": ("-2", "11", "abc"),
            "--rounds": ("0", "-5", "abc"),
            "--alpha": ("0", "1.5", "nan", "-1"),
            "--confidence": ("0", "1", "2", "nan"),
            "--seed": ("abc", "nan"),
            "--test": ("wilcoxon",),
            "--correction": ("sidak",),
        }.items()
        for value in values
    ]
    cases += [
        Case("compare one folder", lambda r: ["compare", _results(r, "a")], "compare"),
        Case("compare missing folder", lambda r: ["compare", _results(r, "a"), str(r / "nope")], "nope"),
        Case("compare a file", lambda r: ["compare", _results(r, "a"), _file(r, "pairs.csv", "a,b\n")], "pairs.csv"),
        Case("compare limits vs full", lambda r: ["compare", _results(r, "a"), _results(r, "lim", limits=2)], "limits"),
        Case(
            "compare --models one",
            lambda r: ["compare", "--models", "static-64", "--tasks", "LeeDocumentSimilarity"],
            "--models",
        ),
        Case("compare --models without tasks", lambda r: ["compare", "--models", "a", "b"], "--tasks"),
        Case(
            "compare folders and --models",
            lambda r: ["compare", _results(r, "a"), "--models", "a", "b", "--tasks", "x"],
            "--models",
        ),
    ]
    for digits in ("-1", "abc", "99"):
        cases.append(
            Case(
                f"report --digits {digits}", lambda r, d=digits: ["report", _results(r, "a"), "--digits", d], "--digits"
            )
        )
    cases += [
        Case("report missing", lambda r: ["report", str(r / "nope")], "nope"),
        Case("report csv file", lambda r: ["report", _file(r, "pairs.csv", "a,b\n")], "pairs.csv"),
        Case(
            "report --html folder",
            lambda r: ["report", _results(r, "a"), "--html", str((r / "h").mkdir() or r / "h")],
            "h",
        ),
        Case("report --html loop", lambda r: ["report", _results(r, "a"), "--html", _loop(r) + "/x.html"], "loop"),
        Case(
            "report --benchmark bogus", lambda r: ["report", _results(r, "a"), "--benchmark", "MTEB(xxx)"], "MTEB(xxx)"
        ),
        Case(
            "report --baseline bogus",
            lambda r: [
                "report",
                _results(r, "a"),
                _results(r, "b"),
                "--html",
                str(r / "out" / "x.html"),
                "--baseline",
                "nobody",
            ],
            "nobody",
        ),
        Case("report --format xml", lambda r: ["report", _results(r, "a"), "--format", "xml"], "xml"),
        Case("report --rounds 0", lambda r: ["report", _results(r, "a"), "--rounds", "0"], "--rounds"),
    ]
    return cases


def _other_cases() -> list[Case]:
    def simple(label: str, argv: list[str], mention: str) -> Case:
        return Case(label, lambda root: list(argv), mention)

    cases = [
        simple("tasks --type Foo", ["tasks", "--type", "Foo"], "Foo"),
        simple("tasks --benchmark bogus", ["tasks", "--benchmark", "MTEB(xxx)"], "MTEB(xxx)"),
        simple("tasks --data-dir missing", ["tasks", "--benchmark", "MTEB(rus, v1)", "--data-dir", "./nope"], "nope"),
        simple("download unknown", ["download", "NoSuchTask", "--to", "x"], "NoSuchTask"),
        simple("download --benchmark bogus", ["download", "--benchmark", "MTEB(xxx)", "--to", "x"], "MTEB(xxx)"),
        simple("download offline", ["download", "SciFact", "--to", "dl"], "SciFact"),
        simple("eval missing dataset", ["eval", "-m", "static-64", "--dataset", "nonexist.csv"], "nonexist.csv"),
        simple("eval --samples 0", ["eval", "-m", "static-64", "--dataset", "x.csv", "--samples", "0"], "--samples"),
        simple(
            "eval --batch-size 0",
            ["eval", "-m", "static-64", "--dataset", "x.csv", "--batch-size", "0"],
            "--batch-size",
        ),
        simple(
            "eval --batch-size -3",
            ["eval", "-m", "static-64", "--dataset", "x.csv", "--batch-size", "-3"],
            "--batch-size",
        ),
        simple(
            "eval --task nonsense", ["eval", "-m", "static-64", "--dataset", "x.csv", "--task", "nonsense"], "nonsense"
        ),
        simple("eval --column bad", ["eval", "-m", "static-64", "--dataset", "x.csv", "--column", "nokey"], "nokey"),
        Case(
            "eval missing model",
            lambda r: ["eval", "-m", "./nomodel", "--dataset", _file(r, "p.csv", "sentence1,sentence2,score\na,b,1\n")],
            "nomodel",
        ),
        simple("cache list --cache-dir missing-ok", ["cache", "list", "--cache-dir", "./nope"], "nope"),
        simple("chunk missing input", ["chunk", "missing.md", "-o", "out.jsonl"], "missing.md"),
        simple("fastbook stats missing", ["fastbook", "stats", "missing.json"], "missing.json"),
    ]
    cases[-3] = Case("cache list --cache-dir missing-ok", cases[-3].argv, "nope", refused=False)

    def chunk(*extra: str) -> Argv:
        return lambda root: [
            "chunk",
            _file(root, "doc.md", "# T\n\nSome text here.\n"),
            "-o",
            str(root / "out" / "c.jsonl"),
            *extra,
        ]

    for flag, values in {
        "--chunk-size": ("0", "-5", "abc", "nan"),
        "--chunk-overlap": ("-1", "abc"),
        "--chunking": ("bogus",),
    }.items():
        for value in values:
            cases.append(Case(f"chunk {flag} {value}", chunk(flag, value), flag))
    cases.append(
        Case("chunk --overlap > size", chunk("--chunk-size", "10", "--chunk-overlap", "20"), "--chunk-overlap")
    )
    cases.append(
        Case(
            "chunk -o folder",
            lambda r: ["chunk", _file(r, "d.md", "x\n"), "-o", str((r / "out").mkdir(exist_ok=True) or r / "out")],
            "out",
        )
    )
    cases.append(
        Case("cache list --cache-dir file", lambda r: ["cache", "list", "--cache-dir", _file(r, "c.txt", "x")], "c.txt")
    )
    cases.append(
        Case(
            "cache clear --cache-dir file", lambda r: ["cache", "clear", "--cache-dir", _file(r, "c.txt", "x")], "c.txt"
        )
    )
    cases.append(
        Case(
            "cache verify --cache-dir file",
            lambda r: ["cache", "verify", "--cache-dir", _file(r, "c.txt", "x")],
            "c.txt",
        )
    )
    for label, text in {
        "not json": "{",
        "array": "[1]",
        "empty object": "{}",
        "wrong shape": '{"questions": 3}',
    }.items():
        cases.append(
            Case(
                f"fastbook stats {label}",
                lambda r, t=text: ["fastbook", "stats", _file(r, "fb.json", t)],
                "fb.json",
            )
        )
    return cases


def _valid(flag: str, value: str) -> bool:
    """Whether ``value`` is a valid ``flag`` (such cases run for real and must not fail)."""
    try:
        number = float(value)
    except ValueError:
        return False
    if number != number or number in (float("inf"), float("-inf")):
        return False
    integral = number == int(number) and "." not in value and "e" not in value
    if flag in ("--samples", "--batch-size", "--ray-workers", "--rounds", "--chunk-size"):
        return integral and number >= 1
    if flag in ("--chunk-overlap",):
        return integral and 0 <= number < 10
    if flag == "--digits":
        return integral and 0 <= number <= 10
    if flag == "--ray-gpus-per-worker":
        return number >= 0
    if flag in ("--alpha", "--confidence"):
        return 0 < number < 1
    return False


def _number_cases() -> list[Case]:
    """The numeric options of the other commands with every hostile number."""

    def eval_(flag: str, value: str) -> Argv:
        return lambda root: ["eval", "-m", "./nomodel", "--dataset", "x.csv", flag, value]

    def chunk(flag: str, value: str) -> Argv:
        size = [] if flag == "--chunk-size" else ["--chunk-size", "10"]
        return lambda root: [
            "chunk",
            _file(root, "d.md", "# T\n\nSome text.\n"),
            "-o",
            str(root / "out" / "c.jsonl"),
            *size,
            flag,
            value,
        ]

    def compare(flag: str, value: str) -> Argv:
        return lambda root: ["compare", _results(root, "a"), _results(root, "b"), flag, value]

    def ray(flag: str, value: str) -> Argv:
        return lambda root: ["run", "--engine", "ray", flag, value, "--print-settings"]

    makers = {
        ("--samples", "--batch-size"): eval_,
        ("--chunk-size", "--chunk-overlap"): chunk,
        ("--rounds", "--alpha", "--confidence"): compare,
        ("--ray-workers", "--ray-gpus-per-worker"): ray,
    }
    cases = []
    for flags, make in makers.items():
        for flag in flags:
            for value in BAD_NUMBERS:
                if make is eval_ and _valid(flag, value):
                    continue  # a valid number: the missing model is the error then, not the number
                name = f"{make.__name__.strip('_')} {flag} {value!r}"
                cases.append(Case(name, make(flag, value), flag, refused=not _valid(flag, value)))
    return cases


# -- issue 31: sweep grids and sub-grids, screen, sweep manifests, EvalScope's work_dir ---------------------------


def _screen_two_models(screen: Callable[..., Argv]) -> Argv:
    """A screen that runs to the end: static-64 (no bf16 path: screened exact) and a tiny sentence-transformers
    model (the torch bf16 fast path), both confirmed, inside the sandbox's HOME and TMPDIR."""

    def argv(root: Path) -> list[str]:
        from support.tiny_models import build_tiny_sentence_transformer

        tiny = root / "in" / "tiny-st"
        if not tiny.exists():
            build_tiny_sentence_transformer(tiny, seed=1)
        json_file, csv_file = str(root / "out" / "s.json"), str(root / "out" / "s.csv")
        return screen("--models", "static-64", str(tiny), "--json", json_file, "--csv", csv_file)(root)

    return argv


def _sweep_screen_cases() -> list[Case]:
    """Sweeps (flags, grids, sub-grids, bad points found before any point runs), screens (two spellings of one
    model, problems found before any model runs), manifests leading outside their folder, EvalScope's work_dir."""

    def fill(root: Path, args: tuple[str, ...]) -> list[str]:
        (root / "in").mkdir(exist_ok=True)
        (root / "in" / "f.txt").write_text("x")
        (root / "in" / "tiny").mkdir(exist_ok=True)
        return [a.replace("{root}", str(root)) for a in args]

    def sweep(*args: str, grid: dict | None = None) -> Argv:
        def argv(root: Path) -> list[str]:
            data = str(write_tiny_beir(root / "data"))
            head = ["sweep", "--tasks", data, "--output-folder", str(root / "out"), "-q", "--rounds", "50"]
            head += ["--set", "show_progress=false", "--set", "cache=false"]
            if grid is not None:
                text = json.dumps(grid).replace("{root}", str(root))
                head += ["--grid", _file(root, "grid.json", text)]
            return head + fill(root, args)

        return argv

    def screen(*args: str) -> Argv:
        def argv(root: Path) -> list[str]:
            data = str(write_tiny_beir(root / "data"))
            calibration = json.dumps({"model_options": {"calibration": str(root / "in" / "cal.txt")}})
            _file(root, "calibration.json", calibration)
            head = ["screen", "--tasks", data, "--output-folder", str(root / "out"), "--fast", "bf16"]
            return head + ["--rounds", "50", "--no-progress"] + fill(root, args)

        return argv

    pipeline = "pipeline={retrievers: [bm25, fts5], fusion: {method: wsum, weights: [1, 1]}}"
    cases = [
        Case("sweep --seed -1", sweep("--axis", "model=bm25,fts5", "--seed", "-1"), "--seed"),
        Case("sweep --seed huge negative", sweep("--axis", "model=bm25", "--seed", "-" + "9" * 23), "--seed"),
        Case("sweep --csv folder", sweep("--axis", "model=bm25", "--csv", "{root}/in"), "--csv"),
        Case("sweep --html under a file", sweep("--axis", "model=bm25", "--html", "{root}/in/f.txt/p.html"), "--html"),
        Case("sweep --csv empty", sweep("--axis", "model=bm25", "--csv", ""), "--csv"),
        Case("sweep point missing model", sweep("--axis", "model=bm25,./no_model"), "no_model"),
        Case("sweep point unknown alias", sweep("--axis", "model=bm25,minilmm"), "minilmm"),
        Case("sweep point hub model offline", sweep("--axis", "model=bm25,org/not-here"), "org/not-here"),
        Case("sweep latency on bm25", sweep("--set", "latency_sample=2", "--axis", "model=bm25"), "latency_sample"),
        Case("sweep truncate_dim on bm25", sweep("--set", "truncate_dim=8", "--axis", "model=bm25,fts5"), "truncate"),
        Case(
            "sweep fusion weights wrong length",
            sweep("--set", pipeline, "--axis", "pipeline.fusion.weights=[[1, 2], [1, 2, 3]]"),
            "fusion",
        ),
        Case(
            "sweep fusion on one retriever",
            sweep("--set", "pipeline={retrievers: [bm25]}", "--axis", "pipeline.fusion=rrf,wsum"),
            "fusion",
        ),
        Case("sweep stage option unknown", sweep("--axis", "model=bm25,bm25:foo=1"), "foo"),
        Case(
            "sweep reranker missing",
            sweep("--set", "pipeline={retrievers: [bm25]}", "--axis", "pipeline.rerankers=[[./no_ce]]"),
            "no_ce",
        ),
        Case(
            "sweep every problem at once",
            sweep("--axis", "model=bm25,./no_model", "--csv", "{root}/in", "--seed", "-2"),
            "3 problems",
        ),
        Case("sweep --tune-folds 1", sweep("--axis", "model=bm25,fts5", "--tune-folds", "1"), "--tune-folds"),
        Case("sweep --rounds 0", sweep("--axis", "model=bm25", "--rounds", "0"), "--rounds"),
        Case("sweep --test bogus", sweep("--axis", "model=bm25", "--test", "bogus"), "bogus"),
        Case(
            "sweep output_folder axis",
            sweep("--axis", "output_folder={root}/out/a,{root}/out/b", "--axis", "model=bm25"),
            "output_folder",
            refused=False,
        ),
        Case(
            "sweep sub-grids",
            sweep(grid={"grids": [{"axes": {"model": ["bm25"]}}, {"axes": {"model": ["fts5"], "top_k": [3, 5]}}]}),
            "grids",
            refused=False,
        ),
    ]
    bad_grids: dict[str, tuple[dict, str]] = {
        "not a list": ({"grids": {"axes": {"top_k": [1]}}}, "grids"),
        "empty": ({"grids": []}, "grids"),
        "entry without axes": ({"grids": [{}]}, "grids[0]"),
        "entry extra key": ({"grids": [{"axes": {"top_k": [1]}, "more": 1}]}, "grids[0]"),
        "unknown key": ({"grids": [{"axes": {"nosuch": [1]}}]}, "nosuch"),
        "empty values": ({"grids": [{"axes": {"top_k": []}}]}, "top_k"),
        "axis twice": ({"axes": {"top_k": [1]}, "grids": [{"axes": {"top_k": [2]}}]}, "top_k"),
        "bad point": ({"grids": [{"axes": {"model": ["bm25"]}}, {"axes": {"model": ["./no_model"]}}]}, "no_model"),
        "bad value": ({"grids": [{"axes": {"model": ["bm25"], "top_k": [0, 5]}}]}, "top_k"),
        "wrong weights": (
            {"grids": [{"axes": {"pipeline": [{"retrievers": ["bm25", "fts5"], "fusion": {"weights": [1]}}]}}]},
            "fusion",
        ),
    }
    cases += [Case(f"sweep sub-grid {name}", sweep(grid=grid), mention) for name, (grid, mention) in bad_grids.items()]
    cases += [
        Case("screen one model two spellings", screen("--models", "{root}/in/tiny", "{root}/in/tiny/"), "twice"),
        Case("screen alias in two cases", screen("--models", "minilm", "MiniLM"), "minilm"),
        Case("screen --seed -1", screen("--models", "static-64", "minilm", "--seed", "-1"), "--seed"),
        Case("screen --json folder", screen("--models", "static-64", "minilm", "--json", "{root}/in"), "--json"),
        Case(
            "screen --csv under a file",
            screen("--models", "static-64", "minilm", "--csv", "{root}/in/f.txt/s.csv"),
            "--csv",
        ),
        Case("screen missing model", screen("--models", "static-64", "./no_model"), "no_model"),
        Case(
            "screen calibration in config",
            screen("--models", "static-64", "minilm", "--config", "{root}/in/calibration.json"),
            "calibration",
        ),
        Case(
            "screen every problem at once",
            screen("--models", "static-64", "./no_model", "--json", "{root}/in", "--seed", "-1"),
            "3 problems",
        ),
        Case("screen --confirm 0", screen("--models", "static-64", "minilm", "--confirm", "0"), "--confirm"),
        Case("screen one model", screen("--models", "static-64"), "two models"),
        Case("screen two models", _screen_two_models(screen), "screen", refused=False),
    ]

    def manifest(points: object, link: bool = False) -> Argv:
        def argv(root: Path) -> list[str]:
            folder = Path(_results(root, "a"))
            data = {
                "format": "embedscope-sweep",
                "version": 2,
                "grid": "x",
                "complete": True,
                "points_total": 1,
                "axes": [{"key": "top_k", "values": [1]}],
                "grids": [],
                "axis_keys": ["top_k"],
                "points": points,
            }
            text = json.dumps(data).replace("{root}", str(root))
            (folder / "sweeps").mkdir(exist_ok=True)
            if link:
                target = _file(root, "m.json", text)
                if not (folder / "sweeps" / "m.json").exists():
                    os.symlink(target, folder / "sweeps" / "m.json")
            else:
                (folder / "sweeps" / "m.json").write_text(text)
            return ["report", str(folder), "--html", str(root / "out" / "r.html"), "--rounds", "50"]

        return argv

    def point(path: str) -> list[dict]:
        return [
            {
                "index": 0,
                "label": "top_k=1",
                "values": {"top_k": 1},
                "done": True,
                "model": "m",
                "reused": False,
                "seconds": 1.0,
                "paths": {"T": path},
                "truncate_dim": None,
                "precision": "fp32",
            }
        ]

    for name, target in {
        "system file": "/etc/passwd",
        "climbing out": "../../../../../../../../etc/passwd",
        "another folder": "../../in/f.txt",
        "empty path": "",
    }.items():
        cases.append(Case(f"report manifest path {name}", manifest(point(target)), "m.json"))
    cases.append(Case("report manifest points not a list", manifest("x"), "m.json"))
    cases.append(Case("report manifest linked outside", manifest(point("x.json"), link=True), "m.json"))

    def evalscope(work_dir: str) -> Argv:
        def argv(root: Path) -> list[str]:
            config = {
                "work_dir": work_dir.replace("{root}", str(root)),
                "eval_backend": "RAGEval",
                "eval_config": {
                    "tool": "MTEB",
                    "models": [{"model_name_or_path": "static-64", "encode_kwargs": {"batch_size": 8}}],
                    "eval": {
                        "custom_tasks": [{"name": "Tiny", "data_path": str(write_tiny_beir(root / "data"))}],
                        "output_folder": str(root / "out" / "res"),
                        "overwrite_results": True,
                        "limits": 500,
                    },
                },
            }
            fill(root, ())
            return ["run", "--config", _file(root, "evalscope.json", json.dumps(config)), "--no-cache"]

        return argv

    cases.append(Case("evalscope work_dir run", evalscope("{root}/out/work"), "work_dir", refused=False))
    cases.append(Case("evalscope work_dir under a file", evalscope("{root}/in/f.txt/work"), "work_dir"))
    return cases


argv_of: dict[str, list[str]] = {}  # each case's argv as it ran (paths in its sandbox)
CASES = (
    _number_cases()
    + _run_number_cases()
    + _run_flag_cases()
    + _config_cases()
    + _score_cases()
    + _compare_cases()
    + _other_cases()
    + _sweep_screen_cases()
)


def test_the_round_has_at_least_300_cases():
    assert len(CASES) >= 300 and len({c.name for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int | str, str]]:
    """Each case's exit code (or the traceback) and stderr, run in a sandbox of its own."""
    results: dict[str, tuple[int | str, str]] = {}
    import contextlib
    import io

    for n, case in enumerate(CASES):
        root = tmp_path_factory.mktemp(f"case{n}")
        for sub in ("cwd", "home", "tmp", "cache"):
            (root / sub).mkdir()
        saved = {k: os.environ.get(k) for k in ("HOME", "TMPDIR", "EMBEDSCOPE_CACHE")}
        os.environ.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), EMBEDSCOPE_CACHE=str(root / "cache"))
        here = os.getcwd()
        os.chdir(root / "cwd")
        err, out = io.StringIO(), io.StringIO()
        try:
            argv = case.argv(root)
            argv_of[case.name] = argv
            before = {p for p in root.rglob("*")}
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    code: int | str = main(argv)
                except SystemExit as e:
                    code = int(e.code or 0)
                except BaseException:
                    code = "traceback: " + traceback.format_exc(limit=3)
            written = {p for p in root.rglob("*")} - before
            outside = sorted(
                str(p.relative_to(root))
                for p in written
                if not any(p.is_relative_to(root / ok) for ok in ("out", "cache", "in", "res", "data"))
            )
            results[case.name] = (code, err.getvalue() + ("".join(f"\nWROTE {o}" for o in outside)))
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return results


def _names_its_subject(message: str, case: Case, argv: list[str]) -> bool:
    """Whether a one-line error names what it is about: the case's subject, a flag or value given, or a file's name."""
    subjects = [case.mention, *(a for a in argv if a.startswith("--"))]
    subjects += [Path(a).name for a in argv if "/" in a] + [a for a in argv[1:] if len(a) > 2 and "/" not in a]
    return any(s and s.lower() in message.lower() for s in subjects)


def test_no_traceback_no_write_outside_and_refusals_are_one_line(outcomes):
    problems, weak = [], []
    for case in CASES:
        code, err = outcomes[case.name]
        if isinstance(code, str) or "Traceback" in err:
            problems.append(f"{case.name}: {code if isinstance(code, str) else err}")
        elif "\nWROTE " in err:
            problems.append(f"{case.name}: wrote outside the named folders: {err}")
        elif code not in (0, 2):
            problems.append(f"{case.name}: exit {code}")
        elif case.refused and code != 2:
            problems.append(f"{case.name}: accepted (exit {code})")
        elif code == 2:
            lines = [line for line in err.splitlines() if line.strip()]
            if len(lines) != 1 or "error:" not in lines[0]:
                problems.append(f"{case.name}: {len(lines)} lines: {err[:300]!r}")
            elif not _names_its_subject(lines[0], case, argv_of[case.name]):
                weak.append(f"{case.name}: {lines[0][:200]}")
    print(f"hostile round: {len(CASES)} cases, {len(problems)} failed, {len(weak)} weak: {weak}")
    assert not problems, f"{len(problems)} of {len(CASES)} cases failed:\n" + "\n".join(problems)
    assert len(weak) <= 5, f"{len(weak)} weak messages:\n" + "\n".join(weak)


def test_the_valid_issue_31_cases_run(outcomes):
    """The sweep, sub-grid, screen and work_dir inputs that are valid run to the end (exit 0), inside the named folders."""
    valid = [c.name for c in _sweep_screen_cases() if not c.refused]
    assert len(valid) == 4
    assert {name: outcomes[name][0] for name in valid} == dict.fromkeys(valid, 0)
