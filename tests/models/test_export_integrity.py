"""An export's manifest and weights are checked together (one integrity key), and the temporary folders of killed
exports are removed at the next start, never those of a running one (issue 31). A tiny BERT the tests build."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.models import exports
from embedscope.models.specs import load_encoder
from embedscope.testing.tiny import write_tiny_beir
from support.tiny_models import build_tiny_sentence_transformer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx is not installed")

TEXTS = ["a cat sat on the mat", "dogs bark at night", "x", "the quick brown fox jumps over the lazy dog"]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "st")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = exports.export_onnx

    def export(source: exports.ExportSource, target: Path) -> None:
        calls.append(str(target))
        original(source, target)

    monkeypatch.setattr(exports, "export_onnx", export)
    return calls


def _edit(folder: Path, change) -> None:
    manifest = json.loads((folder / exports.MANIFEST).read_text())
    change(manifest)
    (folder / exports.MANIFEST).write_text(json.dumps(manifest))


EDITS = {
    "pooling mean -> cls": lambda m: m.update(pooling="cls"),
    "prompts added": lambda m: m.update(prompts={"query": "query: "}),
    "normalize removed": lambda m: m.pop("normalize"),
    "integrity removed (an older manifest)": lambda m: m.pop(exports.INTEGRITY),
    "a file hash changed": lambda m: m["files"].update({"model.onnx": "0" * 64}),
}


@pytest.mark.slow
@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_manifest_is_rebuilt_with_a_one_line_warning(
    tiny_st: Path, tmp_path: Path, counted: list[str], caplog: pytest.LogCaptureFixture, edit: str
) -> None:
    good = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    expected = good.encode(TEXTS, role="query")
    _edit(good.export_folder, EDITS[edit])
    with caplog.at_level(logging.WARNING, logger="embedscope.models.exports"):
        again = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert len(counted) == 2 and again.export_folder == good.export_folder
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "\n" not in warning and "building the export again" in warning and exports.MANIFEST in warning
    assert (again.pooling, again.prompts, again.normalize) == (good.pooling, good.prompts, good.normalize)
    np.testing.assert_array_equal(again.encode(TEXTS, role="query"), expected)
    assert exports.export_problem(again.export_folder, again.export_key) is None


@pytest.mark.slow
def test_a_run_on_an_edited_export_gives_the_untouched_score(
    tiny_st: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = str(write_tiny_beir(tmp_path / "data"))

    def run(out: str) -> float:
        argv = ["run", "--model", str(tiny_st), "--backend", "onnx", "--tasks", data, "--no-progress", "--no-cache"]
        assert main([*argv, "--output-folder", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache")]) == 0
        (result,) = (tmp_path / out).rglob("data.json")
        return json.loads(result.read_text())["scores"]["test"][0]["main_score"]

    first = run("a")
    (folder,) = [p for p in (tmp_path / "cache" / "exports").iterdir() if not p.name.startswith(".")]
    _edit(folder, lambda m: m.update(pooling="cls", prompts={"query": "zzz "}))
    with caplog.at_level(logging.WARNING, logger="embedscope.models.exports"):
        assert run("b") == first
    assert any("does not match its integrity key" in r.getMessage() for r in caplog.records)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.mark.slow
def test_stale_temporary_folders_are_removed_and_live_ones_kept(
    tiny_st: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "exports"
    host, old = exports._host(), time.time() - 2 * exports.STALE_SECONDS
    names = {
        f".k.{host}~{_dead_pid()}.a.tmp": True,  # killed on this host
        f".k.{host}~{os.getpid()}.b.tmp": False,  # this process: still building
        ".k.otherhost~1.c.tmp": False,  # another host, recent
        ".k.otherhost~1.d.tmp": True,  # another host, untouched for two days
        ".k.e.tmp": True,  # an older embedscope's name, old
        ".k.f.tmp": False,  # an older embedscope's name, recent
    }
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "model.onnx").write_bytes(b"half")
    for name in (".k.otherhost~1.d.tmp", ".k.e.tmp"):
        os.utime(folder / name, (old, old))
    with caplog.at_level(logging.WARNING, logger="embedscope.models.exports"):
        load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    left = {p.name for p in folder.iterdir() if p.name.endswith(".tmp")}
    assert left == {n for n, stale in names.items() if not stale}
    assert any("removed 3 temporary folder(s)" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_a_killed_export_leaves_a_folder_the_next_start_removes(tiny_st: Path, tmp_path: Path) -> None:
    """A whole process killed (SIGKILL) in the middle of an export; the next export into the cache cleans up."""
    script = f"""
import time
from pathlib import Path
from embedscope.models import exports
from embedscope.models.specs import load_encoder
def slow(source, target):
    (Path(target) / "model.onnx").write_bytes(b"half")
    time.sleep(600)
exports.export_onnx = slow
load_encoder({str(tiny_st)!r}, backend="onnx", device="cpu", exports_dir={str(tmp_path)!r})
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.time() + 120
    try:
        while not list((tmp_path / "exports").glob(".*.tmp/*/model.onnx")) and time.time() < deadline:
            time.sleep(0.2)
        (temporary,) = (tmp_path / "exports").glob(".*.tmp")
        assert f"~{process.pid}." in temporary.name
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert temporary.is_dir()  # what a kill leaves
    encoder = load_encoder(str(tiny_st), backend="onnx", device="cpu", exports_dir=tmp_path)
    assert not temporary.exists() and [p.name for p in (tmp_path / "exports").iterdir()] == [encoder.export_key]
