"""A screen checks everything it will need before its first model runs, in one pass that names every problem, and
refuses one model given twice under two spellings (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.screen import run as screen_module
from embedscope.testing.tiny import write_tiny_beir


@pytest.fixture()
def runs(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(screen_module, "run_one", lambda settings: calls.append(settings) or 1 / 0)
    return calls


def _screen(tmp_path: Path, *extra: str) -> list[str]:
    data = write_tiny_beir(tmp_path / "data")
    return ["screen", "--tasks", str(data), "--fast", "bf16", "--output-folder", str(tmp_path / "out"), *extra]


@pytest.mark.parametrize("spellings", [("./tiny", "tiny/"), ("tiny", "{root}/tiny"), ("minilm", "MiniLM")])
def test_one_model_under_two_spellings_is_refused_in_one_line(tmp_path, monkeypatch, capsys, runs, spellings):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()
    models = [s.format(root=tmp_path) for s in spellings]
    assert main([*_screen(tmp_path), "--models", *models]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one model given twice" in err and all(m in err for m in models)
    assert runs == []


def test_a_bad_output_path_a_missing_model_a_calibration_file_and_a_bad_seed_are_named_together(tmp_path, capsys, runs):
    (tmp_path / "m1").mkdir()
    (tmp_path / "report.json").mkdir()
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"model_options": {"calibration": str(tmp_path / "cal.txt")}}))
    argv = _screen(tmp_path, "--config", str(config), "--json", str(tmp_path / "report.json"), "--seed", "-1")
    assert main([*argv, "--models", str(tmp_path / "m1"), "./missing-model"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    for named in ("--seed -1", "--json", "report.json is a folder", "./missing-model: no such file", "calibration"):
        assert named in err, named
    assert runs == []  # no model ran
    assert not (tmp_path / "out").exists()
