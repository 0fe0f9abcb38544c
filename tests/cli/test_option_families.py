"""The second option family declared like the first: the statistics and screen options are fields of
StatisticsSettings and ScreenSettings, and every command's flags for them are generated from those fields."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import build_parser, main
from embedscope.errors import ConfigError
from embedscope.settings.options import FAMILY_GROUPS, declared_options
from embedscope.settings.screen import ScreenSettings
from embedscope.settings.statistics import StatisticsSettings

CLI = Path(__file__).resolve().parents[2] / "src" / "embedscope" / "cli"
FAMILIES = {"statistics": StatisticsSettings, "screen": ScreenSettings}
# each command and the statistics options that act in it (sweep tests against its best point: no interval of its own)
STATISTICS_ON = {
    ("compare",): {"test", "rounds", "seed", "correction", "alpha", "confidence", "digits"},
    ("gate",): {"test", "rounds", "seed", "correction", "alpha", "confidence", "digits"},
    ("report",): {"test", "rounds", "seed", "correction", "alpha", "confidence", "digits"},
    ("screen",): {"test", "rounds", "seed", "correction", "alpha", "confidence", "digits"},
    ("sweep",): {"test", "rounds", "seed", "correction"},
}


def _subparser(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_each_family_field_is_one_declared_option_with_a_flag_and_a_help() -> None:
    for group, root in FAMILIES.items():
        options = list(declared_options(root))
        assert {o.path for o in options} == set(root.model_fields)
        for o in options:
            assert o.group == group and group in FAMILY_GROUPS
            assert o.flags and o.help.strip(), o.path


@pytest.mark.parametrize(("path", "paths"), STATISTICS_ON.items())
def test_every_command_takes_the_statistics_flags_from_their_declaration(path, paths) -> None:
    declared = {o.dest: o for o in declared_options(StatisticsSettings)}
    actions = {a.dest: a for a in _subparser(*path)._actions if a.dest in declared}
    assert set(actions) == paths
    for dest, action in actions.items():
        assert tuple(action.option_strings) == declared[dest].flags
        assert action.help == declared[dest].help
        assert action.default is argparse.SUPPRESS  # only the flags given become a layer


def test_the_screen_flags_come_from_screen_settings() -> None:
    declared = {o.dest: o for o in declared_options(ScreenSettings)}
    actions = {a.dest: a for a in _subparser("screen")._actions if a.dest in declared}
    assert set(actions) == set(declared)
    assert all(actions[d].option_strings == list(declared[d].flags) for d in declared)


def test_no_command_spells_a_family_flag_by_hand() -> None:
    flags = {f for root in FAMILIES.values() for o in declared_options(root) for f in o.flags}
    for source in CLI.glob("*.py"):
        written = set(re.findall(r"add_argument\(\s*\"(--[a-z-]+)\"", source.read_text(encoding="utf-8")))
        assert not written & flags, (source.name, written & flags)


def test_a_commands_own_defaults_are_used_and_shown_in_the_reference() -> None:
    from embedscope.cli.report import statistics_settings

    gate = _subparser("gate")
    assert statistics_settings(gate.parse_args(["a", "b"])).test == "t-test"  # the gate's paired t-test
    assert statistics_settings(_subparser("compare").parse_args(["a", "b"])).test == "permutation"
    assert statistics_settings(_subparser("report").parse_args(["a"])).digits == 3
    shown = {a.dest: a.declared_default for a in gate._actions if hasattr(a, "declared_default")}
    assert shown["test"] == "t-test" and shown["rounds"] == 10_000 and shown["digits"] == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "a", "b", "--alpha", "2"], "--alpha: Input should be less than 1"),
        (["compare", "a", "b", "--rounds", "0"], "--rounds: Input should be greater than or equal to 1"),
        (["gate", "a", "b", "--test", "wilcoxon"], "--test: Input should be 'permutation', 't-test' or 'bootstrap'"),
        (["report", "a", "--digits", "12"], "--digits: Input should be less than or equal to 10"),
        (["report", "a", "--correction", "bonferroni"], "--correction: for the HTML report only"),
        (["screen", "--models", "bm25", "--tie-margin", "0.01"], "--tie-margin applies to a screen with --proxy"),
        (["screen", "--models", "bm25", "--proxy", "10", "--confirm", "2"], "--confirm: with --proxy the rounds"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_flag(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_python_api_is_told_in_keywords(tmp_path) -> None:
    with pytest.raises(ConfigError, match="^tie_margin applies to a screen with proxy: give proxy too"):
        embedscope.screen(["bm25", "fts5"], tie_margin=0.01, output_folder=tmp_path)
    with pytest.warns(DeprecationWarning, match="tie_margin"), pytest.raises(ConfigError, match="^tie_margin"):
        embedscope.screen(["bm25", "fts5"], margin=0.01, output_folder=tmp_path)  # the old keyword, renamed
    with pytest.raises(ConfigError, match="^proxy 20 10: give growing sizes"):
        embedscope.screen(["bm25", "fts5"], proxy=[20, 10], output_folder=tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_screen_config_file_holds_the_families_in_sections_and_flags_override_them(tmp_path, capsys) -> None:
    from embedscope.cli.report import statistics_settings
    from embedscope.cli.settings_flags import family_settings
    from embedscope.settings.files import config_layer, family_layers

    config = tmp_path / "c.yaml"
    config.write_text("top_k: 5\nscreen:\n  proxy: [0.05, 0.2]\n  tie_margin: 0.01\nstatistics:\n  rounds: 500\n")
    args = _subparser("screen").parse_args(["--config", str(config), "--rounds", "700"])
    base, sections = family_layers(config_layer(str(config)), "screen", "statistics")
    assert base.values == {"top_k": 5}
    screen = family_settings(args, ScreenSettings, over=sections["screen"])
    assert screen.proxy == [0.05, 0.2] and screen.margin == 0.01
    assert statistics_settings(args, over=sections["statistics"]).rounds == 700  # the flag over the file
    config.write_text("screen:\n  tie_margin: 0.01\n")
    assert main(["screen", "--models", "bm25", "fts5", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"embedscope: error: {config}: screen.tie_margin applies to a screen with --proxy: give --proxy too, or drop it"
    )
