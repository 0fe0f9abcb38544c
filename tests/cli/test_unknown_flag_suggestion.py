"""An unknown flag ends in one line from the command that met it, with the nearest spelling it has (exit 2).
Parse-only and in-process: no model, no data."""

from __future__ import annotations

import pytest

from embedscope.cli.main import build_parser, main


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """The commands' modules imported once (each test then builds its parser in a few hundredths of a second)."""
    build_parser()


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("typo", ["--topk", "--top_k", "--top-kk"])
def test_a_typo_gets_the_nearest_spelling(typo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _refusal(["run", typo, "5"], capsys) == (
        f"embedscope run: error: unrecognized arguments: {typo} 5; did you mean --top-k? (see 'embedscope run --help')"
    )


def test_the_form_with_an_equals_sign_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert _refusal(["run", "--batchsize=8"], capsys).startswith(
        "embedscope run: error: unrecognized arguments: --batchsize=8; did you mean --batch-size?"
    )


def test_a_sub_command_names_itself_and_its_own_flags(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fastbook", "export-beir", "--benchmark", "b.json", "--notebooks", "nb", "-o", "beir", "--chunk-sise", "9"]
    assert _refusal(argv, capsys) == (
        "embedscope fastbook export-beir: error: unrecognized arguments: --chunk-sise 9; did you mean --chunk-size? "
        "(see 'embedscope fastbook export-beir --help')"
    )


def test_several_typos_each_get_theirs(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["run", "--topk", "5", "--batchsize", "8"], capsys)
    assert line == (
        "embedscope run: error: unrecognized arguments: --topk 5 --batchsize 8; "
        "did you mean --top-k for --topk, --batch-size for --batchsize? (see 'embedscope run --help')"
    )


def test_a_typo_of_an_old_spelling_gets_todays(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["chunk", "notes.md", "-o", "c.jsonl", "--methd", "paragraphs"], capsys)
    assert "; did you mean --chunking? (see 'embedscope chunk --help')" in line


def test_the_top_command_suggests_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert _refusal(["--verbsoe", "run"], capsys) == (
        "embedscope: error: unrecognized arguments: --verbsoe; did you mean --verbose? (see 'embedscope --help')"
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "--frobnicate", "5"], "embedscope run: error: unrecognized arguments: --frobnicate 5"),
        (["chunk", "n.md", "-o", "c.jsonl", "--zzz"], "embedscope chunk: error: unrecognized arguments: --zzz"),
    ],
)
def test_a_flag_with_no_close_match_gets_no_guess(argv: list[str], line: str, capsys) -> None:
    assert _refusal(argv, capsys) == f"{line} (see '{line.split(': ')[0]} --help')"


def test_a_stray_value_is_no_flag(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["chunk", "n.md", "-o", "c.jsonl", "--chunk-size", "5", "-3"], capsys)
    assert "did you mean" not in line
