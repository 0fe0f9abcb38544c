"""The fastbook study's paragraph strategies and window sizes, on hand-written documents: every expected
passage below is written out from the method note's definitions (fastbook-method.md, "The chunking
studies"), not computed by the code under test."""

from __future__ import annotations

import dataclasses
import json

import pytest

from embedscope.cli.main import main
from embedscope.data.documents import STUDY_REFERENCE, chunk_documents, halves, read_notebook, read_passages
from embedscope.errors import ConfigError
from embedscope.settings.run import ChunkingSettings


def _notebook(path, cells):
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


CELLS = [
    {"cell_type": "markdown", "source": ["# Chapter 1\n", "\n", "Intro <b>para</b>, one.\n", "\n", "Intro two."]},
    {"cell_type": "code", "source": "x = 1\nprint(x)", "outputs": [{"output_type": "stream", "text": ["1\n"]}]},
    {"cell_type": "code", "source": "y = 2", "outputs": []},
    {"cell_type": "raw", "source": "not read"},
    {"cell_type": "markdown", "source": "## Section A\nFirst under A.\n\nSecond under A!"},
    {"cell_type": "code", "source": "", "outputs": []},
    {
        "cell_type": "code",
        "source": "z",
        "outputs": [
            {"output_type": "execute_result", "data": {"text/plain": ["2"]}, "metadata": {}},
            {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}},
        ],
    },
    {"cell_type": "markdown", "source": "## Questionnaire\n\n1. What?"},
    {"cell_type": "markdown", "source": "### Further Research\n\nTry it."},
    {"cell_type": "markdown", "source": "## Afterword\n\nKept."},
]
CODE_X = "```python\nx = 1\nprint(x)\n```\n\nOutput:\n1"
CODE_Y = "```python\ny = 2\n```"
CODE_Z = "```python\nz\n```\n\nOutput:\n2"
A = [
    "# Chapter 1\n\nIntro <b>para</b>, one.",
    "# Chapter 1\n\nIntro two.",
    f"# Chapter 1\n\n{CODE_X}",
    f"# Chapter 1\n\n{CODE_Y}",
    "## Section A\n\nFirst under A.",
    "## Section A\n\nSecond under A!",
    f"## Section A\n\n{CODE_Z}",
    "## Afterword\n\nKept.",
]
B = [
    f"# Chapter 1\n\nIntro <b>para</b>, one.\n\nIntro two.\n\n{CODE_X}",
    f"# Chapter 1\n\n{CODE_Y}",
    f"## Section A\n\nFirst under A.\n\nSecond under A!\n\n{CODE_Z}",
    "## Afterword\n\nKept.",
]
EXPECTED = {
    "a": A,
    "b": B,
    "c": [a.split("\n\n", 1)[1] for a in A],
    "d": [b.split("\n\n", 1)[1] for b in B],
    "e": [B[0].replace("<b>", "").replace("</b>", ""), *B[1:]],
    "f": [
        "Chapter 1\n\nIntro para one\n\nIntro two\n\npython\nx  1\nprintx\n\n\nOutput\n1",
        "Chapter 1\n\npython\ny  2",
        "Section A\n\nFirst under A\n\nSecond under A\n\npython\nz\n\n\nOutput\n2",
        "Afterword\n\nKept",
    ],
}


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_each_strategy_on_a_hand_written_notebook(tmp_path, variant):
    path = _notebook(tmp_path / "01_intro.ipynb", CELLS)
    passages = chunk_documents(
        [path], ChunkingSettings(method=f"fastbook-paragraphs-{variant}", stop_at=None).options()
    )
    assert [p.text for p in passages] == EXPECTED[variant]
    assert [p.id for p in passages] == [f"01_intro-{n:04d}" for n in range(len(EXPECTED[variant]))]
    assert {p.chapter for p in passages} == {1}
    default = chunk_documents(
        [path], ChunkingSettings(method=f"fastbook-paragraphs-{variant}").options()
    )  # stops at the Questionnaire
    assert [p.text for p in default] == EXPECTED[variant][:-1]


def test_a_markdown_file_is_one_markdown_cell(tmp_path):
    (tmp_path / "02_notes.md").write_text("Before any header.\n\n# Part\ntext under\n\nmore\n\nthird\n\nfourth\n")
    passages = chunk_documents([tmp_path], ChunkingSettings(method="fastbook-paragraphs-b").options())
    assert [p.text for p in passages] == [
        "Before any header.",
        "# Part\n\ntext under\n\nmore\n\nthird",
        "# Part\n\nfourth",
    ]


def test_strategies_refuse_options_they_cannot_use(tmp_path, capsys):
    with pytest.raises(ConfigError, match="fixes its paragraphs and headers"):
        dataclasses.replace(STUDY_REFERENCE, method="fastbook-paragraphs-a", paragraphs=3)
    path = _notebook(tmp_path / "01_intro.ipynb", CELLS)
    out = tmp_path / "c.jsonl"
    assert main(["chunk", str(path), "-o", str(out), "--chunking", "fastbook-paragraphs-c", "--chunk-size", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert "drop --chunk-size" in err and len(err.splitlines()) == 1
    assert main(["chunk", str(path), "-o", str(out), "--chunking", "fastbook-paragraphs-c"]) == 0
    assert [p.text for p in read_passages(out)] == EXPECTED["c"][:-1]


def _long_notebook(path):
    sentences = [f"Sentence {i} explains how layer {i % 13} of the network learns feature {i * 7}." for i in range(600)]
    cells = [{"cell_type": "markdown", "source": " ".join(sentences[i : i + 20])} for i in range(0, 600, 20)]
    cells.insert(5, {"cell_type": "code", "source": "learn = vision_learner(dls, resnet34)\nlearn.fine_tune(1)"})
    return _notebook(path, cells)


# the study's overlaps, from the method note: 25 at 100 tokens, 64 from 256 up
@pytest.mark.slow
@pytest.mark.parametrize(("size", "overlap"), [(100, 25), (500, 64), (2000, 64)])
def test_window_sizes_follow_the_study(tmp_path, size, overlap):
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.utils import get_tokenizer

    path = _long_notebook(tmp_path / "04_long.ipynb")
    splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=get_tokenizer())
    expected = [c for piece in halves(read_notebook(path)) for c in splitter.split_text(piece) if c.strip()]
    passages = chunk_documents([path], ChunkingSettings(method="fastbook-reference", chunk_size=size).options())
    assert [p.text for p in passages] == expected
    count = get_tokenizer()
    assert max(len(count(p.text)) for p in passages) <= size


@pytest.mark.slow
def test_chunk_counts_fall_with_the_window_size_and_500_is_the_default(tmp_path, capsys):
    path = _long_notebook(tmp_path / "04_long.ipynb")
    counts = [
        len(chunk_documents([path], ChunkingSettings(method="fastbook-reference", chunk_size=n).options()))
        for n in (100, 500, 2000)
    ]
    assert counts[0] > counts[1] > counts[2] >= 2  # two halves at least
    out = tmp_path / "c.jsonl"
    assert main(["chunk", str(path), "-o", str(out), "--chunking", "fastbook-reference", "--chunk-size", "500"]) == 0
    assert read_passages(out) == chunk_documents([path], ChunkingSettings(method="fastbook-reference").options())
    assert main(["chunk", str(path), "-o", str(out), "--chunking", "fastbook-reference", "--chunk-size", "100"]) == 0
    assert len(read_passages(out)) == counts[0]
