"""Documents → passages: Jupyter notebooks and Markdown files read as text, then chunked.

A notebook becomes one document: the source of every markdown and code cell, each followed by
``"\\n"``, in order; outputs are dropped; reading stops at the first markdown cell containing
``stop_at`` (e.g. ``"## Questionnaire"``). Chunking is either sentence-aware token windows with
overlap (llama-index's ``SentenceSplitter``; defaults 500 tokens, 64 overlap, tiktoken
``cl100k_base``, the fastbook study's configuration) or groups of N paragraphs (blank-line
separated), with or without Markdown header paragraphs. The ``fastbook-reference`` method
reproduces the study's corpus: each document is first cut into pieces of ``int(len/2)``
characters (:func:`halves`), and each piece is split into token windows on its own. Every passage
keeps its source file and the chapter number taken from the file name (``04_mnist_basics.ipynb`` → 4).

>>> chunk_paragraphs("# Title\\n\\nOne.\\n\\nTwo.\\n\\nThree.", n=2)
['# Title\\n\\nOne.', 'Two.\\n\\nThree.']
>>> chunk_paragraphs("# Title\\n\\nOne.\\n\\nTwo.", n=1, keep_headers=False)
['One.', 'Two.']
>>> chapter_from_name("10_nlp.ipynb")
10
>>> halves("abcde")
['ab', 'cd', 'e']
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.data.jsonl import reading
from embedscope.data.markdown import Cell, header_lines
from embedscope.errors import ConfigError, DataFormatError, MissingDependencyError, SettingError
from embedscope.types import Corpus

DOCUMENT_SUFFIXES = (".ipynb", ".md", ".markdown", ".txt")


@dataclass(frozen=True)
class Passage:
    """A chunk of a document, with where it came from."""

    id: str
    text: str
    source: str
    chapter: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "_id": self.id,
            "title": "",
            "text": self.text,
            "source": self.source,
            "chapter": self.chapter,
            **self.metadata,
        }


def chapter_from_name(name: str) -> int | None:
    """The first number in a file name, or None."""
    match = re.search(r"\d+", Path(name).stem)
    return int(match.group()) if match else None


def _text(value: Any, path: Path, what: str) -> str:
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    if not isinstance(value, str):
        raise DataFormatError(f"{path}: {what} is neither a string nor a list of strings")
    return value


def _output_text(cell: dict[str, Any], path: Path, i: int) -> str:
    """A code cell's text outputs (stream text, and the ``text/plain`` of results and displays), each
    without its trailing newline, joined by newlines."""
    texts = []
    for output in cell.get("outputs") or []:
        if not isinstance(output, dict):
            raise DataFormatError(f"{path}: cell {i} has an output that is not an object")
        if output.get("output_type") == "stream":
            texts.append(_text(output.get("text", ""), path, f"cell {i}'s stream output"))
        elif output.get("output_type") in ("execute_result", "display_data") and "text/plain" in output.get("data", {}):
            texts.append(_text(output["data"]["text/plain"], path, f"cell {i}'s text/plain output"))
    return "\n".join(t.rstrip("\n") for t in texts if t.strip())


def notebook_cells(path: str | Path, stop_at: str | None = "## Questionnaire") -> list[Cell]:
    """The markdown and code cells of a notebook (raw cells skipped), up to the first markdown cell
    containing ``stop_at``; code cells keep their text outputs (:func:`_output_text`)."""
    path = Path(path)
    try:
        with reading(path):
            notebook = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{path}: not a notebook (invalid JSON at line {e.lineno}: {e.msg})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise DataFormatError(f"{path}: not a Jupyter notebook (no 'cells' list)")
    out = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("markdown", "code", "raw"):
            raise DataFormatError(f"{path}: cell {i} has no valid cell_type")
        if cell["cell_type"] == "raw":
            continue
        source = _text(cell.get("source", ""), path, f"cell {i} has a 'source' that")
        if stop_at and cell["cell_type"] == "markdown" and stop_at in source:
            break
        outputs = _output_text(cell, path, i) if cell["cell_type"] == "code" else ""
        out.append(Cell(cell["cell_type"], source, outputs))
    return out


def read_notebook(path: str | Path, stop_at: str | None = "## Questionnaire") -> str:
    """Markdown and code cell sources of a notebook, each followed by a newline; outputs dropped."""
    return "".join(cell.source + "\n" for cell in notebook_cells(path, stop_at))


def document_cells(path: str | Path, stop_at: str | None = "## Questionnaire") -> list[Cell]:
    """A notebook's cells (:func:`notebook_cells`), or a Markdown / text file as one markdown cell."""
    if Path(path).suffix.lower() == ".ipynb":
        return notebook_cells(path, stop_at)
    return [Cell("markdown", read_document(path, stop_at))]


