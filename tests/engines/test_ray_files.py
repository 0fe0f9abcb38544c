"""A local Ray cluster started by embedscope writes nothing outside the folders the run names and prints no banner;
a Ray Client address without the client installed is a one-line error (issue 21)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from embedscope.cli.main import main
from embedscope.testing.tiny import write_tiny_beir

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")


@pytest.mark.skipif(importlib.util.find_spec("grpc") is not None, reason="the Ray Client is installed here")
def test_a_ray_client_address_without_the_client_says_what_to_install(tmp_path, capsys):
    argv = ["run", "--engine", "ray", "--ray-address", "ray://127.0.0.1:1", "--model", "static-64"]
    assert main([*argv, "--tasks", str(write_tiny_beir(tmp_path / "d")), "--output-folder", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install ray[client]" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_local_cluster_keeps_its_files_in_the_cache_folder(tmp_path):
    from support.tiny_models import build_tiny_sentence_transformer

    model = build_tiny_sentence_transformer(tmp_path / "tiny-st")
    home, temp, cache = tmp_path / "home", tmp_path / "tmp", tmp_path / "c"
    home.mkdir()
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), TMPDIR=str(temp), EMBEDSCOPE_CACHE=str(cache))
    argv = [sys.executable, "-m", "embedscope", "run", "--engine", "ray", "--ray-workers", "1", "--model", str(model)]
    argv += [
        "--tasks",
        str(write_tiny_beir(tmp_path / "d")),
        "--output-folder",
        str(tmp_path / "out"),
        "--device",
        "cpu",
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Token authentication" not in done.stderr and "Started a local Ray instance" not in done.stderr
    assert not (home / ".ray").exists() and not any(temp.iterdir())
    assert list(cache.rglob("ray/session_*")), sorted(str(p) for p in cache.rglob("*"))[:20]
