"""Errors speak the user's language (issue 27): a layer below ``settings/`` names a setting by its key
(:class:`~embedscope.errors.SettingError`), and the entry layer names it as the user gave it — the flag on the command
line, the file and key path in a config file, the keyword of ``evaluate()``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.errors import ConfigError, SettingError
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import write_tiny_beir

SRC = Path(__file__).resolve().parents[2] / "src" / "embedscope"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_tiny_beir(tmp_path / "data")


def _cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# (flag argv, config-file text, evaluate() keywords, the key) of one error a layer below settings/ raises
CASES = {
    "task_params at run time (tasks/params.py)": (
        ["--model", "bm25", "--task-param", "nosuch=1"],
        "model: bm25\ntask_params:\n  nosuch: 1\n",
        {"task_params": {"nosuch": 1}},
        ("--task-param", "task_params"),
    ),
    "chunking while settings are checked (data/documents.py)": (
        ["--model", "bm25", "--chunking", "tokens", "--chunk-overlap", "600"],
        "model: bm25\nchunking:\n  method: tokens\n  overlap: 600\n",
        {"chunking": {"method": "tokens", "overlap": 600}},
        ("--chunk-overlap", "chunking.overlap"),
    ),
    "latency_sample on a pipeline (evaluation/runner.py)": (
        ["--model", "bm25", "--latency-sample", "2"],
        "model: bm25\nlatency_sample: 2\n",
        {"latency_sample": 2},
        ("--latency-sample", "latency_sample"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_error_names_the_flag_the_file_and_key_or_the_keyword(case, data, tmp_path, capsys):
    argv, text, keywords, (flag, key) = CASES[case]
    common = ["--tasks", str(data), "--output-folder", str(tmp_path / "out"), "--no-cache"]
    by_flag = _cli_error(capsys, ["run", *argv, *common])
    assert flag in by_flag and key not in by_flag.replace(flag, "")

    config = tmp_path / "c.yaml"
    config.write_text(text)
    by_file = _cli_error(capsys, ["run", "--config", str(config), "--tasks", str(data), *common[2:]])
    assert f"{config}: {key}" in by_file and flag not in by_file

    model = "bm25" if "latency" in case else KeywordEncoder(["cat", "dog"])
    with pytest.raises(ConfigError) as raised:
        embedscope.evaluate(model, [str(data)], output_folder=tmp_path / "api", cache=False, **keywords)
    message = str(raised.value)
    assert key in message and "--" not in message and str(config) not in message
    # the same sentence, each way: only the setting's name differs
    assert by_flag.split(flag, 1)[1][:30] == message.split(key, 1)[1][:30]


def test_a_setting_error_names_each_setting_it_mentions():
    e = SettingError("chunking.overlap", "{chunking.overlap} 9 must be smaller than {chunking.chunk_size} 5")
    assert (e.key, e.keys()) == ("chunking.overlap", ["chunking.overlap", "chunking.chunk_size"])
    assert (
        e.named({"chunking.overlap": "--chunk-overlap"}.get)
        == "--chunk-overlap 9 must be smaller than chunking.chunk_size 5"
    )
    assert isinstance(e, ConfigError) and str(e) == "chunking.overlap 9 must be smaller than chunking.chunk_size 5"


FLAG = re.compile(r"""["'][^"'\n]*(?<![\w-])--[a-z][a-z-]+""")
ALLOWED = ("--repo-type", "--local-dir", "--revision", "--name", "--benchmarks")  # another tool's or command's flags


def test_no_flag_spelling_in_the_messages_below_settings():
    """Layers below settings/ never spell a flag (another program's, such as huggingface-cli, excepted)."""
    found = []
    for package in ("data", "models", "retrieval", "metrics", "tasks"):
        for path in sorted((SRC / package).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in FLAG.finditer(line):
                    flag = re.search(r"--[a-z][a-z-]+$", match.group()).group()  # type: ignore[union-attr]
                    if flag not in ALLOWED:
                        found.append(f"{path.relative_to(SRC)}:{n}: {flag}")
    assert not found, "flag spellings below settings/:\n" + "\n".join(found)
