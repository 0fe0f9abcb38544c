"""A flag or config key renamed in a release keeps working for a release: declared once, on its option
(``option(..., renamed_from=(...))``), it is taken exactly as today's spelling, with one note naming it, and it stays
out of ``--help`` and the reference. Parse-only and in-process: no model, no data."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from embedscope.cli.main import build_parser, main
from embedscope.cli.settings_flags import old_spellings, renamed_flags, settings_layer
from embedscope.errors import ConfigError
from embedscope.settings import build_settings
from embedscope.settings.files import config_layer
from embedscope.settings.options import declared_options

ROOT = Path(__file__).resolve().parents[2]

# What the history shows (f986061: chunk's and fastbook's chunking flags took the settings' spellings; 25944ee moved
# the tests to them). No config key has been renamed: every key of a config file of earlier releases is a key today.
RENAMED_IN_F986061 = {
    "--method": "--chunking",
    "--no-headers": "--no-chunk-headers",
    "--overlap": "--chunk-overlap",
    "--paragraphs": "--chunk-paragraphs",
    "--stop-at": "--chunk-stop-at",
    "--tokenizer": "--chunk-tokenizer",
}
# The commands that had the old spellings, and what each needs besides.
COMMANDS = {
    "chunk": ["chunk", "notes.md", "-o", "corpus.jsonl"],
    "fastbook run": ["fastbook", "run", "--benchmark", "b.json", "--passages", "p.jsonl", "--retriever", "bm25"],
    "fastbook export-beir": ["fastbook", "export-beir", "--benchmark", "b.json", "--notebooks", "nb", "-o", "beir"],
}
# A value each renamed option takes, and the flags it needs to act (paragraph options act with paragraphs).
VALUES: dict[str, tuple[list[str], list[str]]] = {
    "chunking.method": (["paragraphs"], []),
    "chunking.overlap": (["3"], ["--chunking", "tokens"]),
    "chunking.tokenizer": (["cl100k_base"], []),
    "chunking.paragraphs": (["2"], ["--chunking", "paragraphs"]),
    "chunking.keep_headers": ([], ["--chunking", "paragraphs"]),
    "chunking.stop_at": (["END"], []),
}
RENAMES = [(o.path, old, new) for o in declared_options() for old, new in old_spellings(o).items()]


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for name in command.split():
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _settings(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[dict[str, Any], Any]:
    """The settings layer the flags give, and the settings built over the command's default chunking."""
    from embedscope.settings import Layer

    args = parser.parse_args(argv)
    layer = settings_layer(args)
    base = Layer("defaults", {"chunking": {"method": args.default_chunking}}, "api")
    return layer.values, build_settings([base, layer])


def test_every_rename_of_the_history_is_declared() -> None:
    declared = {old: new for _, old, new in RENAMES}
    assert RENAMED_IN_F986061.items() <= declared.items()
    assert {path for path, _, _ in RENAMES} <= set(VALUES), "give a renamed option a value here"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("path", "old", "new"), RENAMES, ids=[old for _, old, _ in RENAMES])
def test_the_old_spelling_gives_the_same_settings_with_one_note(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], command: str, path: str, old: str, new: str
) -> None:
    value, needs = VALUES[path]
    base = COMMANDS[command] + needs
    today = _settings(parser, [*base, new, *value])
    assert capsys.readouterr().err == ""
    assert _settings(parser, [*base, old, *value]) == today
    assert capsys.readouterr().err.splitlines() == [f"embedscope: note: {old} is now {new}"]
    if value:  # --old=VALUE too
        assert _settings(parser, [*base, f"{old}={value[0]}"]) == today
        assert capsys.readouterr().err.splitlines() == [f"embedscope: note: {old} is now {new}"]


def test_the_reported_command_runs_as_with_the_new_spellings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "01_intro.md"
    notes.write_text("# Intro\n\nFirst paragraph.\n\n## Part\n\nSecond paragraph.\n", encoding="utf-8")
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    assert main(["chunk", str(notes), "-o", str(new), "--chunking", "paragraphs", "--no-chunk-headers"]) == 0
    assert "note" not in capsys.readouterr().err
    assert main(["chunk", str(notes), "-o", str(old), "--method", "paragraphs", "--no-headers"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "embedscope: note: --method is now --chunking",
        "embedscope: note: --no-headers is now --no-chunk-headers",
    ]
    assert old.read_text(encoding="utf-8") == new.read_text(encoding="utf-8")
    assert "Intro" not in new.read_text(encoding="utf-8")  # the headers were dropped


def test_an_old_spelling_given_twice_is_noted_once(parser: argparse.ArgumentParser, capsys) -> None:
    args = parser.parse_args([*COMMANDS["chunk"], "--overlap", "3", "--overlap", "4"])
    assert args.chunking__overlap == "4"
    assert capsys.readouterr().err.count("note") == 1


@pytest.mark.parametrize("command", [*COMMANDS, "run", "sweep", "screen"])
def test_old_spellings_stay_out_of_help_and_the_reference(parser: argparse.ArgumentParser, command: str) -> None:
    sub = _subparser(parser, command)
    taken = renamed_flags(sub)
    own = {s for a in sub._actions for s in a.option_strings}  # what --help and the CLI reference list
    if command in COMMANDS:
        assert set(RENAMED_IN_F986061) <= set(taken)
    assert not set(taken) & own
    text = sub.format_help()
    for old in taken:
        assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text), (command, old)


