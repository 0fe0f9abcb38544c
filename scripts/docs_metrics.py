"""Measure the documentation against the rules of "docs that show, not tell", print a summary and exit 1 on a violation.

Run from anywhere: ``.venv/bin/python scripts/docs_metrics.py`` (``--all`` enforces the paragraph rule on every page,
``--quiet`` prints only the summary and the violations). ``tests/docs/test_docs_metrics.py`` runs the same checks.

The checks:

* **paragraphs** — no paragraph of a guide over 80 words. The guides are ``README.md`` and every page under
  ``docs/`` except ``changelog.md`` (the generated reference pages are not on disk). A paragraph is a run of prose
  lines between blank lines. Fenced code blocks, tables (lines starting with ``|``), headings, HTML lines (``<…``)
  and lines holding only an image are not prose and end a paragraph. Each list item (``-``, ``*``, ``+`` or ``1.``)
  starts a paragraph of its own, its indented continuation lines belonging to it. A word is a whitespace-separated
  token holding a letter or a digit (an inline code span of three words counts three). The rule is enforced on the
  pages in ``ENFORCED`` (the pages rewritten to it so far; ``--all``: every guide); on the others each paragraph over
  the limit is counted and printed, not failed.
* **benchmarks size** — ``docs/benchmarks.md`` is under 20 KB (20,000 bytes): today's figures, not every
  re-measurement (those stay in ``git log -p docs/benchmarks.md``).
* **defaults** — every flag whose help text states a default value (``(default 4)``, ``default: 0.005``,
  ``exact (default)``) shows a default in the CLI reference's default column (``docs/hooks.py``, reused here, on
  the parser of ``embedscope.cli.main.build_parser``). A default described rather than stated (``default: the
  provider's``) is not a value and is not checked. The gaps that are known and not cheap to close are listed in
  ``KNOWN_GAPS`` with why; they are printed, and a new gap fails.
* **images** — every image (``![alt](src)`` or ``<img>``) of the guides has alt text and a source command: the
  paragraph right after it (its caption), the paragraph right before it when that ends with ``:``, or an adjacent
  ``<!-- made by: … -->`` comment names, in a code span, the command that made it (``embedscope …``, one of its
  commands such as ``serve …``, or a script).
* **extras** — the README's extras table lists exactly the extras of ``pyproject.toml``'s
  ``[project.optional-dependencies]``, each on one line.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
MAX_WORDS = 80
MAX_BENCHMARKS_BYTES = 20_000
ENFORCED = ("README.md", "docs/benchmarks.md")  # the pages held to the paragraph rule (the test checks these)
NOT_GUIDES = ("docs/changelog.md",)

# (command, flag) -> why its stated default is not in the reference's default column
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("embedscope run", "--api-key-env"): "one variable per provider; the settings field is None until resolved",
    ("embedscope run", "--max-concurrency"): "settings field None (the API backend's own default); settings/run.py",
    ("embedscope run", "--request-timeout"): "settings field None (the API backend's own default); settings/run.py",
    ("embedscope run", "--max-retries"): "settings field None (the API backend's own default); settings/run.py",
    ("embedscope run", "--dtype"): "settings field None means fp32; a declared default would be a settings change",
    ("embedscope run", "--index"): "settings field None means exact; a declared default would be a settings change",
    ("embedscope run", "--batch-size"): "depends on the device (32 on the CPU, 256 on a GPU)",
    ("embedscope eval", "--batch-size"): "depends on the device (32 on the CPU, 256 on a GPU)",
    ("embedscope screen", "--batch-size"): "depends on the device (32 on the CPU, 256 on a GPU)",
    ("embedscope fastbook run", "--batch-size"): "depends on the device (32 on the CPU, 256 on a GPU)",
    ("embedscope run", "--chunk-overlap"): "depends on the chunking method (64 for tokens)",
    ("embedscope chunk", "--chunk-overlap"): "depends on the chunking method (64 for tokens)",
    ("embedscope fastbook run", "--chunk-overlap"): "depends on the chunking method (the study's rule)",
    ("embedscope fastbook export-beir", "--chunk-overlap"): "depends on the chunking method (the study's rule)",
    ("embedscope run", "--ray-temp-dir"): "a folder inside the cache folder, which depends on the environment",
    ("embedscope screen", "--ray-temp-dir"): "a folder inside the cache folder, which depends on the environment",
    ("embedscope score", "--k"): "default=None resolved to the list in the command (cli/run.py)",
    ("embedscope eval", "--column"): "an append flag: three defaults, one per column",
}
ENVIRONMENT = ("$EMBEDSCOPE_CACHE", "$EMBEDSCOPE_STORE")  # a default read from the environment: no fixed value

FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)[^)]*\)|<img\b[^>]*>")
MADE_BY = re.compile(r"<!--\s*made by:\s*(.+?)\s*-->", re.I)
CODE_SPAN = re.compile(r"`([^`]+)`")
WORD = re.compile(r"[^\W_]")
# a default stated as a value: "(default 4)", "default: 0.005", "default $EMBEDSCOPE_CACHE", "exact (default)"
DESCRIBED = r"(?:the|a|an|as|from|what|one|its|on|off|none|each|all|every|this|that|if|when|where|unless)\b"
STATED_AFTER = re.compile(rf"\bdefaults?\b:?\s+(?!{DESCRIBED})([^\s,;)]+)", re.I)
STATED_BEFORE = re.compile(r"(\S+)\s+\(default[,)]", re.I)


@dataclass
class Report:
    """What every check found: ``violations`` fail, ``notes`` are printed only."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # check, measured, limit, status
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, check: str, measured: str, limit: str, problems: Sequence[str], *, enforced: bool = True) -> None:
        status = "ok" if not problems else ("FAIL" if enforced else "report")
        self.rows.append((check, measured, limit, status))
        (self.violations if enforced else self.notes).extend(problems)


