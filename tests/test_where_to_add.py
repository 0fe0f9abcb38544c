"""docs/architecture.md's "where to add" table is true: a toy engine and a toy table format are each added here, in
this one file (the number of files the table states for a plugin), and work from every entry point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

import embedscope
from embedscope.cli.main import main
from embedscope.data.tables import register_table_format, unregister_table_format
from embedscope.engines import EngineSettings, register_engine
from embedscope.engines.base import unregister_engine
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import TINY_CORPUS, TINY_QRELS, TINY_QUERIES

BUILT: list[dict[str, Any]] = []


class EchoEngine(EngineSettings):
    """A toy engine: a keyword encoder in this process, whose vectors are scaled by ``scale``."""

    name: Literal["echo"] = "echo"
    scale: float = Field(1.0, gt=0, description="how much the toy engine scales its vectors")

    def devices(self, spec: str | None) -> list[str]:
        return ["cpu"]

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        BUILT.append({"spec": spec, "scale": self.scale, "devices": devices})
        return KeywordEncoder(["cat", "dog", "fish"], name=f"toy/{spec}")


@pytest.fixture
def echo_engine() -> Iterator[None]:
    register_engine(EchoEngine)
    BUILT.clear()
    yield
    unregister_engine("echo")


def test_a_toy_engine_is_one_module_and_one_registration(echo_engine, tmp_path, capsys):
    from embedscope.testing.tiny import tiny_retrieval_task

    report = embedscope.evaluate(
        "m", [tiny_retrieval_task()], engine="echo", echo_scale=2.5, output_folder=tmp_path, cache=False
    )
    assert BUILT == [{"spec": "m", "scale": 2.5, "devices": ["cpu"]}] and report.outcomes[0].result.main_score() == 1.0
    assert main(["run", "--engine", "echo", "--echo-scale", "3", "--print-settings"]) == 0
    assert '{"name": "echo", "scale": 3.0}' in capsys.readouterr().out
    assert main(["run", "--echo-scale", "3", "--print-settings"]) == 2
    assert "--echo-scale applies to the echo engine only" in capsys.readouterr().err
    assert main(["run", "--engine", "echo", "--echo-scale", "0", "--print-settings"]) == 2
    assert "--echo-scale: Input should be greater than 0" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("engine: echo\necho_scale: 4\n")
    assert main(["run", "--config", str(config), "--print-settings"]) == 0
    assert '{"name": "echo", "scale": 4.0}' in capsys.readouterr().out


def _pipe_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A toy table format: ``|``-separated cells under a header line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("|")
    for n, line in enumerate(lines[1:], start=2):
        yield f"{path}, line {n}", dict(zip(header, line.split("|")))


@pytest.fixture
def pipe_format() -> Iterator[None]:
    register_table_format(".pipe", _pipe_rows)
    yield
    unregister_table_format(".pipe")


def _write_pipe(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("|".join(map(str, r)) for r in [header, *rows]) + "\n")
    return path


def test_a_toy_table_format_is_read_by_every_loader(pipe_format, tmp_path):
    beir = tmp_path / "beir"
    _write_pipe(beir / "corpus.pipe", ["_id", "text"], [[k, v] for k, v in TINY_CORPUS.items()])
    _write_pipe(beir / "queries.pipe", ["_id", "text"], [[k, v] for k, v in TINY_QUERIES.items()])
    qrels = [[q, d, s] for q, docs in TINY_QRELS.items() for d, s in docs.items()]
    _write_pipe(beir / "qrels" / "test.pipe", ["query-id", "corpus-id", "score"], qrels)
    encoder = KeywordEncoder(["cat", "dog", "fish"])
    report = embedscope.evaluate(encoder, [str(beir)], output_folder=tmp_path / "o", cache=False)
    assert report.outcomes[0].result.main_score() == 1.0

    pairs = _write_pipe(
        tmp_path / "pairs.pipe",
        ["sentence1", "sentence2", "score"],
        [["cat", "cat cat", 5], ["dog", "fish", 0], ["fish", "fish", 4], ["cat", "dog", 1]],
    )
    sts = embedscope.evaluate(encoder, [f"sts:{pairs}"], output_folder=tmp_path / "o2", cache=False)
    assert sts.outcomes[0].task.type == "STS" and sts.outcomes[0].result.main_score() > 0

    from embedscope.data.hub_files import read_dataset

    hub = _write_pipe(tmp_path / "hub" / "test.pipe", ["text", "label"], [["a", 0], ["b", 1]])
    assert read_dataset([hub]).to_list() == [{"text": "a", "label": "0"}, {"text": "b", "label": "1"}]
    assert json.dumps(sorted(TINY_QUERIES))  # the tiny data the loaders read
