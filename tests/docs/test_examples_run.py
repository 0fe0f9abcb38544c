"""Every example in the README and the documentation runs, or says why it cannot run here.

A page is read as a sequence of fenced blocks. A block preceded by ``<!-- not-run: REASON -->`` is not executed (a
GPU, a Ray cluster, the hub, a download); every other block is:

* a block with a ``title="PATH"``: a file the page shows. It is written to PATH in the page's folder before the
  commands that follow it; when PATH is a file of this repository (``examples/…``) it must equal that file (as YAML);
* ``bash``: each ``embedscope …`` command is run in-process (``embedscope.cli.main.main``) in a temporary folder, with
  the embedding cache there too, and must exit 0; a runnable block holds embedscope commands only;
* ``python``: executed in that folder;
* an untitled ``text`` block right after a line ending in "prints" or "prints:": the output of the commands just run
  must contain each of its lines.

Fast tier: every ``embedscope`` command of every block (not-run ones included) is parsed by the real parser — a
renamed flag or command fails here; every Python block compiles; every YAML file the pages show is a valid config or
sweep file of embedscope (or EvalScope), so a renamed settings key fails too. Slow tier: every page's runnable blocks run, in order, with run-like commands given
``--limits 20`` when they set no limits (``--set limits=20`` for a sweep), so the whole built-in suite is not encoded.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)(.*)$")
TITLE = re.compile(r'title="([^"]+)"')
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.+?)\s*-->$")
EMBEDSCOPE = ("embedscope", ".venv/bin/embedscope")
LIMITED = {"run", "screen", "compare", "eval"}  # commands that encode: given --limits when they set none


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    title: str | None
    code: str
    not_run: str | None  # the reason, or None when the block runs
    shows_output: bool  # a text block after "… prints:"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with the marker and the prose line before each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        lang, info = match.group(1), match.group(2)
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        before = [line.strip() for line in lines[:start] if line.strip()]
        marker = NOT_RUN.match(before[-1]) if before else None
        title = TITLE.search(info)
        prose = before[-1] if before else ""
        blocks.append(
            Block(
                page,
                start + 1,
                lang,
                title.group(1) if title else None,
                "\n".join(body) + "\n",
                marker.group(1) if marker else None,
                lang == "text" and not title and prose.rstrip(":").endswith("prints"),
            )
        )
        i += 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in read_blocks(page)]


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a bash block as argv lists: continuation lines joined, comments dropped, ``&&``/``;``/``|``
    split, simple ``NAME="…"`` assignments and a ``for V in A B …; do`` loop's first value substituted, ``...``
    placeholders dropped."""
    text = code.replace("\\\n", " ")
    variables: dict[str, str] = {}
    commands: list[list[str]] = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assignment = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", words[0])
        if assignment and len(words) == 1:
            variables[assignment.group(1)] = assignment.group(2)
            continue
        if words[0] == "for" and "in" in words:
            variables[words[1]] = words[words.index("in") + 1].rstrip(";")
            continue
        if words[0] in ("done", "do"):
            continue
        current: list[str] = []
        for word in words:
            if word in ("&&", ";", "|", "||"):
                commands.append(current)
                current = []
                continue
            if word.endswith(";"):
                word = word[:-1]
            for name, value in variables.items():
                if word == f"${name}":
                    current.extend(shlex.split(value))
                    break
            else:
                word = re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), word)
                if word != "...":
                    current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def embedscope_argv(command: list[str]) -> list[str] | None:
    """The argv after ``embedscope`` (or ``python -m embedscope``), or None for another program."""
    if command[0] in EMBEDSCOPE:
        return command[1:]
    if len(command) > 2 and command[0].endswith("python") and command[1:3] == ["-m", "embedscope"]:
        return command[3:]
    return None


def parse_error(argv: list[str]) -> str | None:
    """What embedscope's parser says about ``argv`` (None when it parses)."""
    from embedscope.cli.main import build_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:
            if e.code:
                return err.getvalue().strip() or f"exit {e.code}"
    return None


# -- fast tier --------------------------------------------------------------------------------------------------

COMMAND_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "bash"]


def test_the_pages_have_examples_and_every_not_run_marker_gives_a_reason() -> None:
    assert len(PAGES) > 10 and len(COMMAND_BLOCKS) > 20
    for b in ALL_BLOCKS:
        assert b.not_run is None or len(b.not_run) > 10, f"{b.where}: say why the block cannot run"
    for page in PAGES:
        lines = [line.strip() for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
        for n, line in enumerate(lines):
            if NOT_RUN.match(line):
                after = lines[n + 1] if n + 1 < len(lines) else ""
                assert after.startswith("```"), f"{page.name}: {line!r} must stand right before a block"


@pytest.mark.slow
@pytest.mark.parametrize("block", COMMAND_BLOCKS, ids=lambda b: b.where)
def test_every_documented_command_parses(block: Block) -> None:
    """A renamed command or flag fails here, for every block (not-run ones too)."""
    found = 0
    for command in shell_commands(block.code):
        argv = embedscope_argv(command)
        if argv is None:
            assert block.not_run, f"{block.where}: {shlex.join(command)!r} is not an embedscope command; mark the block"
            continue
        found += 1
        error = parse_error(argv)
        assert error is None, f"{block.where}: embedscope {shlex.join(argv)}: {error}"
    assert found or block.not_run, f"{block.where}: a runnable bash block with no embedscope command"


def test_a_renamed_flag_or_command_is_caught() -> None:
    assert parse_error(["run", "--tasks", "LeeDocumentSimilarity"]) is None
    assert "unrecognized arguments: --taskz" in (parse_error(["run", "--taskz", "Lee"]) or "")
    assert parse_error(["runn"]) is not None
    assert shell_commands('B="--x 1"\nfor n in 5 6; do\n  embedscope a $B --k $n ... \\\n  --y # c\ndone') == [
        ["embedscope", "a", "--x", "1", "--k", "5", "--y"]
    ]


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang == "python"], ids=lambda b: b.where)
def test_every_python_block_compiles(block: Block) -> None:
    compile(block.code, block.where, "exec")