# -- the pages ----------------------------------------------------------------------------------------------------


def guides(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/ except the changelog."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [p for p in pages if p.relative_to(root).as_posix() not in NOT_GUIDES]


def prose_blocks(text: str) -> Iterator[tuple[int, str]]:
    """``(first line number, text)`` of each paragraph of ``text`` (the rule in the module docstring); an image
    alone on its line and an HTML comment are blocks of their own (yielded as they are)."""
    lines = text.splitlines()
    current: list[str] = []
    start = 0
    fenced = False

    def flush() -> Iterator[tuple[int, str]]:
        if current:
            yield start, " ".join(s.strip() for s in current)
            current.clear()

    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if FENCE.match(line):
            yield from flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if not stripped or stripped.startswith(("#", "|", "<")) or IMAGE.fullmatch(stripped):
            yield from flush()
            if stripped.startswith("<!--") or IMAGE.fullmatch(stripped):
                yield number, stripped
            continue
        if LIST_ITEM.match(line):
            yield from flush()
        if not current:
            start = number
        current.append(line)
    yield from flush()


def words(paragraph: str) -> int:
    """The words of a paragraph: whitespace-separated tokens holding a letter or a digit."""
    return sum(1 for token in paragraph.split() if WORD.search(token))


def long_paragraphs(page: Path, limit: int = MAX_WORDS) -> list[tuple[int, int]]:
    """``(line, words)`` of each paragraph of ``page`` over ``limit`` words."""
    found = []
    for line, block in prose_blocks(page.read_text(encoding="utf-8")):
        if block.startswith("<!--") or IMAGE.fullmatch(block):
            continue
        n = words(block)
        if n > limit:
            found.append((line, n))
    return found


# -- the checks ---------------------------------------------------------------------------------------------------


def check_paragraphs(report: Report, root: Path = ROOT, enforce_all: bool = False) -> dict[str, int]:
    """Paragraphs over the limit per page: a violation on an enforced page, a note elsewhere."""
    counts: dict[str, int] = {}
    for page in guides(root):
        name = page.relative_to(root).as_posix()
        found = long_paragraphs(page)
        counts[name] = len(found)
        problems = [f"{name}:{line}: a paragraph of {n} words (at most {MAX_WORDS})" for line, n in found]
        enforced = enforce_all or name in ENFORCED
        report.add(f"paragraphs over {MAX_WORDS} words: {name}", str(len(found)), "0", problems, enforced=enforced)
    return counts


def check_benchmarks_size(report: Report, root: Path = ROOT) -> int:
    size = (root / "docs" / "benchmarks.md").stat().st_size
    problems = [] if size < MAX_BENCHMARKS_BYTES else [f"docs/benchmarks.md is {size:,} bytes (under 20,000)"]
    report.add("docs/benchmarks.md size", f"{size:,} B", f"< {MAX_BENCHMARKS_BYTES:,} B", problems)
    return size


def load_hooks(root: Path = ROOT) -> ModuleType:
    """``docs/hooks.py``, the generator of the reference pages."""
    spec = importlib.util.spec_from_file_location("embedscope_docs_hooks", root / "docs" / "hooks.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {root / 'docs' / 'hooks.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def stated_default(help_text: str) -> str | None:
    """The default value a flag's help text states, or None where it states none (or only describes one).

    >>> stated_default("requests in flight at once (default 4)"), stated_default("exact (default) | hnsw:M=32")
    ('4', 'exact')
    >>> stated_default("the service's base URL (default: the provider's)") is None
    True
    """
    after = STATED_AFTER.search(help_text)
    if after:
        return after.group(1)
    before = STATED_BEFORE.search(help_text)
    return before.group(1) if before else None


def default_gaps(hooks: ModuleType) -> list[tuple[str, str, str]]:
    """``(command, flag, stated default)`` of each flag whose help states a default the reference does not show."""
    import argparse as ap

    gaps = []
    for path, parser, _ in hooks.commands():
        for action in hooks.flags(parser):
            if not action.option_strings or isinstance(action, (ap._StoreTrueAction, ap._StoreFalseAction)):
                continue
            stated = stated_default(action.help or "")
            if stated is None or stated in ENVIRONMENT or hooks._default(action):
                continue
            gaps.append((path, action.option_strings[0], stated))
    return gaps


def check_defaults(report: Report, root: Path = ROOT) -> list[tuple[str, str, str]]:
    gaps = default_gaps(load_hooks(root))
    new = [
        f"{cmd} {flag}: its help states the default {value!r}; the reference shows none" for cmd, flag, value in gaps
    ]
    new = [line for line, (cmd, flag, _) in zip(new, gaps) if (cmd, flag) not in KNOWN_GAPS]
    known = [(cmd, flag) for cmd, flag, _ in gaps if (cmd, flag) in KNOWN_GAPS]
    stale = sorted(set(KNOWN_GAPS) - set(known))
    report.add("flags whose stated default the reference lacks", str(len(new)), "0", new)
    report.notes += [f"known gap: {cmd} {flag} ({KNOWN_GAPS[cmd, flag]})" for cmd, flag in known]
    report.notes += [f"KNOWN_GAPS entry no longer a gap, drop it: {cmd} {flag}" for cmd, flag in stale]
    return gaps


def _commands(hooks: ModuleType | None) -> set[str]:
    names = {"embedscope", ".venv/bin/embedscope", "python", ".venv/bin/python", "bash"}
    if hooks is not None:
        names |= {path.split()[-1] for path, _, _ in hooks.commands()}
    return names


def names_a_command(text: str, commands: set[str]) -> bool:
    """Whether ``text`` holds a code span that starts with a command (or a script path)."""
    for span in CODE_SPAN.findall(text):
        first = span.split()[0] if span.split() else ""
        if first in commands or first.endswith((".py", ".sh")):
            return True
    return False


def image_problems(page: Path, commands: set[str], root: Path = ROOT) -> tuple[int, list[str]]:
    """How many images ``page`` has, and what each lacks (alt text, a source command)."""
    name = page.relative_to(root).as_posix()
    blocks = list(prose_blocks(page.read_text(encoding="utf-8")))
    images, problems = 0, []
    for n, (line, block) in enumerate(blocks):
        for match in IMAGE.finditer(block):
            images += 1
            alt = match.group(1) if match.group(0).startswith("!") else _attribute(match.group(0), "alt")
            if not (alt or "").strip():
                problems.append(f"{name}:{line}: an image without alt text")
            before = blocks[n - 1][1] if n else ""
            after = blocks[n + 1][1] if n + 1 < len(blocks) else ""
            sources = [after, *([before] if before.endswith(":") or before.startswith("<!--") else [])]
            standalone = IMAGE.fullmatch(block) is not None
            if not standalone:
                sources.append(block)  # an image inside a paragraph: the paragraph is its caption
            made_by = any(MADE_BY.search(s) for s in (before, after))
            if not made_by and not any(names_a_command(s, commands) for s in sources):
                problems.append(f"{name}:{line}: an image with no caption or comment naming the command that made it")
    return images, problems


def _attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\b{name}\s*=\s*"([^"]*)"', tag)
    return found.group(1) if found else None


