"""Models behind an API through every entry point (the CLI, embedscope's and EvalScope's config files, evaluate()),
against the fault-injecting test service: one-line errors with exit 2, a second run that sends nothing, a run killed
with SIGKILL that resumes with only the texts never answered, and a key found in no file and no printed line."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.evaluation.runner import evaluate
from embedscope.models.specs import load_encoder
from embedscope.testing.tiny import tiny_retrieval_task, write_tiny_beir
from support.api_server import ApiServer

pytestmark = pytest.mark.usefixtures("quick_backoff")
KEY = "sk-proj-SECRETkey0123456789abcdefXYZ"
BUILTIN = ["BBCNewsRetrieval", "BBCNewsClustering", "BBCNewsClassification", "LeeDocumentSimilarity"]
QUICK = ["BBCNewsRetrieval", "LeeDocumentSimilarity"]  # clustering takes a minute; limits=30 leaves classification
# one training class (the first 30 rows of BBC's train split)


def _run(server: ApiServer, tmp_path: Path, *extra: str) -> int:
    task = write_tiny_beir(tmp_path / "tiny")
    return main(
        [
            "run",
            "--model",
            "openai:fake",
            "--api-base",
            server.url,
            "--api-key-env",
            "EMBEDSCOPE_TEST_KEY",
            "--tasks",
            str(task),
            "--output-folder",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-progress",
            *extra,
        ]
    )


def _files_holding(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.slow
def test_a_run_through_the_cli_and_a_second_run_that_sends_no_request(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EMBEDSCOPE_TEST_KEY", KEY)
    assert _run(server, tmp_path, "--texts-per-request", "2") == 0
    sent = len(server.requests)
    assert sent == 4 and sorted(len(r.texts) for r in server.requests) == [1, 2, 2, 2]  # 3 queries, 4 documents
    result = next((tmp_path / "out" / "openai__fake" / "127.0.0.1").glob("tiny.json"))
    meta = json.loads((result.parent / "model_meta.json").read_text())
    assert (meta["backend"], meta["source"]) == ("openai-api", f"openai API at {server.url}")
    assert _run(server, tmp_path, "--overwrite") == 0  # evaluated again: every vector from the cache
    assert len(server.requests) == sent
    assert "7 texts served, 0 encoded" in capsys.readouterr().out


def test_retries_running_out_end_in_one_line_and_exit_2(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EMBEDSCOPE_TEST_KEY", KEY)
    server.fail("500", times=100)
    assert _run(server, tmp_path, "--max-retries", "1") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("embedscope: error: tiny: ")
    assert "HTTP 500 (internal error), after its retries ran out; none of the " in err and KEY not in err


def test_evaluate_takes_an_api_model_and_its_options(server, tmp_path):
    report = evaluate(
        "openai:fake",
        [tiny_retrieval_task()],
        model_options={"api_base": server.url, "api_key": KEY, "dimensions": 4},
        output_folder=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        show_progress=False,
    )
    assert report.model_name == "openai/fake" and 0 <= report.outcomes[0].result.main_score() <= 1
    assert {r.body["dimensions"] for r in server.requests} == {4}
    assert _files_holding(tmp_path, KEY) == []


def _evalscope_config(server: ApiServer, tmp_path: Path, tasks: list[str] = QUICK, limits: int | None = 30) -> Path:
    """EvalScope's documented API example, pointed at the test service."""
    config = {
        "eval_backend": "RAGEval",
        "eval_config": {
            "tool": "MTEB",
            "models": [
                {
                    "model_name": "fake",
                    "api_base": server.url,
                    "api_key": KEY,
                    "dimensions": 16,
                    "encode_kwargs": {"batch_size": 10},
                }
            ],
            "eval": {"task_names": tasks, "limits": limits, "output_folder": str(tmp_path / "outputs")},
        },
    }
    path = tmp_path / "config" / "evalscope_api.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(
    ("tasks", "limits"), [(QUICK, 30), pytest.param(BUILTIN, None, marks=pytest.mark.slow)], ids=["quick", "builtin"]
)
def test_evalscopes_api_example_runs_the_builtin_tasks(server, tmp_path, capsys, tasks, limits):
    config = _evalscope_config(server, tmp_path, tasks, limits)
    assert main(["run", "-c", str(config), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for task in tasks:
        assert f"| {task} |" in out
    assert all(len(r.texts) <= 10 and r.body["dimensions"] == 16 for r in server.requests)
    assert all(r.body["model"] == "fake" for r in server.requests)
    assert len(list((tmp_path / "outputs" / "openai__fake" / "127.0.0.1").rglob("*.json"))) == len(tasks) + 1


@pytest.mark.slow
def test_the_key_is_in_no_file_and_no_printed_line(server, tmp_path, monkeypatch, capsys, caplog):
    config = _evalscope_config(server, tmp_path)
    monkeypatch.setenv("EMBEDSCOPE_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    assert main(["run", "-c", str(config), "--print-settings"]) == 0
    assert "**********" in capsys.readouterr().out
    assert main(["-v", "-v", "run", "-c", str(config), "--cache-dir", str(tmp_path / "cache")]) == 0
    server.fail("401")
    assert _run(server, tmp_path, "--overwrite", "--max-retries", "0") == 2
    server.fail("500", times=5)
    assert main(["-v", "run", "-c", str(config), "--cache-dir", str(tmp_path / "c2"), "--max-retries", "0"]) == 2
    printed = capsys.readouterr()
    assert server.requests and all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    for needle in (KEY, KEY[-8:]):
        assert needle not in printed.out and needle not in printed.err
        assert needle not in caplog.text
        assert _files_holding(tmp_path / "outputs", needle) == []
        assert [p.name for p in _files_holding(tmp_path, needle)] == ["evalscope_api.json"]  # only the user's file


@pytest.mark.slow  # spawns a process
def test_a_run_killed_mid_corpus_requests_only_the_texts_never_answered(server, tmp_path):
    corpus = tmp_path / "task"
    (corpus / "qrels").mkdir(parents=True)
    docs = {f"d{i}": f"document number {i} about topic {i % 5}" for i in range(40)}
    (corpus / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (corpus / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "topic 3"}) + "\n")
    (corpus / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    command = [sys.executable, "-m", "embedscope", "run", "--model", "openai:fake", "--api-base", server.url]
    command += ["--tasks", str(corpus), "--output-folder", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c")]
    command += ["--texts-per-request", "4", "--max-concurrency", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(Path(embedscope.__file__).parents[1]), "OPENAI_API_KEY": KEY}
    child: list[subprocess.Popen] = []

    def kill_at_the_sixth(n: int) -> bool:
        if n == 6 and child:  # five requests answered (and, one at a time, stored before the next is sent)
            os.kill(child[0].pid, signal.SIGKILL)
            child[0].wait()
            return True
        return False

    server.on_request = kill_at_the_sixth
    child.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    child[0].wait(timeout=300)
    assert child[0].returncode == -signal.SIGKILL
    answered = list(server.answered)
    assert len(server.requests) == 6 and len(answered) >= 17  # five requests answered (one may be the query)
    server.on_request = None
    server.requests.clear()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    again = server.requested
    assert not set(again) & set(answered)
    assert sorted(again + answered) == sorted([*docs.values(), "topic 3"])
    server.requests.clear()
    time.sleep(0.1)
    assert subprocess.run([*command, "--overwrite"], env=env, capture_output=True, timeout=300).returncode == 0
    assert server.requests == []  # a third run: nothing sent


def test_evalscopes_api_entry_becomes_an_openai_model_with_its_options():
    from embedscope.settings.evalscope import evalscope_layer

    entry = {"model_name": "text-embedding-v3", "api_base": "https://example.com/compatible-mode/v1"}
    entry |= {"api_key": KEY, "dimensions": 1024, "encode_kwargs": {"batch_size": 10}}
    layer = evalscope_layer({"eval_config": {"models": [entry], "eval": {"task_names": QUICK, "limits": 30}}}, "c")
    (model,) = layer.values["models"]
    assert model["model"] == "openai:text-embedding-v3" and model["api_key"].get_secret_value() == KEY
    assert (model["api_base"], model["dimensions"], model["batch_size"]) == (entry["api_base"], 1024, 10)
    with pytest.raises(ConfigError, match=r"c: eval_config.models\[0\].pooling_mode: cannot act on an API model"):
        evalscope_layer(
            {"eval_config": {"models": [{**entry, "pooling_mode": "cls"}], "eval": {"task_names": QUICK}}}, "c"
        )


def test_an_api_model_runs_in_this_process_only(server, tmp_path):
    with pytest.raises(ConfigError, match="engine ray: openai:fake is a model behind an API"):
        evaluate(
            "openai:fake",
            [tiny_retrieval_task()],
            model_options={"api_base": server.url},
            engine="ray",
            output_folder=str(tmp_path),
            cache=False,
        )
    assert server.requests == []


def test_the_progress_bar_shows_texts_tokens_and_spend(server, capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    enc = load_encoder("openai:fake", api_base=server.url, price_per_mtok=2.0, texts_per_request=2)
    enc.encode(["one two", "three", "four"], role="document", show_progress=True)
    err = capsys.readouterr().err
    assert "corpus (3 texts) [openai API]" in err and "3/3" in err and "4 tokens, $0.0000" in err