def test_an_old_spelling_that_is_another_option_of_today_keeps_its_meaning(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --tokenizer`` and ``eval --tokenizer`` are the model's tokenizer, as they were."""
    assert "--tokenizer" not in renamed_flags(_subparser(parser, "run"))
    args = parser.parse_args(["run", "--tokenizer", "t.json"])
    assert settings_layer(args).values == {"model_options": {"tokenizer": "t.json"}}
    args = parser.parse_args(["eval", "-m", "minilm", "--dataset", "d.csv", "--tokenizer", "t.json"])
    assert settings_layer(args).values == {"model": "minilm", "model_options": {"tokenizer": "t.json"}}
    assert capsys.readouterr().err == ""


def test_a_value_after_the_end_of_flags_is_left_alone(parser: argparse.ArgumentParser, capsys) -> None:
    args = parser.parse_args(["chunk", "-o", "c.jsonl", "--", "--method"])
    assert args.paths == ["--method"] and not hasattr(args, "chunking__method")
    assert capsys.readouterr().err == ""


def test_the_changelog_lists_every_renamed_flag() -> None:
    text = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    table = text.split("## Renamed in earlier releases", 1)[1]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ")]
    for _, old, new in RENAMES:
        if old.startswith("--no-") and old.replace("--no-", "--", 1) in RENAMED_IN_F986061:
            continue  # a boolean's --no- form goes with its flag
        assert any(old in was and new in now for was, now in rows), f"{old} -> {new} is not in the changelog's table"


# -- config keys ----------------------------------------------------------------------------------------------


def _method_meta() -> dict[str, Any]:
    from embedscope.settings.run import ChunkingSettings

    extra = ChunkingSettings.model_fields["method"].json_schema_extra
    assert isinstance(extra, dict)
    return extra["option"]  # type: ignore[return-value]


def _key_renames() -> list[tuple[str, str]]:
    return [(old, o.path) for o in declared_options() for old in o.old_keys]


def _at(path: str, value: Any) -> dict[str, Any]:
    tree: Any = value
    for part in reversed(path.split(".")):
        tree = {part: tree}
    return tree


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _check_key_rename(old: str, new: str, value: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    given = _at(old, value)
    kept = repr(given)
    today = build_settings([config_layer(_at(new, value))])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        layer = config_layer(given)
    assert [r.getMessage() for r in caplog.records] == [f"config: key {old} is now {new}"]
    assert repr(given) == kept, "the caller's mapping is left as it was"
    assert build_settings([layer]).model_dump() == today.model_dump()
    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump(given), encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert build_settings([config_layer(file)]).model_dump() == today.model_dump()
    assert [r.getMessage() for r in caplog.records] == [f"{file}: key {old} is now {new}"]
    with pytest.raises(ConfigError, match=re.escape(f"{old} is the old spelling of {new}, and both are given")):
        config_layer(_merged(_at(new, value), given))


def test_every_renamed_config_key_works_as_todays_with_its_note(caplog, tmp_path: Path) -> None:
    for old, new in _key_renames():  # none so far: no config key has been renamed in the history
        option = next(o for o in declared_options() if o.path == new)
        _check_key_rename(old, new, option.default, caplog, tmp_path)


def test_a_config_key_declared_renamed_is_read_as_todays(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The mechanism, on a rename declared for the test: the config reader derives it from the declaration."""
    monkeypatch.setitem(_method_meta(), "renamed_from", ["--method", "chunking.split"])
    assert ("chunking.split", "chunking.method") in _key_renames()
    _check_key_rename("chunking.split", "chunking.method", "paragraphs", caplog, tmp_path)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert config_layer({"chunking": {"method": "paragraphs"}}).values == {"chunking": {"method": "paragraphs"}}
    assert not caplog.records