YAML_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "yaml"]


def _check_yaml(block: Block, folder: Path) -> None:
    """A config file (either schema) or a sweep file, checked as embedscope reads it."""
    from embedscope.settings import RunSettings, build_settings
    from embedscope.settings.files import config_layer
    from embedscope.sweep.grid import check_axis_key, read_sweep_file

    data = yaml.safe_load(block.code)
    assert isinstance(data, dict), f"{block.where}: not a mapping"
    path = folder / (Path(block.title).name if block.title else "block.yaml")
    path.write_text(block.code, encoding="utf-8")
    if "axes" in data or "grids" in data:
        base, axes, grids = read_sweep_file(path)
        unknown = set(base.values) - set(RunSettings.model_fields)
        assert not unknown, f"{block.where}: base keys {unknown} are not settings"
        for key, _ in [*axes, *(a for g in grids for a in g)]:
            check_axis_key(key)
        return
    build_settings([config_layer(path)])  # every key and value checked, as `run --config` does


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.where)
def test_every_yaml_file_is_a_valid_config_or_sweep_file(block: Block, tmp_path: Path) -> None:
    """A renamed settings key fails here."""
    _check_yaml(block, tmp_path)
    if block.title and (ROOT / block.title).is_file():
        shipped = yaml.safe_load((ROOT / block.title).read_text(encoding="utf-8"))
        assert yaml.safe_load(block.code) == shipped, f"{block.where}: differs from {block.title}"


def test_a_renamed_settings_key_is_caught(tmp_path: Path) -> None:
    from embedscope.errors import EmbedscopeError

    block = Block(ROOT / "README.md", 1, "yaml", "c.yaml", "modell: minilm\n", None, False)
    with pytest.raises(EmbedscopeError, match="modell"):
        _check_yaml(block, tmp_path)


# -- slow tier: every page's runnable blocks, in order ------------------------------------------------------------


def limited(argv: list[str]) -> list[str]:
    """``argv`` with ``--limits 20`` (a sweep: ``--set limits=20``) when it encodes and sets no limits; a ``run`` of
    the whole built-in suite keeps its retrieval and STS tasks (the first 20 items of the classification data hold
    one class)."""
    if not argv or any("limits" in a for a in argv) or "--print-settings" in argv:
        return argv
    chooses = ("--tasks", "-t", "--config", "-c", "--benchmark", "-b", "--retriever", "--task-type")
    if argv[0] == "run" and not any(a in chooses for a in argv):
        return [*argv, "--task-type", "Retrieval", "STS", "--limits", "20"]
    if argv[0] == "sweep":
        return [*argv, "--set", "limits=20"]
    if argv[0] in LIMITED and not (argv[0] == "compare" and "--models" not in argv):
        return argv if argv[0] == "eval" else [*argv, "--limits", "20"]
    return argv


def run_page(page: Path, folder: Path) -> None:
    """Write the page's files, run its commands and Python blocks in order, and check the output it shows."""
    from embedscope.cli.main import main

    output = ""
    for block in read_blocks(page):
        if block.not_run:
            continue
        if block.title:
            shipped = ROOT / block.title
            if not shipped.is_file():
                target = folder / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code, encoding="utf-8")
            continue
        if block.shows_output:
            for line in block.code.strip().splitlines():
                assert line.strip() in output, f"{block.where}: the output lacks {line!r}"
            continue
        out, err = io.StringIO(), io.StringIO()
        if block.lang == "bash":
            for command in shell_commands(block.code):
                argv = limited(embedscope_argv(command) or [])
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = main(argv)
                said = err.getvalue().strip().splitlines()[-1:]
                assert code == 0, f"{block.where}: embedscope {shlex.join(argv)} exited {code}: {said}"
        elif block.lang == "python":
            with contextlib.redirect_stdout(out):
                exec(compile(block.code, block.where, "exec"), {"__name__": "__docs__"})
        output = out.getvalue()


RUNNABLE_PAGES = [p for p in PAGES if any(not b.not_run and b.lang in ("bash", "python") for b in read_blocks(p))]
LONG_PAGES = {"docs/get-started.md"}  # the first run: a whole built-in task with the real model, more than a minute


def _page_param(page: Path) -> object:
    name = str(page.relative_to(ROOT))
    return pytest.param(page, id=name, marks=[pytest.mark.long] if name in LONG_PAGES else [])


@pytest.mark.slow
@pytest.mark.parametrize("page", [_page_param(p) for p in RUNNABLE_PAGES])
def test_every_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EMBEDSCOPE_CACHE", str(tmp_path / "cache"))
    run_page(page, tmp_path)


def test_the_readme_is_short_and_keeps_the_two_set_up_commands() -> None:
    """At most 12 KB; CI's .ci/run runs the README's test command, so its text stays as it is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024
    assert "bash scripts/setup.sh && .venv/bin/embedscope run\n" in readme
    assert "bash scripts/setup.sh --test && .venv/bin/python -m pytest -q\n" in readme