def read_document(path: str | Path, stop_at: str | None = "## Questionnaire") -> str:
    """A notebook's cell sources, or a Markdown / text file as is (up to ``stop_at`` if it occurs)."""
    path = Path(path)
    if path.suffix.lower() == ".ipynb":
        return read_notebook(path, stop_at)
    with reading(path):
        text = path.read_text(encoding="utf-8")
    if stop_at and stop_at in text:
        text = text[: text.index(stop_at)]
    return text


def document_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files given directly, and the notebooks / Markdown / text files inside given folders (sorted); a
    file given twice (or also through its folder) is read once."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix.lower() in DOCUMENT_SUFFIXES and f.is_file())
        elif p.is_file():
            found = [p]
        else:
            raise DataFormatError(f"{p}: no such file or folder")
        for f in found:
            if f.resolve() not in seen:
                seen.add(f.resolve())
                out.append(f)
    if not out:
        raise DataFormatError(f"no notebooks or Markdown files in {', '.join(map(str, paths))}")
    return out


def document_names(paths: Sequence[Path]) -> list[str]:
    """A name per document, unique among ``paths``: the file stem; where stems clash, the path relative to
    the documents' common folder without its suffix; where those clash too, with it.

    >>> document_names([Path("a/03_doc.md"), Path("b/03_doc.md"), Path("b/04.md")])
    ['a/03_doc', 'b/03_doc', '04']
    """
    resolved = [p.resolve() for p in paths]
    root = Path(os.path.commonpath([p.parent for p in resolved])) if resolved else Path()
    names = [p.stem for p in paths]
    for qualify in (lambda r: r.relative_to(root).with_suffix("").as_posix(), lambda r: r.relative_to(root).as_posix()):
        clashing = {n for n in names if names.count(n) > 1}
        names = [qualify(r) if n in clashing else n for n, r in zip(names, resolved)]
    return names


def _token_counter(tokenizer: str) -> Callable[[str], list]:
    if tokenizer in ("cl100k_base", "tiktoken"):
        from llama_index.core.utils import get_tokenizer  # ships cl100k_base: works offline

        return get_tokenizer()
    from tokenizers import Tokenizer

    path = Path(tokenizer)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise DataFormatError(
            f"tokenizer {tokenizer!r}: use cl100k_base, a model alias, or a tokenizer.json (or its folder)"
        )
    tok = Tokenizer.from_file(str(file))
    tok.no_padding()  # a model's tokenizer.json may pad or truncate every input to a fixed length
    tok.no_truncation()
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def chunk_tokens(text: str, chunk_size: int = 500, overlap: int = 64, tokenizer: str = "cl100k_base") -> list[str]:
    """Sentence-aware token windows (llama-index ``SentenceSplitter``)."""
    if overlap >= chunk_size:
        raise DataFormatError(f"chunk overlap {overlap} must be smaller than the chunk size ({chunk_size})")
    try:
        from llama_index.core.node_parser import SentenceSplitter
    except ImportError as e:
        raise MissingDependencyError("llama-index-core", "token chunking") from e
    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=overlap, tokenizer=_token_counter(tokenizer))
    return [c for c in splitter.split_text(text) if c.strip()]


def halves(text: str) -> list[str]:
    """``text`` cut into pieces of ``int(len/2)`` characters: two halves, plus a one-character third
    piece when the length is odd (the fastbook study's pre-split; a one-character text stays whole)."""
    size = len(text) // 2
    if size == 0:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


def without_headers(text: str) -> str:
    """``text`` with each header line (:func:`header_lines`) made blank: what ``keep_headers=False`` keeps."""
    lines = text.split("\n")
    return "\n".join("" if header else line for line, header in zip(lines, header_lines(text)))


def chunk_paragraphs(text: str, n: int = 1, keep_headers: bool = True) -> list[str]:
    """Groups of ``n`` consecutive blank-line-separated paragraphs. Without headers, each header line
    (:func:`header_lines`) is dropped and nothing else: the lines under a header stay, as a paragraph of
    their own."""
    if n < 1:
        raise DataFormatError(f"paragraphs per chunk must be >= 1, got {n}")
    if not keep_headers:
        text = without_headers(text)
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return ["\n\n".join(paragraphs[i : i + n]) for i in range(0, len(paragraphs), n)]