def check_images(report: Report, root: Path = ROOT, hooks: ModuleType | None = None) -> int:
    commands = _commands(hooks)
    total, problems = 0, []
    for page in guides(root):
        n, found = image_problems(page, commands, root)
        total += n
        problems += found
    report.add("images without alt text or source command", f"{len(problems)} of {total}", "0", problems)
    return total


def pyproject_extras(root: Path = ROOT) -> list[str]:
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the section's keys by line
        section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        return re.findall(r"^([A-Za-z0-9_.-]+)\s*=", section, flags=re.M)
    return list(tomllib.loads(text)["project"].get("optional-dependencies", {}))


def readme_extras(root: Path = ROOT) -> list[str]:
    """The first cell of each row of the README's ``| extra | enables |`` table."""
    rows, inside = [], False
    for line in (root / "README.md").read_text(encoding="utf-8").splitlines():
        if re.match(r"^\|\s*extra\s*\|", line):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not re.match(r"^\|[-\s|:]+\|$", line):
            rows.append(line.split("|")[1].strip().strip("`"))
    return rows


def check_extras(report: Report, root: Path = ROOT) -> tuple[list[str], list[str]]:
    declared, listed = pyproject_extras(root), readme_extras(root)
    problems = [
        f"README.md: extra {e!r} of pyproject.toml is not in the extras table" for e in declared if e not in listed
    ]
    problems += [f"README.md: {e!r} is not an extra of pyproject.toml" for e in listed if e not in declared]
    problems += [
        f"README.md: extra {e!r} listed {listed.count(e)} times" for e in sorted(set(listed)) if listed.count(e) > 1
    ]
    report.add("README extras vs pyproject extras", f"{len(listed)} / {len(declared)}", "equal", problems)
    return declared, listed


