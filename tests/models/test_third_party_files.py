"""Whole processes, each with its own empty HOME and TMPDIR and its output and cache folders named: nothing is
written outside them, for every backend (torch, ONNX, OpenVINO fp32 / bf16 / int8), sweep and screen; NNCF draws no
progress bars (issue 31). The Ray engine's case is tests/engines/test_ray_files.py. A tiny BERT, one tiny task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from embedscope.testing.tiny import write_tiny_beir
from support.cpu import require_bf16

pytestmark = pytest.mark.slow

ISOLATED = ("RAY_", "ORT_", "TORCHINDUCTOR", "EMBEDSCOPE_", "NNCF_")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from support.tiny_models import build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("inputs")
    return build_tiny_sentence_transformer(root / "st"), write_tiny_beir(root / "data")


def run_isolated(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``embedscope ARGV`` in its own process, HOME and TMPDIR empty folders, working folder empty; asserts it
    succeeded and wrote nothing into HOME, TMPDIR or the working folder."""
    home, temp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (home, temp, cwd):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(ISOLATED)}
    env.update(HOME=str(home), TMPDIR=str(temp), PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, "-m", "embedscope", *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = sorted(str(p.relative_to(tmp_path)) for folder in (home, temp, cwd) for p in folder.rglob("*"))
    assert written == [], written
    return done


def _named(tmp_path: Path) -> list[str]:
    return ["--output-folder", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]


@pytest.mark.parametrize("backend", [None, "onnx", "onnx-int8", "openvino", "openvino-bf16", "openvino-int8"])
def test_a_run_on_each_backend_writes_only_into_the_named_folders(tiny, tmp_path: Path, backend: str | None) -> None:
    if backend and backend.startswith("openvino"):
        pytest.importorskip("openvino")
    if backend == "openvino-bf16":
        require_bf16()
    model, data = tiny
    argv = ["run", "--model", str(model), "--tasks", str(data), *_named(tmp_path)]
    done = run_isolated(tmp_path, [*argv, *(["--backend", backend] if backend else [])])
    assert "Traceback" not in done.stderr
    if backend == "openvino-int8":  # NNCF's own progress bars and INFO lines stay off, in a pipe and --no-progress
        assert "━" not in done.stderr + done.stdout and "INFO:nncf" not in done.stderr + done.stdout
        assert "Statistics collection" not in done.stderr + done.stdout


def test_the_shipped_onnx_alias_writes_only_into_the_named_folders(tiny, tmp_path: Path) -> None:
    """``minilm-int8``: the shipped ONNX model (onnxruntime's telemetry switched off)."""
    _, data = tiny
    run_isolated(tmp_path, ["run", "--model", "minilm-int8", "--tasks", str(data), *_named(tmp_path)])


@pytest.mark.parametrize(("model", "backend"), [("minilm-int8", "openvino"), ("paraphrase-minilm-l3", "onnx-int8")])
def test_an_onnx_graphs_fast_path_writes_only_into_the_named_folders(
    tiny, tmp_path: Path, model: str, backend: str
) -> None:
    """The shipped ONNX graphs converted (OpenVINO) or quantized (onnxruntime) into the cache folder."""
    pytest.importorskip("openvino" if backend == "openvino" else "onnx")
    _, data = tiny
    run_isolated(tmp_path, ["run", "--model", model, "--backend", backend, "--tasks", str(data), *_named(tmp_path)])
    assert any((tmp_path / "cache" / "exports").iterdir())  # the export went where it was told


def test_a_sweep_writes_only_into_the_named_folders(tiny, tmp_path: Path) -> None:
    model, data = tiny
    argv = ["sweep", "--tasks", str(data), "--axis", f"model=[bm25, {model}]", "--axis", "top_k=5,10"]
    argv += ["--output-folder", str(tmp_path / "out"), "--set", f"cache_dir={tmp_path / 'cache'}", "--quiet"]
    argv += ["--csv", str(tmp_path / "out" / "sweep.csv")]
    run_isolated(tmp_path, argv)


@pytest.mark.long  # a whole screen in a fresh process: in the long tier
def test_a_screen_writes_only_into_the_named_folders(tiny, tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    from support.tiny_models import build_tiny_sentence_transformer

    model, data = tiny
    other = build_tiny_sentence_transformer(tmp_path / "st-other", seed=1)
    argv = ["screen", "--models", str(model), str(other), "--tasks", str(data), "--fast", "openvino-int8"]
    argv += _named(tmp_path)
    done = run_isolated(tmp_path, [*argv, "--rounds", "50"])
    assert "━" not in done.stderr + done.stdout