def study_overlap(chunk_size: int) -> int:
    """The fastbook study's overlap at window size ``chunk_size``: ``min(chunk_size / 4, chunk_size / 2, 64)``
    tokens (the method note's "llama-index's default rule", the expression of RAGatouille's
    ``llama_index_sentence_splitter``; 25 at 100 tokens, 64 from 256 up), truncated to an integer since
    ``SentenceSplitter`` takes an integer overlap. (llama-index-core's own ``SentenceSplitter`` default is
    200 tokens, whatever the size.)

    >>> [study_overlap(n) for n in (100, 250, 256, 500, 2000)]
    [25, 62, 64, 64, 64]
    """
    return int(min(chunk_size / 4, chunk_size / 2, 64))


PARAGRAPH_STRATEGIES = tuple(f"fastbook-paragraphs-{v}" for v in "abcdef")
CHUNK_METHODS = ("tokens", "paragraphs", "fastbook-reference", *PARAGRAPH_STRATEGIES)


@dataclass(frozen=True)
class ChunkOptions:
    """How documents become passages (``method``: one of :data:`CHUNK_METHODS`).

    ``fastbook-reference`` is :func:`halves`, then token windows of each piece on ``cl100k_base``: 500
    tokens by default (the study's reference configuration, 64 overlap), any ``chunk_size`` with the
    study's overlap rule (:func:`study_overlap`). ``overlap`` None is the method's default (64 for
    ``tokens``); an overlap other than the rule's is refused for ``fastbook-reference``.
    ``fastbook-paragraphs-a`` … ``-f`` are the study's six paragraph strategies
    (:mod:`embedscope.data.paragraph_strategies`), fixed by their name.

    Built from the run settings (:meth:`embedscope.settings.run.ChunkingSettings.options`), where each option's
    default lives.
    """

    method: str
    chunk_size: int
    overlap: int | None
    tokenizer: str
    paragraphs: int
    keep_headers: bool
    stop_at: str | None

    def __post_init__(self) -> None:
        for key, value, least in (("chunk_size", self.chunk_size, 1), ("overlap", self.overlap, 0)):
            if value is not None and value < least:
                raise SettingError(f"chunking.{key}", f"{{chunking.{key}}} must be at least {least} (got {value})")
        if self.paragraphs < 1:
            raise SettingError("chunking.paragraphs", f"must be at least 1 (got {self.paragraphs})")
        if self.method not in CHUNK_METHODS:
            raise SettingError(
                "chunking.method",
                f"{{chunking.method}}: chunking method {self.method!r}: use one of {', '.join(CHUNK_METHODS)}",
            )
        if self.method == "fastbook-reference":
            self._check_reference()
        if self.method == "tokens" and self.window_overlap >= self.chunk_size:
            raise SettingError(
                "chunking.overlap" if self.overlap is not None else "chunking.chunk_size",
                f"{{chunking.overlap}} {self.window_overlap} must be smaller than the chunk size "
                f"({{chunking.chunk_size}} {self.chunk_size}; the overlap is 64 tokens unless set: set a smaller one)",
            )
        if self.method in PARAGRAPH_STRATEGIES:
            self._check_strategy()

    def _check_strategy(self) -> None:
        """A paragraph strategy fixes its paragraphs and headers and uses no token windows: those options stay the
        study's (:data:`STUDY_REFERENCE`)."""
        fixed = ("chunk_size", "overlap", "tokenizer", "paragraphs", "keep_headers")
        changed = [k for k in fixed if getattr(self, k) != getattr(STUDY_REFERENCE, k)]
        if changed:
            raise SettingError(
                f"chunking.{changed[0]}",
                f"chunking method {self.method} fixes its paragraphs and headers and uses no token windows: drop "
                + ", ".join(f"{{chunking.{k}}}" for k in changed),
            )

    def _check_reference(self) -> None:
        rule = study_overlap(self.chunk_size)
        if self.tokenizer != "cl100k_base":
            raise SettingError(
                "chunking.tokenizer",
                "chunking method fastbook-reference counts tokens with cl100k_base (the study's); "
                "use {chunking.method} tokens for another {chunking.tokenizer}",
            )
        if self.overlap is not None and self.overlap != rule:
            raise SettingError(
                "chunking.overlap",
                f"chunking method fastbook-reference uses the study's overlap min(size/4, size/2, 64) = {rule} "
                f"at {{chunking.chunk_size}} {self.chunk_size}, not {{chunking.overlap}} {self.overlap}; "
                "use {chunking.method} tokens for another",
            )

    @property
    def window_overlap(self) -> int:
        """The overlap token windows use: the given one, else 64 (``tokens``) or the study's rule."""
        if self.overlap is not None:
            return self.overlap
        return study_overlap(self.chunk_size) if self.method == "fastbook-reference" else 64

    def split(self, text: str) -> list[str]:
        """Passages of one document's text (a paragraph strategy reads it as one markdown cell)."""
        if self.method == "tokens":
            return chunk_tokens(text, self.chunk_size, self.window_overlap, self.tokenizer)
        if self.method == "paragraphs":
            return chunk_paragraphs(text, self.paragraphs, self.keep_headers)
        if self.method == "fastbook-reference":
            return [
                c
                for piece in halves(text)
                for c in chunk_tokens(piece, self.chunk_size, self.window_overlap, self.tokenizer)
            ]
        return self.split_cells([Cell("markdown", text)])

    def split_cells(self, cells: Sequence[Cell]) -> list[str]:
        """Passages of a document's cells: a paragraph strategy sees the cells (code cells with their
        outputs); every other method their sources, each followed by a newline (:func:`read_notebook`)."""
        if self.method in PARAGRAPH_STRATEGIES:
            from embedscope.data.paragraph_strategies import strategy_chunks

            return strategy_chunks(cells, self.method.rsplit("-", 1)[1])
        return self.split("".join(cell.source + "\n" for cell in cells))


