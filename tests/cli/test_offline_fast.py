"""Offline is fast and short (issue 21): ``download`` and ``eval --dataset`` fail in under 2 s in one line,
without a hub call; a missing path that looks like a file is "no such file or folder", never a hub id."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import embedscope
from embedscope import hub
from embedscope.cli.main import main

SRC = str(Path(embedscope.__file__).resolve().parents[1])
CLOSED_PORT = "http://127.0.0.1:9"  # a refused connection: offline, wherever the test runs


@pytest.fixture(params=["no network", "HF_HUB_OFFLINE"])
def offline(request, monkeypatch, no_offline_flags):
    """The hub out of reach (a refused endpoint) or declared offline; any hub call fails the test."""
    if request.param == "HF_HUB_OFFLINE":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.setenv("HF_ENDPOINT", CLOSED_PORT)
    import datasets
    import huggingface_hub

    def no_hub_call(*args, **kwargs):
        raise AssertionError("the hub was called")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub_call)
    monkeypatch.setattr(datasets, "load_dataset", no_hub_call)
    return request.param


def _one_line(capsys, argv) -> str:
    started = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - started < 2.0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("what", [["SciFact"], ["--benchmark", "MTEB(eng, v2)"]])
def test_download_offline(offline, capsys, tmp_path, what):
    err = _one_line(capsys, ["download", *what, "--to", str(tmp_path / "dl")])
    assert "the Hugging Face hub is offline" in err and f"--data-dir {tmp_path / 'dl'}" in err
    assert ("no network" if offline == "no network" else "HF_HUB_OFFLINE=1 is set") in err
    assert not (tmp_path / "dl").exists()


@pytest.fixture
def no_model(monkeypatch):
    import embedscope.models.specs as specs

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the dataset was checked")

    monkeypatch.setattr(specs, "load_encoder", refuse)


@pytest.mark.parametrize("dataset", ["nonexist.csv", "data/x/pairs", "./pairs", "../pairs", "org/pairs.jsonl"])
def test_eval_of_a_missing_file_is_no_such_file(offline, no_model, capsys, tmp_path, monkeypatch, dataset):
    monkeypatch.chdir(tmp_path)
    err = _one_line(capsys, ["eval", "-m", "fake", "--task", "sentence-similarity", "--dataset", dataset])
    assert err == f"embedscope: error: {dataset}: no such file or folder"


def test_eval_of_a_hub_id_offline(offline, no_model, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _one_line(capsys, ["eval", "-m", "fake", "--task", "sentence-similarity", "--dataset", "mteb/stsb"])
    assert "mteb/stsb: no such file or folder here, and the Hugging Face hub is offline" in err


def _cli(argv: list[str], **env: str) -> tuple[float, subprocess.CompletedProcess]:
    clean = {k: v for k, v in os.environ.items() if k not in (*hub.OFFLINE_FLAGS, "EMBEDSCOPE_HUB_PROBE")}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "embedscope", *argv],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": SRC, **env},
    )
    return time.perf_counter() - started, done


@pytest.mark.slow  # whole processes: what a user sees, start-up included
@pytest.mark.parametrize("env", [{"HF_ENDPOINT": CLOSED_PORT}, {"HF_HUB_OFFLINE": "1"}])
@pytest.mark.parametrize(
    "argv",
    [
        ["download", "SciFact", "--to", "DL"],
        ["download", "--benchmark", "MTEB(eng, v2)", "--to", "DL"],
        ["eval", "-m", "static-64", "--task", "sentence-similarity", "--dataset", "nonexist.csv"],
        ["eval", "-m", "static-64", "--task", "sentence-similarity", "--dataset", "mteb/stsbenchmark-sts"],
    ],
)
def test_offline_commands_in_a_process(tmp_path, env, argv):
    argv = [str(tmp_path / "dl") if a == "DL" else a for a in argv]
    seconds, done = _cli(argv, **env)
    assert done.returncode == 2 and seconds < 2.0, (seconds, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("embedscope: error: "), done.stderr


def test_a_download_that_fails_online_is_one_line(monkeypatch, capsys, tmp_path):
    import huggingface_hub

    def fail(**kwargs):
        raise RuntimeError("404 Client Error: Revision Not Found\nmore detail on a second line")

    monkeypatch.setattr("embedscope.hub.hub_offline", lambda: False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fail)
    err = _one_line(capsys, ["download", "SciFact", "--to", str(tmp_path)])
    assert err.startswith("embedscope: error: SciFact: cannot download mteb/scifact (revision ")
    assert err.endswith(f"into {tmp_path / 'SciFact'} (RuntimeError: 404 Client Error: Revision Not Found)")
