"""``embedscope screen``: the command runs the library's screen, writes JSON and CSV, and refuses in one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.screen.run import DTYPE_FAST_PATHS
from embedscope.testing.tiny import write_tiny_beir


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    from support.tiny_models import build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("screen-cli")
    models = [str(build_tiny_sentence_transformer(root / f"m{seed}", seed=seed)) for seed in range(3)]
    return models, str(write_tiny_beir(root / "tiny"))


def _args(models: list[str], task: str, folder: Path, *extra: str) -> list[str]:
    return [
        "screen",
        "--models",
        *models,
        "--tasks",
        task,
        "--output-folder",
        str(folder / "out"),
        "--cache-dir",
        str(folder / "cache"),
        "--rounds",
        "500",
        *extra,
    ]


@pytest.mark.slow
def test_screen_prints_both_rankings_and_writes_json_and_csv(setup, tmp_path, capsys) -> None:
    models, task = setup
    json_file, csv_file = tmp_path / "screen.json", tmp_path / "screen.csv"
    code = main(
        _args(
            models, task, tmp_path, "--fast", "bf16", "--confirm", "1", "--json", str(json_file), "--csv", str(csv_file)
        )
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "fast mean [95% CI]" in out and "exact mean [95% CI]" in out and "Kendall's τ" in out
    assert "wall time (measured): fast pass" in out
    record = json.loads(json_file.read_text())
    assert record["fast_path"] == "bf16" and record["tasks"] == ["tiny"]
    rows = list(csv.DictReader(io.StringIO(csv_file.read_text())))
    assert [r["model"] for r in rows] == [m["model"] for m in record["models"]]
    assert [r["model"] for r in rows if r["confirmed"] == "True"] == [
        m["model"] for m in record["models"] if m["model"] in record["confirmed"]
    ]
    for r, m in zip(rows, record["models"]):
        assert float(r["fast_mean"]) == m["fast"]["mean"]
        assert m["fast_folder"] and "experiments" in m["fast_folder"]
    assert record["significance"] in out


@pytest.mark.slow
def test_screen_with_a_config_file_takes_its_settings(setup, tmp_path, capsys) -> None:
    models, task = setup
    config = tmp_path / "base.yaml"
    config.write_text(f"batch_size: 2\ntasks: [{task}]\noutput_folder: {tmp_path / 'from-config'}\n")
    code = main(
        [
            "screen",
            "--models",
            *models[:2],
            "--config",
            str(config),
            "--fast",
            "bf16",
            "--no-fidelity",
            "--rounds",
            "200",
        ]
    )
    assert code == 0
    assert (tmp_path / "from-config").is_dir()
    assert "screen: 2 models on fast path bf16" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--confirm", "0"], "--confirm: Input should be greater than or equal to 1"),
        (["--confirm", "two"], "--confirm: Input should be a valid integer"),
        (["--fast", "nope"], "--fast: Unknown fast path 'nope'"),
        (["--fast", "future"], "--fast future: this embedscope cannot run it"),
    ],
)
@pytest.mark.slow
def test_screen_refuses_in_one_line(setup, tmp_path, capsys, monkeypatch, extra, message) -> None:
    models, task = setup
    monkeypatch.setitem(DTYPE_FAST_PATHS, "future", ({"backend": "no-such-backend"}, 9, "torch", "torch"))
    assert main(_args(models[:2], task, tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_screen_needs_two_models(setup, tmp_path, capsys) -> None:
    models, task = setup
    assert main(_args(models[:1], task, tmp_path, "--fast", "bf16")) == 2
    assert "at least two models" in capsys.readouterr().err