STUDY_REFERENCE = ChunkOptions("tokens", 500, None, "cl100k_base", 1, True, "## Questionnaire")
"""The fastbook study's reference configuration: a QA task's own chunking when the run sets none (it equals the
run settings' default chunking, which a test checks)."""


def chunk_documents(paths: Sequence[str | Path], options: ChunkOptions) -> list[Passage]:
    """Passages of every document under ``paths``, in order; ids ``<name>-<n>`` (n from 0), where the name
    is the file stem, qualified by the relative path when two documents share one (:func:`document_names`).
    The source is the file name, or that relative path (with suffix) when names clash."""
    passages = []
    files = document_paths(paths)
    for path, name in zip(files, document_names(files)):
        chapter = chapter_from_name(path.name)
        source = path.name if name == path.stem else _qualified_source(name, path)
        chunks = (
            options.split_cells(document_cells(path, options.stop_at))
            if options.method in PARAGRAPH_STRATEGIES
            else options.split(read_document(path, options.stop_at))
        )
        for n, chunk in enumerate(chunks):
            passages.append(Passage(f"{name}-{n:04d}", chunk, source, chapter))
    check_unique_ids(passages, "the chunked documents")
    return passages


def _qualified_source(name: str, path: Path) -> str:
    return name if name.endswith(path.suffix) else name + path.suffix


def check_unique_ids(passages: Sequence[Passage], where: str | Path) -> None:
    """DataFormatError naming the first passage id that occurs twice (and both sources)."""
    first: dict[str, int] = {}
    for i, p in enumerate(passages):
        if first.setdefault(p.id, i) != i:
            other = passages[first[p.id]]
            raise DataFormatError(
                f"{where}: passage id {p.id!r} occurs twice ({other.source or '?'} and {p.source or '?'}); "
                "passage ids must be unique (re-chunk with 'embedscope chunk', which qualifies clashing names)"
            )


def write_passages(passages: Sequence[Passage], path: str | Path) -> Path:
    """Passages as a BEIR-style ``corpus.jsonl`` (extra fields: source, chapter), written atomically."""
    from embedscope.files import atomic_write_text

    if Path(path).is_dir():
        raise ConfigError(f"{path} is a folder: give the corpus file to write, e.g. {Path(path) / 'corpus.jsonl'}")
    atomic_write_text(path, "".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in passages))
    return Path(path)


def read_passages(path: str | Path) -> list[Passage]:
    """Passages written by :func:`write_passages` (or any corpus.jsonl with ``_id`` and ``text``)."""
    from embedscope.data.jsonl import iter_jsonl

    out = []
    lines: dict[str, int] = {}
    for line_no, row in iter_jsonl(path):
        if "_id" not in row or "text" not in row:
            raise DataFormatError(f"{path}:{line_no}: a passage needs '_id' and 'text'")
        first = lines.setdefault(str(row["_id"]), line_no)
        if first != line_no:
            raise DataFormatError(
                f"{path}, line {line_no}: passage id {str(row['_id'])!r} occurs twice (first at line {first}); "
                "passage ids must be unique"
            )
        chapter = row.get("chapter")
        out.append(
            Passage(
                str(row["_id"]),
                str(row["text"]),
                str(row.get("source", "")),
                int(chapter) if chapter is not None else None,
            )
        )
    return out


def passages_corpus(passages: Sequence[Passage]) -> Corpus:
    """The passages as a corpus, with ``chapter`` and ``source`` as metadata (for filtered search)."""
    return Corpus(
        tuple(p.id for p in passages),
        tuple(p.text for p in passages),
        {"chapter": tuple(p.chapter for p in passages), "source": tuple(p.source for p in passages)},
    )