# -- the command --------------------------------------------------------------------------------------------------


def measure(root: Path = ROOT, enforce_all: bool = False) -> tuple[Report, dict[str, int]]:
    """Every check, in the order of the summary."""
    report = Report()
    hooks = load_hooks(root)
    counts = check_paragraphs(report, root, enforce_all)
    check_benchmarks_size(report, root)
    check_defaults(report, root)
    check_images(report, root, hooks)
    check_extras(report, root)
    return report, counts


def table(rows: Sequence[tuple[str, str, str, str]]) -> str:
    header = ("check", "measured", "limit", "status")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--all", action="store_true", help="enforce the paragraph rule on every guide")
    parser.add_argument("--quiet", action="store_true", help="print only the summary and the violations")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))  # a checkout without the package installed
    report, counts = measure(enforce_all=args.all)
    print(table(report.rows))
    total = sum(counts.values())
    print(
        f"\nparagraphs over {MAX_WORDS} words: {total} on {sum(1 for c in counts.values() if c)} of {len(counts)} pages"
    )
    if report.notes and not args.quiet:
        print("\nreported, not failed:")
        print("\n".join(f"  {n}" for n in report.notes))
    if report.violations:
        print(f"\n{len(report.violations)} violation(s):")
        print("\n".join(f"  {v}" for v in report.violations))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
