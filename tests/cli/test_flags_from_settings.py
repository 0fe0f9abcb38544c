"""Every run option is declared once, on its settings field, and every command's settings flags come from there."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from embedscope.cli.main import build_parser
from embedscope.settings import RunSettings
from embedscope.settings.options import GROUPS, declared_options

CLI = Path(__file__).resolve().parents[2] / "src" / "embedscope" / "cli"


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


COMMANDS = {
    "run": ("run",),
    "sweep": ("sweep",),
    "screen": ("screen",),
    "compare": ("compare",),
    "eval": ("eval",),
    "chunk": ("chunk",),
    "fastbook run": ("fastbook", "run"),
    "fastbook export-beir": ("fastbook", "export-beir"),
}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    root = build_parser()
    return {name: _subparser(root, *path) for name, path in COMMANDS.items()}


def _leaf_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field path, walked independently of the declarations: nested settings models (one per field) by path."""
    from embedscope.engines.base import engine_names, engine_settings
    from embedscope.settings.run import ChunkingSettings, FusionSettings, ModelOptions, PipelineConfig

    nested = {
        "model_options": ModelOptions,
        "chunking": ChunkingSettings,
        "pipeline": PipelineConfig,
        "fusion": FusionSettings,
    }
    out: set[str] = set()
    for name in model.model_fields:
        if name in nested and (model is RunSettings or name == "fusion"):
            out |= _leaf_paths(nested[name], f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    if model is RunSettings:
        for engine in engine_names():
            out |= {f"engine.{engine}_{f}" for f in engine_settings(engine).model_fields if f != "name"}
    return out


def test_every_field_has_exactly_one_flag_or_a_reason_to_be_config_only() -> None:
    options = list(declared_options())
    assert {o.path for o in options} == _leaf_paths(RunSettings)
    assert len({o.path for o in options}) == len(options)
    for o in options:
        assert o.group in GROUPS, o.path
        assert o.help.strip(), f"{o.path}: no help text"
        if o.config_only:
            assert not o.flags and len(o.config_only) > 20, f"{o.path}: a config-only option gives its reason"
        else:
            assert o.flags and all(f.startswith("-") for f in o.flags), o.path
    spellings = [f for o in options for f in o.flags]
    assert len(spellings) == len(set(spellings)), "two options share a flag"
    for name in ("model_options.prompts", "model_options.normalize", "chunking.paragraphs", "verbosity"):
        assert any(o.path == name for o in options)


def test_every_settings_flag_of_every_command_maps_to_its_field_with_one_spelling_and_one_help() -> None:
    declared = {o.dest: o for o in declared_options() if not o.config_only}
    every_spelling = {f for o in declared.values() for f in o.flags} | {
        f"--{o.path.replace('_', '-')}" for o in declared.values() if "." not in o.path
    }
    for command, parser in _parsers().items():
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            option = declared.get(action.dest)
            if option is None:  # a flag of the command itself: it must not re-declare a setting by hand
                clash = set(action.option_strings) & every_spelling
                allowed = {"--benchmark"} if command.startswith("fastbook") else set()  # its benchmark JSON file
                assert not (clash - allowed), f"{command}: {clash} re-declares a setting by hand"
                continue
            expected = set(option.flags) | (
                {f.replace("--", "--no-", 1) for f in option.flags} if option.action == "boolean" else set()
            )
            assert set(action.option_strings) == expected, (command, action.option_strings)
            assert action.help == option.help, (command, action.dest)


def test_run_sweep_and_screen_print_the_same_line_for_each_shared_option() -> None:
    parsers = _parsers()
    helps = {
        name: {a.dest: (tuple(a.option_strings), a.help, a.metavar) for a in parsers[name]._actions}
        for name in ("run", "sweep", "screen")
    }
    declared = {o.dest for o in declared_options()}
    for a, b in (("run", "sweep"), ("run", "screen"), ("sweep", "screen")):
        shared = set(helps[a]) & set(helps[b]) & declared
        assert shared, (a, b)
        for dest in shared:
            assert helps[a][dest] == helps[b][dest], (a, b, dest)
    assert {"tasks", "output_folder"} <= set(helps["sweep"]) & set(helps["screen"])


def test_the_cli_declares_only_the_flags_that_are_not_settings() -> None:
    calls = sum(len(re.findall(r"\badd_argument\(", p.read_text(encoding="utf-8"))) for p in CLI.glob("*.py"))
    assert calls <= 92  # 170 before the settings flags were generated; the rest are each command's own flags (95, then
    # results/gate/serve: 17 of their own; the run filters from RunFilter); 112 before the statistics and screen options
    # were declared as settings (StatisticsSettings, ScreenSettings: 27 hand-written flags fewer), then inspect's 6;
    # run --dry-run 1 (a mode of the command, like --print-settings: a setting would reach sweep and screen too)


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["run", "--rescore", "4"], "rescore_multiplier", "4"),
        (["run", "--chunk-overlap", "10"], "chunking__overlap", "10"),
        (["run", "--devices", "cpu"], "device", "cpu"),
        (["run", "-m", "bm25"], "model", "bm25"),
        (["eval", "-m", "minilm", "--dataset", "d.csv"], "model", "minilm"),
        (
            ["fastbook", "run", "--benchmark", "b", "--passages", "p", "--chunk-size", "100"],
            "chunking__chunk_size",
            "100",
        ),
    ],
)
def test_todays_spellings_are_kept(argv: list[str], dest: str, value: str) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == value
