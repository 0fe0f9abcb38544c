"""The generated reference pages (``docs/hooks.py``) list every command, flag, settings key and public name, and
every public name has a docstring example (which the doctest tier runs where the name is defined)."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embedscope_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command path and its parser, walked here independently of the hooks."""
    from embedscope.cli.main import build_parser

    found = []

    def walk(path: str, parser: argparse.ArgumentParser) -> None:
        found.append((path, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{path} {name}", sub)

    walk("embedscope", build_parser())
    return found


def test_the_cli_reference_lists_every_command_and_flag(hooks: ModuleType) -> None:
    page = hooks.cli_reference()
    sections = re.split(r"^#{2,4} `", page, flags=re.M)
    by_command = {s.split("`", 1)[0]: s for s in sections[1:]}
    parsers = _all_parsers()
    assert len(parsers) > 15
    assert set(by_command) == {path for path, _ in parsers}
    for path, parser in parsers:
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in by_command[path], f"{path}: {flag} is missing from the CLI reference"


@pytest.mark.slow
def test_the_settings_reference_lists_every_key_with_its_default(hooks: ModuleType) -> None:
    from embedscope.settings import RunSettings
    from embedscope.settings.run import ModelOptions

    page = hooks.settings_reference()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", page, flags=re.M)}
    for name, field in RunSettings.model_fields.items():
        assert name in rows, f"settings key {name} is missing from the reference"
        if isinstance(field.default, (int, str)) and not isinstance(field.default, bool):
            assert repr(field.default) in rows[name], f"{name}: default {field.default!r} not shown"
    for name in ModelOptions.model_fields:
        assert f"model_options.{name}" in rows
    assert rows["ray_workers"] and "`eval_config.eval.limits`" in rows["limits"]
    assert "`eval_config.models[].pooling_mode`" in rows["model_options.pooling"]


def test_the_api_reference_lists_exactly_all(hooks: ModuleType) -> None:
    import embedscope

    page = hooks.api_reference()
    listed = re.findall(r"^## `embedscope\.(\w+)`$", page, flags=re.M)
    assert listed == [n for n in embedscope.__all__ if n != "__version__"]
    assert len(re.findall(r"^::: ", page, flags=re.M)) == len(listed)


def test_every_public_name_imports_and_has_a_docstring_example() -> None:
    import embedscope

    for name in embedscope.__all__:
        value = getattr(embedscope, name)
        if name == "__version__":
            continue
        assert ">>> " in (value.__doc__ or ""), f"embedscope.{name} has no docstring example"


def test_the_verbs_are_the_functions_even_after_their_packages_are_imported() -> None:
    import embedscope.compare.core
    import embedscope.screen.run
    import embedscope.sweep.grid  # noqa: F401
    from embedscope import compare, register_engine, screen, sweep

    assert all(callable(f) for f in (compare, screen, sweep, register_engine))
    assert compare.__module__ == "embedscope.api" and screen.__module__ == "embedscope.screen.run"


def test_import_embedscope_loads_none_of_its_subpackages() -> None:
    import subprocess

    code = "import sys, embedscope; print(sorted(m for m in sys.modules if m.startswith('embedscope.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['embedscope.version']"


def test_the_nav_names_every_page_and_the_generated_ones(hooks: ModuleType) -> None:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for v in nav.values() for p in pages(v)]
        return []

    in_nav = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk | set(hooks.GENERATED) == in_nav
